"""Mixed kernels whose later tile classes mirror the first's AIV body (lower/class_mirror.py):
the planner gives the mirrors their counterparts' offsets, the sync steps analyse the first
class alone and copy its syncs, and the result is exact: the kernel's own oracle finds every
dependence ordered, the AIV program equals the one the kernel's own analysis gives, the trace
checker finds no race. And where a mirror must not be taken."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.api.sync_minimality import sync_minimality
from ascendsched.lower.class_mirror import (
    _gm_written_unread,
    _guarded,
    class_mirror,
    mirrored_syncs,
    without_mirrors,
)
from ascendsched.lower.ir import Dim, For, If, Kernel, iter_instrs
from ascendsched.lower.mirror_match import covers
from ascendsched.lower.pass_log import PassLog
from ascendsched.lower.pipeline import _synchronise
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.lower.sync_ir import Sync, WaitFlag
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.target import CoreType
from tests.kit.mixed import assert_ladder_passes, assert_own_oracle_orders_all, lowered

MIRRORED = {
    # 19 row blocks of 16 rows on 19 cores, the M edge block (12 rows) on the last: 8 and 6
    # rows per Vector core, the softmax rows whole in UB
    "default_300x4096x64": lambda: schedule_for(L.gemm_softmax(300, 4096, 64)),
    # rows of 20 000 float32 read in chunks; a full block of 32 rows and an edge of 8
    "chunked_rows_40x20000x40": lambda: GemmSchedule(L.gemm_softmax(40, 20000, 40))
    .tile(32, 512, 32).bind(2).buffer("workspace", 1),
    # an M edge of 9 rows: 5 and 4 rows, one body per Vector core, each mirroring the first
    # class's one body (16 rows on either Vector core)
    "odd_edge_41x20000x40": lambda: GemmSchedule(L.gemm_softmax(41, 20000, 40))
    .tile(32, 512, 32).bind(2).buffer("workspace", 1),
}


def _aiv(k: Kernel) -> str:
    return "\n".join(str(k).split("  program AIV:")[1:])


def _assert_at_least_its_own_syncs(log: PassLog) -> None:
    """The mirrored kernel's own oracle, on its own dependences, finds nothing unordered,
    and its AIV carries at least the syncs the kernel's own analysis places (copying may
    over-synchronise a mirror, never under)."""
    planned, synced = log.results["apply memory plan"], log.results["template syncs"]
    assert_own_oracle_orders_all(log)
    alone, _ = _synchronise(planned, planned.target, lambda _n, r: r)

    def syncs(kern: Kernel) -> int:
        return sum(1 for i, _ in iter_instrs(kern.program(CoreType.AIV).body)
                   if isinstance(i, Sync))

    assert syncs(synced) >= syncs(alone)


@pytest.mark.parametrize("name", sorted(MIRRORED))
def test_a_mirror_class_takes_the_first_classs_syncs_exactly(name: str) -> None:
    sched = MIRRORED[name]()
    k, log = lowered(sched)
    planned = log.results["apply memory plan"]
    mirror = class_mirror(planned)
    assert mirror is not None and mirror.mirrors == (1,)
    # the planner put every mirror buffer where its counterpart is
    for mine, first in mirror.buffers:
        assert planned.buffer_map[mine].offsets == planned.buffer_map[first].offsets
    # the sync steps saw one class loop in the AIV program
    tmpl = log.results["sync template"]
    assert tmpl is not planned
    assert len(tmpl.program(CoreType.AIV).body) == 1
    assert len(planned.program(CoreType.AIV).body) == 2
    # exact: the kernel's own oracle, on its own dependences, finds nothing unordered
    assert_own_oracle_orders_all(log)
    # and the AIV program is the one the kernel's own analysis gives, comments and all
    alone, _ = _synchronise(planned, planned.target, lambda _n, r: r)
    assert _aiv(alone) == _aiv(log.results["template syncs"])
    assert_ladder_passes(sched, k, reduce=False)


@pytest.mark.slow
@pytest.mark.parametrize("make", [lambda: MIRRORED["default_300x4096x64"](),
                                  lambda: SEQUENTIAL["bias_gelu_600x512x64"](),
                                  lambda: schedule_for(L.gemm_bias_gelu(300, 700, 200))],
                         ids=["one run per core", "runs in sequence", "n edge padded"])
def test_a_mirrored_kernel_passes_the_gpp_ladder(make) -> None:  # noqa: ANN001
    sched = make()
    verdicts = check(sched, reduce=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
    assert any(v.check.startswith("C++ trace race") for v in verdicts)


def test_each_sub_block_body_of_an_odd_edge_mirrors_the_first_classs_one_body() -> None:
    """The first class runs one body on both Vector cores (16 rows each, placed by
    ``sub_block_idx``); the 9-row edge runs 5 rows on one and 4 on the other, two bodies
    under ``if sub_block_idx == s``. Each is a run of its own against the first class's body:
    both take its buffers' offsets (they never run on one core) and its syncs."""
    k, log = lowered(MIRRORED["odd_edge_41x20000x40"]())
    planned = log.results["apply memory plan"]
    first, edge = planned.program(CoreType.AIV).body
    halves = edge.body[0].body
    assert len(halves) == 2 and all(isinstance(h, If) for h in halves)
    assert not any(isinstance(s, If) for s in first.body[0].body)
    mirror = class_mirror(planned)
    assert mirror is not None
    by_first: dict[str, list[str]] = {}
    for mine, theirs in mirror.buffers:
        by_first.setdefault(theirs, []).append(mine)
    assert by_first and all(len(v) == 2 for v in by_first.values())
    synced = log.results["template syncs"].program(CoreType.AIV).body[1].body[0].body
    for h in synced:
        assert any(isinstance(i, WaitFlag) for i, _ in iter_instrs(h.body))


