"""Sync minimality on the library kernels: every inserted sync, removed in turn, makes the
trace checker report a race or a flag error (removable count 0), for the default schedules
and double-buffered / multi-core hand schedules."""

import pytest

from ascendsched.algo import library as L
from ascendsched.api.sync_minimality import sync_minimality
from ascendsched.schedule import Schedule
from tests.kit.vector_cases import CASES, IDS

# the cheap cases of the shared list (the 40x1000 reductions take ~40 s each here; the
# benchmark script covers them): every default plus the buffered and multi-core ones
PICKED = [i for i in IDS if i.endswith("-default") or i in (
    "vadd-tail+2cores+db", "mul_add_relu-db", "mul_add_relu-cores", "bias_add-row tiles db",
    "bias_add-reordered+fused+cores", "softmax-column tiles", "rmsnorm-one tile")]


def _softmax_db_cores() -> Schedule:
    s = Schedule(L.softmax(12, 256)).split("y", "i", 3).bind("y", "i_o", 2)
    for st in ("xf", "mx", "e", "s"):
        s = s.compute_at(st, "y", "i_o")
    return s.buffer("x").buffer("y")


@pytest.mark.parametrize("case_id", PICKED)
def test_every_sync_of_a_library_schedule_is_needed(case_id):
    report = sync_minimality(CASES[IDS.index(case_id)][2])
    assert report.needed > 0
    assert report.removable == (), str(report)


def test_every_sync_of_a_double_buffered_multicore_reduction_is_needed():
    report = sync_minimality(_softmax_db_cores())
    assert report.needed > 10 and report.removable == (), str(report)
