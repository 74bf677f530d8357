"""int8 GEMM dequantised per output column on the Fixpipe (VDEQF16), end to end: the library
kernel's default schedule lowers (tails in M, N and K), the IR run equals numpy and the
hardware formula (scale truncated to 10 mantissa bits), every flag is needed, the quant words'
MTE2 -> FIX flag is what keeps the trace race-free, the Vector alternative still works, and
(slow) the emitted C++ built with g++ against the host runtime does the same."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.api.numerics import random_inputs
from ascendsched.api.sync_minimality import sync_minimality
from ascendsched.lower.fixpipe_quant import quant_words, vdeqf16
from ascendsched.lower.ir import For, If, Kernel, Stmt, iter_instrs
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.lower.sync_ir import WaitFlag
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel
from ascendsched.sim.timing import model_time
from ascendsched.target import CoreType, Pipe

M, N, K = 520, 260, 300  # tails in every dimension under the default tiles


def _default(relu: bool = False, m: int = M, n: int = N, k: int = K) -> GemmSchedule:
    s = schedule_for(L.gemm_dequant(m, n, k, relu=relu))
    assert isinstance(s, GemmSchedule)
    return s


def _hand(relu: bool = True, cores: int = 3) -> GemmSchedule:
    # 70 x 50 x 90 in 32 x 32 x 64 tiles: tails of 6 rows, 18 columns and 26 K
    return (GemmSchedule(L.gemm_dequant(70, 50, 90, relu=relu)).tile(32, 32, 64).split_k(32)
            .buffer("l1").buffer("l0c").bind(cores))


def _inputs(sched: GemmSchedule, seed: int = 0) -> dict[str, np.ndarray]:
    """Random int8 operands and dequantisation scales of a realistic size (both signs, no
    float16 overflow), full-mantissa float32 so that the Fixpipe's truncation shows."""
    ins = random_inputs(sched.algo, seed)
    rng = np.random.default_rng(seed + 1)
    n = ins["scale"].shape[0]
    ins["scale"] = (rng.uniform(1e-5, 1e-3, n) * rng.choice([-1, 1], n)).astype(np.float32)
    return ins


def _failures(sched: GemmSchedule, cpp: bool) -> list[str]:
    return [str(v) for v in check(sched, cpp=cpp, inputs=_inputs(sched)) if not v.ok]


