"""GEMM on the Cube path, end to end: hand schedules -> lower -> IR execution == numpy, and the
trace checker finds no race, deadlock or flag error."""

from __future__ import annotations

import numpy as np
import pytest

from ascendsched.algo import evaluate
from ascendsched.algo import library as L
from ascendsched.algo.gemm_spec import gemm_error, match_gemm
from ascendsched.api.check import check
from ascendsched.api.numerics import random_inputs
from ascendsched.api.sync_minimality import sync_minimality
from ascendsched.lower.ir import BLOCK_IDX, For, If, iter_instrs
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel


# Output rounding: 2 units in the last place of the output dtype.
def assert_gemm_close(got: np.ndarray, spec, inputs) -> None:
    """Integers exactly; floats within the K-scaled fp32 accumulation bound."""
    ok, msg = gemm_error(spec, inputs, got)
    assert ok, f"{spec}: {msg}"


def check_gemm(sched: GemmSchedule, seed: int = 0, *, trace: bool = True):
    """Lower, run, compare with numpy matmul, check the trace; return (kernel, report)."""
    k = lower(sched)
    ins = random_inputs(sched.algo, seed)
    res = run_kernel(k, ins, trace=trace)
    spec = sched.spec
    assert_gemm_close(res.outputs[spec.c], spec, ins)
    rep = check_trace(res.trace, k.target) if trace else None
    if rep is not None:
        assert rep.ok, f"{spec}\n{sched}\n{rep}"
    return k, rep


def _s(algo) -> GemmSchedule:
    return GemmSchedule(algo)


CASES = [
    ("single buffered", _s(L.gemm(96, 80, 112)).tile(32, 32, 48).split_k(16)),
    ("L1 + L0 + L0C double buffered",
     _s(L.gemm(96, 80, 112)).tile(32, 32, 48).split_k(16).buffer("l1").buffer("l0")
     .buffer("l0c").bind(2)),
    ("4 cores, swizzle m", _s(L.gemm(150, 140, 70)).tile(32, 32, 32).split_k(16).bind(4)
     .swizzle(2, "m").buffer("l1").buffer("l0")),
    ("3 cores, swizzle n", _s(L.gemm(150, 140, 70)).tile(32, 48, 64).split_k(32).bind(3)
     .swizzle(3, "n").buffer("l0c")),
    ("persistent: 30 tiles on 7 cores", _s(L.gemm(100, 90, 40)).tile(16, 16, 32).bind(7)
     .buffer("l1").buffer("l0").buffer("l0c")),
    ("A transposed", _s(L.gemm(70, 60, 90, trans_a=True)).tile(32, 32, 64).split_k(32).bind(3)),
    ("B transposed", _s(L.gemm(70, 60, 90, trans_b=True)).tile(32, 32, 64).split_k(32).bind(3)
     .buffer("l0")),
    ("A and B transposed", _s(L.gemm(70, 60, 90, trans_a=True, trans_b=True)).tile(48, 16, 32)
     .buffer("l1")),
    ("batched", _s(L.batched_gemm(3, 40, 50, 60)).tile(32, 32, 32).split_k(16).bind(5)
     .swizzle(2)),
    ("batched, shared B^T", _s(L.batched_gemm(3, 40, 50, 60, trans_b=True, shared_b=True))
     .tile(32, 32, 64).bind(4).buffer("l0c")),
    ("bf16 -> bf16", _s(L.gemm(50, 70, 90, "bfloat16", "bfloat16")).tile(32, 32, 32).bind(4)
     .buffer("l1").buffer("l0")),
    ("fp16 -> fp32", _s(L.gemm(50, 70, 90, "float16", "float32")).tile(32, 32, 32).split_k(16)),
    ("bf16 A^T -> fp32", _s(L.gemm(50, 70, 90, "bfloat16", "float32", trans_a=True))
     .tile(16, 32, 48)),
    ("int8", _s(L.gemm_int8(70, 80, 100)).tile(32, 64, 64).split_k(32).bind(4).buffer("l0")),
    ("int8 A^T", _s(L.gemm(70, 80, 100, "int8", "int32", trans_a=True)).tile(64, 32, 64)
     .split_k(32).bind(2).buffer("l1")),
    ("int8 B^T", _s(L.gemm(70, 80, 100, "int8", "int32", trans_b=True)).tile(32, 16, 96)
     .split_k(32)),
    ("int8 batched A^T B^T", _s(L.batched_gemm(2, 33, 45, 70, "int8", "int32", trans_a=True,
                                               trans_b=True)).tile(32, 16, 32).bind(3)),
    ("1 x 1 x 1", _s(L.gemm(1, 1, 1)).tile(16, 16, 16)),
    ("1 x 1 x 1 int8", _s(L.gemm_int8(1, 1, 1)).tile(16, 32, 32)),
    ("17 x 300 x 33", _s(L.gemm(17, 300, 33)).tile(16, 64, 32).split_k(16).bind(5)
     .buffer("l1").buffer("l0")),
    ("m = 1 row", _s(L.gemm(1, 40, 70)).tile(16, 16, 32).bind(3)),
    ("k = 1", _s(L.gemm(40, 30, 1, trans_b=True)).tile(16, 16, 16).bind(2)),
]


