"""The typed sync instructions (lower/sync_ir.py) and instruction ids (lower/ir.py): printed
forms, dispatch by type, numbering by the kernel, and every pass keeping the ids it was given."""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest

from ascendsched.algo import library as L
from ascendsched.errors import BarrierFallbackWarning, InternalCompilerError
from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import (
    UNNUMBERED,
    For,
    Instr,
    Kernel,
    Program,
    Stmt,
    StmtMutator,
    copied,
    format_body,
    iter_instrs,
)
from ascendsched.lower.pass_log import PassLog
from ascendsched.lower.pipeline import STEPS, lower
from ascendsched.lower.sync_ir import (
    Barrier,
    CrossSet,
    CrossSync,
    CrossWait,
    EventSync,
    SetFlag,
    Sync,
    SyncRole,
    WaitFlag,
    program_epilogue,
)
from ascendsched.schedule import Schedule
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.target import CoreType, Pipe
from tests.kit.cube import TWO_IDS, tight_fallback_gemm
from tests.kit.ir import synced_vadd, vadd_kernel

P = Pipe


# --------------------------------------------------------------------------- the nodes
def test_printed_forms() -> None:
    k2 = Affine.mod("k", 2)
    assert str(SetFlag(P.MTE2, dst=P.V, event_id=k2)) == "set_flag MTE2->V id=(k % 2)"
    assert str(WaitFlag(P.V, src=P.MTE2, event_id=Affine(1), comment="x_ub loaded")) == \
        "wait_flag MTE2->V id=1   # x_ub loaded"
    assert str(Barrier(P.ALL)) == "barrier ALL"
    assert str(CrossSet(P.FIX, flag_id=Affine(3))) == "cross_set FIX flag=3 mode=2"
    assert str(CrossWait(P.MTE2, flag_id=Affine(3))) == "cross_wait MTE2 flag=3 mode=2"
    # while the sync passes run: the channel and the role
    placed = SetFlag(P.V, dst=P.MTE3, channel=4, role=SyncRole.PROLOGUE, comment="z_ub free")
    assert str(placed) == "set_flag V->MTE3 id=0 [ch 4, prologue]   # z_ub free"
    assert str(Barrier(P.V, channel=0)) == "barrier V [ch 0]"


def test_format_body_nests_syncs_with_the_rest() -> None:
    k = synced_vadd(4096, 2048)
    lines = format_body(k.programs[0].body)
    assert lines[:2] == ["set_flag V->MTE2 id=0", "set_flag MTE3->V id=0"]
    assert lines[2].startswith("for k in 0..2:")
    assert lines[3] == "  wait_flag V->MTE2 id=0   # x/y_ub free"
    assert lines[4].startswith("  [MTE2] copy_gm_ub  x_ub@(0)")


def test_fields_and_types() -> None:
    s = SetFlag(P.MTE2, dst=P.V, event_id=Affine(2))
    w = WaitFlag(P.V, src=P.MTE2, event_id=Affine(2))
    assert (s.src, s.dst, w.src, w.dst) == (P.MTE2, P.V, P.MTE2, P.V)
    assert (s.op, w.op, Barrier(P.V).op) == ("set_flag", "wait_flag", "barrier")
    for node in (s, w, Barrier(P.V), CrossSet(P.FIX), CrossWait(P.S)):
        assert isinstance(node, Instr) and isinstance(node, Sync)
        assert node.writes == node.reads == node.attrs == () and node.id == UNNUMBERED
    assert isinstance(s, EventSync) and isinstance(w, EventSync)
    assert isinstance(CrossSet(P.FIX), CrossSync) and not isinstance(s, CrossSync)
    assert replace(s, event_id=Affine(1)).event_id == Affine(1)  # typed fields replace
    assert replace(s, writes=()).writes == ()  # generic code may rewrite regions
    with pytest.raises(InternalCompilerError, match="Sync is the base"):
        Sync(P.V)
    with pytest.raises(InternalCompilerError, match="channel must be an int"):
        Barrier(P.V, channel="3")  # type: ignore[arg-type]
    with pytest.raises(InternalCompilerError, match="mode must be an int"):
        CrossSet(P.FIX, mode=True)
    with pytest.raises(TypeError):
        SetFlag(P.MTE2, op="wait_flag", dst=P.V)  # type: ignore[call-arg]  # op is the type's


