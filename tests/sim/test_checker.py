"""check_trace on hand-made kernels and traces: races, deadlocks, flag and budget errors."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest

from ascendsched.dtypes import float16
from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import BLOCK_IDX, For, Instr, Kernel, Program, Region, Stmt, view
from ascendsched.sim.check_report import CheckReport
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel
from ascendsched.sim.trace import Trace, TraceEvent
from ascendsched.target import ASCEND_910B, CoreType
from tests.kit.ir import P, barrier, kernel, set_flag, synced_vadd, vadd_kernel, wait_flag


def check(k: Kernel) -> CheckReport:
    inputs = {t.name: np.ones(t.shape, t.dtype.np) for t in k.params if t.kind == "input"}
    tr = run_kernel(k, inputs, trace=True).trace
    assert tr is not None
    return check_trace(tr, ASCEND_910B)


def race_kinds(rep: CheckReport) -> set[tuple[str, str, str, str]]:
    return {(r.kind, r.space, r.first.op, r.second.op) for r in rep.races}


# --------------------------------------------------------------------------- vadd
def test_unsynchronised_vadd_races() -> None:
    rep = check(vadd_kernel(4096, 2048))
    kinds = race_kinds(rep)
    assert ("RAW", "UB:x_ub:0", "copy_gm_ub", "vec_binary") in kinds  # MTE2 -> V
    assert ("RAW", "UB:z_ub:0", "vec_binary", "copy_ub_gm") in kinds  # V -> MTE3
    assert ("WAR", "UB:x_ub:0", "vec_binary", "copy_gm_ub") in kinds  # next iteration's load
    assert ("WAR", "UB:z_ub:0", "copy_ub_gm", "vec_binary") in kinds
    war = next(r for r in rep.races if r.kind == "WAR" and r.space == "UB:x_ub:0")
    assert "k=0" in war.first.label and "k=1" in war.second.label
    text = str(war)
    assert "vec_binary #2" in text and "copy_gm_ub #4" in text and "[0, 4096)" in text
    assert not rep.ok and rep.summary().startswith(f"{len(rep.races)} races, 0 deadlocks")


@pytest.mark.parametrize("copies,blocks", [(1, 1), (2, 1), (1, 2), (2, 2)])
def test_hand_synced_vadd_is_clean(copies: int, blocks: int) -> None:
    rep = check(synced_vadd(8192, 1024, copies, blocks))
    assert rep.ok, str(rep)
    assert rep.summary() == "0 races, 0 deadlocks, 0 flag errors, 0 budget errors"


def test_removing_one_wait_brings_back_the_war_race() -> None:
    k = synced_vadd(8192, 2048)
    prog = k.programs[0].body
    i = next(i for i, s in enumerate(prog) if isinstance(s, For))
    loop = prog[i]
    body = tuple(s for s in loop.body if not (isinstance(s, Instr) and "z_ub free" in s.comment))
    prog = (*prog[:i], replace(loop, body=body), *prog[i + 1:])
    k2 = k.with_programs((Program(CoreType.AIV, prog),))
    rep = check(k2)
    assert ("WAR", "UB:z_ub:0", "copy_ub_gm", "vec_binary") in race_kinds(rep)
    assert any(f.kind == "double set" for f in rep.flag_errors)  # MTE3->V never consumed


def test_barrier_all_orders_everything() -> None:
    k = vadd_kernel(4096, 2048)
    (loop,) = k.programs[0].body
    body = tuple(s for i in loop.body for s in (i, barrier(P.ALL)))
    assert check(k.with_programs((Program(CoreType.AIV, (replace(loop, body=body),)),))).ok


# --------------------------------------------------------------------------- same pipe
def v_chain(middle: tuple[Stmt, ...]) -> Kernel:
    """load x; a = exp x; <middle>; b = exp a; store b (MTE2->V and V->MTE3 flags in place)."""
    def r(b: str) -> Region:
        return view(b, 0, 2, 128, 128)

    def ex(d: str, s: str) -> Instr:
        return Instr("vec_unary", P.V, (r(d),), (r(s),), (("fn", "exp"),), f"{d}=exp")

    body = (
        Instr("copy_gm_ub", P.MTE2, (r("xu"),), (view("x", 0, 2, 128, 128),)),
        set_flag(P.MTE2, P.V), wait_flag(P.MTE2, P.V),
        ex("a", "xu"), *middle, ex("b", "a"),
        set_flag(P.V, P.MTE3), wait_flag(P.V, P.MTE3),
        Instr("copy_ub_gm", P.MTE3, (view("z", 0, 2, 128, 128),), (r("b"),)),
    )
    return kernel([("x", (256,), float16, "input"), ("z", (256,), float16, "output")],
                  [(n, float16, 256) for n in ("xu", "a", "b")], body)


def test_v_to_v_raw_needs_a_barrier() -> None:
    rep = check(v_chain(()))
    assert race_kinds(rep) == {("RAW", "UB:a:0", "vec_unary", "vec_unary")}
    assert "a=exp" in str(rep.races[0]) and "b=exp" in str(rep.races[0])
    assert check(v_chain((barrier(P.V),))).ok
    assert check(v_chain((set_flag(P.V, P.V, 1), wait_flag(P.V, P.V, 1)))).ok


def test_a_wait_does_not_order_its_own_pipe() -> None:
    # V waits for an unrelated MTE2 copy between the two exps: still a V->V race
    extra = (Instr("copy_gm_ub", P.MTE2, (view("xu", 128, 1, 128, 128),),
                   (view("x", 0, 1, 128, 128),)),
             set_flag(P.MTE2, P.V, 2), wait_flag(P.MTE2, P.V, 2))
    rep = check(v_chain(extra))
    assert ("RAW", "UB:a:0", "vec_unary", "vec_unary") in race_kinds(rep)


# --------------------------------------------------------------------------- flags
def test_wait_without_set_is_a_deadlock() -> None:
    k = synced_vadd(4096, 2048)
    body = (wait_flag(P.V, P.MTE2, 3, "orphan"), *k.programs[0].body)
    rep = check(k.with_programs((Program(CoreType.AIV, body),)))
    orphan = [d for d in rep.deadlocks if "orphan" in d.event.label]
    assert orphan and "no matching set_flag V->MTE2 id=3" in orphan[0].reason
    assert any(f.kind == "wait without set" for f in rep.flag_errors)
    assert "deadlock" in rep.summary() and not rep.ok


def test_circular_waits_deadlock() -> None:
    body = (wait_flag(P.V, P.MTE2), set_flag(P.MTE2, P.V), wait_flag(P.MTE2, P.V),
            set_flag(P.V, P.MTE2))
    rep = check(kernel([], [], body))
    assert len(rep.deadlocks) == 2
    assert all("never fires" in d.reason for d in rep.deadlocks)


def test_double_set_is_a_flag_error() -> None:
    body = (set_flag(P.MTE2, P.V), set_flag(P.MTE2, P.V), wait_flag(P.MTE2, P.V),
            wait_flag(P.MTE2, P.V))
    rep = check(kernel([], [], body))
    assert [f.kind for f in rep.flag_errors] == ["double set"]
    assert "set_flag #1" in str(rep.flag_errors[0])
    assert not rep.deadlocks and not rep.races


def test_unconsumed_set_and_illegal_event() -> None:
    rep = check(kernel([], [], (set_flag(P.MTE2, P.V), set_flag(P.V, P.MTE1, 1),
                                wait_flag(P.V, P.MTE1, 1))))
    kinds = sorted(f.kind for f in rep.flag_errors)
    assert kinds == ["illegal event", "unconsumed set"]
    assert "V_MTE1" in str(next(f for f in rep.flag_errors if f.kind == "illegal event"))


def test_event_id_outside_budget() -> None:
    rep = check(kernel([], [], (set_flag(P.MTE2, P.V, 7), wait_flag(P.MTE2, P.V, 7))))
    assert len(rep.budget_errors) == 1 and "event id 7" in str(rep.budget_errors[0])
    assert not rep.flag_errors and not rep.deadlocks


# --------------------------------------------------------------------------- blocks and cores
def test_two_blocks_writing_overlapping_gm_race() -> None:
    u = view("u", 0, 1, 256, 256)
    body = (
        Instr("copy_gm_ub", P.MTE2, (u,), (view("x", Affine.of(BLOCK_IDX) * 256, 1, 256, 256),)),
        set_flag(P.MTE2, P.MTE3), wait_flag(P.MTE2, P.MTE3),
        Instr("copy_ub_gm", P.MTE3, (view("z", 0, 1, 256, 256),), (u,), comment="same z"),
    )
    k = kernel([("x", (512,), float16, "input"), ("z", (256,), float16, "output")],
               [("u", float16, 256)], body, blocks=2)
    rep = check(k)
    assert len(rep.races) == 1
    race = rep.races[0]
    assert (race.kind, race.space, race.lo, race.hi) == ("WAW", "GM:z", 0, 512)
    assert {race.first.block, race.second.block} == {0, 1}
    # the same kernel writing z at block_idx * 256 is clean
    body2 = body[:3] + (replace(body[3], writes=(view("z", Affine.of(BLOCK_IDX) * 256, 1, 256,
                                                      256),)),)
    k2 = kernel([("x", (512,), float16, "input"), ("z", (512,), float16, "output")],
                [("u", float16, 256)], body2, blocks=2)
    assert check(k2).ok


def ev(core: str, seq: int, op: str, pipe: str, **kw: object) -> TraceEvent:
    return TraceEvent(0, core, seq, op, pipe, **kw)  # type: ignore[arg-type]


def cube_to_vector(flags: bool, *, flag: int = 1, aic_sets: int = 1) -> Trace:
    aic = [ev("AIC", 0, "fixpipe", "FIX", writes=(("GM:ws", 0, 1024),), label="C -> ws")]
    aiv = [ev("AIV", 0, "copy_gm_ub", "MTE2", reads=(("GM:ws", 0, 1024),),
              writes=(("UB:u:0", 0, 1024),), label="ws -> u")]
    if flags:
        aic += [ev("AIC", 1 + i, "cross_set", "FIX", flag_id=flag) for i in range(aic_sets)]
        aiv = [ev("AIV", 0, "cross_wait", "S", flag_id=flag)] + [replace(aiv[0], seq=1)]
    return Trace(tuple(aic + aiv))


def test_cross_core_flags_order_gm_handoff() -> None:
    assert check_trace(cube_to_vector(True), ASCEND_910B).ok
    rep = check_trace(cube_to_vector(False), ASCEND_910B)
    assert race_kinds(rep) == {("RAW", "GM:ws", "fixpipe", "copy_gm_ub")}


def test_cross_core_wait_without_set_and_budget() -> None:
    tr = cube_to_vector(True)
    no_set = Trace(tuple(e for e in tr.events if e.op != "cross_set"))
    rep = check_trace(no_set, ASCEND_910B)
    assert len(rep.deadlocks) == 1 and rep.deadlocks[0].event.op == "cross_wait"
    rep = check_trace(cube_to_vector(True, flag=12), ASCEND_910B)
    assert any("cross-core flag 12" in str(b) for b in rep.budget_errors)
    rep = check_trace(cube_to_vector(True, aic_sets=17), ASCEND_910B)
    assert any("more than 15 pending" in str(b) for b in rep.budget_errors)


def test_jsonl_trace_checks_the_same() -> None:
    k = vadd_kernel(4096, 2048)
    tr = run_kernel(k, {"x": np.ones(4096, np.float16), "y": np.ones(4096, np.float16)},
                    trace=True).trace
    assert tr is not None
    a = check_trace(tr, ASCEND_910B)
    b = check_trace(Trace.from_jsonl(tr.to_jsonl()), ASCEND_910B)
    assert a == b


def test_fifty_thousand_events_check_quickly() -> None:
    k = synced_vadd(128 * 4096, 128, copies=2, blocks=4)
    x = np.ones(128 * 4096, np.float16)
    tr = run_kernel(k, {"x": x, "y": x}, trace=True).trace
    assert tr is not None and len(tr) > 49_000
    t0 = time.perf_counter()
    rep = check_trace(tr, ASCEND_910B)
    assert rep.ok and time.perf_counter() - t0 < 20
    # and an unsynchronised trace of that size stops at the race cap
    loop: For = vadd_kernel(128 * 4096, 128, 2, 4).programs[0].body[0]  # type: ignore[assignment]
    assert loop.extent == 1024
    rep = check(vadd_kernel(128 * 1024, 128, 2, 4))
    assert rep.races_truncated and len(rep.races) >= 1000 and "1000+ races" in rep.summary()


def test_wait_on_the_scalar_pipe_stalls_every_later_instruction() -> None:
    def trace(sync: bool) -> Trace:
        evs = [ev("AIV", 0, "vec_dup", "V", writes=(("UB:u:0", 0, 256),))]
        if sync:
            evs += [ev("AIV", 1, "set_flag", "V", src="V", dst="S", event_id=0),
                    ev("AIV", 2, "wait_flag", "S", src="V", dst="S", event_id=0)]
        evs.append(ev("AIV", len(evs), "copy_ub_gm", "MTE3", reads=(("UB:u:0", 0, 256),),
                      writes=(("GM:z", 0, 256),)))
        return Trace(tuple(evs))

    assert check_trace(trace(True), ASCEND_910B).ok
    rep = check_trace(trace(False), ASCEND_910B)
    assert race_kinds(rep) == {("RAW", "UB:u:0", "vec_dup", "copy_ub_gm")}
