"""The library vector kernels under their default and hand-written schedules (shared by the
e2e tests), with each case's lowered kernel cached for the whole test session."""

from __future__ import annotations

from functools import cache

from ascendsched.algo import library as L
from ascendsched.lower.ir import Kernel
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import Schedule


def _fused(s: Schedule, stages, consumer: str, loop: str) -> Schedule:
    for st in stages:
        s = s.compute_at(st, consumer, loop)
    return s


def _schedules():
    yield "vadd", "default", schedule_for(L.vadd(8192))
    a = L.vadd(10000)
    yield "vadd", "tail+2cores+db", Schedule(a).split("z", "i", 2048).bind("z", "i_o", 2) \
        .buffer("x").buffer("y").buffer("z")
    yield "vadd", "small tiles", Schedule(L.vadd(4096)).split("z", "i", 256)
    yield "vadd", "48 cores uneven", Schedule(L.vadd(3000)).split("z", "i", 64).bind("z", "i_o", 48)

    yield "mul_add_relu", "default", schedule_for(L.fused_mul_add_relu(8192))
    a = L.fused_mul_add_relu(5000)
    yield "mul_add_relu", "db", Schedule(a).split("d", "i", 1024).buffer("a").buffer("b") \
        .buffer("c").buffer("d")
    yield "mul_add_relu", "cores", Schedule(a).split("d", "i", 512).bind("d", "i_o", 8)
    yield "mul_add_relu", "one tile", Schedule(L.fused_mul_add_relu(777))

    yield "bias_add", "default", schedule_for(L.bias_add(64, 1024))
    a = L.bias_add(37, 1000)
    yield "bias_add", "2-D tiles tails", Schedule(a).tile("y", ("i", "j"), (8, 256))
    yield "bias_add", "reordered+fused+cores", Schedule(a).tile("y", ("i", "j"), (8, 256)) \
        .reorder("y", "j_o", "i_o").fuse("y", "j_o", "i_o", fused="t").bind("y", "t", 6) \
        .buffer("x").buffer("y")
    yield "bias_add", "row tiles db", Schedule(L.bias_add(64, 4096)).split("y", "i", 2) \
        .buffer("x").buffer("y")

    fused = ("xf", "mx", "e", "s")
    yield "softmax", "default", schedule_for(L.softmax(8, 1024))
    a = L.softmax(40, 1000)
    yield "softmax", "rows 8", _fused(Schedule(a).split("y", "i", 8), fused, "y", "i_o")
    yield "softmax", "rows 3 cores 5 db", _fused(
        Schedule(a).split("y", "i", 3).bind("y", "i_o", 5).compute_inline("xf"),
        ("mx", "e", "s"), "y", "i_o").buffer("x").buffer("y")
    yield "softmax", "column tiles", _fused(Schedule(L.softmax(16, 512)).tile("y", ("i", "j"), (4, 128)),
                                            fused, "y", "j_o")

    yield "rmsnorm", "default", schedule_for(L.rmsnorm(8, 1024))
    a = L.rmsnorm(24, 1000)
    yield "rmsnorm", "rows 4", _fused(Schedule(a).split("y", "i", 4), ("xf", "ss", "r"), "y", "i_o")
    yield "rmsnorm", "rows 5 cores 3 inline", _fused(
        Schedule(a).split("y", "i", 5).bind("y", "i_o", 3).compute_inline("xf").compute_inline("r"),
        ("ss",), "y", "i_o").buffer("x").buffer("y")
    yield "rmsnorm", "one tile", _fused(Schedule(L.rmsnorm(8, 256)), ("xf", "ss", "r"), "y", "root")

    yield "layernorm", "default", schedule_for(L.layernorm(8, 1024))
    a = L.layernorm(20, 1000)
    stages = ("xf", "mean", "d", "var", "r")
    yield "layernorm", "rows 4", _fused(Schedule(a).split("y", "i", 4), stages, "y", "i_o")
    yield "layernorm", "rows 3 cores 2 db", _fused(Schedule(a).split("y", "i", 3).bind("y", "i_o", 2),
                                                   stages, "y", "i_o").buffer("x").buffer("y")
    yield "layernorm", "inline elementwise", _fused(
        Schedule(L.layernorm(8, 512)).split("y", "i", 2).compute_inline("r"),
        ("xf", "mean", "d", "var"), "y", "i_o")

    yield "column_sum", "default", schedule_for(L.column_sum(64, 1024))
    a = L.column_sum(200, 1000)
    yield "column_sum", "tiles 96 cores 3", Schedule(a).split("y", "j", 96).bind("y", "j_o", 3)
    yield "column_sum", "row chunks 48 tail db", Schedule(a).split("y", "j", 128) \
        .bind("y", "j_o", 4).split("y", "k", 48).buffer("x").buffer("y")
    yield "column_sum", "one tile", Schedule(L.column_sum(33, 256))


CASES = list(_schedules())

IDS = [f"{k}-{lab}" for k, lab, _ in CASES]


@cache
def lowered(case_id: str) -> Kernel:
    """The synced kernel of one case (lowering is the slow part; several tests need it)."""
    return lower(CASES[IDS.index(case_id)][2])