def test_a_mutator_visits_the_nearest_type_with_a_visitor() -> None:
    body = synced_vadd(4096, 2048).programs[0].body

    class Waits(StmtMutator):  # only waits go
        def visit_WaitFlag(self, s: WaitFlag) -> tuple[Stmt, ...]:
            return ()

    class Syncs(StmtMutator):  # every sync goes
        def visit_Sync(self, s: Sync) -> tuple[Stmt, ...]:
            return ()

    def count(b: tuple[Stmt, ...], kind: type) -> int:
        return sum(isinstance(i, kind) for i, _ in iter_instrs(b))

    assert count(body, WaitFlag) == 6 and count(body, SetFlag) == 6
    no_waits = Waits().visit_body(body)
    assert count(no_waits, WaitFlag) == 0 and count(no_waits, SetFlag) == 6
    bare = Syncs().visit_body(body)
    assert count(bare, Sync) == 0 and count(bare, Instr) == 4  # load, load, add, store
    assert StmtMutator().visit_body(body) is body  # nothing changed: the same tuple


# --------------------------------------------------------------------------- numbering
def test_build_numbers_in_program_order() -> None:
    k = vadd_kernel()
    assert [i.id for i, _ in iter_instrs(k.programs[0].body)] == [0, 1, 2, 3]
    assert k.next_id == 4
    s = synced_vadd()  # the same four with syncs around them: those get 4, 5, ...
    ids = [i.id for i, _ in iter_instrs(s.programs[0].body)]
    assert sorted(ids) == list(range(s.next_id))
    assert [i.id for i, _ in iter_instrs(s.programs[0].body) if not isinstance(i, Sync)] == \
        [0, 1, 2, 3]


def test_with_programs_gives_fresh_ids_and_the_kernel_rejects_bad_ones() -> None:
    k = vadd_kernel()
    (loop,) = k.programs[0].body
    bar = Barrier(P.V)
    k2 = k.replace_body(CoreType.AIV, (For(loop.var, loop.extent, (bar,) + loop.body),))
    got = next(i for i, _ in iter_instrs(k2.programs[0].body))
    assert isinstance(got, Barrier) and got.id == 4 and k2.next_id == 5
    k3 = k2.replace_body(CoreType.AIV, k2.programs[0].body + (Barrier(P.V),))
    assert k3.next_id == 6  # ids only grow, even where one was dropped before
    with pytest.raises(InternalCompilerError, match="has no id"):
        replace(k, programs=(Program(CoreType.AIV, (bar,)),))
    with pytest.raises(InternalCompilerError, match="has the id 0 of another instruction"):
        replace(k, programs=(Program(CoreType.AIV, loop.body + loop.body),))
    with pytest.raises(InternalCompilerError, match="not below next_id 4"):
        replace(k, programs=(Program(CoreType.AIV, (replace(bar, id=9),)),))
    twice = k.with_programs((Program(CoreType.AIV, loop.body + copied(loop.body)),))
    assert [i.id for i, _ in iter_instrs(twice.programs[0].body)] == [0, 1, 2, 3, 4, 5, 6, 7]


def test_the_epilogue_barrier_has_an_id_no_body_instruction_has() -> None:
    k = lower(GemmSchedule(L.gemm(64, 64, 128)).tile(32, 32, 64))
    (epi,) = program_epilogue(k, CoreType.AIC)
    assert isinstance(epi, Barrier) and epi.pipe == P.ALL and epi.id == k.next_id
    assert epi.id not in {i.id for p in k.programs for i, _ in iter_instrs(p.body)}
    assert program_epilogue(k, CoreType.AIV) == ()


