"""Random GEMMs (each dim 1..600, every dtype mode, transposes, batches) under random legal
Cube schedules: lowered with memory planning and sync insertion, IR execution equals numpy
within the fp32 accumulation bound, and the trace checker finds no race or deadlock. Large
GEMMs (up to 4096 per dimension, tails everywhere) are checked by the kernel's own symbolic
happens-before oracle instead of a run."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ascendsched.algo import library as L
from ascendsched.algo.gemm_spec import gemm_error
from ascendsched.api.check import check
from ascendsched.api.numerics import random_inputs
from ascendsched.lower.happens_before import unordered_dependences
from ascendsched.lower.pipeline import lower
from ascendsched.lower.polyhedral import analyze_dependences
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel

MODES = [("float16", "float16"), ("float16", "float32"), ("bfloat16", "bfloat16"),
         ("bfloat16", "float32"), ("int8", "int32")]
# >= 100 examples under the CI profile (its 200 would take minutes); more under 'dev'.
EXAMPLES = max(100, settings.default.max_examples // 2)


@st.composite
def gemm_cases(draw, trans_a: bool | None = None) -> GemmSchedule:
    """A random GEMM and legal Cube schedule (``trans_a``: A transposed or not; None: either)."""
    m, n, k = (draw(st.integers(1, 600), label=x) for x in "mnk")
    ind, out = draw(st.sampled_from(MODES))
    ta = draw(st.booleans()) if trans_a is None else trans_a
    tb = draw(st.booleans())
    batch = draw(st.sampled_from([0, 0, 0, 2]))
    if batch:
        algo = L.batched_gemm(batch, m, n, k, ind, out, trans_a=ta, trans_b=tb,
                              shared_b=draw(st.booleans()))
    else:
        algo = L.gemm(m, n, k, ind, out, trans_a=ta, trans_b=tb)
    s = GemmSchedule(algo)
    c0 = 32 if ind == "int8" else 16
    mg = 32 if ind == "int8" and ta else 16
    ng = 32 if ind == "int8" and not tb else 16
    # at most 8 tiles per dimension (edge tiles included) keep the IR run short; K steps and
    # cores (up to all 24, often not dividing the tile count) leave tails
    tm = draw(st.sampled_from([g for g in range(mg, 129, mg) if -(-m // g) <= 8] or [128]))
    tn = draw(st.sampled_from([g for g in range(ng, 129, ng) if -(-n // g) <= 8] or [128]))
    tk = draw(st.sampled_from(range(c0, 129, c0)))
    s = s.tile(tm, tn, tk)
    s = s.split_k(draw(st.sampled_from([d for d in range(c0, tk + 1, c0) if tk % d == 0])))
    for level in ("l1", "l0", "l0c"):
        s = s.buffer(level, draw(st.sampled_from([1, 2])))
    s = s.bind(draw(st.integers(1, s.target.num_aic)))
    if draw(st.booleans()):
        s = s.swizzle(draw(st.integers(1, 4)), draw(st.sampled_from(["m", "n"])))
    return s


@settings(max_examples=EXAMPLES // 2)
@given(gemm_cases(trans_a=False))
def test_random_gemms_match_numpy_and_are_race_free(sched: GemmSchedule) -> None:
    _matches_numpy_and_race_free(sched)


@settings(max_examples=EXAMPLES // 2)
@given(gemm_cases(trans_a=True))
def test_random_gemms_with_a_transposed_match_numpy_and_are_race_free(sched: GemmSchedule
                                                                      ) -> None:
    """The other half of the examples (two tests: the CI runs them on two cores)."""
    _matches_numpy_and_race_free(sched)


def _matches_numpy_and_race_free(sched: GemmSchedule) -> None:
    k = lower(sched)
    ins = random_inputs(sched.algo, 0)
    res = run_kernel(k, ins, trace=True)
    spec = sched.spec
    ok, msg = gemm_error(spec, ins, res.outputs[spec.c])
    assert ok, f"{spec}\n{sched}\n{msg}"
    rep = check_trace(res.trace, k.target)
    assert rep.ok, f"{spec}\n{sched}\n{rep}"


@st.composite
def large_gemm_cases(draw) -> GemmSchedule:
    """A large GEMM with tails in any dimension and a schedule of LLM-sized tiles on cores
    that may not divide the tile count."""
    m, n, k = (draw(st.integers(17, 4096), label=x) for x in "mnk")
    ind, out = draw(st.sampled_from(MODES))
    algo = L.gemm(m, n, k, ind, out, trans_b=draw(st.booleans()))
    size = 1 if ind == "int8" else 2
    tm, tn = draw(st.sampled_from([(a, b) for a in (64, 128, 256) for b in (64, 128, 256)
                                   if a * b <= 128 * 256]))  # L0C: 128 KiB of fp32
    l0 = draw(st.sampled_from([1, 2]))
    c0 = 32 if ind == "int8" else 16
    # L0A/L0B: 64 KiB each hold the copies of a tm x k0 and a k0 x tn slice
    k0 = draw(st.sampled_from([d for d in (32, 64, 128) if d % c0 == 0
                               and d * max(tm, tn) * size * l0 <= 64 * 1024]))
    tk = draw(st.sampled_from([t for t in (64, 128, 256) if t % k0 == 0]))
    s = GemmSchedule(algo).tile(tm, tn, tk).split_k(k0).buffer("l0", l0)
    s = s.buffer("l1", draw(st.sampled_from([1, 2])))
    s = s.bind(draw(st.integers(1, s.target.num_aic)))
    if draw(st.booleans()):
        s = s.swizzle(draw(st.integers(2, 4)), draw(st.sampled_from(["m", "n"])))
    return s


@settings(max_examples=max(25, settings.default.max_examples // 8))
@given(large_gemm_cases())
def test_large_gemms_with_tails_order_every_dependence(sched: GemmSchedule) -> None:
    """Every dependence of the kernel as shipped (its tile classes and peeled K step given
    their template's syncs, or synchronised alone) is ordered by its syncs, by the kernel's
    own oracle over all instances, blocks and trips; nothing is run, so any size goes."""
    k = lower(sched)
    bad = unordered_dependences(k, analyze_dependences(k), k.target, by_channel=False)
    assert bad == (), f"{sched.spec}\n{sched}\n{bad[0]}"


@settings(max_examples=3)
@given(gemm_cases())
def test_random_sample_through_the_emitted_cpp(sched: GemmSchedule) -> None:
    """A few random GEMMs through the whole ladder: emitted C++ built with g++, run, numbers
    (within the K-scaled bound) and trace equal to the IR's, checker clean."""
    verdicts = check(sched, seed=0)
    bad = [str(v) for v in verdicts if not v.ok]
    assert not bad, f"{sched.spec}\n{sched}\n" + "\n".join(bad)
