"""Affine index expressions: equality, hashing and their memos."""

import pickle
import subprocess
import sys

from ascendsched.lower.affine import Affine


def test_equal_expressions_hash_equal_and_find_each_other() -> None:
    a = Affine.of("k") * 2048 + Affine.mod("k", 2) + Affine.of("b").floordiv(4)
    b = Affine.mod("k", 2) + Affine.of("b").floordiv(4) + Affine.of("k") * 2048
    assert a == b and hash(a) == hash(b)
    assert {a: 1}[b] == 1
    assert a.vars() == frozenset({"k", "b"}) and b.vars() == a.vars()


def test_pickled_expression_drops_its_memos() -> None:
    """A str hash differs between processes (PYTHONHASHSEED): a hash memoised in one must not
    travel to a worker with the expression, or the worker's dict lookups miss."""
    a = Affine.of("i_o") * 3 + 1
    hash(a), a.vars()
    assert "_hash" in a.__dict__ and "_vars" in a.__dict__
    b = pickle.loads(pickle.dumps(a))
    assert "_hash" not in b.__dict__ and "_vars" not in b.__dict__
    code = ("import pickle, sys; a = pickle.loads(sys.stdin.buffer.read()); "
            "print({a: 'found'}.get(pickle.loads(pickle.dumps(a)), 'missed'), "
            "hash(a) == hash((a.const, a.terms, a.mods, a.divs)))")
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(a),
                         capture_output=True, check=True).stdout.decode().split()
    assert out == ["found", "True"]
