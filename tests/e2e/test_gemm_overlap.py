"""Double buffering on the Cube path buys overlap: with L1, L0 and L0C double buffered the
syncs leave MTE2, MTE1, M and FIX free to run at the same time (pairwise), every sync is
still needed, and the kernel checks clean. Single buffered, MTE1 and M serialise."""

from ascendsched.algo import library as L
from ascendsched.api.numerics import random_inputs
from ascendsched.api.sync_minimality import sync_minimality
from ascendsched.lower.pipeline import lower
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.sim.checker import check_trace, concurrent_pipes
from ascendsched.sim.execute import run_kernel

PAIRS = {("MTE1", "MTE2"), ("M", "MTE1"), ("M", "MTE2"), ("FIX", "M"), ("FIX", "MTE1"),
         ("FIX", "MTE2")}


def _overlap(s: GemmSchedule) -> dict[tuple[str, str], int]:
    k = lower(s)
    trace = run_kernel(k, random_inputs(s.algo), trace=True).trace
    assert check_trace(trace, k.target).ok
    return concurrent_pipes(trace, k.target)


def _two_tiles() -> GemmSchedule:
    return GemmSchedule(L.gemm(128, 64, 256)).tile(64, 64, 64).split_k(32)


def test_double_buffering_overlaps_all_four_cube_pipes():
    got = _overlap(_two_tiles().buffer("l1").buffer("l0").buffer("l0c"))
    assert PAIRS <= {p for p, n in got.items() if n > 0}, got


def test_single_buffering_serialises_loads_and_mmads():
    got = _overlap(_two_tiles())
    assert got.get(("M", "MTE1"), 0) == 0, got


def test_every_sync_of_the_double_buffered_gemm_is_needed():
    report = sync_minimality(_two_tiles().buffer("l1").buffer("l0").buffer("l0c"))
    assert report.needed >= 5 and report.removable == (), str(report)
