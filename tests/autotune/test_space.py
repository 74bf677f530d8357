"""Spaces: pruning applies the schedule's and the planner's own rules, and counts them."""

import pytest

from ascendsched.algo import library as L
from ascendsched.autotune import default_space, gemm_space, library_space
from ascendsched.autotune.spaces import LIBRARY
from ascendsched.errors import AscendSchedError, CapacityError, ScheduleError
from ascendsched.lower.pipeline import lower
from ascendsched.schedule.gemm import GemmSchedule


def test_every_library_kernel_has_a_default_space():
    shapes = {"vadd": (4096,), "fused_mul_add_relu": (4096,), "bias_add": (64, 1024),
              "softmax": (8, 1024), "rmsnorm": (8, 1024), "layernorm": (8, 1024),
              "column_sum": (4096, 1024),
              "gemm": (256, 256, 256), "batched_gemm": (2, 128, 128, 128),
              "gemm_int8": (256, 256, 256), "gemm_softmax": (64, 600, 64)}
    assert set(shapes) == set(LIBRARY)
    for name, args in shapes.items():
        sp = library_space(name, *args)
        assert sp.size > 1, name
        # the first legal point lowers completely
        legal = next(c for c in map(sp.check, sp.points()) if c.legal)
        assert lower(legal.schedule).programs


def test_pruned_points_are_exactly_those_lowering_rejects(gemm_small_space):
    sp = gemm_small_space
    rep = sp.prune()
    assert rep.total == sp.size == 3 * 2 * 2 * 2 * 2
    assert rep.pruned["schedule"] > 0 and rep.pruned["capacity"] > 0
    assert len(rep.legal) + sum(rep.pruned.values()) == rep.total
    for pt in sp.points():
        c = sp.check(pt)
        try:
            sched = sp.schedule(pt)
            lower(sched, stop_after="apply memory plan")
            verdict = None
        except CapacityError:
            verdict = "capacity"
        except ScheduleError:
            verdict = "schedule"
        assert c.rule in (verdict, "duplicate"), (sp.as_dict(pt), c.message)


def test_k0_must_divide_tk_is_the_schedule_rule(gemm_small_space):
    d = dict(tm=64, tn=128, tk=64, k0=128, l1=2, l0=1, l0c=1, cores=4, swizzle_w=1,
             swizzle_dir="m")
    c = gemm_small_space.check(tuple(d.values()))
    assert c.rule == "schedule" and "k0 must divide" in c.message


def test_capacity_verdict_names_the_buffer():
    sp = library_space("softmax", 64, 4096)
    d = {p.name: p.choices[0] for p in sp.params} | {"rows": 32, "cols": "whole"}
    c = sp.check(tuple(d[p.name] for p in sp.params))
    assert c.rule == "capacity" and "UB" in c.message


def test_duplicates_point_at_their_legal_twin(vadd_space):
    # 64K / 16384 = 4 tiles: 8 and 16 cores clamp to 4, the same schedule as cores=4
    rep = vadd_space.prune()
    assert rep.pruned["duplicate"] > 0
    d = dict(tile=16384, cores=16, copies_x=1, copies_y=1, copies_z=1)
    c = vadd_space.check(tuple(d.values()))
    assert c.rule == "duplicate" and vadd_space.as_dict(c.same_as)["cores"] == 4
    assert str(vadd_space.check(c.same_as).schedule) == str(c.schedule)


def test_restrict_keeps_only_given_choices(vadd_space):
    sp = vadd_space.restrict("tile", ("4096",))
    assert sp.param("tile").choices == (4096,) and sp.size == vadd_space.size // 4
    with pytest.raises(ScheduleError, match="not a choice"):
        vadd_space.restrict("tile", (3,))


def test_default_space_picks_the_cube_for_a_gemm():
    assert default_space(L.gemm(128, 128, 128)).param("tm")
    assert default_space(L.softmax(8, 512)).param("rows")


