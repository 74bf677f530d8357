"""GEMM epilogues on the Cube core (issue 13, Fixpipe slice), end to end: a GEMM followed by a
cast, ReLU, bias stages lowers to one AIC kernel whose Mmad adds the bias from the bias table and
whose Fixpipe applies ReLU and the cast; the IR run equals numpy, the trace is race-free, and
(slow) the emitted C++ built with g++ against the host runtime does the same."""

from __future__ import annotations

import pytest

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.api.numerics import random_inputs
from ascendsched.api.sync_minimality import sync_minimality
from ascendsched.lower.ir import iter_instrs
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.lower.sync_ir import SetFlag
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.sim.execute import run_kernel
from ascendsched.target import Scope

# M, N, K = 70, 50, 90 with 32 x 32 x 32 tiles: tails of 6 rows, 18 columns and 26 K
ALGOS = {
    "cast": lambda m, n, k: L.gemm_epilogue(m, n, k),
    "relu + cast": lambda m, n, k: L.gemm_epilogue(m, n, k, relu=True),
    "bias + relu": lambda m, n, k: L.gemm_epilogue(m, n, k, bias=True, relu=True,
                                                   out_dtype="float32"),
    "bias + relu + cast": lambda m, n, k: L.gemm_epilogue(m, n, k, bias=True, relu=True),
    "bias + relu + cast, one stage": lambda m, n, k: L.gemm_epilogue(
        m, n, k, bias=True, relu=True, stages=False),
    "int8 bias + relu": lambda m, n, k: L.gemm_epilogue(m, n, k, "int8", "int32", bias=True,
                                                        relu=True),
}


def _hand(name: str, m: int = 70, n: int = 50, k: int = 90) -> GemmSchedule:
    algo = ALGOS[name](m, n, k)
    if name.startswith("int8"):  # int8 B (K, N): N and K granules of 32
        return GemmSchedule(algo).tile(32, 32, 64).split_k(32).buffer("l1").bind(3)
    return (GemmSchedule(algo).tile(32, 32, 32).split_k(16).buffer("l1").buffer("l0")
            .buffer("l0c").bind(3))


def _default(name: str) -> GemmSchedule:
    s = schedule_for(ALGOS[name](150, 140, 70))
    assert isinstance(s, GemmSchedule)
    return s


def _failures(sched: GemmSchedule, cpp: bool) -> list[str]:
    return [str(v) for v in check(sched, cpp=cpp) if not v.ok]


@pytest.mark.parametrize("name", list(ALGOS))
@pytest.mark.parametrize("which", ["default", "hand"])
def test_ir_ladder(name: str, which: str) -> None:
    """IR execution == numpy (with the epilogue) and a race-free trace."""
    sched = _default(name) if which == "default" else _hand(name)
    bad = _failures(sched, cpp=False)
    assert not bad, "\n".join(bad)


@pytest.mark.slow  # g++ build and run of each emitted kernel
@pytest.mark.parametrize("name", list(ALGOS))
@pytest.mark.parametrize("which", ["default", "hand"])
def test_through_the_emitted_cpp(name: str, which: str) -> None:
    sched = _default(name) if which == "default" else _hand(name)
    bad = _failures(sched, cpp=True)
    assert not bad, "\n".join(bad)


def test_intermediates_are_not_stored() -> None:
    """GM holds A, B, the bias and the last stage only; the epilogue's buffers are the bias
    row in L1 and in the bias table."""
    sched = _hand("bias + relu + cast")
    k = lower(sched)
    assert {(p.name, p.kind) for p in k.params} == {("A", "input"), ("B", "input"),
                                                   ("bias", "input"), ("F", "output")}
    by = {b.name: b for b in k.buffers}
    assert by["bias_l1"].scope == Scope.L1 and by["bias_bt"].scope == Scope.BT
    assert k.name == "gemm_epilogue"
    ops = [i.op for i, _ in iter_instrs(k.programs[0].body)]
    assert ops.count("copy_l1_bt") == len(sched.tile_classes)  # one per tile, before its K loop
    fix = [i for i, _ in iter_instrs(k.programs[0].body) if i.op == "fixpipe"]
    assert fix and all(i.attr("reluEn") is True and i.attr("quantPre") == "F322F16" for i in fix)


def test_bias_syncs_are_derived() -> None:
    """The bias row's path GM -(MTE2)-> L1 -(MTE1)-> BT -(M)-> Mmad gets its flags from the
    dependence analysis, each one needed (dropping any makes a race)."""
    k = lower(_hand("bias + relu"))
    pairs = {(str(i.pipe), str(i.dst)) for i, _ in iter_instrs(k.programs[0].body)
             if isinstance(i, SetFlag)}
    assert {("MTE2", "MTE1"), ("MTE1", "M"), ("M", "MTE1")} <= pairs
    rep = sync_minimality(GemmSchedule(ALGOS["bias + relu"](64, 48, 64)).tile(32, 32, 32)
                          .split_k(16).buffer("l1").bind(1))
    assert not rep.removable, str(rep)


def test_bias_over_the_bias_table_is_a_capacity_error() -> None:
    from ascendsched.errors import CapacityError

    s = GemmSchedule(ALGOS["bias + relu"](64, 512, 64)).tile(32, 512, 32)
    with pytest.raises(CapacityError, match="bias_bt"):
        lower(s)


def test_relu_really_clamps() -> None:
    """The Fixpipe's ReLU shows: some outputs are exactly 0, none negative."""
    s = _hand("relu + cast")
    ins = random_inputs(s.algo, 3)
    out = run_kernel(lower(s), ins).outputs["E"]
    assert (out >= 0).all() and (out == 0).mean() > 0.2


def test_dequant_lowers_to_the_fixpipe() -> None:
    """The per-column scale is the Fixpipe's VDEQF16 (tests/e2e/test_gemm_dequant.py: the
    ladders)."""
    k = lower(GemmSchedule(L.gemm_dequant(64, 64, 64)).tile(32, 32, 64))
    ops = [i.op for i, _ in iter_instrs(k.programs[0].body)]
    assert "fixpipe_quant" in ops and "fixpipe" not in ops


def test_example_kernel() -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "gemm_bias_relu.py"
    spec = importlib.util.spec_from_file_location("example_gemm_bias_relu", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    bad = _failures(mod.schedule(), cpp=False)
    assert not bad, "\n".join(bad)
