"""Fused multiply-add selection (lower/select_fma.py): ``p * q + c`` becomes one ``vec_fma``
only when the overwritten operand is a value computed for it; the kernels equal numpy through
the IR executor and their traces are race-free."""

from __future__ import annotations

import pytest

from ascendsched.algo import library as L
from ascendsched.algo.algorithm import algorithm
from ascendsched.algo.ops import exp
from ascendsched.algo.tensor import compute, placeholder
from ascendsched.lower.ir import Instr, Kernel, iter_instrs
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import Schedule
from ascendsched.sim.checker import check_trace
from tests.kit.reference import LAYERNORM, assert_matches_reference, row_tiles


def _instrs(k: Kernel, op: str) -> list[Instr]:
    return [i for p in k.programs for i, _ in iter_instrs(p.body) if i.op == op]


def _fn_ops(k: Kernel) -> list[tuple[str, str]]:
    return [(i.op, str(i.attr("fn", ""))) for p in k.programs for i, _ in iter_instrs(p.body)
            if i.op in ("vec_binary", "vec_fma")]


def _mul_add_exp(m: int = 8, n: int = 256):  # noqa: ANN202 -- an Algorithm
    """y = x * w + exp(x), float32: the addend is the only computed operand (MulAddDst)."""
    x = placeholder("x", (m, n), "float32")
    w = placeholder("w", (m, n), "float32")
    y = compute("y", (m, n), lambda i, j: x[i, j] * w[i, j] + exp(x[i, j]))
    return algorithm("mul_add_exp", y)


def _mul_add_loads(m: int = 8, n: int = 256):  # noqa: ANN202
    """y = x * w + b, float32, every operand an input tile."""
    x = placeholder("x", (m, n), "float32")
    w = placeholder("w", (m, n), "float32")
    b = placeholder("b", (m, n), "float32")
    return algorithm("mul_add_loads", compute("y", (m, n), lambda i, j: x[i, j] * w[i, j]
                                              + b[i, j]))


def test_layernorm_scale_and_shift_is_one_fused_mul_add() -> None:
    k = lower(schedule_for(L.layernorm(8, 1024)))
    fmas = _instrs(k, "vec_fma")
    assert [str(i.attr("fn")) for i in fmas] == ["fused_mul_add"]
    (fma,) = fmas
    acc = fma.writes[0].tensor
    # the product d * r, a temporary of y that dies here, is overwritten; the once-per-core
    # float32(gamma) / float32(beta) and the stage tiles (xf, d) are only read
    assert acc.startswith("y_t") and not acc.endswith("_once"), acc
    assert fma.reads[0] == fma.writes[0]
    assert [r.tensor.endswith("_once") for r in fma.reads[1:]] == [True, True]
    assert ("vec_binary", "add") not in _fn_ops(k)  # the add of beta is gone
    assert not any(i.writes[0].tensor.endswith("_once") or i.writes[0].tensor in (
        "xf_ub", "d_ub") for i in fmas)


def test_layernorm_row_tiles_with_tails_fuse_and_match_numpy() -> None:
    """20 x 1000 in tiles of 3 rows (a 2-row tail, 1000 = 15 * 64 + 40 lanes): float32(gamma)
    is computed per tile here (no load_once), and still only the product d * r is
    overwritten."""
    s = row_tiles(L.layernorm(20, 1000), 3, LAYERNORM)
    k, res = assert_matches_reference(s, trace=True)
    fmas = _instrs(k, "vec_fma")
    assert fmas and {str(i.attr("fn")) for i in fmas} == {"fused_mul_add"}
    assert len({i.writes[0].tensor for i in fmas}) <= 2  # the full and the tail tile version
    report = check_trace(res.trace, k.target)
    assert report.ok and not report.races and not report.deadlocks, report.summary()


@pytest.mark.parametrize("make", [lambda: schedule_for(L.layernorm(8, 1024)),
                                  lambda: schedule_for(L.layernorm(64, 512))])
def test_layernorm_default_with_fma_matches_numpy_race_free(make) -> None:  # noqa: ANN001
    k, res = assert_matches_reference(make(), trace=True)
    assert _instrs(k, "vec_fma")
    report = check_trace(res.trace, k.target)
    assert report.ok and not report.races, report.summary()