def test_the_gemm_space_holds_catlass_basic_matmul_and_it_is_legal():
    # hicann/catlass examples/00_basic_matmul: L1 128 x 256 x 256, L0 K 64, L1 and L0A/L0B
    # ping-pong, one L0C tile, every AIC, GemmIdentityBlockSwizzle<3, 0>
    sp = library_space("gemm", 4096, 4096, 4096)
    catlass = (128, 256, 256, 64, 2, 2, 1, sp.target.num_aic, 3, "m")
    assert catlass in sp.seed_points()
    c = sp.check(catlass)
    assert c.legal, c.message
    t = c.schedule.tiling
    assert (t.tm, t.tn, t.tk, t.k0) == (128, 256, 256, 64)
    assert (t.l1_copies, t.l0_copies, t.l0c_copies, t.cores) == (2, 2, 1, 24)
    assert (t.swizzle.width, t.swizzle.direction) == (3, "m")
    # the default generator's best-estimated tiling is a seed too, and a legal point
    first = sp.seed_points()[0]
    assert sp.check(first).legal


def test_seeds_outside_the_choices_are_dropped():
    sp = library_space("gemm", 1024, 1024, 1024)
    assert any(pt[8] == 3 for pt in sp.seed_points())  # CATLASS' swizzle(3, "m")
    narrow = sp.restrict("swizzle_w", (1, 4))
    assert narrow.seed_points() == [pt for pt in sp.seed_points() if pt[8] in (1, 4)]
    assert narrow.seed_points() and all(pt[8] != 3 for pt in narrow.seed_points())


def _narrow_gemm_space(algo):
    """One tiling: the epilogue knobs are the only choices left."""
    return gemm_space(algo, tm=(64,), tn=(128,), tk=(64,), k0=(64,), l1=(2,), l0=(2,),
                      l0c=(1,), cores=(2,), swizzle_w=(1,), swizzle_dir=("m",))


def test_a_vector_epilogue_tunes_its_vector_cores_and_workspace_slots():
    sp = _narrow_gemm_space(L.gemm_gelu(96, 128, 64))
    assert sp.param("vector_cores").choices == (2, 1)
    assert sp.param("workspace").choices == (1, 2, 3)
    with pytest.raises(AscendSchedError, match="no parameter .epilogue."):
        gemm_space(L.gemm_gelu(96, 128, 64), epilogue=("vector",))
    rep = sp.prune()
    assert len(rep.legal) == 6 and not any(rep.pruned.values())  # 6 different kernels
    seeds = [sp.as_dict(pt) for pt in library_space("gemm", 1024, 1024, 1024).seed_points()]
    assert all("vector_cores" not in d for d in seeds)  # no epilogue, no epilogue knobs
    seeds = [sp.as_dict(pt) for pt in gemm_space(sp.algo).seed_points()]
    assert seeds and all((d["vector_cores"], d["workspace"]) == (2, 2) for d in seeds)
    kernels = {}
    for c in rep.legal:
        d, s = sp.as_dict(c.point), c.schedule
        assert (s.epilogue_vector_cores, s.copies("workspace")) == (d["vector_cores"],
                                                                     d["workspace"])
        kernels[d["vector_cores"], d["workspace"]] = lower(s)
    assert kernels[1, 2].sub_blocks == 1 and kernels[2, 2].sub_blocks == 2
    # the default (2 cores, 2 slots) adds no directive: it prints as the plain GEMM schedule
    plain = str(next(c.schedule for c in rep.legal
                     if sp.as_dict(c.point)["vector_cores"] == 2
                     and sp.as_dict(c.point)["workspace"] == 2))
    assert "epilogue_on" not in plain and "workspace" not in plain


def test_an_epilogue_the_fixpipe_can_run_may_move_to_the_vector_cores():
    sp = _narrow_gemm_space(L.gemm_epilogue(96, 128, 64, "float16", bias=True, relu=True))
    assert sp.param("epilogue").choices == ("fixpipe", "vector")
    rep = sp.prune()
    # on the Fixpipe the Vector knobs change nothing: 5 of those 6 points are duplicates
    assert rep.pruned["duplicate"] == 5 and len(rep.legal) == 1 + 6
    fixpipe = [c.schedule for c in rep.legal if sp.as_dict(c.point)["epilogue"] == "fixpipe"]
    assert len(fixpipe) == 1 and fixpipe[0].vector_epilogue is None
    vector = {sp.as_dict(c.point)["vector_cores"]: c.schedule for c in rep.legal
              if sp.as_dict(c.point)["epilogue"] == "vector"}
    assert {n: lower(s).sub_blocks for n, s in vector.items()} == {1: 1, 2: 2}


