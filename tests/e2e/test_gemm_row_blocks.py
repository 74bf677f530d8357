"""GEMM + row softmax with rows wider than a Cube tile, in one mixed kernel (issue 13): each core
takes row blocks, the AIC runs a block's tiles one after the other into one workspace slot and
the AIVs run the softmax over the whole block, rows UB cannot hold read in chunks
(``CubePlan.row_blocks``, ``lower/build_mixed.py``). Hand and default schedules, tails in M, N
and K (a batched GEMM, 1:1 Vector cores, a bias on the Cube core too); the IR rungs here (the
g++ ladder of these schedules and the default's: ``test_gemm_vector_epilogue.py``, dropping
each cross flag and sync minimality: ``tests/lower/test_cross_core_sync.py``); Cube and Vector
overlap across row blocks; the errors of what row blocks cannot honour."""

from __future__ import annotations

import pytest

from ascendsched.algo import algorithm, compute, placeholder, reduce_axis, reduce_sum
from ascendsched.algo import library as L
from ascendsched.algo.algorithm import Algorithm
from ascendsched.algo.ops import exp, reduce_max
from ascendsched.api.check import check
from ascendsched.errors import CapacityError, ScheduleError
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.sim.timing import model_time
from tests.kit.general_cube import general_spelling, kernel_text
from tests.sim.test_timing_mixed import _busy, _overlap

HAND = {
    # 100 x 3000 x 90: 3 full row blocks and an M edge's on 2 cores, 11 tiles of 256 and
    # a tail tile of 184 columns per block, a K tail; rows fit UB whole
    "tiles_of_256": lambda: GemmSchedule(L.gemm_softmax(100, 3000, 90)).tile(32, 256, 32)
    .buffer("l0c", 2).bind(2),
    # rows of 20 000 float32 do not fit UB: the epilogue reduces them in chunks
    "rows_over_ub": lambda: GemmSchedule(L.gemm_softmax(40, 20000, 40)).tile(32, 512, 32)
    .bind(2).buffer("workspace", 1),
    # a batched GEMM (per batch and row block), one Vector core per block
    "batched_1_to_1": lambda: GemmSchedule(_batched_softmax(3, 40, 300, 64)).tile(16, 64, 32)
    .bind(3).epilogue_on("vector", vector_cores=1),
    # a bias added on the Cube core (the bias table, per tile of the block), softmax after it
    "bias_on_cube": lambda: GemmSchedule(_bias_softmax(70, 600, 64))
    .epilogue_on("vector", after="D").tile(32, 128, 32).bind(2),
    # the general Schedule's spelling ('j' split under a tensorized contraction): below
}


def _bias_softmax(m: int, n: int, k: int) -> Algorithm:
    q, kt = placeholder("Q", (m, k)), placeholder("Kt", (k, n))
    bias = placeholder("bias", (n,), "float32")
    kk, k1, k2 = reduce_axis(k, "k"), reduce_axis(n, "k1"), reduce_axis(n, "k2")
    c = compute("C", (m, n), lambda i, j: reduce_sum(
        q[i, kk].astype("float32") * kt[kk, j].astype("float32"), kk))
    d = compute("D", (m, n), lambda i, j: c[i, j] + bias[j])
    mx = compute("mx", (m,), lambda i: reduce_max(d[i, k1], k1))
    e = compute("e", (m, n), lambda i, j: exp(d[i, j] - mx[i]))
    sm = compute("sm", (m,), lambda i: reduce_sum(e[i, k2], k2))
    return algorithm("bias_softmax", compute("P", (m, n), lambda i, j:
                                             (e[i, j] / sm[i]).astype("float16")))


def _batched_softmax(b: int, m: int, n: int, k: int) -> Algorithm:
    q, kt = placeholder("Q", (b, m, k)), placeholder("Kt", (b, k, n))
    kk, k1, k2 = reduce_axis(k, "k"), reduce_axis(n, "k1"), reduce_axis(n, "k2")
    s = compute("S", (b, m, n), lambda p, i, j: reduce_sum(
        q[p, i, kk].astype("float32") * kt[p, kk, j].astype("float32"), kk))
    mx = compute("mx", (b, m), lambda p, i: reduce_max(s[p, i, k1], k1))
    e = compute("e", (b, m, n), lambda p, i, j: exp(s[p, i, j] - mx[p, i]))
    sm = compute("sm", (b, m), lambda p, i: reduce_sum(e[p, i, k2], k2))
    return algorithm("batched_softmax", compute("P", (b, m, n), lambda p, i, j:
                                                (e[p, i, j] / sm[p, i]).astype("float16")))


