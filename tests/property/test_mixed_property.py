"""Random GEMMs followed by an epilogue (GELU, row scale, column scale + ReLU, residual, row
softmax on the Vector cores; bias + ReLU placed at random on the Fixpipe or the Vector cores;
bias + GELU and ReLU(bias) + exp with the bias (and ReLU) at random on the Cube core or on the
Vector cores;
each dim 1..160) under random Cube schedules (the softmax's tiles of whole rows or narrower,
in row blocks), workspace copies, cores, Vector cores per block (1:1 or 1:2) and Vector step
rows:
lowered to one mixed kernel, the IR run equals numpy (the accumulator bound carried through
the epilogue) and the trace checker finds no race, deadlock or flag error; the derived
channels are data ready (distance 0) and, when a block reuses a slot, slot free (a distance
that is a multiple of the workspace copies)."""

from __future__ import annotations

from hypothesis import given, reject, settings
from hypothesis import strategies as st

from ascendsched.algo import algorithm, compute, placeholder, reduce_axis, reduce_sum
from ascendsched.algo import library as L
from ascendsched.algo.ops import exp, relu
from ascendsched.api.check import check
from ascendsched.errors import CapacityError, SyncError
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


def _bias_relu_exp(m: int, n: int, k: int):  # noqa: ANN202 -- Algorithm
    c = L.gemm_bias_gelu(m, n, k).tensor("C")
    bias = placeholder("bias", (n,), "float32")
    d = compute("D", (m, n), lambda i, j: relu(c[i, j] + bias[j]))
    return algorithm("bias_relu_exp", compute("E", (m, n), lambda i, j:
                                              exp(d[i, j] * -0.1).astype("float16")))


def _bias_relu(m: int, n: int, k: int):  # noqa: ANN202 -- Algorithm
    return L.gemm_epilogue(m, n, k, bias=True, relu=True)


EPILOGUES = {"gelu": L.gemm_gelu, "row_scale": L.gemm_row_scale,
             "residual": L.gemm_residual, "column_scale_relu": _column_scale_relu,
             "softmax": L.gemm_softmax, "bias_relu": _bias_relu, "bias_gelu": L.gemm_bias_gelu,
             "bias_relu_exp": _bias_relu_exp}
FIXPIPE_ABLE = {"bias_relu"}  # the rest can only run on the Vector cores


@st.composite
def mixed_cases(draw) -> GemmSchedule:
    m, n, k = (draw(st.integers(1, 160), label=x) for x in "mnk")
    kind = draw(st.sampled_from(sorted(EPILOGUES)))
    algo = EPILOGUES[kind](m, n, k)
    tm, tn, tk = (draw(st.sampled_from([16, 32, 64]), label=f"tile {x}") for x in "mnk")
    if kind == "softmax" and draw(st.booleans(), label="whole rows"):
        tn = -(-n // 16) * 16  # else narrower tiles of the rows it reduces: row blocks
    unit = (draw(st.sampled_from(["fixpipe", "vector"]), label="placement")
            if kind in FIXPIPE_ABLE else "vector")
    s = GemmSchedule(algo)
    if unit == "fixpipe":
        s = s.epilogue_on("fixpipe")
    else:
        rows = draw(st.sampled_from([None, 4, 8, 16]), label="rows")
        cores = draw(st.sampled_from([2, 1]), label="vector cores per block")
        after = (draw(st.sampled_from([None, "D"]), label="bias on the Cube")
                 if kind in ("bias_gelu", "bias_relu_exp") else None)
        s = s.epilogue_on("vector", rows=rows, vector_cores=cores, after=after)
    s = s.tile(tm, tn, tk)
    if draw(st.booleans()):
        s = s.buffer("l1", 2)
    s = s.bind(draw(st.integers(1, 4)))
    if unit == "vector":
        s = s.buffer("workspace", draw(st.integers(1, 3)))
    return s


@settings(max_examples=max(100, settings.default.max_examples // 2))
@given(mixed_cases())
def test_random_mixed_kernels_pass_the_ir_ladder(sched: GemmSchedule) -> None:
    log = PassLog()
    try:
        k = lower(sched, log=log)
    except CapacityError:
        reject()
    except SyncError as e:  # the event-id budget (a known limit, tests/errors/test_gemm_errors.py)
        if "into event ids" not in str(e):
            raise
        reject()
    bad = [str(v) for v in check(sched, cpp=False, kernel=k) if not v.ok]
    assert not bad, "\n".join(bad)
    if sched.vector_epilogue is None:  # on the Fixpipe: a Cube-only kernel
        assert [p.core for p in k.programs if p.body] == [CoreType.AIC]
        return
    assert k.sub_blocks == sched.epilogue_vector_cores
    plan = log.results["cross-core plan"]
    copies = sched.copies("workspace")
    got = [(c.src_core, c.distance) for c in plan.channels]
    assert got[0] == (CoreType.AIC, 0), str(plan)
    # a slot is reused only a multiple of the copies iterations later (slot = iteration mod
    # copies); more when guarded-off iterations of a class lie between (they set and wait too)
    assert len(got) == 1 or (got[1][0] == CoreType.AIV and got[1][1] >= copies
                             and got[1][1] % copies == 0 and len(got) == 2), str(plan)
