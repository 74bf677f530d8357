"""Property: a mixed kernel whose later tile classes mirror the first (lower/class_mirror.py)
is synchronised exactly by copying the first class's syncs. Hypothesis draws GEMM + Vector
epilogue schedules whose tile classes differ in rows only (an M edge in three or more whole
steps of rows, no N edge, or an odd edge of single-row steps split 5 : 4 between the Vector
cores; or row blocks, which span every column), on enough cores for one tile per core; each
kernel's AIV program must equal what the kernel's own analysis gives, and the ladder must
pass. And on fewer cores than tiles, where a core's runs follow each other (condition 1'): no
dependence of the kernel's own may be left unordered, and the ladder must pass."""

from __future__ import annotations

from hypothesis import given, reject, settings
from hypothesis import strategies as st

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.errors import CapacityError, SyncError
from ascendsched.lower.class_mirror import class_mirror
from ascendsched.lower.cross_core_sync import leave_to_cross
from ascendsched.lower.happens_before import unordered_dependences
from ascendsched.lower.ir import Kernel
from ascendsched.lower.mirror_match import MIN_TRIPS
from ascendsched.lower.pass_log import PassLog
from ascendsched.lower.pipeline import _synchronise, lower
from ascendsched.lower.polyhedral import analyze_dependences
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.target import CoreType

KINDS = {"softmax": L.gemm_softmax, "gelu": L.gemm_gelu, "row_scale": L.gemm_row_scale,
         "residual": L.gemm_residual, "bias_gelu": L.gemm_bias_gelu}


@st.composite
def mirror_cases(draw) -> GemmSchedule:
    kind = draw(st.sampled_from(sorted(KINDS)))
    tm, tn, tk = (draw(st.sampled_from([16, 32, 64]), label=f"tile {x}") for x in "mnk")
    full = draw(st.integers(1, 3), label="full row tiles")
    # each Vector core's rows of a tile run in steps of ``rows``: the edge's a whole number
    # of them too, so its steps are the full tiles' (its loop of steps shorter)
    subs = draw(st.sampled_from([2, 1]), label="vector cores per block")
    rows = draw(st.sampled_from([r for r in (1, 2, 4) if tm // (subs * r) > MIN_TRIPS]),
                label="rows per step")
    # at least 3 steps (mirror_match.MIN_TRIPS): with 2 a double buffer's copy is never
    # reused and the mirror needs fewer syncs than the first class
    if subs == 2 and rows == 1 and draw(st.booleans(), label="odd edge"):
        # 2s - 1 rows: s on one Vector core, s - 1 on the other, a body each, both mirroring
        # the first class's one body (and its 3 steps at least)
        m = full * tm + 2 * draw(st.integers(MIN_TRIPS + 1, tm // 2), label="edge steps") - 1
    else:
        m = full * tm + subs * rows * draw(st.integers(MIN_TRIPS, tm // (subs * rows) - 1),
                                           label="edge steps")
    if kind == "softmax":  # rows wider than a tile: row blocks, each spanning every column
        n = draw(st.integers(tn + 1, 4 * tn), label="n")
        per_class = (full, 1)
    else:  # whole column tiles: the M edge is the only other class
        cols = draw(st.integers(1, 2), label="column tiles")
        n, per_class = cols * tn, (full * cols, cols)
    k = draw(st.integers(1, 96), label="k")
    # tile T runs on core T % cores, the classes numbered one after the other: one tile per core
    cores = draw(st.integers(sum(per_class), sum(per_class) + 2), label="cores")
    s = GemmSchedule(KINDS[kind](m, n, k)).epilogue_on("vector", rows=rows,
                                                        vector_cores=subs)
    return s.tile(tm, tn, tk).bind(cores).buffer("workspace", draw(st.integers(1, 3)))


def _aiv(text: str) -> str:
    return text.split("  program AIV:")[1]


def _lowered_or_rejected(sched: GemmSchedule) -> tuple[Kernel, PassLog]:
    """The lowered kernel and its log; a draw over UB or over the event-id budget (a known
    limit) is rejected."""
    log = PassLog()
    try:
        return lower(sched, log=log), log
    except CapacityError:
        reject()
    except SyncError as e:
        if "into event ids" not in str(e):
            raise
        reject()
    raise AssertionError("unreachable: reject() raises")


@settings(max_examples=max(30, settings.default.max_examples // 5))
@given(mirror_cases())
def test_mirror_classes_are_synchronised_as_their_own_analysis_would(
        sched: GemmSchedule) -> None:
    k, log = _lowered_or_rejected(sched)
    planned = log.results["apply memory plan"]
    mirror = class_mirror(planned)
    if mirror is None:  # e.g. unequal sub-block halves in one class only
        reject()
    tmpl = log.results["sync template"]
    if tmpl is not planned:  # the mirrors were left out of the analysis
        assert len(tmpl.program(CoreType.AIV).body) < len(planned.program(CoreType.AIV).body)
    alone, _ = _synchronise(planned, planned.target, lambda _n, r: r)
    assert _aiv(str(alone)) == _aiv(str(log.results["template syncs"]))
    bad = [str(v) for v in check(sched, cpp=False, kernel=k) if not v.ok]
    assert not bad, "\n".join(bad)


@st.composite
def sequential_cases(draw) -> GemmSchedule:
    """The default epilogue (each tile in one step, its instructions in loops of 128
    repeats) on fewer cores than tiles: the first class runs several tiles per core, an M
    edge of any rows after them."""
    kind = draw(st.sampled_from(sorted(KINDS)))
    tm, tn, tk = (draw(st.sampled_from([16, 32, 64]), label=f"tile {x}") for x in "mnk")
    full = draw(st.integers(1, 4), label="full row tiles")
    edge = draw(st.integers(0, tm - 1), label="edge rows")
    if kind == "softmax":
        n = draw(st.integers(tn + 1, 4 * tn), label="n")
        tiles = full + (edge > 0)
    else:
        cols = draw(st.integers(1, 2), label="column tiles")
        n, tiles = cols * tn, (full + (edge > 0)) * cols
    k = draw(st.integers(1, 96), label="k")
    cores = draw(st.integers(1, max(1, tiles - 1)), label="cores")
    return GemmSchedule(KINDS[kind](full * tm + edge, n, k)).tile(tm, tn, tk).bind(cores)


@settings(max_examples=max(30, settings.default.max_examples // 5))
@given(sequential_cases())
def test_runs_that_follow_each_other_are_synchronised_by_the_first_classs_loop(
        sched: GemmSchedule) -> None:
    k, log = _lowered_or_rejected(sched)
    mirror = class_mirror(log.results["apply memory plan"])
    if mirror is None or not mirror.trips or log.results["template syncs"] is None:
        reject()
    synced, cross = log.results["template syncs"], log.results["cross-core plan"]
    deps = leave_to_cross(analyze_dependences(synced), cross, synced)
    assert unordered_dependences(synced, deps, k.target, by_channel=False) == ()
    bad = [str(v) for v in check(sched, cpp=False, kernel=k) if not v.ok]
    assert not bad, "\n".join(bad)
