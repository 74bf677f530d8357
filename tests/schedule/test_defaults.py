"""Default schedules: the vector tiles fit with their double buffering honoured, the UB
estimate matches the planner, and the GEMM default's estimate agrees with the timing model."""

from __future__ import annotations

import itertools

import pytest

from ascendsched.algo import library as L
from ascendsched.lower.build_loop_nest import build_loop_nest
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule.gemm_cost import estimate_gemm
from ascendsched.schedule.gemm_default import default_gemm_schedules
from ascendsched.schedule.schedule import Schedule
from ascendsched.schedule.ub_budget import TileShape, tile_bytes
from ascendsched.sim.timing import model_time
from ascendsched.target import DEFAULT_TARGET as T
from ascendsched.target.model import Scope
from tests.kit.ir import memory_plan

VECTOR = {
    "vadd": lambda: L.vadd(4096 * 4096),
    "bias_add": lambda: L.bias_add(4096, 4096),
    "softmax": lambda: L.softmax(4096, 4096),
    "softmax_1k": lambda: L.softmax(4096, 1024),
    "rmsnorm": lambda: L.rmsnorm(4096, 4096),
    "layernorm": lambda: L.layernorm(4096, 4096),
}


@pytest.mark.parametrize("name", sorted(VECTOR))
def test_vector_default_is_double_buffered_and_the_planner_honours_it(name: str) -> None:
    algo = VECTOR[name]()
    s = schedule_for(algo)
    assert isinstance(s, Schedule)
    out = algo.outputs[0]
    # tiled tensors double buffered; a row vector every tile reads whole (bias, gamma) is
    # loaded once per core (lower/build_loop_nest.py), in one copy
    want = {t.name: 2 if len(t.shape) == len(out.shape) else 1 for t in (*algo.inputs, out)}
    assert {n: s.copies(n) for n in want} == want, str(s)
    plan = memory_plan(s, T)[1]
    assert plan.compromises == ()
    assert plan.peak(Scope.UB) <= T.scope(Scope.UB).usable


@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "layernorm", "bias_add"])
def test_ub_estimate_is_close_to_the_planner_peak(name: str) -> None:
    # the estimate the default sizes its tiles with, against the planner on the same tile
    algo = VECTOR[name]()
    s = schedule_for(algo)
    nest = s.loop_nest(algo.outputs[0].name)
    rows = nest.factors.get(algo.outputs[0].op.axes[0].name, int(algo.outputs[0].shape[0]))
    est = tile_bytes(algo, TileShape(rows, int(algo.outputs[0].shape[-1])), 2, T)
    peak = memory_plan(s, T)[1].peak(Scope.UB)
    # an estimate: under costs a fallback candidate (schedule_for plans each one and takes
    # the first that fits with its buffering), over leaves UB unused
    assert 0.8 <= est / peak <= 1.10, (est, peak)


def test_gemm_default_estimate_agrees_with_the_timing_model() -> None:
    # the rank the default is chosen by, against the model, on the first candidates
    cands = list(itertools.islice(default_gemm_schedules(L.gemm(2048, 2048, 2048)), 3))
    for s in cands:
        est = estimate_gemm(s).seconds(T.clock_hz)
        got = model_time(lower(s)).time_s
        assert abs(est / got - 1) < 0.15, (str(s), est, got)


def test_gemm_candidates_the_estimate_cannot_tell_apart_go_by_the_longer_k_step() -> None:
    """fp16 8192^3: 128 x 256 x 128 tiles in L0 K steps of 16 and 64 estimate within 0.01%
    of each other (the slowest pipe, MTE2, is the same); the default takes steps of 64,
    whose fewer Mmad calls the timing model prices 9% faster than steps of 16, which the
    estimate alone ranks first."""
    from ascendsched.schedule.gemm_default import CLOSE

    algo = L.gemm(8192, 8192, 8192)
    first = next(default_gemm_schedules(algo))
    k16 = next(default_gemm_schedules(algo, close=1.0))
    tiles = [(s.tiling.tm, s.tiling.tn, s.tiling.tk, s.tiling.k0) for s in (first, k16)]
    assert tiles == [(128, 256, 128, 64), (128, 256, 128, 16)]
    assert estimate_gemm(k16).cycles <= estimate_gemm(first).cycles <= \
        estimate_gemm(k16).cycles * CLOSE
    assert model_time(lower(first)).time_s < 0.95 * model_time(lower(k16)).time_s


