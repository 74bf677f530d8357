"""Random large vector kernels (library algorithms, default schedules or hand row tiles, 1 to
48 cores, tails, double buffering) checked through their reduced instance: the reduction keeps
every structure fact, lowers to the full kernel's IR up to sizes, is no bigger, and its IR run
equals numpy race-free (``check(..., reduce=True)`` without the C++ rungs). Schedules the
compiler refuses (buffers over UB: CapacityError; more double-buffered syncs than event ids
can serve: SyncError) reject the example; the reduced instance of an accepted one must lower."""

from __future__ import annotations

import math

from hypothesis import event, given, reject, settings
from hypothesis import strategies as st

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.errors import CapacityError, SyncError
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import Schedule
from ascendsched.schedule.reduce import describe, reduce_instance, structure_facts
from tests.kit.reference import LAYERNORM, RMSNORM, SOFTMAX

ROW_STAGES = {"bias_add": (), "softmax": SOFTMAX, "rmsnorm": RMSNORM, "layernorm": LAYERNORM}


@st.composite
def large_vector_cases(draw) -> Schedule:
    """A library vector kernel with tens to thousands of tiles; rows at most 2048 wide so
    the reduced instance's IR run stays short."""
    name = draw(st.sampled_from(sorted(L.VECTOR_KERNELS)))
    if name == "column_sum":  # tiles of columns over the cores, rows whole or in chunks
        rows, cols = draw(st.integers(200, 8192)), draw(st.integers(1, 128)) * 16
        algo = L.column_sum(rows, cols)
        if draw(st.booleans()):
            return schedule_for(algo)
        s = Schedule(algo).split("y", "j", draw(st.integers(1, cols // 16)) * 16)
        s = s.bind("y", "j_o", draw(st.integers(1, 48)))
        if draw(st.booleans()):
            s = s.split("y", "k", draw(st.integers(8, min(512, rows))))
        for t in ("x", "y"):
            if draw(st.booleans()):
                s = s.buffer(t, 2)
        return s
    if name in ("vadd", "mul_add_relu"):
        algo = L.VECTOR_KERNELS[name](draw(st.integers(1 << 14, 1 << 22)))
        if draw(st.booleans()):
            return schedule_for(algo)
        out = algo.outputs[0].name
        s = Schedule(algo).split(out, "i", draw(st.sampled_from([64, 256, 1024, 2048])))
    else:
        algo = L.VECTOR_KERNELS[name](draw(st.integers(200, 8192)),
                                      draw(st.integers(1, 128)) * 16)
        if draw(st.booleans()):
            return schedule_for(algo)
        out = "y"
        s = Schedule(algo).split(out, "i", draw(st.integers(1, 8)))
        for stage in ROW_STAGES[name]:
            s = s.compute_at(stage, out, "i_o")
    s = s.bind(out, "i_o", draw(st.integers(1, 48)))
    for t in [*algo.inputs, algo.outputs[0]]:
        if draw(st.booleans()):
            s = s.buffer(t.name, 2)
    return s


@settings(max_examples=max(40, settings.default.max_examples // 5))
@given(large_vector_cases())
def test_random_large_kernels_pass_through_their_reduced_instance(sched: Schedule) -> None:
    try:
        k = lower(sched)
    except (CapacityError, SyncError):
        reject()
    red = reduce_instance(sched)
    event("its own reduction" if red.is_full else "reduced")
    assert structure_facts(red.reduced) == structure_facts(sched), str(red)
    verdicts = check(sched, kernel=k, cpp=False, reduce=True)
    bad = [str(v) for v in verdicts if not v.ok]
    assert not bad, f"{sched}\n{red}\n" + "\n".join(bad)
    assert [v.check for v in verdicts[2:4]] == ["reduced instance", "full IR == reduced IR"]
    assert {v.instance for v in verdicts[4:]} == {describe(red.reduced)}
    # smaller, or as large on fewer cores (column sum y[16] in tiles over 3 cores: 2 cores)
    size = [(math.prod(int(d) for d in s.algo.outputs[0].shape), _cores(s))
            for s in (red.reduced, sched)]
    assert red.is_full or size[0][0] < size[1][0] or (
        size[0][0] == size[1][0] and size[0][1] < size[1][1]), str(red)


def _cores(s: Schedule) -> int:
    nest = s.loop_nest(s.algo.outputs[0].name)
    return nest.bound[1] if nest.bound else 1
