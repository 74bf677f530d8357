"""Random GEMMs followed by a Vector epilogue (GELU, row scale, column scale + ReLU, residual,
row softmax; each dim 1..160) under random Cube schedules, workspace copies, cores and Vector step rows:
lowered to one mixed kernel, the IR run equals numpy (the accumulator bound carried through
the epilogue) and the trace checker finds no race, deadlock or flag error; the derived
channels are data ready (distance 0) and, when a block reuses a slot, slot free (a distance
that is a multiple of the workspace copies)."""

from __future__ import annotations

from hypothesis import given, reject, settings
from hypothesis import strategies as st

from ascendsched.algo import algorithm, compute, placeholder, reduce_axis, reduce_sum
from ascendsched.algo import library as L
from ascendsched.algo.ops import relu
from ascendsched.api.check import check
from ascendsched.errors import CapacityError
from ascendsched.lower.pass_log import PassLog
from ascendsched.lower.pipeline import lower
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.target import CoreType


def _column_scale_relu(m: int, n: int, k: int):  # noqa: ANN202 -- Algorithm
    a, b = placeholder("A", (m, k)), placeholder("B", (k, n))
    v = placeholder("v", (n,), "float32")
    kk = reduce_axis(k, "k")
    c = compute("C", (m, n), lambda i, j: reduce_sum(
        a[i, kk].astype("float32") * b[kk, j].astype("float32"), kk))
    return algorithm("gemm_col_relu", compute("D", (m, n), lambda i, j:
                                              relu(c[i, j] * v[j]).astype("float16")))


EPILOGUES = {"gelu": L.gemm_gelu, "row_scale": L.gemm_row_scale,
             "residual": L.gemm_residual, "column_scale_relu": _column_scale_relu,
             "softmax": L.gemm_softmax}


@st.composite
def mixed_cases(draw) -> GemmSchedule:
    m, n, k = (draw(st.integers(1, 160), label=x) for x in "mnk")
    kind = draw(st.sampled_from(sorted(EPILOGUES)))
    algo = EPILOGUES[kind](m, n, k)
    tm, tn, tk = (draw(st.sampled_from([16, 32, 64]), label=f"tile {x}") for x in "mnk")
    if kind == "softmax":  # reduces along rows: tiles of whole rows
        tn = -(-n // 16) * 16
    s = GemmSchedule(algo).tile(tm, tn, tk)
    if draw(st.booleans()):
        s = s.buffer("l1", 2)
    s = s.bind(draw(st.integers(1, 4)))
    s = s.buffer("workspace", draw(st.integers(1, 3)))
    rows = draw(st.sampled_from([None, 4, 8, 16]))
    if rows is not None:
        s = s.epilogue_on("vector", rows=rows)
    return s


@settings(max_examples=max(100, settings.default.max_examples // 2))
@given(mixed_cases())
def test_random_mixed_kernels_pass_the_ir_ladder(sched: GemmSchedule) -> None:
    log = PassLog()
    try:
        k = lower(sched, log=log)
    except CapacityError:
        reject()
    bad = [str(v) for v in check(sched, cpp=False, kernel=k) if not v.ok]
    assert not bad, "\n".join(bad)
    plan = log.results["cross-core plan"]
    copies = sched.copies("workspace")
    got = [(c.src_core, c.distance) for c in plan.channels]
    assert got[0] == (CoreType.AIC, 0), str(plan)
    # a slot is reused only a multiple of the copies iterations later (slot = iteration mod
    # copies); more when guarded-off iterations of a class lie between (they set and wait too)
    assert len(got) == 1 or (got[1][0] == CoreType.AIV and got[1][1] >= copies
                             and got[1][1] % copies == 0 and len(got) == 2), str(plan)