@pytest.mark.parametrize("name,sched", CASES, ids=[c[0] for c in CASES])
def test_gemm_schedule(name: str, sched: GemmSchedule) -> None:
    check_gemm(sched)


@pytest.mark.parametrize("algo", [L.gemm(17, 300, 33), L.gemm(1, 1, 1),
                                  L.batched_gemm(2, 30, 20, 50, "bfloat16", "float32"),
                                  L.gemm_int8(40, 70, 50)], ids=["17x300x33", "1x1x1",
                                                                 "batched bf16", "int8"])
def test_default_schedule(algo) -> None:
    sched = schedule_for(algo)
    assert isinstance(sched, GemmSchedule)
    check_gemm(sched)


def test_reference_is_the_algorithm() -> None:
    """gemm_reference (matmul) agrees with the algorithm's own numpy evaluation."""
    for algo in (L.gemm(13, 21, 34, trans_a=True), L.batched_gemm(2, 5, 6, 7, trans_b=True,
                                                                  shared_b=True),
                 L.gemm_int8(9, 10, 11), L.gemm(8, 9, 10, "bfloat16", "bfloat16")):
        ins = random_inputs(algo, 1)
        spec = match_gemm(algo)
        assert_gemm_close(evaluate(algo, ins)[spec.c], spec, ins)


def test_swizzle_visits_every_tile_once() -> None:
    for w, d in ((1, "m"), (3, "m"), (4, "n"), (7, "m")):
        s = _s(L.batched_gemm(2, 100, 90, 16)).tile(16, 16, 16).bind(8).swizzle(w, d)
        t = s.tiling
        coords = [s.tile_coords(i) for i in range(t.tiles)]
        assert sorted(coords) == [(b, m, n) for b in range(2) for m in range(t.mt)
                                  for n in range(t.nt)]
    s = _s(L.gemm(64, 64, 16)).tile(16, 16, 16).swizzle(2, "m")
    assert [s.tile_coords(i) for i in range(4)] == [(0, 0, 0), (0, 1, 0), (0, 0, 1), (0, 1, 1)]


