"""GEMM user errors: each bad input raises one exact error type with a message that names the
cause: overflow of L0A / L0B / L0C / L1 (the planner's CapacityError), illegal schedule
primitives (ScheduleError), algorithms or dtypes the Cube path cannot lower (UnsupportedError)."""

from __future__ import annotations

import pytest

from ascendsched.algo import compute, placeholder, reduce_axis, reduce_sum
from ascendsched.algo import library as L
from ascendsched.algo.algorithm import algorithm
from ascendsched.errors import CapacityError, ScheduleError, SyncError, UnsupportedError
from ascendsched.lower.pipeline import lower
from ascendsched.schedule.gemm import GemmSchedule


@pytest.mark.parametrize("scope,sched,buffer", [
    ("L0A", GemmSchedule(L.gemm(256, 16, 256)).tile(256, 16, 256), "a_l0"),
    ("L0B", GemmSchedule(L.gemm(16, 256, 256)).tile(16, 256, 256), "b_l0"),
    ("L0C", GemmSchedule(L.gemm(256, 256, 16)).tile(256, 256, 16), "c_l0"),
    ("L1", GemmSchedule(L.gemm(128, 128, 2048)).tile(128, 128, 1024).split_k(64)
     .buffer("l1", 2), "a_l1"),
], ids=["L0A", "L0B", "L0C", "L1"])
def test_overflow_is_the_planners_capacity_error(scope: str, sched: GemmSchedule,
                                                 buffer: str) -> None:
    with pytest.raises(CapacityError, match=rf"{scope} buffers need \d+ B but ascend910b "
                                            rf"{scope} has \d+ B usable") as e:
        lower(sched)
    msg = str(e.value)
    assert buffer in msg and "In GEMM schedule" in msg and ". Try " in msg


def test_a_tile_too_big_for_the_instructions_too_is_reported_as_the_capacity_error() -> None:
    # b_l1 = 64 x 4096 fp16 = 512 KB > L1's usable bytes; its L0B slice would also need
    # Mmad n=4096 (documented range 1..4095) and LoadData2D repeatTimes=256 (1..255): the
    # user's problem is the tile's size, so that is what is reported, not the IR check
    s = GemmSchedule(L.gemm(64, 4096, 64)).tile(64, 4096, 64)
    with pytest.raises(CapacityError, match=r"L1 buffers need 532480 B but ascend910b L1 has "
                                            r"524032 B usable") as e:
        lower(s)
    msg = str(e.value)
    assert "b_l1: 1 copy x 524288 B" in msg and ".tile(64, 4096, 64)" in msg
    assert "Try a smaller tile k (or m, n)" in msg


def test_double_buffering_is_what_overflows_l0a() -> None:
    s = GemmSchedule(L.gemm(256, 16, 256)).tile(256, 16, 256).split_k(128)
    lower(s, stop_after="apply memory plan")  # 64 KB: fits exactly
    with pytest.raises(CapacityError, match="a_l0: 2 copies"):
        lower(s.buffer("l0", 2), stop_after="apply memory plan")


@pytest.mark.parametrize("build,match", [
    (lambda s: s.tile(24, 16, 16), r"m=24 must be a positive multiple of 16"),
    (lambda s: s.tile(16, 16, 8), r"k=8 must be a positive multiple of 16"),
    (lambda s: s.tile(16, 16, 16).tile(32, 32, 32), "already set"),
    (lambda s: s.tile(16, 16, 64).split_k(48), r"k0 must divide the L1 tile's k=64; legal: "
                                               r"16, 32, 64"),
    (lambda s: s.tile(16, 16, 64).split_k(8), "multiple of 16"),
    (lambda s: s.split_k(16), r"no L1 tile; call \.tile"),
    (lambda s: s.bind(25), "has 24 Cube cores"),
    (lambda s: s.buffer("l2", 2), "one of l1, l0, l0c"),
    (lambda s: s.buffer("l1", 3), "1 or 2 copies"),
    (lambda s: s.swizzle(2, "k"), "direction is 'm' or 'n'"),
    (lambda s: s.swizzle(0), "width must be an int >= 1"),
])
def test_illegal_schedule(build, match: str) -> None:
    with pytest.raises(ScheduleError, match=match):
        build(GemmSchedule(L.gemm(64, 64, 64)))


def test_int8_granules() -> None:
    s = GemmSchedule(L.gemm_int8(64, 64, 64))
    with pytest.raises(ScheduleError, match="k=16 must be a positive multiple of 32"):
        s.tile(16, 32, 16)
    with pytest.raises(ScheduleError, match="n=16 must be a positive multiple of 32"):
        s.tile(16, 16, 32)  # int8 B (K, N) keeps N along the 32-element C0 in L1
    GemmSchedule(L.gemm(64, 64, 64, "int8", "int32", trans_b=True)).tile(16, 16, 32)


def test_not_a_gemm() -> None:
    with pytest.raises(UnsupportedError, match="is not a single-axis sum"):
        GemmSchedule(L.vadd())
    with pytest.raises(UnsupportedError, match="5 stages"):
        GemmSchedule(L.softmax())


