"""Sync insertion, redundancy removal and event-id allocation (lower/insert_sync.py & co)."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from ascendsched.algo import library as L
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.allocate_event_ids import EventIdPressureWarning, allocate_event_ids
from ascendsched.lower.happens_before import unordered_dependences
from ascendsched.lower.insert_sync import insert_sync, place_syncs
from ascendsched.lower.ir import For, If, Instr, Kernel, copied, view
from ascendsched.lower.pipeline import lower
from ascendsched.lower.polyhedral import analyze_dependences
from ascendsched.lower.remove_redundant_sync import (
    _bracketed,
    channels_of,
    drop_channels,
    remove_redundant_sync,
)
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.lower.sync_ir import Barrier, EventSync, SetFlag, WaitFlag
from ascendsched.lower.sync_stats import sync_stats
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.target import ASCEND_910B, Pipe, Target
from tests.kit.ir import planned, row_max_sub_kernel, vadd_kernel


def _synced(k: Kernel, target: Target = ASCEND_910B) -> Kernel:
    k = planned(k, target)
    return insert_sync(k, analyze_dependences(k), target)


def _syncs(k: Kernel) -> list[str]:
    from ascendsched.lower.ir import iter_instrs

    out = []
    for p in k.programs:
        for ins, _ in iter_instrs(p.body):
            if isinstance(ins, SetFlag):
                out.append(f"set {ins.src}->{ins.dst} {ins.event_id}")
            elif isinstance(ins, WaitFlag):
                out.append(f"wait {ins.src}->{ins.dst} {ins.event_id}")
            elif isinstance(ins, Barrier):
                out.append(f"barrier {ins.pipe}")
    return out


def test_vadd_single_buffer() -> None:
    k = _synced(vadd_kernel())
    # Prologue sets for the two loop-carried WARs (V reads x_ub/y_ub before the next load;
    # MTE3 reads z_ub before the next add), one RAW pair per direction inside the loop: the
    # x_ub RAW and y_ub WAR pairs are implied by the y_ub RAW / x_ub WAR pairs (program order),
    # the same-pipe WAWs (MTE2 x2, V) by the flag chains, so there is no barrier.
    assert _syncs(k) == [
        "set V->MTE2 0", "set MTE3->V 0",
        "wait V->MTE2 0", "set MTE2->V 0", "wait MTE2->V 0", "wait MTE3->V 0",
        "set V->MTE2 0", "set V->MTE3 0", "wait V->MTE3 0", "set MTE3->V 0",
        "wait V->MTE2 0", "wait MTE3->V 0"]
    st = sync_stats(k)
    assert st["per_iteration"]["k"] == {"sets": 4, "waits": 4, "barriers": 0, "pipe_all": 0}
    assert (st["sets"], st["waits"], st["barriers"], st["pipe_all"]) == (18, 18, 0, 0)


def test_vadd_double_buffer_ping_pong() -> None:
    k = _synced(vadd_kernel(copies=2))
    # Two prologue sets / epilogue waits per carried WAR, ids k % 2; the RAW pairs also
    # alternate ids because MTE2 may run one tile ahead of V.
    assert _syncs(k) == [
        "set V->MTE2 0", "set V->MTE2 1", "set MTE3->V 0", "set MTE3->V 1",
        "wait V->MTE2 (k % 2)", "set MTE2->V (k % 2)", "wait MTE2->V (k % 2)",
        "wait MTE3->V (k % 2)", "set V->MTE2 (k % 2)", "set V->MTE3 (k % 2)",
        "wait V->MTE3 (k % 2)", "set MTE3->V (k % 2)",
        "wait V->MTE2 0", "wait V->MTE2 1", "wait MTE3->V 0", "wait MTE3->V 1"]
    st = sync_stats(k)
    assert st["per_iteration"]["k"]["sets"] == 4 and st["barriers"] == 0
    assert (st["sets"], st["waits"]) == (20, 20)


def test_row_max_sub_barriers() -> None:
    k = _synced(row_max_sub_kernel())
    # MTE2->V before the reduce; V barriers for reduce->brcb (m_ub RAW; it also orders the
    # WAR that writing y_ub in place over x_ub creates, reduce -> sub, which that tighter pair
    # implies: analyze_dependences leaves it out) and brcb->sub (mb_ub RAW); V->MTE3 before
    # the store. The x_ub RAW of the sub rides on the first pair.
    assert _syncs(k) == ["set MTE2->V 0", "wait MTE2->V 0", "barrier V", "barrier V",
                         "set V->MTE3 0", "wait V->MTE3 0"]
    comments = [i.comment for i, _ in _iter(k) if isinstance(i, Barrier)]
    assert comments[0] == "m_ub: V write -> V read (RAW)"


def _iter(k: Kernel):  # noqa: ANN202
    from ascendsched.lower.ir import iter_instrs

    return iter_instrs(k.programs[0].body)


def test_zero_trip_loop_pairs() -> None:
    # The same synced code run with zero (and one) trips, as a tail loop would: prologue sets
    # and epilogue waits sit outside the loop, so every set still meets exactly one wait.
    for copies in (1, 2):
        k = _synced(vadd_kernel(copies=copies))
        body = k.programs[0].body
        for trips in (0, 1):
            i = next(j for j, s in enumerate(body) if isinstance(s, For))
            loop = body[i]
            short = k.replace_body(k.programs[0].core, body[:i] + (
                For(loop.var, trips, loop.body, loop.comment),) + body[i + 1:])
            assert unordered_dependences(short, None, ASCEND_910B, by_channel=False) == ()
            st = sync_stats(short)
            assert st["sets"] == st["waits"] == 2 * copies + 4 * trips
            if trips == 0:
                assert _check(short).ok


def test_id_exhaustion_falls_back_with_a_warning() -> None:
    one = dataclasses.replace(ASCEND_910B, event_ids=(0,))
    with pytest.warns(EventIdPressureWarning, match="double-buffered"):
        k = _synced(vadd_kernel(copies=2), one)
    assert all("%" not in s for s in _syncs(k))  # ping-pong gave way to one id
    # two overlapping MTE2->V pairs merge into one when only one id exists
    base = row_max_sub_kernel()
    body = (
        Instr("copy_gm_ub", Pipe.MTE2, (view("x_ub", 0, 16, 64, 64),), (view("x", 0, 16, 64, 64),)),
        Instr("copy_gm_ub", Pipe.MTE2, (view("y_ub", 0, 16, 64, 64),), (view("x", 0, 16, 64, 64),)),
        Instr("vec_reduce", Pipe.V, (view("m_ub", 0, 16, 1, 1),), (view("x_ub", 0, 16, 64, 64),),
              (("fn", "max"),)),
        Instr("vec_unary", Pipe.V, (view("y_ub", 0, 16, 64, 64),), (view("y_ub", 0, 16, 64, 64),),
              (("fn", "exp"),)),
        Instr("copy_ub_gm", Pipe.MTE3, (view("y", 0, 16, 64, 64),), (view("y_ub", 0, 16, 64, 64),)),
    )
    k2 = base.replace_body(base.programs[0].core, body)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _syncs(_synced(k2)).count("set MTE2->V 1") == 1  # two ids: no pressure
    with pytest.warns(EventIdPressureWarning, match="merged"):
        merged = _synced(k2, one)
    assert _syncs(merged)[:2] == ["set MTE2->V 0", "wait MTE2->V 0"]


def test_double_buffered_loads_short_of_ids_share_a_ping_pong_pair_and_keep_overlapping() -> None:
    """RoPE over two output halves (x, cos, sin loaded per tile, lo and hi stored), default
    schedule: every input double buffered needs 6 MTE2 -> V ids, and the tail tile more. The
    ping-pong pairs merge two by two (one set after both loads, one wait before both reads,
    still ``k % 2``) instead of falling back to one id, which could set an id twice and made
    the default schedule fail with a SyncError."""
    from ascendsched.algo.algorithm import algorithm
    from ascendsched.algo.tensor import compute, placeholder
    from ascendsched.sim.checker import check_trace
    from tests.kit.reference import assert_matches_reference

    m, h = 200, 64
    x = placeholder("x", (m, 2 * h), "float16")
    cos = placeholder("cos", (m, h), "float16")
    sin = placeholder("sin", (m, h), "float16")

    def f32(t, i, j):  # noqa: ANN001, ANN202
        return t[i, j].astype("float32")

    lo = compute("lo", (m, h), lambda i, j: (f32(x, i, j) * f32(cos, i, j)
                                             - f32(x, i, j + h) * f32(sin, i, j)).astype("float16"))
    hi = compute("hi", (m, h), lambda i, j: (f32(x, i, j + h) * f32(cos, i, j)
                                             + f32(x, i, j) * f32(sin, i, j)).astype("float16"))
    sched = schedule_for(algorithm("rope_halves", [lo, hi]))
    with pytest.warns(EventIdPressureWarning, match="merged double-buffered"):
        k = lower(sched)
    # the full tiles' loads still alternate two ids (the tail tile's are single copies)
    pingpong = [i for i in _syncs(k) if i.startswith(("set MTE2->V", "wait MTE2->V")) and "%" in i]
    assert {i.split()[0] for i in pingpong} == {"set", "wait"}
    k, res = assert_matches_reference(sched, kernel=k, trace=True)
    assert check_trace(res.trace, k.target).ok


def test_a_ping_pong_sync_on_one_id_that_could_be_set_twice_is_refused() -> None:
    """LayerNorm tiles of 2 rows on 2 cores with x, gamma, beta and y double buffered, on a
    part with 4 event ids: the full tiles' loop needs 6 MTE2->V ids (3 ping-pong pairs). On
    one id each, nothing orders MTE2's next set after V's previous wait (the WAR on the
    other copy is two tiles away): a SyncError, not a kernel whose trace has double sets (the
    fallback emitted one before this check). (On the 910B it fits since the tail tile is peeled
    out of the loop; as a second version inside it, it needed 12.)"""
    from ascendsched.algo import library as L
    from ascendsched.errors import SyncError
    from ascendsched.lower.pipeline import lower
    from ascendsched.schedule import Schedule
    from tests.kit.cube import FOUR_IDS

    s = Schedule(L.layernorm(7, 64)).split("y", "i", 2).bind("y", "i_o", 2)
    s = s.compute_at("xf", "y", "i_o").compute_at("d", "y", "i_o")
    for stage in ("mean", "var", "r"):
        s = s.compute_inline(stage)
    for t in ("x", "gamma", "beta", "y"):
        s = s.buffer(t, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EventIdPressureWarning)
        with pytest.raises(SyncError, match="set it again before its previous wait"):
            lower(s, FOUR_IDS)


def test_every_dependence_is_ordered_and_ids_in_budget() -> None:
    for k in (vadd_kernel(), vadd_kernel(copies=2), vadd_kernel(blocks=2, copies=2),
              vadd_kernel(n=2048 * 3, tile=2048, copies=2), row_max_sub_kernel()):
        p = planned(k)
        s = insert_sync(p, analyze_dependences(p), ASCEND_910B)
        assert unordered_dependences(s, analyze_dependences(p), ASCEND_910B,
                                     by_channel=False) == ()
        for i, _ in _iter(s):
            if isinstance(i, EventSync):
                eid = i.event_id
                vals = {eid.evaluate({"k": j}) for j in range(2)}
                assert vals <= set(ASCEND_910B.event_ids)
            assert i.pipe != Pipe.ALL


# --------------------------------------------------------------------------- with sim/checker
def _check(k: Kernel):  # noqa: ANN202
    checker = pytest.importorskip("ascendsched.sim.checker")
    execute = pytest.importorskip("ascendsched.sim.execute")
    rng = np.random.default_rng(0)
    inputs = {t.name: rng.standard_normal(t.shape).astype(t.dtype.np)
              for t in k.params if t.kind == "input"}
    return checker.check_trace(execute.run_kernel(k, inputs, trace=True).trace, ASCEND_910B)


def _nested_vadd(copies: int) -> Kernel:
    """vadd over 2 blocks with k split into (ko, ki), ki of odd extent 3 inside an If."""
    k = vadd_kernel(n=2048 * 12, tile=2048, copies=copies, blocks=2)
    loop = k.programs[0].body[0]
    kk = Affine.of("ko") * 3 + Affine.of("ki")

    def sub(r):  # noqa: ANN001, ANN202
        copy = r.copy if r.copy.is_const else Affine.mod("ki", 2)
        return dataclasses.replace(r, offset=r.offset.substitute("k", kk), copy=copy)

    body = tuple(dataclasses.replace(i, writes=tuple(map(sub, i.writes)),
                                     reads=tuple(map(sub, i.reads))) for i in loop.body)
    nest = (For("ko", 2, (If((Cond(Affine.of("block_idx"), ">=", 0),),
                             (For("ki", 3, body),)),)),)
    return k.replace_body(k.programs[0].core, nest)


def test_nested_loops_share_one_carried_pair() -> None:
    # The WARs are carried by ko and ki; one pair over the flattened iterations (prologue
    # before ko, ids ki % 2) orders both levels.
    k = _synced(_nested_vadd(2))
    st = sync_stats(k)
    assert st["per_iteration"]["ki"]["sets"] == 4 and "ko" not in st["per_iteration"]
    assert st["static"]["sets"] == 8


FIXTURES = {
    "nested_vadd_db": lambda: _nested_vadd(2),
    "nested_vadd": lambda: _nested_vadd(1),
    "vadd": lambda: vadd_kernel(),
    "vadd_db": lambda: vadd_kernel(copies=2),
    "vadd_db_odd_2blocks": lambda: vadd_kernel(n=2048 * 6, tile=2048, copies=2, blocks=2),
    "row_max_sub": lambda: row_max_sub_kernel(),
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_synced_fixtures_check_clean(name: str) -> None:
    assert _check(planned(FIXTURES[name]())).races  # unsynced: races
    report = _check(_synced(FIXTURES[name]()))
    assert report.ok, str(report)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_every_inserted_sync_is_needed(name: str) -> None:
    p = planned(FIXTURES[name]())
    deps = analyze_dependences(p)
    pruned = remove_redundant_sync(place_syncs(p, deps, ASCEND_910B).kernel, deps,
                                   ASCEND_910B).kernel
    chans = channels_of(pruned)
    assert chans
    for ch in chans:
        report = _check(allocate_event_ids(drop_channels(pruned, frozenset([ch])), ASCEND_910B,
                                           verify=False))
        assert report.races, f"removing sync channel {ch} of {name} left no race"


def test_sibling_loops_reusing_a_variable_with_other_extents() -> None:
    # Two tile loops named k, of 7 and 8 tiles: the happens-before run clamps them to 7 and 6
    # iterations, so its instance box must be per loop, not per variable name (it was: the
    # 8-tile loop's k = 6 counted as "never ran" and placement raised SyncError).
    eight = vadd_kernel(n=2048 * 8, tile=2048)
    loop8 = eight.programs[0].body[0]
    first = copied(loop8.body)  # distinct instructions (fresh ids)
    both = eight.replace_body(eight.programs[0].core, (For("k", 7, first), loop8))
    k = _synced(both)
    assert _check(k).ok


def test_latest_source_of_a_tail_version_dependence() -> None:
    # A tile loop of 8 fused tiles whose last 4 are a tail version (branch on floor(t / 4)),
    # y double buffered: the store of full tile 2 and the copy into tail tile 4 share a copy
    # of y_ub. The happens-before oracle must see that pair (isl's lexmax of the quasi-affine
    # relation returned tile 0 as the latest source, and a real race went unnoticed).
    from ascendsched.algo import algorithm, compute, placeholder
    from ascendsched.api.numerics import random_inputs
    from ascendsched.lower.pipeline import lower
    from ascendsched.schedule import Schedule
    from ascendsched.sim.checker import check_trace
    from ascendsched.sim.execute import run_kernel

    x = placeholder("x", (4, 17), "float16")
    algo = algorithm("copy", compute("y", (4, 17), lambda i, j: x[i, j]))
    s = (Schedule(algo).split("y", "i", 1).split("y", "j", 16).reorder("y", "j_o", "i_o")
         .fuse("y", "j_o", "i_o", fused="t").buffer("y", copies=2))
    k = lower(s)
    report = check_trace(run_kernel(k, random_inputs(algo), trace=True).trace, k.target)
    assert report.ok, report.summary()



def _lowered_watching_mirrored(sched, monkeypatch) -> tuple[Kernel, list[bool]]:  # noqa: ANN001
    """``lower(sched)``, and per pair ``mirrored`` gave: whether it went into the source's
    branch (False: the sink's)."""
    from ascendsched.lower import insert_sync as ins
    from ascendsched.lower.sync_requirements import mirrored

    sides: list[bool] = []

    def spy(r, d, deps, kernel, held):  # noqa: ANN001, ANN202
        got = mirrored(r, d, deps, kernel, held)
        sides.extend(q.container[-1] == r.after for q in got)
        return got

    with monkeypatch.context() as mp:
        mp.setattr(ins, "mirrored", spy)
        return lower(sched), sides


def _assert_bias_add_exact_and_race_free(k: Kernel, algo) -> None:  # noqa: ANN001
    from ascendsched.api.numerics import random_inputs
    from ascendsched.sim.checker import check_trace
    from ascendsched.sim.execute import run_kernel

    ins = random_inputs(algo)
    res = run_kernel(k, ins, trace=True)
    report = check_trace(res.trace, k.target)
    assert report.ok, report.summary()
    np.testing.assert_array_equal(res.outputs["y"], (ins["x"] + ins["bias"]).astype(np.float16))


@pytest.mark.parametrize("buffered", [("x", "y"), ()])
def test_exclusive_tile_versions_share_their_channels_with_no_sync_between_them(
        buffered: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    """Four tile versions (full or tail along both axes) as exclusive branches of one fused,
    core-bound loop. A dependence from one version into another (any trips apart, in either
    text order) is deferred; one whose sink's version has no pair of its own (the corner tile
    runs once) gets the pair that version would have for its own uses (``mirrored``; so does
    the source's version), which joins the other versions' channel. Before, the fallback put
    set/wait pairs between the versions that drained every pipe in every trip (modelled 1.64
    us double-buffered, slower than 1.44 single-buffered now; the LLM-sized 1605 x 10472 one
    676 -> 397 us)."""
    from ascendsched.schedule import Schedule
    from ascendsched.sim.timing import model_time

    algo = L.bias_add(37, 1000)

    def scheduled(bufs: tuple[str, ...]) -> Schedule:
        s = (Schedule(algo).tile("y", ("i", "j"), (8, 256)).reorder("y", "j_o", "i_o")
             .fuse("y", "j_o", "i_o", fused="t").bind("y", "t", 6))
        for b in bufs:
            s = s.buffer(b)
        return s

    k, sides = _lowered_watching_mirrored(scheduled(buffered), monkeypatch)
    assert sides
    loop = next(x for x in k.programs[0].body if isinstance(x, For))
    (guard,) = loop.body
    assert isinstance(guard, If) and len(guard.body) == 4
    assert all(isinstance(x, If) for x in guard.body)  # no sync between the versions
    _assert_bias_add_exact_and_race_free(k, algo)
    if buffered:
        assert model_time(k).cycles < model_time(lower(scheduled(()))).cycles


def test_a_version_that_never_reuses_its_copy_gets_its_pair_as_a_source_too(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two row tiles of a full column tile, then two of a tail, on one core, ``y`` double
    buffered: the full version's two trips use both copies of ``y_ub`` once, so it has no
    MTE3 -> V pair of its own, and the tail version's V write of a copy the full version's
    MTE3 read two trips before needs one in both versions (``mirrored``'s source side). The
    fallback of set/wait pairs between the versions drained MTE3 before every tail tile."""
    from ascendsched.schedule import Schedule

    algo = L.bias_add(14, 118)
    s = (Schedule(algo).tile("y", ("i", "j"), (7, 112)).reorder("y", "j_o", "i_o")
         .fuse("y", "j_o", "i_o", fused="t").buffer("y"))
    k, sides = _lowered_watching_mirrored(s, monkeypatch)
    assert sorted(sides) == [False, True]
    loop = next(x for x in k.programs[0].body if isinstance(x, For))
    assert len(loop.body) == 2 and all(isinstance(x, If) for x in loop.body)
    _assert_bias_add_exact_and_race_free(k, algo)


def test_an_odd_count_of_l0_steps_per_tile_keeps_ping_pong_ids() -> None:
    """GEMM 300x200x330 tiled 64x64x128 (K step 32) on 2 cores: 11 L0 K steps per tile (two
    full L1 steps of 4, a K tail of 3). A running L0 copy counter gave ``(kk + t) % 2``, which
    no ping-pong id follows: 16 'slot free' syncs for 6 ids (EventIdPressureWarning), 4 of
    them on one id. Each tile now numbers its L0 copies from an even count (build_gemm), so
    the copy is ``kk % 2`` in every L0 K loop: no warning, ping-pong waits, nothing
    unordered, and the trace of the IR run is race-free."""
    from ascendsched.algo import library as L
    from ascendsched.api.numerics import random_inputs
    from ascendsched.schedule.gemm import GemmSchedule
    from ascendsched.sim.checker import check_trace
    from ascendsched.sim.execute import run_kernel

    s = (GemmSchedule(L.gemm(300, 200, 330)).tile(64, 64, 128).split_k(32).buffer("l1", 2)
         .buffer("l0", 2).bind(2))
    k = _lowered_with_l0_ping_pong(s, least=6)
    report = check_trace(run_kernel(k, random_inputs(s.algo), trace=True).trace, k.target)
    assert report.ok, report.summary()


def _lowered_with_l0_ping_pong(s, least: int):  # noqa: ANN001, ANN202
    """``s`` lowered (an EventIdPressureWarning fails), with at least ``least`` M -> MTE1
    waits in L0 K loops, each on a ``kk % 2`` id, and every dependence ordered."""
    from ascendsched.lower.pipeline import lower

    with warnings.catch_warnings():
        warnings.simplefilter("error", EventIdPressureWarning)
        k = lower(s)
    in_loops = [w for inside, w in _loop_waits(k.programs[0].body, Pipe.M, Pipe.MTE1, "kk")
                if inside]
    assert len(in_loops) >= least
    assert all(w.event_id.mods and w.event_id.mods[0][0] == "kk" for w in in_loops)
    assert unordered_dependences(k, analyze_dependences(k), ASCEND_910B, by_channel=False) == ()
    return k


def _loop_waits(body: tuple, src: Pipe, dst: Pipe, var: str, inside: bool = False
                ) -> list[tuple[bool, WaitFlag]]:
    """(directly in the body of a loop over ``var``, wait) for every src -> dst wait of a
    kernel body."""
    out: list[tuple[bool, WaitFlag]] = []
    for s in body:
        if isinstance(s, WaitFlag) and s.src == src and s.pipe == dst:
            out.append((inside, s))
        elif isinstance(s, (For, If)):
            out += _loop_waits(s.body, src, dst, var, isinstance(s, For) and s.var == var)
    return out


def test_tile_classes_share_their_l0_slot_channels_and_keep_double_buffering() -> None:
    """GEMM 200x130x232 tiled 64x64x128 (K step 32) on 2 cores: each tile class is a persistent
    loop, and each tile has two L0 K loops (the full L1 step and the peeled K tail), each with
    an M -> MTE1 'slot free' pair over the class loop. One channel per loop for both pairs
    (insert_sync.channel_numbers) fits the ids: no EventIdPressureWarning, and every wait in
    an L0 K loop keeps its ping-pong id, so loads of one L0 slot overlap the Mmad of the other
    (before: 16 such channels for 6 ids, every one on a single id)."""
    from ascendsched.algo import library as L
    from ascendsched.schedule.gemm import GemmSchedule

    s = (GemmSchedule(L.gemm(200, 130, 232)).tile(64, 64, 128).split_k(32).buffer("l1", 2)
         .buffer("l0", 2).bind(2))
    _lowered_with_l0_ping_pong(s, least=6)  # two L0 K loops per class loop, three class loops


def test_a_guarded_one_tile_class_shares_the_class_loops_l1_channels() -> None:
    """GEMM 2000x100x200 tiled 256x128x64 (K step 64, one L0 step per L1 step) on 3 cores: the
    N-edge class is a persistent loop, the corner class one tile under its guard (no loop).
    Each had its own MTE1 -> MTE2 'slot free' channels for a_l1 and b_l1 (ping-pong, 2 ids
    each), and a set of the corner's prologue may not share an id with the class loop's
    channel it could overtake: 9 ids for 6, so 4 of them fell back to one id
    (EventIdPressureWarning). When the ids run out, placement runs again with a channel's
    prologue and epilogue around the guard too (insert_sync.allocate_ids, channel_numbers with
    join_classes), so the corner's L1 K loop joins the class loop's channels: no warning, every
    L1 slot-free wait in a K loop on a ``kt % 2`` id, race-free."""
    from ascendsched.algo import library as L
    from ascendsched.api.numerics import random_inputs
    from ascendsched.lower.pipeline import lower
    from ascendsched.schedule.gemm import GemmSchedule
    from ascendsched.sim.checker import check_trace
    from ascendsched.sim.execute import run_kernel

    s = (GemmSchedule(L.gemm(2000, 100, 200)).tile(256, 128, 64).split_k(64).buffer("l1", 2)
         .buffer("l0", 2).bind(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", EventIdPressureWarning)
        k = lower(s)
    in_loops = [w for inside, w in _loop_waits(k.programs[0].body, Pipe.MTE1, Pipe.MTE2, "kt")
                if inside]
    assert len(in_loops) >= 4  # a_l1 and b_l1 in the class loop's and the corner's K loop
    assert all(w.event_id.mods and w.event_id.mods[0][0] == "kt" for w in in_loops)
    report = check_trace(run_kernel(k, random_inputs(s.algo), trace=True).trace, k.target)
    assert report.ok, report.summary()


@pytest.mark.parametrize("make", [
    lambda: schedule_for(L.gemm(1000, 1000, 1000)),  # tile classes, a peeled K step
    lambda: (GemmSchedule(L.gemm(300, 500, 200)).tile(64, 128, 64).split_k(32)
             .buffer("l1", 2).buffer("l0", 2).buffer("l0c", 2).bind(3)),
    lambda: schedule_for(L.layernorm(16384, 256)),  # a peeled tail tile, row chunks
    lambda: schedule_for(L.softmax(100, 1000)),
])
def test_a_channel_pruning_does_not_try_is_needed(make) -> None:  # noqa: ANN001
    """Pruning skips a channel that is the last sync between a bracketed dependent pair able
    to start a chain from the source's pipe or end one at the sink's (``_bracketed``): the
    oracle must find a problem once that channel alone is dropped."""
    k = lower(make(), stop_after="apply memory plan")
    deps = analyze_dependences(k)
    placed = place_syncs(k, deps, ASCEND_910B)
    lone = {ch for chans in _bracketed(placed.kernel, deps, ASCEND_910B) if len(chans) == 1
            for ch in chans if ch is not None}
    assert lone
    for ch in sorted(lone):
        assert placed.oracle.problems(dropped=placed.oracle.sync_keys(ch), first_only=True), ch


@pytest.mark.parametrize("make,ahead", [
    (lambda: L.vadd(4194304), True),  # a full-tile loop and a tail tile
    (lambda: L.vadd(16384), True),  # two trips, two copies: no buffer reuse, no pair back
    (lambda: L.softmax(16384, 4096), True),
    (lambda: L.layernorm(16384, 256), True),
    (lambda: L.bias_add(100, 256), True),
    (lambda: L.softmax(8, 1024), False),  # one trip: nothing can run ahead
    # the Cube core: the double-buffered K loops' MTE2->MTE1 and MTE1->M pairs
    (lambda: L.gemm(1000, 1000, 1000), True),
    (lambda: GemmSchedule(L.gemm_int8(33, 47, 200)).tile(16, 32, 64).split_k(32)  # K loops
     .buffer("l1", 2).buffer("l0", 2).bind(6).swizzle(3, "m"), True),   # of 4 and 2 steps
    (lambda: L.gemm_softmax(100, 3000, 90), True),  # a mixed kernel: both programs
    (lambda: L.gemm_gelu(130, 200, 70), True),
])
def test_pairs_get_up_front_the_ping_pong_ids_the_check_would_ask_for(
        make, ahead, monkeypatch) -> None:  # noqa: ANN001
    """``insert_sync._ahead_up_front`` gives in-loop pairs whose source pipe runs a trip
    ahead ping-pong ids before the first check, on every core; the kernel must be the one
    the check's own fallback (place, find double sets, place again) gives."""
    from ascendsched.lower import insert_sync as ins

    changed = []
    up_front = ins._ahead_up_front

    def spy(reqs, kernel, join):  # noqa: ANN001, ANN202
        got = up_front(reqs, kernel, join)
        changed.append(got is not reqs)
        return got

    monkeypatch.setattr(ins, "_ahead_up_front", spy)
    fast = str(lower(schedule_for(make())))
    assert changed == [ahead]
    monkeypatch.setattr(ins, "_ahead_up_front", lambda reqs, kernel, join: reqs)
    assert str(lower(schedule_for(make()))) == fast


def test_carried_ping_pong_pairs_short_of_ids_join_where_they_share_a_body() -> None:
    """LayerNorm 64 x 32 000 (the statistics in chunk loops read from GM, then pieces, as
    the default had it before it staged the row; with gamma's and beta's pieces double
    buffered too, as the default had them before that) needs four
    carried V -> MTE2 ping-pong channels, 8 ids of 6. The x chunks of the three loops share
    one channel, gamma's pair joins it in the piece body (one wait before both loads, one
    set after both reads) and every load keeps alternating two ids; before, three channels
    fell back to one id each. Equal to numpy race-free."""
    from ascendsched.api.check import check
    from tests.kit.row_stats import layernorm_pieces

    s = layernorm_pieces(64, 32000, 6400).buffer("gamma", 2).buffer("beta", 2)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        k = lower(s)
    said = [str(w.message) for w in got if issubclass(w.category, EventIdPressureWarning)]
    assert said and all("merged double-buffered 'gamma_ub" in m for m in said), said
    waits = " ".join(i for i in _syncs(k) if i.startswith("wait V->MTE2"))
    for loop in ("mean_k_o1", "var_k2_o2", "j_o"):  # the two statistics' chunks, the pieces
        assert f"({loop} % 2)" in waits, waits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EventIdPressureWarning)
        assert all(v.ok for v in check(s, cpp=False))