def test_a_tile_narrower_than_the_rows_makes_row_blocks() -> None:
    s = HAND["tiles_of_256"]()
    assert s.row_blocks and s.tiling.cores == 2
    assert [(c.label, c.rows, c.mv, c.nv) for c in s.tile_classes] == [
        ("row blocks", 3, 32, 3000), ("M edge row block", 1, 4, 3000)]
    assert "in row blocks of 12 tiles on 2 Cube cores" in s.plan.loop_nest_text()
    assert s.plan.loop_nest_text().endswith("as many rows per step as UB holds")
    assert HAND["rows_over_ub"]().plan.loop_nest_text().endswith(
        "one row at a time, read in chunks (no row fits UB)")
    # whole rows in one tile stay tiles
    assert not GemmSchedule(L.gemm_softmax(100, 130, 90)).tile(32, 144, 32).row_blocks


def test_the_aic_walks_a_row_block_into_one_slot_and_the_aiv_reads_it_whole() -> None:
    k = lower(HAND["tiles_of_256"]())
    text = str(k)
    # 11 full tiles in a loop, the tail tile peeled; each writes its columns of the slot
    assert "for nj in 0..11:   # the row block's 11 tiles of 32 x 256" in text
    assert "S_ws@(4096*(t0 mod 2) + 256*nj + 8192*block_idx)" in text.replace(") +", ")+")\
        or "256*nj" in text
    ws = k.param_map["S_ws"]
    assert ws.shape == (4, 32 * 256 * 12)  # 2 cores x 2 slots of a row block
    # one data-ready set per row block (after its last tile), one wait per block on the AIV
    aic, aiv = (text.split("program AIV:")[i] for i in (0, 1))
    assert aic.count("cross_set FIX") == 2 and aiv.count("cross_wait MTE2") == 2


def test_row_blocks_spelled_generally_lower_to_the_same_kernel() -> None:
    g = GemmSchedule(L.gemm_softmax(70, 2500, 64)).tile(32, 512, 32).bind(3)
    s = general_spelling(g)
    assert s.cube is not None and s.cube.row_blocks
    assert kernel_text(lower(s)) == kernel_text(lower(g))


@pytest.mark.parametrize("name", list(HAND))
def test_ir_rungs_hand(name: str) -> None:
    verdicts = check(HAND[name](), cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


def test_the_default_of_rows_wider_than_l0c_is_row_blocks() -> None:
    """Whole rows of 3000 float32 columns need 16 x 3008 x 4 B of L0C (192 KB of 128 KB):
    the default takes row blocks, checked through its reduced instance."""
    algo = L.gemm_softmax(100, 3000, 90)
    s = schedule_for(algo)
    assert isinstance(s, GemmSchedule) and s.row_blocks
    verdicts = check(algo, cpp=False, reduce=True)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


def test_cube_and_vector_overlap_across_row_blocks() -> None:
    """One block, 8 row blocks of 32 x 1024 in 4 tiles each: the AIC computes block i + 1
    while the two AIVs run the softmax of block i."""
    k = lower(GemmSchedule(L.gemm_softmax(256, 1024, 128)).tile(32, 256, 64).buffer("l1", 2)
              .buffer("l0c", 2))
    r = model_time(k, record=True)
    aic = _busy(r.slices[(0, "AIC")])
    for name in ("AIV0", "AIV1"):
        both, shorter = _overlap(aic, _busy(r.slices[(0, name)]))
        assert both > 0.5 * shorter


def test_what_row_blocks_cannot_honour_is_an_error() -> None:
    with pytest.raises(ScheduleError, match=r"swizzle\(2, 'm'\) orders the tiles across the "
                       r"cores, but the Vector epilogue reduces rows \(stage 'mx'\) of 3000 "
                       r"columns, wider than the tile n=256, so each core takes whole row "
                       r"blocks, their tiles one after the other: drop the swizzle"):
        lower(HAND["tiles_of_256"]().swizzle(2, "m"))
    with pytest.raises(CapacityError, match=r"one row of the Vector epilogue's tile \(20000 "
                       r"columns of S_ws and P\) does not fit the ascend910b UB \(188160 B\), "
                       r"so the epilogue reads its rows in chunks, one row at a time, not 4 "
                       r"rows per step: drop rows=4 from \.epilogue_on\('vector', \.\.\.\)"):
        lower(HAND["rows_over_ub"]().epilogue_on("vector", rows=4))


def test_the_example_kernel() -> None:
    """examples/attention_softmax.py: its hand schedule and the default both row blocks,
    both through the IR rungs."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "attention_softmax.py"
    spec = importlib.util.spec_from_file_location("example_attention_softmax", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    assert mod.schedule().row_blocks and schedule_for(mod.algorithm()).row_blocks
    for sched in (mod.schedule(), mod.algorithm()):
        verdicts = check(sched, cpp=False)
        assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