def test_the_general_spelling_of_a_gemm_schedule_is_the_same_point() -> None:
    # the equivalence key reads the resolved Cube plan, so a tuner seeded with a general
    # Schedule does not evaluate its GemmSchedule twin again; another tiling is another point
    from ascendsched.autotune.space import equivalence_key
    from tests.kit.general_cube import general_spelling

    g = (GemmSchedule(L.gemm_gelu(520, 260, 300)).tile(128, 128, 128).split_k(64)
         .buffer("l1", 2).bind(4).epilogue_on("vector", vector_cores=1).buffer("workspace", 3))
    assert equivalence_key(general_spelling(g)) == equivalence_key(g)
    other = GemmSchedule(L.gemm_gelu(520, 260, 300)).tile(128, 128, 128).split_k(64).bind(4)
    assert equivalence_key(general_spelling(other)) != equivalence_key(g)


def test_the_split_of_an_epilogue_is_part_of_the_equivalence_key() -> None:
    """Bias on the Cube core and GELU on the Vector cores is another kernel than all of it on
    the Vector cores (tuning must not take one's time for the other's); the default split and
    its explicit spelling are one kernel."""
    from ascendsched.autotune.space import equivalence_key

    a = L.gemm_bias_gelu(256, 256, 256)
    whole = GemmSchedule(a).epilogue_on("vector").tile(64, 64, 64)
    split = GemmSchedule(a).epilogue_on("vector", after="D").tile(64, 64, 64)
    assert equivalence_key(whole) != equivalence_key(split)
    assert equivalence_key(GemmSchedule(a).tile(64, 64, 64)) == equivalence_key(split)


def test_stats_outer_holds_the_row_outer_default_of_wide_rows() -> None:
    """LayerNorm 4096 x 12288: the point with single rows outer, pieces of 4096 inside,
    ``stats="outer"`` and gamma/beta loaded once is the default schedule (same loop tree,
    placements and kernel text below the schedule comment), so the search can reach it and
    move from it."""
    from ascendsched.lower.schedule_for import schedule_for

    algo = L.layernorm(4096, 12288)
    space = default_space(algo)
    assert space.param("stats").choices == ("tile", "outer", "chunks")
    names = [p.name for p in space.params]
    point = dict(rows=1, cols=4096, order="rows", cores=48, place_xf="at", place_d="at",
                 place_mean="inline", place_var="inline", place_r="inline",
                 stats="outer", copies_x=1, copies_gamma=1, copies_beta=1, copies_y=1,
                 once_gamma="load", once_beta="load", stage_x="tile")
    sched = space.schedule(tuple(point[n] for n in names))
    default = schedule_for(algo)
    assert sched.loop_names("y") == default.loop_names("y") == ["i_o", "j_o"]
    for st in ("xf", "mean", "d", "var", "r"):
        assert sched.placement(st).loop == "i_o", st

    def body(k) -> str:  # noqa: ANN001
        return "\n".join(x for x in str(k).splitlines() if not x.lstrip().startswith("#"))

    assert body(lower(sched)) == body(lower(default))
    tile = dict(point, stats="tile")
    assert space.schedule(tuple(tile[n] for n in names)).placement("d").loop == "j_o"


