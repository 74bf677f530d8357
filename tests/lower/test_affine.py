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


def test_printed_expressions_say_mod_where_the_ir_writes_floors() -> None:
    """``modulo`` writes ``x - d*floor(x/d)``; a substitution leaves it on a plain variable
    (the running tile count of a core with one tile) and nests it (a swizzled tile's column
    within its strip): the printer says ``x % d``, drops ``(x % m) % m`` and
    ``floor((x % m) / d)`` for ``m <= d``, and means the same value everywhere."""
    import itertools

    kt, r, b, t = (Affine.of(v) for v in ("kt", "r", "block_idx", "t"))
    copy = (r * 4 + kt).modulo(2).substitute("r", Affine())
    assert str(copy) == "(kt % 2)"
    col = (b + 12).modulo(24)
    strip = col.modulo(9).floordiv(3) * 256 + kt * 128000
    assert str(strip) == "128000*kt + 256*((((block_idx + 12) % 24) % 9) / 3)"
    tile = (b + t * 24).modulo(16)
    assert str(tile.modulo(16) * 5 + tile.floordiv(16) * 7 + 3) == "5*((block_idx + 24*t) % 16) + 3"
    assert str(tile.modulo(4)) == "((block_idx + 24*t) % 4)"
    offset = b * 38400 + 76800 * b.floordiv(8) - 76800 * b.modulo(8).floordiv(2) - 38400 * (
        b - b.modulo(8))
    assert str(offset) == "38400*(block_idx % 2) + 76800*(block_idx / 8)"
    for e in (copy, strip, tile.modulo(16) * 5 + tile.floordiv(16) * 7 + 3, tile.modulo(4),
              offset):
        for env in (dict(zip(("kt", "block_idx", "t"), v)) for v in
                    itertools.product(range(5), range(30), range(3))):
            text = str(e)
            for name, value in env.items():
                text = text.replace(name, str(value))
            assert eval(text.replace("/", "//")) == e.evaluate(env), (str(e), env)
