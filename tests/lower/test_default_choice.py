"""Choosing a default schedule cheaply (lower/schedule_for.py, lower/prepared.py,
lower/plan_memory.py's live-bytes floor, lower/collector.py): the same choice and the same
kernel as planning every candidate in full, made once."""

from __future__ import annotations

import gc
import warnings

import pytest

from ascendsched.algo import library as L
from ascendsched.errors import CapacityError
from ascendsched.lower.lifetimes import buffer_lifetimes
from ascendsched.lower.pass_log import PassLog
from ascendsched.lower.pipeline import build, lower
from ascendsched.lower.plan_memory import _live_floor, plan_memory
from ascendsched.lower.prepared import kept
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule.default import default_schedules
from ascendsched.target import DEFAULT_TARGET, Scope

# wide rows: the first candidates overflow UB (LayerNorm 64x16384: two of the first four)
ALGOS = [L.layernorm(64, 16384), L.rmsnorm(1024, 16384), L.softmax(100, 4096),
         L.layernorm(1000, 256), L.bias_add(300, 1000)]


@pytest.mark.parametrize("algo", ALGOS, ids=lambda a: f"{a.name}{list(a.outputs[0].shape)}")
def test_the_live_floor_never_exceeds_a_plan_that_fits(algo) -> None:  # noqa: ANN001
    """The floor rejects a plan without packing it: it must be a lower bound of every
    packing's peak, or a candidate that fits would be refused."""
    for cand in list(default_schedules(algo, DEFAULT_TARGET))[:6]:
        k = build(cand, DEFAULT_TARGET)
        lt = buffer_lifetimes(k)
        items = [e for e in lt.entries if e.scope == Scope.UB]
        align = DEFAULT_TARGET.scope(Scope.UB).alignment
        sizes = {(e.buffer, e.copy): -(-max(e.nbytes, 1) // align) * align for e in items}
        floor = _live_floor(items, sizes, lt.in_place)
        try:
            plan = plan_memory(k, lt, DEFAULT_TARGET, warn=False)
        except CapacityError:
            continue
        if not plan.compromises:
            assert 0 < floor <= plan.peak(Scope.UB)


def test_a_candidate_over_the_floor_raises_the_same_capacity_error() -> None:
    algo = L.layernorm(64, 16384)
    first = next(iter(default_schedules(algo, DEFAULT_TARGET)))
    k = build(first, DEFAULT_TARGET)
    with pytest.raises(CapacityError, match=r"UB buffers need 262240 B but ascend910b UB has "
                                            r"188160 B usable .* Live at the peak"):
        plan_memory(k, buffer_lifetimes(k), DEFAULT_TARGET, warn=False)


def test_lower_takes_the_chosen_candidates_build_and_plan() -> None:
    algo = L.layernorm(64, 16384)
    sched = schedule_for(algo)
    ready = kept(sched, DEFAULT_TARGET)
    assert ready is not None
    log = PassLog()
    k = lower(sched, log=log)
    assert log.results["build"] is ready[0] and log.results["memory plan"] is ready[2]
    # the same kernel as a schedule lowered from scratch (an equal schedule, another object)
    again = list(default_schedules(algo, DEFAULT_TARGET))
    twin = next(c for c in again if str(c) == str(sched))
    assert kept(twin, DEFAULT_TARGET) is None
    assert str(lower(twin)) == str(k)


def test_a_schedule_that_gave_up_buffering_is_not_kept() -> None:
    """Only a plan without compromises is kept: lowering another plans again and warns."""
    algo = L.layernorm(64, 16384)
    cands = list(default_schedules(algo, DEFAULT_TARGET))
    compromised = []
    for c in cands:
        try:
            k = build(c, DEFAULT_TARGET)
            if plan_memory(k, buffer_lifetimes(k), DEFAULT_TARGET, warn=False).compromises:
                compromised.append(c)
        except CapacityError:
            pass
    assert compromised
    assert kept(compromised[0], DEFAULT_TARGET) is None
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        lower(compromised[0])
    assert any("keeping the pipelined loops" in str(w.message) for w in got)


def _row_sum(rows: int, cols: int):  # noqa: ANN202 -- Algorithm
    from ascendsched.algo.algorithm import algorithm
    from ascendsched.algo.ops import reduce_sum
    from ascendsched.algo.tensor import compute, placeholder, reduce_axis

    x = placeholder("x", (rows, cols), "float32")
    k = reduce_axis(cols, "k")
    return algorithm("row_sum", compute("y", (rows,), lambda i: reduce_sum(x[i, k], k)))


@pytest.mark.parametrize("enabled", [True, False])
def test_lowering_leaves_the_collector_as_it_found_it(enabled: bool, monkeypatch) -> None:
    from ascendsched.schedule import default

    monkeypatch.setattr(default, "chunked_rows", lambda *_: [])  # so that nothing fits
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        lower(schedule_for(L.softmax(64, 256)))
        assert gc.isenabled() is enabled
        with pytest.raises(CapacityError):  # a 1-D row sum of 400 KB rows: no default
            lower(schedule_for(_row_sum(8, 100000)))
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_without_a_plan_as_scheduled_the_first_candidate_that_fits_at_all_wins(monkeypatch
                                                                                ) -> None:
    from ascendsched.lower import schedule_for as chooser

    algo = L.layernorm(64, 16384)
    fits = []
    for c in default_schedules(algo, DEFAULT_TARGET):
        k = build(c, DEFAULT_TARGET)
        try:
            plan_memory(k, buffer_lifetimes(k), DEFAULT_TARGET, warn=False)
        except CapacityError:
            continue
        fits.append(str(c))
    monkeypatch.setattr(chooser, "plan_as_scheduled", lambda *args: None)
    got = chooser.schedule_for(algo)
    assert str(got) == fits[0] and kept(got, DEFAULT_TARGET) is None
