"""schedule/reduce.py: the reduced instance keeps every fact the lowering reads from sizes."""

import numpy as np

from ascendsched.algo import library as L
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import Bind, Schedule
from ascendsched.schedule.gemm import CubeBind, GemmSchedule
from ascendsched.schedule.reduce import (
    SEARCH,
    _reduce_gemm,
    describe,
    reduce_instance,
    reduced_trips,
    structure_facts,
    trip_class,
)


def test_trip_counts_keep_small_values_and_parity():
    assert [reduced_trips(n) for n in range(8)] == [0, 1, 2, 3, 4, 3, 4, 3]
    assert trip_class(22) == trip_class(4) != trip_class(3) == trip_class(201)
    assert trip_class(2) == 2


def _per_class_iters(s: GemmSchedule) -> list[tuple[int, bool]]:
    t = s.tiling
    out = []
    for c in s.tile_classes:
        n = s.spec.batch * c.rows * c.cols
        out.append((-(-n // t.cores), n % t.cores != 0))
    return out


def test_gemm_4096_default_keeps_tiles_and_uneven_persistent_loop():
    full = schedule_for(L.gemm(4096, 4096, 4096))
    red = reduce_instance(full).reduced
    assert str(reduce_instance(full)) == ("gemm 4096 x 4096 x 4096 on 24 cores -> reduced "
                                          "gemm 512 x 512 x 512 on 3 cores")
    ft, rt = full.tiling, red.tiling
    assert (rt.tm, rt.tn, rt.tk, rt.k0, rt.swizzle) == (ft.tm, ft.tn, ft.tk, ft.k0, ft.swizzle)
    assert _per_class_iters(full) == [(22, True)]
    assert _per_class_iters(red) == [(3, True)]  # >= 3 trips, still uneven
    assert red.spec.k // rt.tk == 4  # 32 L1 K steps -> 4 (even: kt % 2 ping-pong)
    assert structure_facts(red) == structure_facts(full)
    assert [d for d in red.directives if not isinstance(d, CubeBind)] == \
        [d for d in full.directives if not isinstance(d, CubeBind)]


def test_gemm_edge_classes_keep_their_valid_sizes_and_tails():
    full = schedule_for(L.gemm(4000, 3000, 1000))
    red = reduce_instance(full).reduced
    key = [(c.label, c.width, c.mv, c.nv) for c in full.tile_classes]
    assert [(c.label, c.width, c.mv, c.nv) for c in red.tile_classes] == key
    assert red.spec.k % red.tiling.tk == full.spec.k % full.tiling.tk
    assert red.tiling.tiles < full.tiling.tiles and red.tiling.cores >= 2
    assert structure_facts(red) == structure_facts(full)


def test_gemm_whose_edges_need_more_than_16_tiles_per_axis_is_still_reduced():
    """3000 x 5000 x 777 on 24 cores: keeping every class's guard and its first core needs 27
    tile columns, past the first search's 16; the wider search finds it."""
    full = GemmSchedule(L.gemm(3000, 5000, 777)).tile(256, 128, 256).split_k(64).buffer(
        "l1", 2).buffer("l0", 2).bind(24).swizzle(4, "m")  # the GEMM default before c832238
    assert _reduce_gemm(full, SEARCH[0]) is None
    red = reduce_instance(full).reduced
    assert red.tiling.tiles < full.tiling.tiles and red.tiling.nt > SEARCH[0]
    assert structure_facts(red) == structure_facts(full)


def test_batched_gemm_keeps_a_batch():
    full = GemmSchedule(L.batched_gemm(8, 648, 658, 348)).tile(32, 32, 32).split_k(16) \
        .bind(5).swizzle(2)
    red = reduce_instance(full).reduced
    assert 2 <= red.spec.batch < 8
    assert structure_facts(red) == structure_facts(full)


def test_rmsnorm_rows_shrink_and_the_reduced_row_stays_whole():
    full = schedule_for(L.rmsnorm(4096, 4096))
    r = reduce_instance(full)
    assert describe(r.reduced) == "y[10, 4096] on 2 cores"  # 5 tiles of 2 rows: 3 + 2
    assert structure_facts(r.reduced) == structure_facts(full)
    assert [type(d) for d in r.reduced.directives] == [type(d) for d in full.directives]
    assert next(d.cores for d in r.reduced.directives if isinstance(d, Bind)) == 2


def test_double_buffered_tail_keeps_three_full_tiles_on_a_core():
    """Two cores, 400 full tiles and a tail: the full-tile version must run at least three
    times on a core (a distance-2 dependence on the other copy), not only the loop."""
    full = Schedule(L.vadd(2048 * 400 + 1808)).split("z", "i", 2048).bind("z", "i_o", 2) \
        .buffer("x").buffer("y").buffer("z")
    red = reduce_instance(full).reduced
    assert describe(red) == f"z[{2048 * 8 + 1808}] on 2 cores"


def test_even_work_stays_even():
    full = Schedule(L.vadd(2048 * 48 * 10)).split("z", "i", 2048).bind("z", "i_o", 48)
    red = reduce_instance(full).reduced
    n, cores = red.algo.outputs[0].shape[0] // 2048, red.loop_nest("z").bound[1]
    assert cores >= 2 and n % cores == 0 and n // cores == 4


def test_small_instance_is_its_own_reduction():
    for s in (schedule_for(L.vadd(8192)), GemmSchedule(L.gemm(96, 80, 112)).tile(32, 32, 48)):
        r = reduce_instance(s)
        assert r.is_full and r.reduced is s
        assert "no smaller instance keeps its structure" in str(r)


def test_axis_split_along_a_reduction_keeps_its_size():
    a = L.softmax(4 * 500, 512)
    full = Schedule(a).tile("y", ("i", "j"), (4, 128))
    for st in ("xf", "mx", "e", "s"):
        full = full.compute_at(st, "y", "j_o")
    red = reduce_instance(full).reduced
    assert red.algo.outputs[0].shape[1] == 512 and red.algo.outputs[0].shape[0] < 2000


def test_a_tail_version_each_core_runs_at_most_once_stays_so():
    """Batched softmax 4 x 2048 x 2048: 293 tiles of 7 rows per batch, the last of each a tail,
    on 48 cores: no core runs a tail tile twice, so the tail version depends on no earlier run
    of itself and its syncs differ from a version that does. A reduced 3 batches on 2 cores
    ran one core's tail tiles three iterations apart; the reduced instance keeps the fact."""
    from ascendsched.schedule.reduce import _far_neighbours
    from tests.schedule.test_defaults_rank3 import KERNELS

    full = schedule_for(KERNELS["softmax"](4, 2048, 2048))
    red = reduce_instance(full).reduced
    assert structure_facts(red) == structure_facts(full)
    (batch, rows, _) = red.algo.outputs[0].shape
    cores = next(d.cores for d in red.directives if isinstance(d, Bind))
    per = -(-rows // 7)
    tail = [(b * per + per - 1) % cores for b in range(batch)]
    assert len(set(tail)) == len(tail)  # each core's tail tile at most once
    # the fact itself: label 1 (tail) after label 1 on one core (core 0: 0, 1, 0, 1), two
    # iterations later (an even number: the same buffer copy)
    assert (0, 1, 1, 0) in _far_neighbours(np.array([0, 0, 1, 0, 0, 0, 1, 0]), 2)
    assert not {f for f in _far_neighbours(np.array([0, 0, 1, 0, 0, 1]), 2) if f[1:3] == (1, 1)}


def test_the_parity_of_a_version_following_itself_is_a_fact():
    """Double-buffered copies alternate with the iteration's parity: a version that follows
    itself only an odd number of iterations later never meets its own copy, so the reduced
    instance keeps whether it does at an even distance (softmax 64 x 32000 in fused 1 x 512
    tiles on 16 cores: a core's column-tail tiles 126 iterations apart; reduced to 2 rows on 9
    cores they were 7 apart, and the full kernel had one sync requirement more)."""
    from ascendsched.schedule.reduce import _far_neighbours

    odd, even = _far_neighbours(np.array([1, 1]), 1), _far_neighbours(np.array([1, 0, 1]), 1)
    assert (0, 1, 1, 1) in odd and (0, 1, 1, 0) not in odd
    assert (0, 1, 1, 0) in even and (0, 1, 1, 1) not in even
    s = (Schedule(L.softmax(64, 32000)).split("y", "i", 1).split("y", "j", 512)
         .fuse("y", "i_o", "j_o").bind("y", "i_o_j_o", cores=16).compute_inline("xf")
         .compute_at("mx", "y", "i_o_j_o").split("mx", "k", 512).compute_inline("e")
         .compute_at("s", "y", "i_o_j_o").split("s", "k2", 512).buffer("y", 2))
    red = reduce_instance(s)
    assert structure_facts(red.reduced) == structure_facts(s)
    assert red.reduced.algo.outputs[0].shape[0] != 2  # 2 rows on 9 cores lose the fact


def _reduced_equals_full(s: Schedule) -> Schedule:
    from ascendsched.lower.compare import structural_diff
    from ascendsched.lower.pipeline import lower

    red = reduce_instance(s)
    assert not red.is_full
    assert structural_diff(lower(s), lower(red.reduced)) is None, str(red)
    return red.reduced


def test_axes_a_buffer_holds_whole_keep_their_size():
    """Softmax with the row statistics computed at the column tile loop (rows inside it):
    ``mx_ub`` holds every row's max, so the rows keep their count (they were reduced to 36 of
    100 and the buffer shrank); the columns, read by the statistics in chunks, shrink."""
    s = (Schedule(L.softmax(100, 3000)).split("y", "j", 256).split("y", "i", 8)
         .bind("y", "j_o", 12).compute_inline("xf").compute_at("mx", "y", "j_o")
         .split("mx", "k", 256).compute_inline("e").compute_at("s", "y", "j_o")
         .split("s", "k2", 256))
    red = _reduced_equals_full(s).algo.outputs[0].shape
    assert red[0] == 100 and red[1] < 3000
    # with the statistics per tile the rows shrink again
    per_tile = (Schedule(L.softmax(100, 3000)).split("y", "j", 256).split("y", "i", 8)
                .bind("y", "j_o", 12).compute_inline("xf").compute_at("mx", "y", "i_o")
                .split("mx", "k", 256).compute_inline("e").compute_at("s", "y", "i_o")
                .split("s", "k2", 256))
    assert _reduced_equals_full(per_tile).algo.outputs[0].shape[0] < 100


def test_axes_of_a_load_once_input_keep_their_size():
    """bias_add in fused 2 x 256 tiles with ``bias`` loaded once: ``bias_ub`` holds the whole
    row of 1030 columns (the columns were reduced to 518); the rows still shrink."""
    s = (Schedule(L.bias_add(1000, 1030)).split("y", "i", 2).split("y", "j", 256)
         .fuse("y", "i_o", "j_o", fused="i_o_j_o").bind("y", "i_o_j_o", 24)
         .load_once("bias", hoist=False).buffer("x", 2))
    red = _reduced_equals_full(s)
    assert red.algo.outputs[0].shape[1] == 1030 and red.algo.outputs[0].shape[0] < 1000


def test_a_row_read_at_the_bound_column_tile_reduces():
    """RMSNorm with columns bound to 8 cores outside the row tiles: the output tile reads
    ``xf_ub`` (the whole row) at ``256*block_idx + 2048*k``, whose numbers follow the core
    count; the reduced instance on fewer cores differs there in numbers only."""
    s = (Schedule(L.rmsnorm(300, 5000)).split("y", "j", 256).split("y", "i", 2)
         .bind("y", "j_o", 8).compute_at("xf", "y", "i_o").compute_at("ss", "y", "i_o")
         .compute_inline("r").load_once("gamma"))
    red = _reduced_equals_full(s)
    assert red.algo.outputs[0].shape[0] < 300


def test_an_axis_read_by_chunked_reductions_shrinks_with_its_chunk_loops():
    """Softmax 64 x 32 000, columns in 256-wide tiles bound to 24 cores, the statistics at the
    column tile loop in 256-column chunks: 125 column tiles of 125 chunks each, about 711 k
    dynamic instructions, which check ran whole (150 s of CPU). The chunk loops keep their
    factor, tail and odd trip count, so the columns shrink (7 tiles on 2 cores); rows stay
    (mx_ub holds them all). A reduction read whole still keeps its axis."""
    from ascendsched.api.check import DEFAULT_BUDGET, estimated_instrs
    from ascendsched.lower.pipeline import lower

    s = (Schedule(L.softmax(64, 32000)).split("y", "j", 256).split("y", "i", 32)
         .bind("y", "j_o", 24).compute_inline("xf").compute_at("mx", "y", "j_o")
         .split("mx", "k", 256).compute_inline("e").compute_at("s", "y", "j_o")
         .split("s", "k2", 256))
    red = _reduced_equals_full(s)
    assert describe(red) == "y[64, 1792] on 2 cores"
    assert estimated_instrs(lower(red)) < DEFAULT_BUDGET.instrs
    whole = (Schedule(L.softmax(64, 4096)).split("y", "j", 256).split("y", "i", 32)
             .bind("y", "j_o", 4).compute_inline("xf").compute_at("mx", "y", "j_o")
             .compute_inline("e").compute_at("s", "y", "j_o"))
    assert reduce_instance(whole).is_full
