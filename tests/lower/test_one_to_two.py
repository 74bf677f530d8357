"""AIC:AIV 1:2 mixed kernels (issue 13 point 3): the two Vector cores of a block split every
tile by rows (``sub_block_idx``), uneven halves and empty ones included; both run the AIV
program with their own UB; the mode-2 flags work as the hardware's (one AIC set releases both
AIVs, the AIC's wait needs a set from each); and the checker catches every dropped or
half-dropped cross-core flag. The g++ ladder of every library mixed kernel at shapes with odd
tile row counts is the slow test at the end."""

from __future__ import annotations

import pytest

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.api.numerics import random_inputs
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.build_mixed import row_halves
from ascendsched.lower.ir import SUB_BLOCK_IDX, For, If, Instr, Kernel, Stmt, StmtMutator
from ascendsched.lower.pipeline import lower
from ascendsched.lower.sync_ir import CrossSet, CrossWait
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel
from ascendsched.sim.trace import Trace, TraceEvent
from ascendsched.target import ASCEND_910B, CoreType

SUB = Affine.of(SUB_BLOCK_IDX)

# tiles of 32 rows (halves 16 + 16) and an M tail of 3 rows (2 + 1); tails in N and K too.
# Tile rows are multiples of 16, so odd row counts come from M tails: 7 rows (4 + 3) in the
# softmax below, 1 row (sub-block 1 gets nothing) in the residual of LADDER
GELU = (GemmSchedule(L.gemm_gelu(67, 47, 70)).tile(32, 32, 32).split_k(16).buffer("l0", 2)
        .epilogue_on("vector", rows=8))
SOFTMAX = (GemmSchedule(L.gemm_softmax(39, 100, 70)).tile(16, 112, 32).bind(2)
           .epilogue_on("vector", rows=4))


def test_row_halves() -> None:
    assert row_halves(32, 2) == [(SUB * 16, 16, ())]
    assert row_halves(33, 2) == [(Affine(0), 17, (Cond(SUB, "==", 0),)),
                                 (Affine(17), 16, (Cond(SUB, "==", 1),))]
    assert row_halves(1, 2) == [(Affine(0), 1, (Cond(SUB, "==", 0),))]
    assert row_halves(33, 1) == [(Affine(), 33, ())]


