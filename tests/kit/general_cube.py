"""The general-``Schedule`` spelling of a ``GemmSchedule``, written through the public, checked
``Schedule`` methods (split, tensorize, cache_read, ...) from the GEMM schedule's resolved
tiling: the two must lower to the same kernel (issue 13)."""

from __future__ import annotations

from dataclasses import replace

from ascendsched.algo.algorithm import Algorithm
from ascendsched.algo.gemm_epilogue import is_matmul_stage
from ascendsched.lower.ir import Kernel, format_kernel
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.schedule import Schedule


def issue_example(algo: Algorithm) -> tuple[Schedule, GemmSchedule]:
    """The issue's example GEMM schedule (128 x 256 x 256 tiles, K step 64, double buffered,
    24 cores, swizzle 4 along m), written generally and as a GemmSchedule."""
    s = (Schedule(algo).tile("C", ("i", "j"), (128, 256)).split("C", "k", 256)
         .split("C", "k_i", 64).tensorize("C", "k_i_i", "mmad")
         .cache_read("A", "L1", at=("C", "k_o"), copies=2)
         .cache_read("B", "L1", at=("C", "k_o"), copies=2)
         .cache_read("A", "L0A", at=("C", "k_i_o"), copies=2)
         .cache_read("B", "L0B", at=("C", "k_i_o"), copies=2)
         .fuse("C", "i_o", "j_o").bind("C", "i_o_j_o", 24).swizzle("C", "i_o_j_o", 4, "i"))
    g = (GemmSchedule(algo).tile(128, 256, 256).split_k(64).buffer("l1", 2).buffer("l0", 2)
         .bind(24).swizzle(4, "m"))
    return s, g


def general_spelling(g: GemmSchedule) -> Schedule:
    algo = g.algo
    c = next(t for t in algo.stages if is_matmul_stage(t))
    axes = [a.name for a in c.op.axes]  # type: ignore[union-attr]
    i, j = axes[-2], axes[-1]
    t = g.tiling
    s = Schedule(algo, target=g.target)
    tile_loops = []
    if t.mt > 1:
        s = s.split(c.name, i, t.tm)
        tile_loops.append(f"{i}_o")
    if t.nt > 1:
        s = s.split(c.name, j, t.tn)
        tile_loops.append(f"{j}_o")
    k_loops: list[str] = []
    if t.kt > 1 or t.kk > 1:
        s = s.split(c.name, "k", t.tk)
        k_loops.append("k_o")
        if t.kk > 1:
            s = s.split(c.name, "k_i", t.k0)
            k_loops.append("k_i_o")
    inner = {0: "k", 1: "k_i", 2: "k_i_i"}[len(k_loops)]
    s = s.tensorize(c.name, inner, "mmad")
    l1 = (c.name, k_loops[0]) if k_loops else None
    l0 = (c.name, k_loops[-1]) if k_loops else None
    sp = g.spec
    s = (s.cache_read(sp.a, "L1", at=l1, copies=t.l1_copies)
         .cache_read(sp.b, "L1", at=l1, copies=t.l1_copies)
         .cache_read(sp.a, "L0A", at=l0, copies=t.l0_copies)
         .cache_read(sp.b, "L0B", at=l0, copies=t.l0_copies)
         .cache_write(c.name, "L0C", copies=t.l0c_copies))
    if g.vector_epilogue is not None:
        s = s.cache_write(c.name, "workspace", copies=g.copies("workspace"))
    if len(tile_loops) == 2:
        s = s.fuse(c.name, *tile_loops)
        tile_loops = ["_".join(tile_loops)]
    if tile_loops:
        s = s.bind(c.name, tile_loops[0], t.cores)
        s = s.swizzle(c.name, tile_loops[0], t.swizzle.width,
                      i if t.swizzle.direction == "m" else j)
    else:
        assert t.cores == 1, "no tile loop to bind"
    if g.epilogue_unit is not None:
        s = s.place(algo.outputs[0].name, g.epilogue_unit, rows=g.epilogue_rows,
                    vector_cores=g.epilogue_vector_cores)
    return s


def kernel_text(k: Kernel) -> str:
    """``format_kernel`` without the notes (they print the schedule as written)."""
    return format_kernel(replace(k, notes=()))