def test_a_mirror_of_fewer_rows_in_place_is_exact() -> None:
    """GEMM + softmax 45 x 300 x 40 in 32-row blocks on 2 cores: a full block is 16 rows per
    Vector core in one step, the 13-row edge 7 and 6, each edge body the first class's on
    fewer rows of the same tiles (regions within its, buffers no larger). Exact by the
    kernel's own oracle and the IR ladder; copying may give the edge a sync its own analysis
    would not place (never one fewer), and every channel is needed."""
    sched = GemmSchedule(L.gemm_softmax(45, 300, 40)).tile(32, 128, 32).bind(2)
    k, log = lowered(sched)
    planned = log.results["apply memory plan"]
    mirror = class_mirror(planned)
    assert mirror is not None
    sizes = planned.buffer_map
    assert any(sizes[m].elems < sizes[f].elems for m, f in mirror.buffers)
    assert all(sizes[m].offsets == sizes[f].offsets for m, f in mirror.buffers)
    _assert_at_least_its_own_syncs(log)
    assert_ladder_passes(sched, k, reduce=False)
    got = sync_minimality(sched)
    assert got.needed and not got.removable, str(got)


def test_no_mirror_where_runs_follow_each_other_and_the_edge_shortens_a_busy_loop() -> None:
    """Three full row blocks and an edge on two cores: core 0 runs two full blocks, so a
    core's runs follow each other (condition 1'), where a shorter loop must hold no sync; the
    edge's loop of row steps (2 steps of the first class's 16) holds the loads, the vector
    work and the stores between them. The kernel is synchronised with both classes in view."""
    sched = GemmSchedule(L.gemm_softmax(100, 20000, 40)).tile(32, 512, 32).bind(2)
    k, log = lowered(sched)
    planned = log.results["apply memory plan"]
    assert class_mirror(planned) is None
    assert len(log.results["sync template"].program(CoreType.AIV).body) == 2


SEQUENTIAL = {
    # 8 interior tiles of 128 x 256 on 3 cores (3, 3 and 2 each), then the M edge of 88 rows
    # (44 per Vector core: one instruction of 176 repeats where the interior's 64 rows take
    # a loop of two of 128)
    "bias_gelu_600x512x64": lambda: GemmSchedule(L.gemm_bias_gelu(600, 512, 64))
    .tile(128, 256, 64).bind(3),
    # the default schedule at an LLM layer's width: 24 interior tiles per core, 2 of the
    # last strip, the M edge of 8 rows
    "default_5000x4096x4096": lambda: schedule_for(L.gemm_bias_gelu(5000, 4096, 4096)),
}