def test_the_kernel_runs_two_vector_cores_with_their_own_rows() -> None:
    k = lower(GELU)
    assert k.sub_blocks == 2 and "2 Vector cores per block" in str(k).splitlines()[0]
    run = run_kernel(k, random_inputs(GELU.algo, 0), trace=True)
    cores = {e.core for e in run.trace.events}
    assert cores == {"AIC", "AIV0", "AIV1"}
    # each AIV writes exactly its rows of D: the first ceil(m / 2) of each tile on AIV0
    d_row = 47 * 2  # bytes per row of D (float16)

    def owner(r: int) -> str:
        m = min(32, 67 - r // 32 * 32)
        return "AIV0" if r % 32 < -(-m // 2) else "AIV1"

    written: dict[str, set[int]] = {"AIV0": set(), "AIV1": set()}
    for e in run.trace.events:
        for space, lo, hi in e.writes:
            if space == "GM:D":
                written[e.core] |= set(range(lo // d_row, (hi - 1) // d_row + 1))
    assert all(owner(r) == c for c, rows in written.items() for r in rows)
    assert written["AIV0"] | written["AIV1"] == set(range(67))
    assert {64, 65} <= written["AIV0"] and 66 in written["AIV1"]  # the 3-row tail: 2 + 1
    rep = check_trace(run.trace, k.target)
    assert rep.ok, rep.summary()


def _without(k: Kernel, target: int) -> Kernel:
    class _Drop(StmtMutator):
        def visit_Instr(self, s: Instr) -> tuple[Stmt, ...]:
            return () if s.id == target else (s,)

    return k.with_programs(tuple(type(p)(p.core, _Drop().visit_body(p.body))
                                 for p in k.programs))


def _only_sub0(k: Kernel, kind: type) -> Kernel:
    """The AIV's cross-core instructions of ``kind`` run on sub-block 0 only."""
    class _Half(StmtMutator):
        def visit_Instr(self, s: Instr) -> tuple[Stmt, ...]:
            return (If((Cond(SUB, "==", 0),), (s,)),) if isinstance(s, kind) else (s,)

    return k.replace_body(CoreType.AIV, _Half().visit_body(k.program(CoreType.AIV).body))


def _caught(k: Kernel, inputs: dict) -> str:
    """How the simulator or the trace checker rejects ``k`` ('' if it does not)."""
    try:
        run = run_kernel(k, inputs, trace=True)
    except InternalCompilerError as e:
        assert "cross-core deadlock" in str(e), e
        return "deadlock"
    rep = check_trace(run.trace, k.target)
    return "" if rep.ok else rep.summary()


def test_the_aic_waits_for_both_vector_cores() -> None:
    """One AIV that does not free its half of a slot: the AIC never reuses the slot (its wait
    needs both sets). One AIV that does not wait for data: it reads the slot unordered."""
    k = lower(GELU)
    inputs = random_inputs(GELU.algo, 0)
    assert _caught(k, inputs) == ""
    assert _caught(_only_sub0(k, CrossSet), inputs) == "deadlock"
    got = _caught(_only_sub0(k, CrossWait), inputs)
    assert got and not got.startswith("0 races"), got  # AIV1 reads slots not yet written


@pytest.mark.parametrize("sched", [GELU, SOFTMAX], ids=["gelu", "softmax"])
def test_dropping_any_one_cross_core_instruction_is_caught(sched: GemmSchedule) -> None:
    """Mutation: every CrossSet and CrossWait of either program, one at a time (the
    loop-body ones of the first class loop and every prologue/epilogue one)."""
    k = lower(sched)
    inputs = random_inputs(sched.algo, 0)
    picked = []
    for p in k.programs:
        first = True
        for s in p.body:
            if isinstance(s, (CrossSet, CrossWait)):
                picked.append(s.id)
            elif isinstance(s, For) and first:
                picked += [x.id for x in s.body if isinstance(x, (CrossSet, CrossWait))]
                first = False
    assert len(picked) >= (8 if sched is GELU else 2)  # softmax: 3 tiles, 2 cores, no slot reuse
    for i in picked:
        assert _caught(_without(k, i), inputs), f"dropping instruction {i} went unnoticed"


def _ev(core: str, seq: int, op: str, pipe: str, *, reads=(), writes=(),  # noqa: ANN001
        flag: int | None = None) -> TraceEvent:
    return TraceEvent(0, core, seq, op, pipe, tuple(reads), tuple(writes), flag_id=flag)


def test_trace_checker_mode_2_between_one_aic_and_two_aivs() -> None:
    """The AIC's k-th wait needs the k-th set of each AIV: a write of AIV1 before its set is
    ordered before the AIC's read after the wait even when AIV0 set first; without AIV1's set
    the wait deadlocks."""
    w = ("GM:x", 64, 128)
    ev = [_ev("AIV0", 0, "cross_set", "MTE3", flag=1),
          _ev("AIV1", 0, "copy_ub_gm", "MTE3", writes=[w]),
          _ev("AIV1", 1, "cross_set", "MTE3", flag=1),
          _ev("AIC", 0, "cross_wait", "S", flag=1),
          _ev("AIC", 1, "copy_gm_l1", "MTE2", reads=[w])]
    assert check_trace(Trace(tuple(ev)), ASCEND_910B).ok
    rep = check_trace(Trace(tuple(e for e in ev if (e.core, e.seq) != ("AIV1", 1))), ASCEND_910B)
    assert rep.deadlocks and rep.deadlocks[0].event.core == "AIC", rep.summary()
    # an AIC set releases each AIV's wait: both reads are ordered after the AIC's write
    ev2 = [_ev("AIC", 0, "fixpipe", "FIX", writes=[w]),
           _ev("AIC", 1, "cross_set", "FIX", flag=0)]
    for core in ("AIV0", "AIV1"):
        ev2 += [_ev(core, 0, "cross_wait", "S", flag=0),
                _ev(core, 1, "copy_gm_ub", "MTE2", reads=[w])]
    assert check_trace(Trace(tuple(ev2)), ASCEND_910B).ok


def test_sub_blocks_with_the_same_rows_are_refused() -> None:
    """The analysis proves the two Vector cores' GM writes disjoint: a kernel whose AIV body
    ignores ``sub_block_idx`` (both halves write the same rows) is an internal error."""
    from ascendsched.lower.cross_core_sync import plan_cross_sync

    k = lower(GemmSchedule(L.gemm_gelu(32, 32, 32)).tile(32, 32, 32), stop_after="build")

    class _Same(StmtMutator):
        def visit_Instr(self, s: Instr) -> tuple[Stmt, ...]:
            def fix(r):  # noqa: ANN001, ANN202
                return type(r)(r.tensor, _drop_sub(r.offset), r.dims, r.copy)
            return (type(s)(s.op, s.pipe, tuple(map(fix, s.writes)), tuple(map(fix, s.reads)),
                            s.attrs, s.comment, id=s.id),)

    bad = k.replace_body(CoreType.AIV, _Same().visit_body(k.program(CoreType.AIV).body))
    with pytest.raises(InternalCompilerError, match="two Vector cores both touch"):
        plan_cross_sync(bad, k.target)


def _drop_sub(e: Affine) -> Affine:
    return Affine(e.const, tuple(t for t in e.terms if t[0] != SUB_BLOCK_IDX), e.mods, e.divs)


# every library mixed kernel, tile row counts odd (uneven halves) and tails in M, N and K
LADDER = {
    "gelu": lambda: GELU,
    "row_scale": lambda: GemmSchedule(L.gemm_row_scale(101, 130, 90)).tile(32, 64, 32).bind(3)
    .swizzle(2, "m").buffer("workspace", 3),
    "residual": lambda: GemmSchedule(L.gemm_residual(97, 130, 90)).tile(48, 32, 64).bind(2),
    "softmax": lambda: SOFTMAX,
    "batched_row_scale": lambda: GemmSchedule(L.batched_gemm_row_scale(3, 41, 50, 30))
    .tile(16, 32, 32).bind(2).epilogue_on("vector", rows=8).buffer("workspace", 3),
    "gelu_default": lambda: L.gemm_gelu(67, 47, 70),
    "softmax_default": lambda: L.gemm_softmax(101, 130, 90),
}


@pytest.mark.parametrize("name", ["gelu", "row_scale", "batched_row_scale"])
def test_ir_rungs(name: str) -> None:
    verdicts = check(LADDER[name](), cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


@pytest.mark.slow  # g++ builds and runs
@pytest.mark.parametrize("name", list(LADDER))
def test_cpp_ladder(name: str) -> None:
    verdicts = check(LADDER[name]())
    bad = [str(v) for v in verdicts if not v.ok]
    assert not bad, "\n".join(bad)
    assert "C++ trace race check" in [v.check for v in verdicts]


@pytest.mark.slow  # one simulated trace per sync
@pytest.mark.parametrize("name", ["gelu", "softmax"])
def test_every_sync_is_needed(name: str) -> None:
    from ascendsched.api.sync_minimality import sync_minimality

    m = sync_minimality(LADDER[name]())
    assert not m.removable, str(m)
