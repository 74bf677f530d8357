"""Random fused row x column tiles of softmax, RMSNorm and LayerNorm whose row statistics are
computed per tile (read in chunks of any width, a softmax's two in one ``online`` pass or not):
tails in rows, columns and chunks, any core count and buffering. The statistics' code, shared
by a row version's full and tail column tiles, runs once between the column guards
(``lower/shared_versions.py``); the IR run equals numpy race-free (through the reduced instance
when the kernel is large). Schedules over UB (CapacityError) or short of event ids (SyncError)
reject the example."""

from __future__ import annotations

from hypothesis import given, reject, settings
from hypothesis import strategies as st

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.errors import CapacityError, SyncError
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule
from tests.kit.row_stats import KERNELS, stats_per_tile


@st.composite
def fused_cases(draw) -> Schedule:
    name = draw(st.sampled_from(KERNELS))
    rows, cols = draw(st.integers(2, 24)), draw(st.integers(4, 64)) * 16
    algo = getattr(L, name)(rows, cols)
    tile_rows = draw(st.integers(1, rows))
    piece = draw(st.integers(1, cols // 16 - 1)) * 16
    tiles = -(-rows // tile_rows) * -(-cols // piece)
    s = (Schedule(algo).split("y", "i", tile_rows).split("y", "j", piece)
         .fuse("y", "i_o", "j_o").bind("y", "i_o_j_o", draw(st.integers(1, min(tiles, 8)))))
    online = name == "softmax" and draw(st.booleans())
    width = draw(st.integers(1, cols)) if online else None
    s = stats_per_tile(s, algo, "i_o_j_o", lambda: width or draw(st.integers(1, cols)))
    if online:
        s = s.online("s", "mx")
    for t in [*algo.inputs, algo.outputs[0]]:
        if draw(st.booleans()):
            s = s.buffer(t.name, 2)
    return s


@settings(max_examples=max(12, settings.default.max_examples // 16))
@given(fused_cases())
def test_random_fused_tiles_with_per_tile_statistics_equal_numpy_race_free(
        sched: Schedule) -> None:
    try:
        k = lower(sched)
    except (CapacityError, SyncError):
        reject()
    bad = [str(v) for v in check(sched, kernel=k, cpp=False) if not v.ok]
    assert not bad, f"{sched}\n" + "\n".join(bad)