@pytest.mark.parametrize("name", sorted(SEQUENTIAL))
def test_runs_that_follow_each_other_take_the_first_classs_loop_syncs(name: str) -> None:
    """Condition 1': every later class mirrors the first, the sync steps analyse the first
    class's run in a loop of as many trips as all class loops have, and each class loop
    takes that loop's body syncs. Exact by the kernel's own oracle (never fewer syncs than
    its own analysis places) and the IR ladder."""
    sched = SEQUENTIAL[name]()
    k, log = lowered(sched)
    planned = log.results["apply memory plan"]
    mirror = class_mirror(planned)
    loops = planned.program(CoreType.AIV).body
    assert mirror is not None and mirror.mirrors == tuple(range(1, len(loops)))
    assert mirror.trips == sum(lp.extent for lp in loops) and loops[0].extent > 1
    for mine, first in mirror.buffers:
        assert planned.buffer_map[mine].offsets == planned.buffer_map[first].offsets
    (analysed,) = log.results["sync template"].program(CoreType.AIV).body
    assert analysed.extent == mirror.trips and not any(isinstance(s, If) for s in analysed.body)
    synced = log.results["template syncs"]
    # each class loop holds the analysed loop's body syncs
    inner = [sum(isinstance(i, Sync) for i, _ in iter_instrs(lp.body))
             for lp in synced.program(CoreType.AIV).body if isinstance(lp, For)]
    assert len(set(inner)) == 1 and inner[0] > 0, inner
    _assert_at_least_its_own_syncs(log)
    assert_ladder_passes(sched, k, reduce=name.startswith("default"))


def test_an_n_edge_computes_at_the_interiors_columns_and_mirrors_it() -> None:
    """GEMM + bias + GELU 300 x 700 x 200 (default: 256-column tiles): the N edge of 188
    columns computes on UB tiles of the interior's 256 columns (its lanes past 188 are never
    stored) and moves 188 of them to and from GM, so its body is the interior's but for those
    moves and every class mirrors the first; the IR ladder passes."""
    sched = schedule_for(L.gemm_bias_gelu(300, 700, 200))
    k, log = lowered(sched)
    planned = log.results["apply memory plan"]
    mirror = class_mirror(planned)
    loops = planned.program(CoreType.AIV).body
    assert mirror is not None and mirror.mirrors == tuple(range(1, len(loops)))
    labels = [lp.comment for lp in loops]
    edge = loops[next(n for n, c in enumerate(labels) if "N edge" in c)]
    moves = [i for i, _ in iter_instrs(edge.body) if i.op in ("copy_gm_ub", "copy_ub_gm")]
    assert moves and all(r.dims[-1].extent == 188 for i in moves for r in i.writes + i.reads
                         if r.dims[-1].stride == 1 and len(r.dims) > 1)
    ub = [planned.buffer_map[r.tensor] for i in moves for r in i.writes + i.reads
          if r.tensor in planned.buffer_map and len(r.dims) > 1]
    assert ub and all(b.shape[-1] == 256 for b in ub)
    assert_own_oracle_orders_all(log)
    assert_ladder_passes(sched, k, reduce=False)


def test_an_edge_unrolls_the_first_classs_loop_of_instructions() -> None:
    """The 44-row edge's one instruction stands for the interior's loop of two (condition
    4): it touches no element outside those the loop's trips touch."""
    _, log = lowered(SEQUENTIAL["bias_gelu_600x512x64"]())
    first, edge = log.results["apply memory plan"].program(CoreType.AIV).body
    kinds = [(type(a).__name__, type(b).__name__)
             for a, b in zip(_guarded(first)[1], _guarded(edge)[1])]
    assert ("For", "Instr") in kinds
    assert class_mirror(log.results["apply memory plan"]) is not None


def test_covers_counts_every_trip_of_the_unrolled_loop() -> None:
    two = (Dim(128, 64), Dim(64, 1))  # one trip: 128 repeats of 64 elements
    assert covers((Dim(176, 64), Dim(64, 1)), two, 8192, 2)  # 176 repeats: both trips
    assert not covers((Dim(176, 64), Dim(64, 1)), two, 8192, 1)
    assert not covers((Dim(257, 64), Dim(64, 1)), two, 8192, 2)  # past the second trip
    assert not covers((Dim(176, 64), Dim(64, 1)), two, 9000, 2)  # a gap between the trips
    assert covers((Dim(2, 0), Dim(64, 0)), ((Dim(1, 0), Dim(8, 1))), 0, 2)
    rows = (Dim(2, 128), Dim(64, 1))  # two rows of 64 at a pitch of 128: not dense
    assert covers(rows, (Dim(64, 1),), 128, 2)
    assert not covers(rows, (Dim(64, 1),), 64, 2)