# --------------------------------------------------------------------------- every pass
VADD = Schedule(L.vadd(4096)).split("z", "i", 1024).buffer("x", 2).buffer("y", 2)
SOFTMAX = Schedule(L.softmax(16, 512)).split("y", "i", 4).compute_at("xf", "y", "i_o") \
    .compute_at("mx", "y", "i_o").compute_at("e", "y", "i_o").compute_at("s", "y", "i_o")
GEMM = GemmSchedule(L.gemm(64, 64, 128)).tile(32, 32, 64).split_k(32).buffer("l1", 2)


def _ids(k: Kernel) -> dict[int, Instr]:
    out = {}
    for p in k.programs:
        for i, _ in iter_instrs(p.body):
            assert i.id not in out, f"id {i.id} twice: {i}"
            out[i.id] = i
    return out


def _kernels(log: PassLog) -> list[tuple[str, Kernel]]:
    out = []
    for name in STEPS:
        r = log.results[name]
        k = r if isinstance(r, Kernel) else getattr(r, "kernel", None)
        if isinstance(k, Kernel):
            out.append((name, k))
    return out


@pytest.mark.parametrize("sched", [VADD, SOFTMAX, GEMM], ids=["vadd", "softmax", "gemm"])
def test_every_pass_keeps_the_ids_and_new_syncs_get_fresh_ones(sched) -> None:  # noqa: ANN001
    log = PassLog()
    lower(sched, log=log)
    steps = _kernels(log)
    assert [n for n, _ in steps][:1] == ["build"] and steps[-1][0] == "verify final"
    built = _ids(steps[0][1])
    assert not any(isinstance(i, Sync) for i in built.values())
    assert sorted(built) == list(range(len(built)))  # Kernel.build: 0, 1, ... in order
    seen = dict(built)
    next_id = steps[0][1].next_id
    for name, k in steps[1:]:
        now = _ids(k)
        # the built instructions keep their ids through every step (the memory plan moves
        # their regions only through buffer offsets, so they are the same instructions)
        assert {i: ins for i, ins in now.items() if not isinstance(ins, Sync)} == built, name
        for i, ins in now.items():
            if i not in seen:  # a sync this step added: an id never given before
                assert isinstance(ins, Sync) and i >= next_id, (name, ins)
            else:
                assert type(seen[i]) is type(ins), name  # an id never changes its kind
        assert k.next_id >= next_id and all(i < k.next_id for i in now)
        seen.update(now)
        next_id = k.next_id
    final = steps[-1][1]
    syncs = [i for i in _ids(final).values() if isinstance(i, Sync)]
    assert syncs and all(s.channel is None and s.role is None for s in syncs)


def test_a_fallbacks_new_waits_get_fresh_ids() -> None:
    """A tight-pair fallback adds a wait after each set: new instructions, fresh ids."""
    log = PassLog()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.warns(BarrierFallbackWarning):
            lower(tight_fallback_gemm(), TWO_IDS, log=log)
    pruned = log.results["remove redundant syncs"].kernel
    final = log.results["allocate event ids"]
    before, after = _ids(pruned), _ids(final)
    fresh = {i: s for i, s in after.items() if i not in before}
    assert fresh and all(isinstance(s, WaitFlag) and i >= pruned.next_id
                         for i, s in fresh.items())
    assert {i: s for i, s in after.items() if not isinstance(s, Sync)} == \
        {i: s for i, s in before.items() if not isinstance(s, Sync)}


def test_a_sync_prints_its_first_reasons_and_how_many_more() -> None:
    """A barrier of a LayerNorm tile orders a hundred pairs: the printed IR names the first
    three and counts the rest; the comment keeps them all (explain, dumps)."""
    reasons = [f"t{n}: V write -> V read (RAW)" for n in range(7)]
    b = Barrier(Pipe.V, comment="; ".join(reasons))
    line = format_body((b,))[0]
    assert line.endswith("# t0: V write -> V read (RAW); t1: V write -> V read (RAW); "
                         "t2: V write -> V read (RAW) (+4 more)")
    assert b.comment.count("; ") == 6
    four = Barrier(Pipe.V, comment="; ".join(reasons[:4]))  # no "(+1 more)" for one left
    assert format_body((four,))[0].endswith(reasons[3])