def test_product_in_the_input_dtype() -> None:
    a, b = placeholder("A", (32, 32)), placeholder("B", (32, 32))
    k = reduce_axis(32, "k")
    c = compute("C", (32, 32), lambda i, j: reduce_sum((a[i, k] * b[k, j]).astype("float32"),
                                                       k, dtype="float32"))
    with pytest.raises(UnsupportedError, match="not a product of two loads|computed in float16"):
        GemmSchedule(algorithm("g", c))


def test_mixed_input_dtypes() -> None:
    a, b = placeholder("A", (32, 32), "float16"), placeholder("B", (32, 32), "bfloat16")
    k = reduce_axis(32, "k")
    c = compute("C", (32, 32), lambda i, j: reduce_sum(
        a[i, k].astype("float32") * b[k, j].astype("float32"), k, dtype="float32"))
    with pytest.raises(UnsupportedError, match="A is float16 but B is bfloat16"):
        GemmSchedule(algorithm("g", c))


def test_float32_operands_name_the_dtypes_the_cube_path_multiplies() -> None:
    a, b = placeholder("A", (32, 32), "float32"), placeholder("B", (32, 32), "float32")
    k = reduce_axis(32, "k")
    c = compute("C", (32, 32), lambda i, j: reduce_sum(a[i, k] * b[k, j], k))
    with pytest.raises(UnsupportedError, match="multiplies bfloat16, float16, int8 operands, "
                                               "not float32: give A and B one of those"):
        lower(GemmSchedule(algorithm("g", c)).tile(16, 16, 16))


def test_a_contraction_over_a_computed_stage_says_to_give_it_its_own_kernel() -> None:
    """Attention's P x V after the softmax: P is computed (here from a first contraction),
    the Cube reads GM inputs."""
    q, kt, v = (placeholder(n, (32, 32)) for n in ("Q", "K", "V"))
    d = reduce_axis(32, "d")
    s = compute("S", (32, 32), lambda i, j: reduce_sum(
        q[i, d].astype("float32") * kt[j, d].astype("float32"), d, dtype="float32"))
    p = compute("P", (32, 32), lambda i, j: (s[i, j] * 0.125).astype("float16"))
    k = reduce_axis(32, "k")
    o = compute("O", (32, 32), lambda i, j: reduce_sum(
        p[i, k].astype("float32") * v[k, j].astype("float32"), k, dtype="float32"))
    with pytest.raises(UnsupportedError, match="reads 'P', which this algorithm computes.*"
                                               "compute 'P' in a kernel of its own"):
        GemmSchedule(algorithm("pv", o))
    a = placeholder("A", (32, 32))
    e = compute("E", (32, 32), lambda i, j: reduce_sum(
        (a[i, k] + a[i, k]).astype("float32") * v[k, j].astype("float32"), k, dtype="float32"))
    with pytest.raises(UnsupportedError, match=r"is not an input read .*compute \(A\[i, k\] "
                                               r"\+ A\[i, k\]\) in a kernel of its own"):
        GemmSchedule(algorithm("ax", e))


def test_unsupported_output_dtype() -> None:
    s = GemmSchedule(L.gemm(32, 32, 32, "int8", "float16")).tile(16, 32, 32)
    with pytest.raises(UnsupportedError, match="Fixpipe cannot convert int32 to float16"):
        lower(s)


def test_event_ids_running_out_names_the_syncs_and_the_ways_out() -> None:
    """A small GEMM with a bias and tails in M and K on one core: its MTE1 -> MTE2 syncs,
    even as set-then-wait pairs, cannot share ids (MTE1 may run ahead of MTE2). The 910B's 6
    ids take them, and so do 4 (falling back from ping-pong, with a warning; its tile classes
    share the syncs of their template, lower/sync_template.py); a part with 2 ids does not. A
    known limit of sync placement: the error says which syncs and how to avoid it."""
    import warnings

    from tests.kit.cube import TWO_IDS

    def sched() -> GemmSchedule:
        return (GemmSchedule(L.gemm_epilogue(17, 32, 17, bias=True, relu=True))
                .tile(16, 16, 16).buffer("l1", 2).bind(1))

    with pytest.raises(SyncError, match=r"AIC MTE1_MTE2: cannot fit \d+ syncs into event ids "
                       r"\(0, 1\).*bias_l1: MTE1 read -> MTE2 write \(WAR\).*pick "
                       r"tile sizes that divide the problem.*more cores"):
        lower(sched(), TWO_IDS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the 910B: no fallback; no tails: neither
        lower(sched())
        lower(GemmSchedule(L.gemm_epilogue(32, 32, 32, bias=True, relu=True)).tile(16, 16, 16)
              .buffer("l1", 2).bind(1))


def test_a_row_softmax_wider_than_the_cube_tiles_gets_row_blocks() -> None:
    """Attention scores with 4096 keys and their row softmax: 16 rows of 4096 float32
    overflow L0C (it once was an UnsupportedError naming the two-kernel way out); the
    default now takes row blocks of narrower tiles (CubePlan.row_blocks). Tiles of whole rows
    (up to 2048 columns) compete with row blocks on the estimate, and win some."""
    from ascendsched.lower.schedule_for import schedule_for

    wide = schedule_for(L.gemm_softmax(256, 4096, 128))
    assert wide.row_blocks and wide.tiling.tn < 4096
    assert schedule_for(L.gemm_softmax(4096, 512, 16)).plan.tiling.tn == 512
    assert schedule_for(L.gemm_softmax(256, 2064, 128)).row_blocks