def _fixpipe_tiles(k, sched: GemmSchedule) -> dict[int, list[tuple[int, int, int]]]:
    """Per core, the (batch, m tile, n tile) each executed Fixpipe writes, in program order."""
    spec, t = sched.spec, sched.tiling
    out: dict[int, list[tuple[int, int, int]]] = {}

    def walk(body, env, core):
        for s in body:
            if isinstance(s, For):
                for i in range(s.extent):
                    walk(s.body, {**env, s.var: i}, core)
            elif isinstance(s, If):
                if s.evaluate(env):
                    walk(s.body, env, core)
            elif s.op == "fixpipe":
                off = s.writes[0].offset.evaluate(env)
                b, rest = divmod(off, spec.m * spec.n)
                row, col = divmod(rest, spec.n)
                out.setdefault(core, []).append((b, row // t.tm, col // t.tn))

    for core in range(k.block_dim):
        walk(k.programs[0].body, {BLOCK_IDX: core}, core)
    return out


@pytest.mark.parametrize("sched", [
    _s(L.batched_gemm(2, 100, 90, 16)).tile(16, 16, 16).bind(7).swizzle(3, "n"),
    _s(L.gemm(150, 140, 16)).tile(32, 32, 16).bind(5).swizzle(4, "m"),
    _s(L.gemm(64, 64, 16)).tile(16, 16, 16).bind(24),
], ids=["batched swizzle n", "swizzle m edges", "more cores than tiles"])
def test_cores_run_the_schedules_tile_order(sched: GemmSchedule) -> None:
    """Tile T of schedule.tile_order() runs on core T % cores, in order: the lowering's affine
    tile coordinates (persistent loops, swizzle, edge classes) match the schedule's model."""
    t = sched.tiling
    order = sched.tile_order()
    want = {c: [order[i] for i in range(c, t.tiles, t.cores)] for c in range(t.cores)}
    assert _fixpipe_tiles(lower(sched, stop_after="apply memory plan"), sched) == want


def test_kernel_structure() -> None:
    """Never m == 1 (GEMV: one valid row runs with m = 2 over a copied row), one AIC program,
    one block per bound core, K steps exact."""
    s = _s(L.gemm(1, 40, 70)).tile(16, 16, 32).split_k(16).bind(3)
    k = lower(s)
    assert k.block_dim == 3 and [p.core.value for p in k.programs] == ["AIC"]
    mmads = [i for i, _ in iter_instrs(k.programs[0].body) if i.op == "mmad"]
    assert mmads and all(i.attr("m") == 2 for i in mmads)
    assert {i.attr("n") for i in mmads} == {16, 8}  # the valid columns (40 = 2 * 16 + 8)
    assert sorted({i.attr("k") for i in mmads}) == [6, 16]  # 70 = 2 * 32 + 6: L0 steps of 16
    fix = [i for i, _ in iter_instrs(k.programs[0].body) if i.op == "fixpipe"]
    assert {(i.attr("mSize"), i.attr("nSize")) for i in fix} == {(1, 16), (1, 8)}


def test_double_buffering_uses_both_copies() -> None:
    s = _s(L.gemm(64, 64, 256)).tile(64, 64, 64).split_k(32).buffer("l1").buffer("l0")
    k = lower(s)
    by = {b.name: b for b in k.buffers}
    assert by["a_l1"].copies == by["b_l1"].copies == by["a_l0"].copies == 2
    assert len(set(by["a_l0"].offsets)) == 2 and len(set(by["a_l1"].offsets)) == 2
    check_gemm(s)


def test_1024_cubed_once() -> None:
    s = _s(L.gemm(1024, 1024, 1024)).tile(128, 256, 256).split_k(64).buffer("l1") \
        .buffer("l0").bind(24).swizzle(4)
    check_gemm(s)  # lowering time is measured in benchmarks/compile_scaling.py, not asserted


@pytest.mark.parametrize("sched", [
    _s(L.gemm(64, 64, 256)).tile(32, 32, 64).split_k(32).buffer("l1").buffer("l0")
    .buffer("l0c"),
    _s(L.gemm(70, 50, 100)).tile(32, 32, 64).split_k(32).buffer("l1").buffer("l0").bind(3),
], ids=["double buffered", "edges, 3 cores"])
def test_every_gemm_sync_is_needed(sched: GemmSchedule) -> None:
    """Sync minimality (issue 3) on GEMM kernels: removing any inserted sync makes a race
    (with edges, in the kernel that takes its template's syncs)."""
    rep = sync_minimality(sched)
    assert rep.needed > 0 and rep.removable == (), str(rep)


@pytest.mark.slow  # g++ build and run
@pytest.mark.parametrize("name", ["int8 A^T", "batched, shared B^T", "17 x 300 x 33"])
def test_through_the_emitted_cpp(name: str) -> None:
    """The whole ladder (ascendsched check): emitted C++ built with g++ and run equals numpy,
    its trace equals the IR's and is race-free."""
    sched = dict(CASES)[name]
    bad = [str(v) for v in check(sched) if not v.ok]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("trans_b,dtype", [(False, "float16"), (True, "float16"),
                                           (False, "int8"), (True, "int8")])
def test_mmad_reads_only_loaded_rows_and_columns(trans_b: bool, dtype: str) -> None:
    # Edge tiles pass Mmad the valid m and n (asc-devkit docs Mmad.md:285-287: the rest of a
    # fractal is ignored), so it never reads L1 rows no copy wrote (Mmad.md:329: NaN inputs may
    # raise an execution error); the simulator rejects such a read. One valid row: m = 2 over
    # a copied row (m == 1 is GEMV). int8 B (K, N): n is the 32-column round-up (Nd2Nz zeros).
    out = "int32" if dtype == "int8" else "float32"
    sched = _s(L.gemm(65, 40, 64, dtype, out, trans_b=trans_b)).tile(32, 32, 64).split_k(32)
    k = lower(sched)
    instrs = [ins for ins, _ in iter_instrs(k.programs[0].body)]
    mn = {(ins.attr("m"), ins.attr("n")) for ins in instrs if ins.op == "mmad"}
    n_edge = 32 if dtype == "int8" and not trans_b else 8
    assert mn == {(32, 32), (32, n_edge), (2, 32), (2, n_edge)}
    twice = [ins for ins in instrs if ins.op == "copy_gm_l1" and ins.attr("ndNum") == 2]
    assert len(twice) == 2 and all(ins.attr("nValue") == 1 for ins in twice)  # A's 1-row tiles
    check_gemm(sched)
