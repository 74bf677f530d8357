"""Double buffering survives tail tiles: when a loop holds a full-tile and a tail-tile
version as sibling branches, the syncs still let the load of the next tile (MTE2) and the
store of the last one (MTE3) run while the vector unit works on this one."""

import pytest

from ascendsched.algo import library as L
from ascendsched.api.numerics import random_inputs
from ascendsched.api.sync_minimality import sync_minimality
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule
from ascendsched.sim.checker import check_trace, concurrent_pipes
from ascendsched.sim.execute import run_kernel


def _softmax_tail_db() -> Schedule:
    s = Schedule(L.softmax(13, 256)).split("y", "i", 3).bind("y", "i_o", 2)
    for st in ("xf", "mx", "e", "s"):
        s = s.compute_at(st, "y", "i_o")
    return s.buffer("x").buffer("y")


CASES = {
    "vadd 5 tiles on 2 cores": lambda: Schedule(L.vadd(10000)).split("z", "i", 2048)
    .bind("z", "i_o", 2).buffer("x").buffer("y").buffer("z"),
    "softmax 13 rows, 3-row tiles": _softmax_tail_db,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_tail_versions_keep_the_pipes_overlapping(name):
    sched = CASES[name]()
    k = lower(sched)
    trace = run_kernel(k, random_inputs(sched.algo), trace=True).trace
    assert check_trace(trace, k.target).ok
    got = concurrent_pipes(trace, k.target)
    assert got.get(("MTE2", "V"), 0) > 0 and got.get(("MTE3", "V"), 0) > 0, got
    assert sync_minimality(sched).removable == ()