def test_gemm_estimate_prices_late_l1_copies_by_the_work_before_them() -> None:
    """int8 4096^3, 128 x 256 tiles: a 512-deep L1 K step has more L0 work than the MTE1 and
    M queues hold, so its copies start late ("MTE2 issue"); the estimate ranks it ahead of
    the 256-deep step, as the timing model does (295.7 vs 308.3 us modelled). Stretching the
    whole step by the queue's share ranked it 4.7% behind."""
    cands = list(itertools.islice(default_gemm_schedules(L.gemm_int8(4096, 4096, 4096)), 2))
    tiles = [(s.tiling.tm, s.tiling.tn, s.tiling.tk, s.tiling.k0) for s in cands]
    assert tiles == [(128, 256, 512, 128), (128, 256, 256, 128)]
    deep, shallow = (estimate_gemm(s) for s in cands)
    assert deep.bound == "MTE2 issue" and deep.cycles < shallow.cycles
    assert model_time(lower(cands[0])).time_s < 0.97 * model_time(lower(cands[1])).time_s


@pytest.mark.parametrize("split", [("i", 8), ("j", 256)])
def test_load_once_loads_an_input_whole_before_the_tile_loops(split) -> None:  # noqa: ANN001
    """Rows tiled: every tile reads the whole bias; columns tiled: each tile reads its part
    of the one copy (no load in the tile loop either way), and the results match numpy."""
    from ascendsched.api.check import check
    from ascendsched.lower.ir import For, Instr, iter_instrs

    s = Schedule(L.bias_add(64, 1024)).split("y", *split).load_once("bias")
    body = build_loop_nest(s, T).programs[0].body
    first = [x for x in body if isinstance(x, Instr)]
    assert [x.reads[0].tensor for x in first if x.op == "copy_gm_ub"] == ["bias"]
    assert isinstance(body[-1], For)
    assert [x.reads[0].tensor for x, _ in iter_instrs(body[-1].body)
            if x.op == "copy_gm_ub"] == ["x"]
    verdicts = check(s, cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


def test_a_row_too_wide_for_ub_still_gets_a_default_that_fits():
    """LayerNorm over 16384 columns: no whole row fits UB, and a row piece with a tail version
    (its own row-wide temporaries) does not either; a piece that divides the row does."""
    from ascendsched.algo import library as L
    from ascendsched.lower.pipeline import lower
    from ascendsched.lower.schedule_for import schedule_for

    for shape in ((64, 16384), (64, 12000)):
        sched = schedule_for(L.layernorm(*shape))
        k = lower(sched)
        # the pieces of every row spread over every Vector core: the column loop fused under
        # the rows and bound (bound alone, it kept LayerNorm 64 x 16384 on 4 cores)
        loops = sched.loop_names("y")
        assert len(loops) == 1 and k.block_dim == T.num_aiv, sched


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(50, 12000), (20, 15771)])
def test_a_row_cut_into_pieces_over_every_core_matches_numpy(shape: tuple[int, int]) -> None:
    """LayerNorm over rows too wide for one tile (its default: two pieces of each row, 100
    pieces over the 48 Vector cores, each piece reducing its whole row; 15771 columns in an
    even cut, 7888 and a tail piece of 7883) through the ladder: IR execution, race check,
    g++ build and run of the emitted C++."""
    from ascendsched.api.check import check

    sched = schedule_for(L.layernorm(*shape))
    assert sched.loop_names("y") == ["i_o_j_o"], sched
    verdicts = check(sched)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