def test_runs_that_follow_each_other_meet_in_no_gm_element() -> None:
    """Condition 1' needs every GM tensor the AIV program writes to be an output it never
    reads (its runs store different tiles of it)."""
    _, log = lowered(SEQUENTIAL["bias_gelu_600x512x64"]())
    planned = log.results["apply memory plan"]
    body = planned.program(CoreType.AIV).body
    assert _gm_written_unread(planned, body)
    store = next(i for i, _ in iter_instrs(body) if i.writes[0].tensor == "E")
    load = next(i for i, _ in iter_instrs(body) if i.op == "copy_gm_ub")
    reads_e = replace(load, reads=(replace(load.reads[0], tensor=store.writes[0].tensor),))
    assert not _gm_written_unread(planned, body + (reads_e,))


def test_no_mirror_whose_loop_keeps_too_few_trips_to_reuse_a_copy() -> None:
    """The M edge of 4 rows, one per step on each of 2 Vector cores: 2 steps, so its double
    buffers never reuse a copy and its own analysis places no flag for that; the first
    class's 8 steps need them. Copied, they would be syncs the mirror does not need (found by
    the property test): a mirror keeps at least 3 trips and one more than any copies."""
    sched = GemmSchedule(L.gemm_bias_gelu(20, 16, 1)).epilogue_on("vector", rows=1) \
        .tile(16, 16, 16).bind(2).buffer("workspace", 1)
    k, log = lowered(sched)
    planned = log.results["apply memory plan"]
    assert len(planned.program(CoreType.AIV).body) == 2
    assert class_mirror(planned) is None


def test_no_mirror_between_classes_of_different_tile_shapes() -> None:
    """GEMM + softmax 1000 x 1000 x 128: the M edge class has other instructions (narrower
    repeats), not the first class's with a shorter loop."""
    k, log = lowered(schedule_for(L.gemm_softmax(1000, 1000, 128)))
    assert len(log.results["apply memory plan"].program(CoreType.AIV).body) == 2
    assert class_mirror(log.results["apply memory plan"]) is None


def _drop_first_wait_in_shortened_loop(body: tuple, depth: int = 0) -> tuple:
    """``body`` (the first class loop, synced) without the first wait inside its loop of
    row steps (the loop the mirror runs shorter)."""
    out, done = [], False
    for s in body:
        if done:
            out.append(s)
        elif isinstance(s, WaitFlag) and depth >= 2:
            done = True  # dropped
        elif isinstance(s, For | If):
            inner = _drop_first_wait_in_shortened_loop(
                s.body, depth + (1 if isinstance(s, For) else 0))
            done = inner != s.body
            out.append(replace(s, body=inner))
        else:
            out.append(s)
    return tuple(out)


def test_a_shortened_loop_whose_trips_leave_a_flag_changed_is_not_copied() -> None:
    """Condition 3: cutting whole trips keeps sets and waits alternating only when each trip
    sets and waits every flag alike. Drop one wait inside the first class's row loop: the
    mirror refuses to copy (the kernel is then synchronised by itself)."""
    sched = MIRRORED["default_300x4096x64"]()
    k, log = lowered(sched)
    planned = log.results["apply memory plan"]
    mirror = class_mirror(planned)
    assert mirror is not None
    synced = log.results["allocate event ids"].program(CoreType.AIV).body
    own = planned.program(CoreType.AIV).body
    assert len(synced) == len(without_mirrors(own, mirror)) == 1
    assert mirrored_syncs(own, synced, mirror) is not None
    bad = _drop_first_wait_in_shortened_loop(synced)
    assert sum(isinstance(i, WaitFlag) for i, _ in iter_instrs(bad)) == sum(
        isinstance(i, WaitFlag) for i, _ in iter_instrs(synced)) - 1
    assert mirrored_syncs(own, bad, mirror) is None


def test_explain_says_the_mirror_classes_take_the_first_classs_syncs() -> None:
    from ascendsched.api.cli import _on_template

    _, log = lowered(MIRRORED["default_300x4096x64"]())
    text = _on_template(log)
    assert "the AIV program the kernel's own, its first tile class for 2 (the others mirror " \
           "it, lower/class_mirror.py)" in text