SCHEDULES = {
    "default": lambda: _default(),
    "default relu": lambda: _default(relu=True),
    "hand relu": lambda: _hand(),
    "hand": lambda: _hand(relu=False, cores=1),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_ir_ladder(name: str) -> None:
    """IR execution == numpy within the scale's truncation, and a race-free trace."""
    bad = _failures(SCHEDULES[name](), cpp=False)
    assert not bad, "\n".join(bad)


@pytest.mark.slow  # g++ build and run of each emitted kernel
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_through_the_emitted_cpp(name: str) -> None:
    bad = _failures(SCHEDULES[name](), cpp=True)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("relu", [False, True])
def test_ir_run_is_the_hardware_formula(relu: bool) -> None:
    """Bit for bit: float16(float32(relu?(A x B)) * M1(scale)), M1 the scale with its low 13
    mantissa bits cleared (lower/fixpipe_quant.py), not numpy's full-precision reference."""
    s = _hand(relu=relu)
    ins = _inputs(s, seed=3)
    got = run_kernel(lower(s), ins).outputs["D"]
    acc = ins["A"].astype(np.int64) @ ins["B"].astype(np.int64)
    want = vdeqf16(acc, quant_words(ins["scale"], acc.shape[1]), relu)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
    full = (np.maximum(acc, 0) if relu else acc).astype(np.float32) * ins["scale"]
    assert not np.array_equal(got, full.astype(np.float16))  # the truncation shows


def test_kernel_reads_quant_words() -> None:
    """GM holds uint64 quant words (whole 128 B) the host converts from the float32 scale; each
    tile copies its columns' words to L1 and the Fixpipe reads them."""
    k = lower(_default())
    scale = k.param_map["scale"]
    assert scale.dtype.name == "uint64" and scale.shape == (272,)  # 260 -> 17 x 16 words
    assert scale.host is not None and scale.host.shape == (N,)
    ops = [i.op for i, _ in iter_instrs(k.programs[0].body)]
    assert ops.count("copy_gm_l1_cont") == ops.count("fixpipe_quant") > 0
    assert "fixpipe" not in ops


def test_every_flag_is_needed() -> None:
    for s in (_hand(cores=1), _hand(relu=False, cores=1).buffer("l0c", 1)):
        rep = sync_minimality(s)
        assert not rep.removable, str(rep)


def _drop_waits(body: tuple[Stmt, ...], src: Pipe, dst: Pipe) -> tuple[Stmt, ...]:
    out: list[Stmt] = []
    for s in body:
        if isinstance(s, WaitFlag) and s.src == src and s.dst == dst:
            continue
        if isinstance(s, (For, If)):
            s = replace(s, body=_drop_waits(s.body, src, dst))
        out.append(s)
    return tuple(out)


def test_mutation_without_the_mte2_fix_wait_races() -> None:
    """Drop every MTE2 -> FIX WaitFlag: the Fixpipe may read quant words the copy is still
    writing, and the race checker says so."""
    s = _hand(cores=1)
    k = lower(s)
    prog = k.program(CoreType.AIC)
    assert prog is not None
    body = prog.body
    cut = _drop_waits(body, Pipe.MTE2, Pipe.FIX)
    assert cut != body
    mutant: Kernel = k.replace_body(CoreType.AIC, cut)
    rep = check_trace(run_kernel(mutant, _inputs(s), trace=True).trace, k.target)
    assert rep.races, str(rep)
    assert not check_trace(run_kernel(k, _inputs(s), trace=True).trace, k.target).races


def test_vector_alternative_still_works() -> None:
    s = _hand().epilogue_on("vector")
    ops = {i.op for p in lower(s).programs for i, _ in iter_instrs(p.body)}
    assert "fixpipe_quant" not in ops
    bad = _failures(s, cpp=False)
    assert not bad, "\n".join(bad)


def test_fixpipe_is_modelled_faster_than_the_vector_epilogue() -> None:
    s = _default(m=1024, n=1024, k=1024)
    fix = model_time(lower(s)).time_s
    vec = model_time(lower(s.epilogue_on("vector"))).time_s
    assert fix < vec


def _dequant_algo(scale_dtype: str, cast: bool):  # noqa: ANN202 -- Algorithm
    from ascendsched.algo import algorithm, compute, placeholder, reduce_axis, reduce_sum

    a, b = placeholder("A", (64, 64), "int8"), placeholder("B", (64, 64), "int8")
    s = placeholder("scale", (64,), scale_dtype)
    kk = reduce_axis(64, "k")
    c = compute("C", (64, 64), lambda i, j: reduce_sum(
        a[i, kk].astype("int32") * b[kk, j].astype("int32"), kk, dtype="int32"))
    if cast:
        return algorithm("g", compute("D", (64, 64), lambda i, j: (
            c[i, j].astype("float32") * s[j].astype("float32")).astype("float16")))
    return algorithm("g", compute("D", (64, 64), lambda i, j: c[i, j].astype("float32") * s[j]))


@pytest.mark.parametrize("scale_dtype,cast,match", [
    ("float16", True, "the dequantisation scale 'scale' is float16; declare it float32"),
    ("float32", False, "does not then cast to float16"),
])
def test_epilogues_the_fixpipe_cannot_take_still_raise(scale_dtype: str, cast: bool,
                                                       match: str) -> None:
    """Forced onto the Fixpipe, a scale it cannot apply still names the fix."""
    from ascendsched.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match=match):
        lower(GemmSchedule(_dequant_algo(scale_dtype, cast)).tile(32, 32, 64)
              .epilogue_on("fixpipe"))