def test_a_row_reduction_stored_as_a_1d_output_gets_tiles_of_its_rows() -> None:
    """y[i] = max_k x[i, k] (999 x 1000 float16): each output element reads a row of x. The
    estimate sized x's tile as if its rows were the output's own elements and offered the
    whole output as one tile (2 MB of x), so no default fitted; now the reduction reads along
    an axis of its own, the tile of 16 elements holds 16 rows, and it matches numpy."""
    from ascendsched.algo.algorithm import algorithm
    from ascendsched.algo.ops import reduce_max
    from ascendsched.algo.tensor import compute, placeholder, reduce_axis
    from ascendsched.sim.checker import check_trace
    from tests.kit.reference import assert_matches_reference

    x = placeholder("x", (999, 1000), "float16")
    k = reduce_axis(1000, "k")
    algo = algorithm("rowmax", compute("y", (999,), lambda i: reduce_max(x[i, k], k)))
    assert tile_bytes(algo, TileShape(1, 16), 1, T) >= 16 * 1000 * 2
    sched = schedule_for(algo)
    assert sched.loop_nest("y").factors["i"] == 16, sched
    kernel, res = assert_matches_reference(sched, trace=True)
    assert check_trace(res.trace, kernel.target).ok


def test_a_row_sum_whose_32_byte_step_does_not_fit_gets_tiles_of_single_rows() -> None:
    """float32 sums of bfloat16 rows of 4096 stored as a 1-D output: 16 outputs (one 32-byte
    block) read 16 rows (430 KB with the float32 cast); the tile steps by single elements
    (5 rows per tile) instead of the generator offering nothing (an AssertionError in
    schedule_for before)."""
    from ascendsched.algo.algorithm import algorithm
    from ascendsched.algo.ops import reduce_sum
    from ascendsched.algo.tensor import compute, placeholder, reduce_axis
    from tests.kit.reference import assert_matches_reference

    x = placeholder("x", (200, 4096), "bfloat16")
    k = reduce_axis(4096, "k")
    algo = algorithm("rowsum", compute("y", (200,), lambda i: reduce_sum(
        x[i, k].astype("float32"), k)))
    sched = schedule_for(algo)
    assert sched.loop_nest("y").factors["i"] < 16, sched
    assert_matches_reference(sched)


def test_a_reduction_no_tile_can_hold_reads_its_rows_in_chunks() -> None:
    """A sum of squares over 300 000 float32 columns (1.2 MB a row): one row per tile, read
    in chunks; equal to numpy (the CapacityError when nothing fits:
    tests/errors/test_schedule_errors.py)."""
    from ascendsched.algo.algorithm import algorithm
    from ascendsched.algo.ops import reduce_sum
    from ascendsched.algo.tensor import compute, placeholder, reduce_axis
    from ascendsched.schedule.chunks import chunk_split
    from tests.kit.reference import assert_matches_reference

    x = placeholder("x", (10, 300000), "float32")
    k = reduce_axis(300000, "k")
    algo = algorithm("big", compute("y", (10,), lambda i: reduce_sum(x[i, k] * x[i, k], k)))
    sched = schedule_for(algo)
    assert chunk_split(sched, "y") is not None, sched
    assert_matches_reference(sched)


def test_wide_rows_on_many_rows_keep_their_statistics_once_per_row() -> None:
    """LayerNorm 4096 x 12288 (GPT-3's hidden size): no whole row fits UB; with two rows and
    more per core the default binds the row loop, cuts each row into pieces inside it and
    computes the statistics once per row (the row loaded once, gamma/beta once per core),
    which models faster than the pieces fused under the rows, each reducing its row again.
    With fewer rows than twice the cores (64 x 12288) the fused pieces stay."""
    from ascendsched.schedule.default import _candidate

    algo = L.layernorm(4096, 12288)
    sched = schedule_for(algo)
    assert sched.loop_names("y") == ["i_o", "j_o"], sched
    assert {st: sched.placement(st).loop for st in ("xf", "d", "var", "r")} == dict.fromkeys(
        ("xf", "d", "var", "r"), "i_o")
    assert sched.loaded_once("gamma") and sched.loaded_once("beta")
    pieces = int(str(sched).split("'j', ")[1].split(",")[0])
    fused = _candidate(algo, T, TileShape(1, pieces), 1, hoist=False)
    assert fused.loop_names("y") == ["i_o_j_o"]
    assert model_time(lower(sched)).cycles < 0.8 * model_time(lower(fused)).cycles
    few = schedule_for(L.layernorm(64, 12288))
    assert len(few.loop_names("y")) == 1