def test_stats_chunks_reach_rows_no_tile_holds() -> None:
    """softmax 64 x 32 000: with the row statistics at the row loop and read whole, no point
    fits UB; ``stats="chunks"`` reads them in chunks of the piece's width (the row-wide
    stages inlined), lowers, and equals numpy race-free."""
    from ascendsched.api.check import check
    from ascendsched.errors import CapacityError
    from ascendsched.schedule.chunks import chunk_split

    space = default_space(L.softmax(64, 32000))
    names = [p.name for p in space.params]
    point = dict(rows=1, cols=4096, order="rows", cores=48, place_xf="at", place_e="at",
                 stats="chunks", online=False, copies_x=2, copies_y=2, stage_x="tile")
    sched = space.schedule(tuple(point[n] for n in names))
    assert [chunk_split(sched, st).factor for st in ("mx", "s")] == [4096, 4096]
    assert sched.placement("xf").__class__.__name__ == "ComputeInline"
    verdicts = check(sched, cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
    with pytest.raises(CapacityError):
        lower(space.schedule(tuple(dict(point, stats="outer")[n] for n in names)))


def test_online_joins_the_chunked_statistics_of_a_softmax_point() -> None:
    """``online=True`` on a ``stats="chunks"`` point: the sum of exponentials in the max's
    chunk loop (``schedule/online.py``), one pass over x fewer, modelled faster."""
    from ascendsched.schedule.online import online_of
    from ascendsched.sim.timing import model_time

    space = default_space(L.softmax(64, 32000))
    assert space.param("online").choices == (False, True)
    names = [p.name for p in space.params]
    point = dict(rows=1, cols=8000, order="rows", cores=48, place_xf="at", place_e="at",
                 stats="chunks", online=False, copies_x=2, copies_y=2, stage_x="tile")
    plain, online = (space.schedule(tuple(dict(point, online=o)[n] for n in names))
                     for o in (False, True))
    assert online_of(plain) == {} and online_of(online) == {"s": "mx"}
    times = [model_time(lower(s)).time_s for s in (plain, online)]
    assert times[1] < 0.95 * times[0], times
    assert "online" not in [p.name for p in default_space(L.rmsnorm(64, 32000)).params]



def test_column_tiles_include_widths_that_divide_the_row() -> None:
    """Beside each power-of-two column tile, the widest one above its half that divides the
    row (as the default's pieces): 8 000 for a 32 000-word vocabulary, whose default
    schedule's 8 000-column pieces the tuner could not reach before; none for 4096."""
    from ascendsched.lower.schedule_for import schedule_for

    cols = dict((p.name, p.choices) for p in default_space(L.softmax(64, 32000)).params)["cols"]
    assert {8000, 4000, 2000, 8192, 4096}.issubset(cols)
    assert schedule_for(L.softmax(64, 32000)).loop_nest("y").factors["j"] in cols
    plain = dict((p.name, p.choices) for p in default_space(L.softmax(64, 4096)).params)
    assert plain["cols"] == (256, 512, 1024, 2048, "whole")


def test_a_column_reduction_space_reads_rows_in_chunks() -> None:
    """db[j] = sum_i dy[i, j] (4096 x 4096): with the rows read whole no point fits UB; the
    space tiles the columns as the cores take them and reads the rows in chunks, and such a
    point lowers."""
    from ascendsched.algo.algorithm import algorithm
    from ascendsched.algo.ops import reduce_sum
    from ascendsched.algo.tensor import compute, placeholder, reduce_axis
    from ascendsched.schedule.chunks import chunk_split

    dy = placeholder("dy", (4096, 4096), "float16")
    k = reduce_axis(4096, "k")
    algo = algorithm("bias_grad", compute("db", (4096,), lambda j: reduce_sum(
        dy[k, j].astype("float32"), k)))
    space = default_space(algo)
    choices = {p.name: p.choices for p in space.params}
    assert 96 in choices["tile"] and 128 in choices["chunk"]  # 4096 columns over 43+ cores
    point = {p.name: p.choices[0] for p in space.params} | dict(
        tile=96, cores=48, chunk=128, copies_dy=2, copies_db=2, once_dy="tile")
    sched = space.schedule(tuple(point[p.name] for p in space.params))
    assert chunk_split(sched, "db").factor == 128
    lower(sched)


def test_vector_seeds_are_the_default_tiles_of_each_buffering() -> None:
    """A vector space offers the default's tallest whole-row tile of each buffering as rows
    and seeds its search with both; the single-buffered one is taller, and for LayerNorm
    4096 x 4096 (bound by its Vector pipe) faster than the default's (modelled)."""
    from ascendsched.autotune.evaluate import evaluate_schedule
    from ascendsched.lower.schedule_for import schedule_for

    sp = library_space("layernorm", 4096, 4096)
    assert 3 in sp.param("rows").choices  # not a power of two
    seeds = [sp.as_dict(p) for p in sp.seed_points()]
    assert [(s["rows"], s["copies_x"], s["copies_y"]) for s in seeds] == [(2, 2, 2), (3, 1, 1)]
    assert all(s["place_xf"] == s["place_d"] == "at" and s["place_mean"] == "inline"
               and s["once_gamma"] == "once" for s in seeds)
    checked = [sp.check(p) for p in sp.seed_points()]
    assert all(c.legal for c in checked), [c.message for c in checked]
    default = evaluate_schedule(schedule_for(sp.algo))
    single = evaluate_schedule(checked[1].schedule)
    assert evaluate_schedule(checked[0].schedule).time_s == pytest.approx(default.time_s)
    assert single.time_s < 0.97 * default.time_s
