"""schedule/reduce.py on Cube schedules: a general ``Schedule`` with a tensorized stage reduces
exactly as the ``GemmSchedule`` it spells out (same sizes and cores, same reduced kernel), and
its reduced kernel equals its full one up to sizes."""

from __future__ import annotations

import pytest

from ascendsched.algo import library as L
from ascendsched.errors import ScheduleError
from ascendsched.lower.compare import structural_diff
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import Bind, Schedule
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.reduce import describe, reduce_instance, structure_facts
from tests.kit.general_cube import general_spelling, issue_example, kernel_text

# the GemmSchedule spellings; their general spellings come from tests/kit/general_cube.py
CASES = {
    # M 2000 % 128, N 3000 % 256, K 1000 % 128: a tail in every dimension, each one reduced
    "gemm 2000x3000x1000": lambda: schedule_for(L.gemm(2000, 3000, 1000)),
    # tails in M, N and K; the K tail step runs an L0 loop (its first-step test is a Cond)
    "gemm 1000^3": lambda: schedule_for(L.gemm(1000, 1000, 1000)),
    "gemm 4096^3": lambda: schedule_for(L.gemm(4096, 4096, 4096)),
    "gemm_int8 2000x1000x1000": lambda: schedule_for(L.gemm_int8(2000, 1000, 1000)),
    "gemm A^T 1500x1000x1000": lambda: schedule_for(L.gemm(1500, 1000, 1000, trans_a=True)),
    "gemm 3000x5000x777 (wide search)": lambda: GemmSchedule(L.gemm(3000, 5000, 777))
    .tile(256, 128, 256).split_k(64).buffer("l1", 2).buffer("l0", 2).bind(24).swizzle(4, "m"),
    "batched 16x256x384x300": lambda: schedule_for(L.batched_gemm(16, 256, 384, 300)),
    "batched 8x648x658x348": lambda: GemmSchedule(L.batched_gemm(8, 648, 658, 348))
    .tile(32, 32, 32).split_k(16).bind(5).swizzle(2),
    "gemm_gelu 2048x2048x1000": lambda: schedule_for(L.gemm_gelu(2048, 2048, 1000)),
    "gemm_gelu on 1 vector core": lambda: GemmSchedule(L.gemm_gelu(2048, 2048, 512))
    .tile(128, 256, 256).split_k(64).buffer("l1", 2).epilogue_on("vector", vector_cores=1)
    .bind(20),
    "gemm_softmax 3000x256x500": lambda: schedule_for(L.gemm_softmax(3000, 256, 500)),
    "gemm bias+relu on the fixpipe": lambda: GemmSchedule(
        L.gemm_epilogue(3000, 2600, 2000, bias=True, relu=True)).tile(128, 128, 128)
    .split_k(32).buffer("l1", 2).buffer("l0", 2).bind(4).epilogue_on("fixpipe"),
}
# lowered three times each (full general, both reduced): a few seconds at most
LOWERED = ["gemm 1000^3", "batched 16x256x384x300", "gemm_gelu 2048x2048x1000",
           "gemm_gelu on 1 vector core", "gemm_softmax 3000x256x500"]
SLOW_LOWERED = ["gemm 2000x3000x1000", "batched 8x648x658x348", "gemm bias+relu on the fixpipe"]


def _bound_cores(s: Schedule) -> int:
    return next(d.cores for d in s.directives if isinstance(d, Bind))


@pytest.mark.parametrize("name", list(CASES))
def test_general_spelling_reduces_to_the_gemm_schedules_sizes_and_cores(name: str) -> None:
    g = CASES[name]()
    s = general_spelling(g)
    rg, rs = reduce_instance(g), reduce_instance(s)
    assert not rs.is_full and str(rs) == str(rg), name
    assert isinstance(rs.reduced, Schedule)
    assert structure_facts(s) == structure_facts(g) == structure_facts(rs.reduced)
    assert rs.reduced.cube is not None and rs.reduced.cube.tiling == rg.reduced.tiling
    # only bind's core count changed in the replayed records
    assert [d for d in rs.reduced.directives if not isinstance(d, Bind)] == \
        [d for d in s.directives if not isinstance(d, Bind)]
    assert _bound_cores(rs.reduced) == rg.reduced.tiling.cores


