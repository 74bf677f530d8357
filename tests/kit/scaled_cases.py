"""Large instances of the library kernels and of the e2e tests' hand schedules (same tiles,
tails, cores and buffering at many more tiles): what ``check`` verifies through a reduced
instance. Each case is (kernel, label, schedule)."""

from __future__ import annotations

from ascendsched.algo import library as L
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import Schedule
from ascendsched.schedule.gemm import GemmSchedule


def _fused(s: Schedule, stages, consumer: str, loop: str) -> Schedule:
    for st in stages:
        s = s.compute_at(st, consumer, loop)
    return s


def _vector():
    for name, make in L.VECTOR_KERNELS.items():
        algo = make(4096 * 4096) if name in ("vadd", "mul_add_relu") else make(4096, 4096)
        yield name, "default 4096x4096", schedule_for(algo)
    yield "vadd", "tail+2cores+db", Schedule(L.vadd(2048 * 400 + 1808)).split("z", "i", 2048) \
        .bind("z", "i_o", 2).buffer("x").buffer("y").buffer("z")
    yield "vadd", "small tiles", Schedule(L.vadd(256 * 1001)).split("z", "i", 256)
    yield "vadd", "48 cores uneven", Schedule(L.vadd(64 * 1000 + 56)).split("z", "i", 64) \
        .bind("z", "i_o", 48)
    yield "vadd", "48 cores, one tile each", Schedule(L.vadd(3000)).split("z", "i", 64) \
        .bind("z", "i_o", 48)
    a = L.fused_mul_add_relu(1024 * 300 + 904)
    yield "mul_add_relu", "db", Schedule(a).split("d", "i", 1024).buffer("a").buffer("b") \
        .buffer("c").buffer("d")
    yield "mul_add_relu", "cores", Schedule(a).split("d", "i", 512).bind("d", "i_o", 8)
    a = L.bias_add(8 * 200 + 5, 256 * 40 + 232)
    yield "bias_add", "2-D tiles tails", Schedule(a).tile("y", ("i", "j"), (8, 256))
    yield "bias_add", "reordered+fused+cores", Schedule(a).tile("y", ("i", "j"), (8, 256)) \
        .reorder("y", "j_o", "i_o").fuse("y", "j_o", "i_o", fused="t").bind("y", "t", 6) \
        .buffer("x").buffer("y")
    yield "bias_add", "row tiles db", Schedule(L.bias_add(2 * 1000, 4096)).split("y", "i", 2) \
        .buffer("x").buffer("y")
    fused = ("xf", "mx", "e", "s")
    a = L.softmax(8 * 300 + 3, 1000)
    yield "softmax", "rows 8", _fused(Schedule(a).split("y", "i", 8), fused, "y", "i_o")
    yield "softmax", "rows 3 cores 5 db", _fused(
        Schedule(a).split("y", "i", 3).bind("y", "i_o", 5).compute_inline("xf"),
        ("mx", "e", "s"), "y", "i_o").buffer("x").buffer("y")
    yield "softmax", "column tiles", _fused(
        Schedule(L.softmax(4 * 500, 512)).tile("y", ("i", "j"), (4, 128)), fused, "y", "j_o")
    a = L.rmsnorm(4 * 500 + 2, 1000)
    yield "rmsnorm", "rows 4", _fused(Schedule(a).split("y", "i", 4), ("xf", "ss", "r"), "y", "i_o")
    yield "rmsnorm", "rows 5 cores 3 inline", _fused(
        Schedule(a).split("y", "i", 5).bind("y", "i_o", 3).compute_inline("xf")
        .compute_inline("r"), ("ss",), "y", "i_o").buffer("x").buffer("y")
    a = L.layernorm(3 * 700 + 1, 1000)
    stages = ("xf", "mean", "d", "var", "r")
    yield "layernorm", "rows 4", _fused(Schedule(a).split("y", "i", 4), stages, "y", "i_o")
    yield "layernorm", "rows 3 cores 2 db", _fused(
        Schedule(a).split("y", "i", 3).bind("y", "i_o", 2), stages, "y", "i_o") \
        .buffer("x").buffer("y")


def _gemm():
    yield "gemm", "default 4096^3", schedule_for(L.gemm(4096, 4096, 4096))
    yield "gemm", "default 8192^3", schedule_for(L.gemm(8192, 8192, 8192))
    yield "gemm", "default 4096x11008x4096", schedule_for(L.gemm(4096, 11008, 4096))
    yield "gemm", "default 4000x3000x1000 (edges, K tail)", schedule_for(L.gemm(4000, 3000, 1000))
    s = GemmSchedule
    yield "gemm", "L1 + L0 + L0C double buffered, 2 cores", s(L.gemm(1920, 1616, 1456)) \
        .tile(32, 32, 48).split_k(16).buffer("l1").buffer("l0").buffer("l0c").bind(2)
    yield "gemm", "4 cores, swizzle m", s(L.gemm(1302, 1292, 646)).tile(32, 32, 32).split_k(16) \
        .bind(4).swizzle(2, "m").buffer("l1").buffer("l0")
    yield "gemm", "3 cores, swizzle n", s(L.gemm(1302, 1484, 646)).tile(32, 48, 64).split_k(32) \
        .bind(3).swizzle(3, "n").buffer("l0c")
    yield "gemm", "persistent on 7 cores", s(L.gemm(964, 810, 328)).tile(16, 16, 32).bind(7) \
        .buffer("l1").buffer("l0").buffer("l0c")
    yield "gemm", "A transposed", s(L.gemm(1286, 1276, 666, trans_a=True)).tile(32, 32, 64) \
        .split_k(32).bind(3)
    yield "gemm", "batched", s(L.batched_gemm(8, 648, 658, 348)).tile(32, 32, 32).split_k(16) \
        .bind(5).swizzle(2)
    yield "gemm", "int8", s(L.gemm_int8(1286, 1296, 676)).tile(32, 64, 64).split_k(32).bind(4) \
        .buffer("l0")
    yield "gemm", "17 x 300 x 33 scaled", s(L.gemm(801, 1964, 641)).tile(16, 64, 32).split_k(16) \
        .bind(5).buffer("l1").buffer("l0")


VECTOR = list(_vector())
GEMM = list(_gemm())
CASES = VECTOR + GEMM
IDS = [f"{k}-{lab}" for k, lab, _ in CASES]
