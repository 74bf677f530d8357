"""Cube (AIC) programs through the lowering passes: memory planning, dependences, sync insertion,
checked by the simulator's trace checker (race-free when synced, a race for every removed sync).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ascendsched.errors import CapacityError
from ascendsched.lower.allocate_event_ids import allocate_event_ids
from ascendsched.lower.insert_sync import insert_sync, place_syncs
from ascendsched.lower.ir import Kernel, iter_instrs
from ascendsched.lower.lifetimes import buffer_lifetimes
from ascendsched.lower.plan_memory import plan_memory
from ascendsched.lower.polyhedral import DepKind, analyze_dependences
from ascendsched.lower.remove_redundant_sync import (
    channels_of,
    drop_channels,
    remove_redundant_sync,
)
from ascendsched.lower.sync_ir import Sync
from ascendsched.sim.check_report import CheckReport
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel
from ascendsched.target import ASCEND_910B, Pipe, Scope
from tests.kit.cube import (
    CASES,
    TWO_IDS,
    case,
    gemm_kernel,
    inputs,
    reference,
    tight_fallback_gemm,
)
from tests.kit.ir import planned

T = ASCEND_910B


def _synced(k: Kernel) -> Kernel:
    p = planned(k)
    return insert_sync(p, analyze_dependences(p), T)


def _check(k: Kernel, name: str) -> tuple[CheckReport, bool]:
    c = CASES[name]
    ins = inputs(c)
    res = run_kernel(k, ins, trace=True)
    same = np.array_equal(res.outputs["c"].astype(np.float64),
                          reference(c, ins).astype(np.float64))
    return check_trace(res.trace, T), same


def test_single_tile_dependences() -> None:
    p = planned(gemm_kernel(CASES["fp16_single"]))
    deps = analyze_dependences(p)
    got = sorted((d.kind.value, d.src_pipe.value, d.dst_pipe.value, d.src_tensors[0])
                 for d in deps)
    assert got == [("RAW", "M", "FIX", "c_l0"), ("RAW", "MTE1", "M", "a_l0"),
                   ("RAW", "MTE1", "M", "b_l0"), ("RAW", "MTE2", "MTE1", "a_l1"),
                   ("RAW", "MTE2", "MTE1", "b_l1")]


def test_k_loop_dependences() -> None:
    p = planned(gemm_kernel(CASES["fp16_kloop_db"]))
    deps = analyze_dependences(p)
    # accumulation: each mmad reads the C tile the previous one wrote (RAW on M, loop-carried)
    acc = [d for d in deps if d.kind == DepKind.RAW and d.src_pipe == d.dst_pipe == Pipe.M]
    assert acc and all(d.src_tensors == ("c_l0",) for d in acc)
    assert any(d.carried for d in acc)
    # double-buffered L0: the WAR from Mmad back to the next load of the same copy is distance 2
    war = [d for d in deps if d.kind == DepKind.WAR and d.src_pipe == Pipe.M
           and d.dst_pipe == Pipe.MTE1 and d.distance("k0") is not None]
    assert war and min(d.distance("k0") for d in war) == 2
    # double-buffered L1: MTE1 reads of copy kl % 2 before MTE2 overwrites it two tiles later
    war1 = [d for d in deps if d.kind == DepKind.WAR and d.src_pipe == Pipe.MTE1
            and d.dst_pipe == Pipe.MTE2]
    assert war1 and min(d.distance("kl") for d in war1 if d.distance("kl")) == 2


def test_planned_cube_scopes() -> None:
    p = planned(gemm_kernel(CASES["fp16_blocks"]))
    for b in p.buffers:
        align = T.scope(b.scope).alignment
        assert all(o % align == 0 for o in b.offsets)
    assert {b.scope for b in p.buffers} == {Scope.L1, Scope.L0A, Scope.L0B, Scope.L0C}


def test_l0_overflow_is_a_capacity_error() -> None:
    k = gemm_kernel(case("fp16_single"))
    big = replace(k, buffers=tuple(replace(b, elems=33000) if b.name == "a_l0" else b
                                   for b in k.buffers))  # 66000 B > 64 KB of L0A
    with pytest.raises(CapacityError, match="a_l0"):
        plan_memory(big, buffer_lifetimes(big), T)


@pytest.mark.parametrize("name", sorted(CASES))
def test_synced_gemm_is_race_free_and_correct(name: str) -> None:
    unsynced, ok = _check(planned(gemm_kernel(CASES[name])), name)
    assert unsynced.races and ok  # in-order simulation is right, but the pipes race
    report, ok = _check(_synced(gemm_kernel(CASES[name])), name)
    assert report.ok, str(report)
    assert ok


def _sync_count(k: Kernel) -> int:
    return sum(1 for p in k.programs for i, _ in iter_instrs(p.body) if isinstance(i, Sync))


@pytest.mark.parametrize("name", ["fp16_single", "fp16_kloop_db", "int8", "m_tail_1",
                                  "fp16_blocks"])
def test_every_inserted_sync_is_needed(name: str) -> None:
    p = planned(gemm_kernel(CASES[name]))
    deps = analyze_dependences(p)
    pruned = remove_redundant_sync(place_syncs(p, deps, T).kernel, deps, T).kernel
    chans = channels_of(pruned)
    assert chans and _sync_count(pruned) > 0
    for ch in chans:
        report, _ = _check(allocate_event_ids(drop_channels(pruned, frozenset([ch])), T,
                                              verify=False), name)
        # needed = its removal shows as a race, or as a flag set twice before its wait (the
        # producer runs ahead and the flag is lost on hardware)
        assert report.races or report.flag_errors, f"removing sync channel {ch} of {name} left no race"


def test_batched_kernel_synced() -> None:
    from tests.kit.cube import batched_kernel

    rng = np.random.default_rng(2)
    a = rng.integers(-4, 5, (3, 20, 40)).astype(np.float16)
    b = rng.integers(-4, 5, (3, 40, 24)).astype(np.float16)
    for k, want_ok in ((planned(batched_kernel()), False), (_synced(batched_kernel()), True)):
        res = run_kernel(k, {"a": a, "b": b}, trace=True)
        np.testing.assert_array_equal(res.outputs["c"],
                                      np.matmul(a.astype(np.float32), b.astype(np.float32)))
        assert check_trace(res.trace, T).ok == want_ok


def _ev(seq: int, op: str, pipe: str, w=(), r=(), src=None, dst=None, eid=None):  # noqa: ANN001, ANN202
    from ascendsched.sim.trace import TraceEvent

    return TraceEvent(0, "AIC", seq, op, pipe, tuple(r), tuple(w), src, dst, eid)


def test_checker_on_aic_pipes() -> None:
    from ascendsched.sim.trace import Trace

    c = ("L0C", 0, 1024)
    # two accumulating Mmads: same-pipe M needs PipeBarrier<PIPE_M> (target table)
    racy = Trace((_ev(0, "mmad", "M", w=[c]), _ev(1, "mmad", "M", w=[c], r=[c])))
    assert {r.kind for r in check_trace(racy, T).races} == {"RAW", "WAW"}
    fenced = Trace((_ev(0, "mmad", "M", w=[c]), _ev(1, "barrier", "M"),
                    _ev(2, "mmad", "M", w=[c], r=[c])))
    assert check_trace(fenced, T).ok
    # M -> FIX through a flag; MTE1 -> M; MTE2 -> MTE1
    l1, l0 = ("L1", 0, 512), ("L0A", 0, 512)
    chain = Trace((
        _ev(0, "copy_gm_l1", "MTE2", w=[l1], r=[("GM:a", 0, 512)]),
        _ev(1, "set_flag", "MTE2", src="MTE2", dst="MTE1", eid=0),
        _ev(2, "wait_flag", "MTE1", src="MTE2", dst="MTE1", eid=0),
        _ev(3, "load_l0a", "MTE1", w=[l0], r=[l1]),
        _ev(4, "set_flag", "MTE1", src="MTE1", dst="M", eid=0),
        _ev(5, "wait_flag", "M", src="MTE1", dst="M", eid=0),
        _ev(6, "mmad", "M", w=[c], r=[l0]),
        _ev(7, "set_flag", "M", src="M", dst="FIX", eid=0),
        _ev(8, "wait_flag", "FIX", src="M", dst="FIX", eid=0),
        _ev(9, "fixpipe", "FIX", w=[("GM:c", 0, 64)], r=[c]),
    ))
    assert check_trace(chain, T).ok
    broken = Trace(tuple(e for e in chain.events if e.seq not in (7, 8)))
    (race,) = check_trace(broken, T).races
    assert (race.kind, race.first.op, race.second.op) == ("RAW", "mmad", "fixpipe")
    # an illegal AIC HardEvent (FIX -> MTE1 exists, MTE1 -> MTE1 does not)
    bad = Trace((_ev(0, "set_flag", "MTE1", src="MTE1", dst="MTE1", eid=0),
                 _ev(1, "wait_flag", "MTE1", src="MTE1", dst="MTE1", eid=0)))
    assert any(f.kind == "illegal event" for f in check_trace(bad, T).flag_errors)


def test_tail_versions_in_a_double_buffered_k_loop_place() -> None:
    # K and M/N tail versions as sibling Ifs inside an L1 double-buffered K loop, on 3 blocks:
    # placing every cross-branch pair between the branches made the source pipe set its flags
    # twice (SyncError); deferred cross-branch dependences place cleanly.
    from tests.kit.cube import GemmCase

    c = GemmCase(m=76, n=86, k=55, tm=16, tn=48, tk=32, tk0=16, blocks=3, l1_copies=2,
                 trans_a=True, name="tails_db")
    k = _synced(gemm_kernel(c))
    ins = inputs(c)
    res = run_kernel(k, ins, trace=True)
    assert check_trace(res.trace, ASCEND_910B).ok
    np.testing.assert_allclose(res.outputs["c"], reference(c, ins), rtol=1e-3, atol=1e-3)


def test_tight_pair_fallback_stays_race_free() -> None:
    from ascendsched.api.numerics import random_inputs
    from ascendsched.errors import BarrierFallbackWarning
    from ascendsched.lower.pipeline import lower
    sched = tight_fallback_gemm()
    with pytest.warns(BarrierFallbackWarning):
        k = lower(sched, TWO_IDS)
    ins = random_inputs(sched.algo, 0)
    res = run_kernel(k, ins, trace=True)
    assert check_trace(res.trace, k.target).ok
    np.testing.assert_array_equal(res.outputs["C"], ins["A"].astype(np.int32)
                                  @ ins["B"].astype(np.int32))


def test_a_fallback_that_drops_an_ordering_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The re-check after a fallback rewrite: a tight-pair rewrite that loses the wait leaves
    dependences unordered, and lowering says so instead of emitting a race. (The first
    tight-pair rewrite dropped a prologue set that pruning had leaned on; since carried
    channels are shared across sibling loops, no GEMM of a scan of the property test's space
    leans on it any more, so the mutation here is blunter.)"""
    import warnings

    import ascendsched.lower.allocate_event_ids as alloc
    from ascendsched.errors import InternalCompilerError
    from ascendsched.lower.affine import Affine
    from ascendsched.lower.pipeline import lower
    from ascendsched.lower.sync_ir import EventSync, SetFlag, SyncRole

    def waitless(fresh: int):  # noqa: ANN202
        extra, kept = iter(range(fresh, fresh + 1000)), set()

        def tighten(s: EventSync) -> tuple:
            if not isinstance(s, SetFlag) or s.role != SyncRole.SET:
                return ()
            ch = s.channel if s.channel not in kept else next(extra)
            kept.add(s.channel)
            return (replace(s, event_id=Affine(), channel=ch),)  # no wait: the bug
        return tighten

    monkeypatch.setattr(alloc, "_tightener", waitless)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(InternalCompilerError, match="unordered"):
            lower(tight_fallback_gemm(), TWO_IDS)
