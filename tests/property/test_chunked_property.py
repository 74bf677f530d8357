"""Random chunked reductions: softmax, RMSNorm and LayerNorm rows cut into pieces under a bound
row loop, their statistics computed once per row with every reduction read in chunks of any
width (a tail chunk or none, chunks wider or narrower than the pieces, one chunk; a softmax's
max and sum in one ``online`` pass or not), any core
count and buffering, the row read from GM per chunk and piece or staged in UB once per row
(``cache_read("x", "UB", at=("y", "i_o"))``, whose chunks must be whole 32-byte blocks); the IR
run equals numpy race-free (through the reduced instance when
the kernel is large). Schedules over UB (CapacityError) or short of event ids (SyncError)
reject the example."""

from __future__ import annotations

from hypothesis import given, reject, settings
from hypothesis import strategies as st

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.errors import CapacityError, ScheduleError, SyncError
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule
from tests.kit.row_stats import KERNELS, stats_per_tile


@st.composite
def chunked_cases(draw) -> Schedule:
    name = draw(st.sampled_from(KERNELS))
    rows, cols = draw(st.integers(1, 40)), draw(st.integers(2, 200)) * 16
    algo = getattr(L, name)(rows, cols)
    piece = draw(st.integers(1, cols // 16)) * 16
    s = Schedule(algo).split("y", "i", 1).split("y", "j", piece)
    s = s.bind("y", "i_o", draw(st.integers(1, min(rows, 8))))
    # a softmax's two statistics in one online pass half the time (one chunk width for both)
    online = name == "softmax" and draw(st.booleans())
    width = draw(st.integers(1, cols)) if online else None
    s = stats_per_tile(s, algo, "i_o", lambda: width or draw(st.integers(1, cols)))
    if online:
        s = s.online("s", "mx")
    for t in [*algo.inputs, algo.outputs[0]]:
        if draw(st.booleans()):
            s = s.buffer(t.name, 2)
    if len(s.loop_names("y")) == 2 and draw(st.booleans()):  # the row staged once for all
        s = s.cache_read("x", "UB", at=("y", "i_o"), copies=draw(st.sampled_from((1, 2))))
    return s


@settings(max_examples=max(30, settings.default.max_examples // 4))
@given(chunked_cases())
def test_random_chunked_reductions_equal_numpy_race_free(sched: Schedule) -> None:
    try:
        k = lower(sched)
    except (CapacityError, SyncError):
        reject()
    except ScheduleError as e:  # chunks of a staged row must start on 32-byte blocks
        if "out of the staged row" not in str(e):
            raise
        reject()
    bad = [str(v) for v in check(sched, kernel=k, cpp=False) if not v.ok]
    assert not bad, f"{sched}\n" + "\n".join(bad)
