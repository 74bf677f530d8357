"""Casts are exactly the 910B ``Cast`` table (asc-devkit docs Cast.md:215-247): each pair with
the round modes it takes, pairs outside it through an exact chain of Casts or rejected, and
integer results saturating (precision_conversion.md:30). Checked through the whole ladder."""

from __future__ import annotations

import numpy as np
import pytest

from ascendsched.algo import evaluate
from ascendsched.algo.algorithm import algorithm
from ascendsched.algo.tensor import compute, placeholder
from ascendsched.api.check import check
from ascendsched.errors import UnsupportedError
from ascendsched.lower.ir import iter_instrs
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.target import ASCEND_910B, CoreType


def _casts(k) -> list[tuple[str, str, str]]:
    """(src dtype, dst dtype, round) of every vec_cast in program order."""
    out = []
    for i, _ in iter_instrs(k.program(CoreType.AIV).body):
        if i.op == "vec_cast":
            out.append((k.dtype_of(i.reads[0].tensor).name, k.dtype_of(i.writes[0].tensor).name,
                        i.attr("round")))
    return out


def _chain(n: int = 1000):
    """int32 -> int16 (saturating: the inputs times 400 leave its range) -> int32 (no direct
    Cast) plus int32 -> float16 (the table's int32 -> half is a dequantisation) -> int32."""
    x = placeholder("x", (n,), "int32")
    s = compute("s", (n,), lambda i: (x[i] * 400).astype("int16"))
    y = compute("y", (n,), lambda i: s[i].astype("int32")
                + x[i].astype("float16").astype("int32"))
    return algorithm("casts", y)


def test_the_table_is_the_documented_one():
    t = ASCEND_910B.vector_casts
    assert ("int16", "int32") not in t            # no CastIntrinsicsImpl overload
    assert ("int32", "float16") not in t          # vconv_deq: needs SetDeqScale
    assert t[("int32", "int16")] == {"none"}      # Cast.md:234
    assert t[("float16", "int32")] == {"rint", "floor", "ceil", "round", "trunc"}
    assert t[("float32", "float16")] >= {"odd", "none"}
    assert t[("int16", "float32")] == {"none"}


def test_lowering_uses_only_table_pairs_and_modes():
    k = lower(schedule_for(_chain()))
    casts = _casts(k)
    assert ("int32", "int16", "none") in casts
    assert ("int16", "float32", "none") in casts and ("float32", "int32", "rint") in casts
    assert ("int32", "float32", "none") in casts and ("float32", "float16", "rint") in casts
    for a, b, mode in casts:
        assert mode in ASCEND_910B.vector_casts[(a, b)], (a, b, mode)


def test_a_cast_without_an_exact_chain_is_rejected():
    x = placeholder("x", (64,), "int32")
    algo = algorithm("to_bf16", compute("y", (64,), lambda i: x[i].astype("bfloat16")))
    with pytest.raises(UnsupportedError, match=r"cast int32 -> bfloat16 is neither a vector Cast"):
        lower(schedule_for(algo))


def test_integer_casts_saturate():
    x = placeholder("x", (4,), "float32")
    algo = algorithm("sat", compute("y", (4,), lambda i: x[i].astype("int8")))
    out = evaluate(algo, {"x": np.array([300.7, -1e9, 5.5, np.nan], np.float32)})["y"]
    np.testing.assert_array_equal(out, [127, -128, 6, 0])


def test_casts_pass_the_whole_ladder():
    bad = [str(v) for v in check(_chain()) if not v.ok]
    assert not bad, "\n".join(bad)