def _lowered_alike(name: str) -> None:
    g = CASES[name]()
    s = general_spelling(g)
    rg, rs = reduce_instance(g), reduce_instance(s)
    reduced = lower(rs.reduced)
    assert kernel_text(reduced) == kernel_text(lower(rg.reduced)), name
    assert structural_diff(lower(s), reduced) is None, f"{name}: {rs}"


@pytest.mark.parametrize("name", LOWERED)
def test_general_reduced_kernel_is_the_gemm_schedules_and_the_full_one_up_to_sizes(
        name: str) -> None:
    _lowered_alike(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW_LOWERED)
def test_large_general_reduced_kernel_is_the_gemm_schedules_and_the_full_one_up_to_sizes(
        name: str) -> None:
    _lowered_alike(name)


def test_the_issue_example_written_generally_reduces_like_its_gemm_schedule() -> None:
    s, g = issue_example(L.gemm(4096, 4096, 4096))
    rs = reduce_instance(s)
    assert str(rs) == str(reduce_instance(g))
    assert describe(rs.reduced) == "gemm 512 x 512 x 1024 on 3 cores"


def test_general_spelling_without_bind_reduces_on_one_core() -> None:
    s = (Schedule(L.gemm(2000, 1000, 600)).tile("C", ("i", "j"), (128, 256))
         .split("C", "k", 128).tensorize("C", "k_i").fuse("C", "i_o", "j_o"))
    r = reduce_instance(s)
    assert not r.is_full and r.reduced.cube.tiling.cores == 1
    assert r.reduced.directives == s.directives
    assert structure_facts(r.reduced) == structure_facts(s)


def test_small_general_spelling_is_its_own_reduction() -> None:
    s = general_spelling(GemmSchedule(L.gemm(96, 80, 112)).tile(32, 32, 48))
    r = reduce_instance(s)
    assert r.is_full and r.reduced is s


def test_schedule_on_replays_the_records_on_a_resized_algorithm() -> None:
    s = Schedule(L.vadd(4096)).split("z", "i", 512).bind("z", "i_o", 8).buffer("x")
    small = L.vadd(1024)
    t = s.on(small, cores=2)
    assert t.algo is small and t.target is s.target
    assert t.directives == (s.directives[0], Bind("z", "i_o", 2), s.directives[2])
    assert s.on(small).directives == s.directives
    with pytest.raises(ScheduleError, match=r"on\('rmsnorm'\): the schedule of 'vadd' names "
                                            r"tensors x, y, z; give the same algorithm"):
        s.on(L.rmsnorm(8, 64))


@pytest.mark.parametrize("shape, reduced", [
    # 4096 keys in 256-column tiles: 32 tiles per row block, within the old search's 64
    ((4096, 8192, 128), "gemm 160 x 8192 x 128 on 2 cores"),
    # the LM head: 250 tiles of 128 per row block, rows read in 8 000-column chunks; two full
    # row blocks and the M edge block on 3 cores keep its classes, K 4 steps (even, as 32)
    ((4096, 32000, 4096), "gemm 400 x 32000 x 512 on 3 cores"),
])
def test_row_blocks_reduce_in_m_and_k_and_keep_their_whole_width(shape, reduced) -> None:  # noqa: ANN001
    """A row block spans every column (each tile class's valid N is N), so N stays and only
    M, K and the cores shrink; before, N's tile count had to be within the search's 64, and
    the LM head (250) was checked whole (it never finished)."""
    sched = schedule_for(L.gemm_softmax(*shape))
    assert sched.cube.row_blocks
    red = reduce_instance(sched)
    assert describe(red.reduced) == reduced
    assert structural_diff(lower(sched), lower(red.reduced)) is None
