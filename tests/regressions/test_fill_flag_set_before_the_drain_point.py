"""A flag whose set came *before* the drain point was taken as proof of order.

What broke: ``sync_text._across`` (pairs between sibling branches, e.g. a double-buffered tile
loop and its tail version) let a *fill* flag into the sink's pipe count even when one of its
sets ran before the point where the drain chain had reached the flag's source pipe. Pruning
then dropped a sync the kernel needed.
How it showed: ``mul_add_relu`` with every input double buffered and a tail tile (5000
elements in tiles of 1024) lowered without complaint, and the race checker found 2 races in
its trace (the tail's V read of a copy against the full tiles' MTE2 write).
Fixed by: ``_across`` takes a fill flag only when every set of it lies after the drain point
(commit "sync_text: chains across sibling branches ...", this session's soundness script
confirmed the rule on 29 kernels).
"""

from __future__ import annotations

from ascendsched.algo import library as L
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule
from ascendsched.sim.checker import check_trace
from tests.kit.reference import assert_matches_reference


def _schedule() -> Schedule:
    return (Schedule(L.fused_mul_add_relu(5000)).split("d", "i", 1024).buffer("a").buffer("b")
            .buffer("c").buffer("d"))


def test_double_buffered_tiles_with_a_tail_are_race_free() -> None:
    sched = _schedule()
    k, res = assert_matches_reference(sched, kernel=lower(sched), trace=True)
    report = check_trace(res.trace, k.target)
    assert report.ok and not report.races and not report.deadlocks, report.summary()
