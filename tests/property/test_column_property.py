"""Random column reductions (``y[j] = op_k f(x[k, j])``, also over the middle axis of a 3-D
input): any row count (odd ones fold a last row in at some level), column tiles with or
without a tail, any core count, rows read whole or in chunks with or without a tail chunk,
any buffering; the IR run equals numpy race-free (through the reduced instance when the
kernel is large). Schedules over UB (CapacityError) reject the example."""

from __future__ import annotations

from hypothesis import given, reject, settings
from hypothesis import strategies as st

from ascendsched.algo.algorithm import algorithm
from ascendsched.algo.ops import exp, reduce_max, reduce_min, reduce_sum
from ascendsched.algo.tensor import compute, placeholder, reduce_axis
from ascendsched.api.check import check
from ascendsched.errors import CapacityError
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule

OPS = {"sum": reduce_sum, "max": reduce_max, "min": reduce_min}
BODIES = {"cast": lambda v: v.astype("float32"), "exp": lambda v: exp(v.astype("float32")),
          "square": lambda v: v.astype("float32") * v.astype("float32")}


@st.composite
def column_cases(draw) -> Schedule:
    m, n = draw(st.integers(1, 300)), draw(st.integers(1, 300))
    batch = draw(st.sampled_from([None, 2, 3]))
    dtype = draw(st.sampled_from(["float16", "float32"]))
    op, body = draw(st.sampled_from(sorted(OPS))), BODIES[draw(st.sampled_from(sorted(BODIES)))]
    k = reduce_axis(m, "k")
    if batch is None:
        x = placeholder("x", (m, n), dtype)
        y = compute("y", (n,), lambda j: OPS[op](body(x[k, j]), k))
    else:
        x = placeholder("x", (batch, m, n), dtype)
        y = compute("y", (batch, n), lambda p, j: OPS[op](body(x[p, k, j]), k))
    s = Schedule(algorithm("colred", y))
    gran = 16 if dtype == "float16" else 8
    if draw(st.booleans()) and n > gran:
        s = s.split("y", "j", draw(st.integers(1, n // gran)) * gran)
    if batch is not None:
        s = s.split("y", "p", 1)
        loops = s.loop_names("y")
        if len(loops) == 2:
            s = s.reorder("y", "p_o", "j_o").fuse("y", "p_o", "j_o")
    loops = s.loop_names("y")
    if loops:
        s = s.bind("y", loops[0], draw(st.integers(1, 4)))
    if draw(st.booleans()) and m > 1:
        s = s.split("y", "k", draw(st.integers(1, m - 1)))
    for t in ("x", "y"):
        if draw(st.booleans()):
            s = s.buffer(t, 2)
    return s


@settings(max_examples=max(30, settings.default.max_examples // 4))
@given(column_cases())
def test_random_column_reductions_equal_numpy_race_free(sched: Schedule) -> None:
    try:
        k = lower(sched)
    except CapacityError:
        reject()
    bad = [str(v) for v in check(sched, kernel=k, cpp=False) if not v.ok]
    assert not bad, f"{sched}\n" + "\n".join(bad)