def test_row_pieces_fused_over_the_cores_are_cut_evenly() -> None:
    """A row too wide for one tile, its pieces fused under the row loop over 48 cores: the
    row is cut into as many pieces as the widest tile UB holds would give, but evenly (bias
    add 1108 x 35738: three pieces of 11920 and 11898, not 14 000-odd and a narrow tail on
    the cores whose every tile is a tail), and that models faster than the widest cut."""
    from ascendsched.schedule.default import _even_cut

    assert _even_cut(15771, 11696, 16) == 7888 and _even_cut(16384, 8192, 16) == 8192
    algo = L.bias_add(1108, 35738)
    sched = schedule_for(algo)
    assert sched.loop_names("y") == ["i_o_j_o"], sched
    w = sched.loop_nest("y").factors["j"]
    pieces = -(-35738 // w)
    assert 0 <= w - (35738 - (pieces - 1) * w) < (pieces - 1) * 16, w  # whole 32 B steps
    widest = max(c for c in range(w, 35738, 16) if -(-35738 // c) == pieces
                 and tile_bytes(algo, TileShape(1, c), 2, T) <= T.scope(Scope.UB).usable)
    assert widest > w + 1000
    uneven = Schedule(algo).split("y", "j", widest).split("y", "i", 1).reorder(
        "y", "i_o", "j_o").fuse("y", "i_o", "j_o", fused="t").bind("y", "t", cores=48)
    for t in ("x", "bias", "y"):
        uneven = uneven.buffer(t, 2)
    assert model_time(lower(sched)).cycles < 0.95 * model_time(lower(uneven)).cycles


def test_a_tiny_piece_that_divides_the_row_does_not_come_first() -> None:
    """Bias add 63 x 33392 (16 x 2087, 2087 prime): the only piece that divides the row is
    16 columns, 131 481 tiles; it no longer comes before the widest piece cut evenly (three
    of 11136, 11136, 11120), whose busiest core has a fraction of the work: 647.1 us
    modelled in 16-column pieces, 15.6 us. A dividing piece close to the widest still comes
    first (no tail version): LayerNorm 1024 x 16384 in 4096 (previous tests)."""
    algo = L.bias_add(63, 33392)
    sched = schedule_for(algo)
    w = sched.loop_nest("y").factors["j"]
    assert w == 11136, sched
    tiny = Schedule(algo).split("y", "j", 16).split("y", "i", 1).reorder(
        "y", "i_o", "j_o").fuse("y", "i_o", "j_o", fused="t").bind("y", "t", cores=48)
    assert model_time(lower(sched)).cycles < 0.1 * model_time(lower(tiny)).cycles


def test_two_pieces_of_many_rows_read_each_row_once_in_chunks() -> None:
    """LayerNorm 1000 x 16384 (about 21 rows per core), each row in two pieces: the pieces
    under the bound row loop with the statistics read in chunks once per row, not fused
    under the rows (each piece reducing its whole row again): 91.4 against 109.0 us
    modelled. With few rows per core (64 x 16384) the fused pieces stay (previous tests)."""
    from ascendsched.schedule.default import _candidate

    algo = L.layernorm(1000, 16384)
    sched = schedule_for(algo)
    assert sched.loop_names("y") == ["i_o", "j_o"], sched
    assert sched.placement("mean").loop == "i_o" and sched.placement("var").loop == "i_o"
    fused = _candidate(algo, T, TileShape(1, 8192), 1, hoist=False)
    assert fused.loop_names("y") == ["i_o_j_o"]
    assert model_time(lower(sched)).cycles < 0.9 * model_time(lower(fused)).cycles


def test_gamma_stays_loaded_once_in_narrower_pieces_when_the_widest_does_not_fit() -> None:
    """RMSNorm 2625 x 19310 (about 55 rows per core, statistics in chunks): the estimate's
    widest piece with gamma loaded once (9296) and 3/4 of it do not fit UB; half of it does,
    and models faster than the pieces with a piece of gamma per piece of every row that came
    next (202.3 against 273.8 us). Under two rows per core only the widest is offered (a
    core's first row would wait for all of gamma)."""
    from ascendsched.schedule.default_chunked import once_pieces

    algo = L.rmsnorm(2625, 19310)
    offered = [p.cols for p in once_pieces(algo, T)]
    assert offered == [9296, 6960, 4640]
    assert [p.cols for p in once_pieces(L.rmsnorm(35, 19310), T)] == offered[:1]
    sched = schedule_for(algo)
    assert sched.loaded_once("gamma") and sched.loop_names("y") == ["i_o", "j_o"], sched
    w = sched.loop_nest("y").factors["j"]
    assert w == 4640
    plain = (Schedule(algo).split("y", "j", 4816).split("y", "i", 1).reorder("y", "i_o", "j_o")
             .bind("y", "i_o", cores=48).compute_inline("xf").compute_at("ss", "y", "i_o")
             .split("ss", "k", 4816).compute_at("r", "y", "i_o").buffer("x", 2).buffer("y", 2))
    assert model_time(lower(sched)).cycles < 0.8 * model_time(lower(plain)).cycles


@pytest.mark.slow
def test_wide_rows_with_statistics_once_per_row_match_numpy() -> None:
    """The row-outer default (LayerNorm 100 x 12288: two rows and more per core, each row in
    pieces) through the ladder: IR execution, race check, g++ build and run."""
    from ascendsched.api.check import check

    sched = schedule_for(L.layernorm(100, 12288))
    assert sched.loop_names("y") == ["i_o", "j_o"], sched
    verdicts = check(sched)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


def test_whole_rows_far_over_the_estimate_are_not_offered() -> None:
    """A whole row over the UB estimate is offered while the planner's in-place reuse may
    still fit it (RMSNorm 16384 wide: estimated 1.62x UB without hoisting, fitted by giving up
    double buffering), not when hopelessly over (LayerNorm 16384 wide, double buffered)."""
    from ascendsched.schedule.default import WHOLE_ROW_SLACK, default_schedules

    usable = T.scope(Scope.UB).usable

    def whole_rows(algo) -> list[str]:  # noqa: ANN001
        return [str(s) for s in default_schedules(algo, T) if "'j'" not in str(s)]

    rms = whole_rows(L.rmsnorm(64, 16384))
    assert any("buffer" in s and "hoist=False" in s for s in rms)
    assert lower(schedule_for(L.rmsnorm(64, 16384))).block_dim == 48  # whole rows, 48 cores
    ln = whole_rows(L.layernorm(64, 16384))
    assert not any("buffer" in s for s in ln)  # double buffered: 1.79x and more
    assert tile_bytes(L.layernorm(64, 16384), TileShape(1, 16384), 2, T, hoist=False) \
        > WHOLE_ROW_SLACK * usable


def _layernorm_rows(load_once: bool) -> Schedule:
    s = (Schedule(L.layernorm(37, 512)).split("y", "i", 4).bind("y", "i_o", cores=3)
         .compute_at("xf", "y", "i_o").compute_at("d", "y", "i_o")
         .compute_inline("mean").compute_inline("var").compute_inline("r"))
    return s.load_once("gamma").load_once("beta") if load_once else s


def test_values_of_load_once_inputs_alone_are_computed_once_before_the_tile_loops() -> None:
    # float32(gamma[j]) and float32(beta[j]) of LayerNorm: one Cast each before the tile loop
    # (and every tile, the tail tile too, reads that buffer); x's Cast stays in the loop
    import numpy as np

    from ascendsched.algo.evaluate import evaluate
    from ascendsched.lower.ir import For, Instr, iter_instrs
    from ascendsched.lower.pipeline import lower
    from ascendsched.sim.execute import run_kernel

    s = _layernorm_rows(True)
    body = build_loop_nest(s, T).programs[0].body
    before = [x for x in body if isinstance(x, Instr) and x.op == "vec_cast"]
    assert sorted(x.reads[0].tensor for x in before) == ["beta_ub", "gamma_ub"]
    loop = next(x for x in body if isinstance(x, For))
    inside = [x for x, _ in iter_instrs(loop.body) if x.op == "vec_cast"]
    assert "x_ub" in {x.reads[0].tensor for x in inside}
    assert not {"gamma_ub", "beta_ub"} & {x.reads[0].tensor for x in inside}
    once = {x.writes[0].tensor for x in before}
    assert once <= {r.tensor for x, _ in iter_instrs(loop.body) for r in x.reads}
    # without load_once nothing is hoisted: the casts read the per-tile copies
    plain = build_loop_nest(_layernorm_rows(False), T).programs[0].body
    assert not [x for x in plain if isinstance(x, Instr) and x.op == "vec_cast"]
    rng = np.random.default_rng(0)
    ins = {"x": rng.uniform(-2, 2, (37, 512)), "gamma": rng.uniform(-2, 2, 512),
           "beta": rng.uniform(-2, 2, 512)}
    ref = evaluate(s.algo, ins)["y"].astype(np.float32)
    got = run_kernel(lower(s), ins).outputs["y"].astype(np.float32)
    assert np.allclose(got, ref, atol=1e-2)


def test_load_once_without_hoist_recomputes_the_values_per_tile_and_wide_rows_default_to_it(
) -> None:
    # hoist=False: gamma and beta are loaded once, their casts stay in the tile loop
    from ascendsched.lower.ir import For, Instr, iter_instrs
    from ascendsched.lower.schedule_for import schedule_for

    s = _layernorm_rows(False).load_once("gamma", hoist=False).load_once("beta", hoist=False)
    assert ".load_once('gamma', hoist=False)" in str(s)
    body = build_loop_nest(s, T).programs[0].body
    assert not [x for x in body if isinstance(x, Instr) and x.op == "vec_cast"]
    loop = next(x for x in body if isinstance(x, For))
    casts = {x.reads[0].tensor for x, _ in iter_instrs(loop.body) if x.op == "vec_cast"}
    assert {"gamma_ub", "beta_ub"} <= casts
    # RMSNorm rows of 16384: float32(gamma) held all the time does not fit beside one row's
    # double buffers and temporaries; loaded once and cast per tile it does (not a column split)
    wide = schedule_for(L.rmsnorm(64, 16384))
    assert ".load_once('gamma', hoist=False)" in str(wide) and "'j'" not in str(wide)


def test_one_row_double_buffered_tiles_give_way_to_single_buffered_pairs() -> None:
    """Double buffering would leave softmax 4096 x 8192 one row per tile; one copy fits two,
    and the default takes those: the row statistics' chain is paid per pair of rows, and the
    model times it faster than the double-buffered single rows."""
    algo = L.softmax(4096, 8192)
    s = schedule_for(algo)
    assert isinstance(s, Schedule)
    assert ".split('y', 'i', 2" in str(s) and s.copies("x") == s.copies("y") == 1, str(s)
    double = Schedule(algo).split("y", "i", 1).bind("y", "i_o", 48)
    for stage in ("xf", "mx", "e", "s"):
        double = double.compute_at(stage, "y", "i_o")
    double = double.buffer("x", 2).buffer("y", 2)
    assert model_time(lower(s)).time_s < 0.95 * model_time(lower(double)).time_s
    # with several rows per double-buffered tile the default keeps the double buffering
    assert schedule_for(L.softmax(4096, 4096)).copies("x") == 2


@pytest.mark.parametrize("m, halves", [(4096, True), (256, False)])
def test_elementwise_rows_get_double_buffered_half_rows_with_the_bias_loaded_once(
        m: int, halves: bool) -> None:
    """Bias add over rows of 11008: two copies hold one whole row, one copy three. With
    enough rows per core the default takes three half rows in two copies, the bias loaded
    whole once, and models faster than three whole rows in one copy; with 256 rows (5 per
    core) the extra tiles' heads do not pay and it keeps whole rows."""
    from ascendsched.api.check import check
    from ascendsched.schedule.default import _candidate

    algo = L.bias_add(m, 11008)
    s = schedule_for(algo)
    assert (s.loop_nest("y").factors.get("j") == 5504) == halves
    if halves:
        assert s.loop_nest("y").factors["i"] == 3 and s.loaded_once("bias")
        assert s.copies("x") == s.copies("y") == 2
        whole = _candidate(algo, T, TileShape(3, 11008), 1)
        assert model_time(lower(s)).time_s < 0.97 * model_time(lower(whole)).time_s
        # the same schedule with a tail of rows, against numpy and the race checker
        verdicts = check(Schedule(L.bias_add(16 * 48 + 5, 11008), s.directives), cpp=False)
        assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