def test_computed_addend_is_accumulated_with_mul_add_dst() -> None:
    s = Schedule(_mul_add_exp()).split("y", "i", 4)
    k, res = assert_matches_reference(s, trace=True)
    (fma,) = _instrs(k, "vec_fma")
    assert fma.attr("fn") == "mul_add_dst"
    assert {r.tensor for r in fma.reads[1:]} == {"x_ub", "w_ub"}  # inputs only read
    assert check_trace(res.trace, k.target).ok


def test_no_fma_when_every_operand_is_live_elsewhere() -> None:
    """x * w + b over input tiles: overwriting any of them would clobber a live buffer (an
    input tile), so the Mul and Add stay."""
    k, _ = assert_matches_reference(Schedule(_mul_add_loads()).split("y", "i", 4))
    assert not _instrs(k, "vec_fma")
    assert _fn_ops(k) == [("vec_binary", "mul"), ("vec_binary", "add")]


def test_no_fma_on_a_hoisted_or_stage_operand() -> None:
    """y = d * float32(gamma) + float32(beta) with d a stage of its own (a tile other
    readers share) and gamma, beta hoisted once per core: no operand dies at the add."""
    x = placeholder("x", (8, 512), "float16")
    g = placeholder("gamma", (512,), "float16")
    b = placeholder("beta", (512,), "float16")
    d = compute("d", (8, 512), lambda i, j: x[i, j].astype("float32") * 2.0)
    y = compute("y", (8, 512), lambda i, j: (d[i, j] * g[j].astype("float32")
                                             + b[j].astype("float32")).astype("float16"))
    a = algorithm("scale_shift", y)
    s = (Schedule(a).split("y", "i", 2).compute_at("d", "y", "i_o").load_once("gamma")
         .load_once("beta"))
    k, _ = assert_matches_reference(s)
    assert not _instrs(k, "vec_fma")


def test_a_peeled_tail_version_fuses_as_the_full_tiles_do() -> None:
    """A row reduction at the column tile loop: its temporaries span the whole row, so the
    peeled column tail's share the full tiles' names. The tail decided "fresh" by whether a
    name was new to the kernel, found them all taken and emitted the Mul and Add, numbering
    its temporaries differently: one name stood for a float16 and a float32 buffer
    (InternalCompilerError, found by the property tests' schedule strategy). Freshness is
    what this expression made, so both versions fuse alike."""
    from ascendsched.algo import reduce_axis, reduce_max, relu
    from ascendsched.algo.ops import abs_

    x = placeholder("in0", (9, 515), "float32")
    # |x| * x + x: x16 is computed once and read twice (select_vector.repeated), so the
    # product's factor overwritten in place is |x|, which nothing else reads
    t0 = compute("t0", (9, 515), lambda i, j: relu(-(abs_(x[i, j].astype("float16"))
                                                      * x[i, j].astype("float16")
                                                      + x[i, j].astype("float16"))))
    k = reduce_axis(515, "k")
    r = compute("r", (9,), lambda i: reduce_max(t0[i, k].astype("float32"), k))
    y = compute("y", (9, 515), lambda i, j: (t0[i, j].astype("float32") - r[i])
                .astype("float16"))
    s = (Schedule(algorithm("prop", y)).split("y", "i", 9).split("y", "j", 512)
         .compute_inline("t0").compute_at("r", "y", "j_o").buffer("in0", copies=2))
    kern, res = assert_matches_reference(s, trace=True)
    assert check_trace(res.trace, kern.target).ok
    fused = [i for i in _instrs(kern, "vec_fma") if "r_" in i.writes[0].tensor]
    assert fused and len({i.writes[0].tensor for i in fused}) == 1  # full tiles and the tail


def test_a_value_read_again_is_not_overwritten_by_a_fused_op() -> None:
    """x16 * x16 + x16 with x16 = float16(x) a common subexpression: the FusedMulAdd may
    not overwrite the value the other two reads share, so the factor it overwrites is cast
    into the stage's tile on its own, and the kernel equals numpy."""
    x = placeholder("in0", (16, 256), "float32")
    y = compute("y", (16, 256), lambda i, j: x[i, j].astype("float16") * x[i, j].astype(
        "float16") + x[i, j].astype("float16"))
    s = Schedule(algorithm("square_plus", y)).split("y", "i", 8)
    kern, _ = assert_matches_reference(s)
    fma, casts = _instrs(kern, "vec_fma"), _instrs(kern, "vec_cast")
    assert [i.writes[0].tensor for i in fma] == ["y_ub"] and len(casts) == 2
    shared = next(c.writes[0].tensor for c in casts if c.writes[0].tensor != "y_ub")
    assert [r.tensor for r in fma[0].reads].count(shared) == 2
