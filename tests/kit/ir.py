"""Hand-built kernel IR shared by the sim, lower and emit tests: kernels written out instance by
instance (``vadd_kernel``, ``row_max_sub_kernel``, ``kernel`` for any body), the sync
instructions (``set_flag``, ``wait_flag``, ``barrier``), a hand-synced vadd and memory plans
(``hand_plan`` by hand, ``planned`` and ``memory_plan`` by the planner).

These exist so that passes can be tested before and independently of ``build_loop_nest``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ascendsched.dtypes import DType, float16, float32
from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import (
    BLOCK_IDX,
    Buffer,
    For,
    GmTensor,
    Instr,
    Kernel,
    Program,
    Stmt,
    view,
)
from ascendsched.lower.sync_ir import Barrier, SetFlag, WaitFlag
from ascendsched.target import ASCEND_910B, CoreType, Pipe, Scope, Target

if TYPE_CHECKING:
    from ascendsched.schedule import Schedule

P = Pipe


def vadd_kernel(n: int = 8192, tile: int = 2048, copies: int = 1, blocks: int = 1) -> Kernel:
    """z = x + y over float16[n]; each block handles tiles ``k*blocks + block_idx``.

    ``n`` must be a multiple of ``tile * blocks`` and ``tile`` a multiple of 128.
    """
    assert n % (tile * blocks) == 0 and tile % 128 == 0
    per_block = n // (tile * blocks)
    k = Affine.of("k")
    base = (k * blocks + Affine.of(BLOCK_IDX)) * tile
    cp = Affine.mod("k", 2) if copies == 2 else Affine()
    rows = tile // 128

    def load(src: str, dst: str) -> Instr:
        return Instr("copy_gm_ub", Pipe.MTE2, (view(dst, 0, 1, tile, tile, copy=cp),),
                     (view(src, base, 1, n, tile),), comment=f"load {src} tile")

    body = (
        load("x", "x_ub"),
        load("y", "y_ub"),
        Instr("vec_binary", Pipe.V, (view("z_ub", 0, rows, 128, 128, copy=cp),),
              (view("x_ub", 0, rows, 128, 128, copy=cp), view("y_ub", 0, rows, 128, 128, copy=cp)),
              (("fn", "add"),), comment="z = x + y"),
        Instr("copy_ub_gm", Pipe.MTE3, (view("z", base, 1, n, tile),),
              (view("z_ub", 0, 1, tile, tile, copy=cp),), comment="store z tile"),
    )
    return Kernel.build(
        name="vadd",
        params=(GmTensor("x", (n,), float16), GmTensor("y", (n,), float16),
                GmTensor("z", (n,), float16, "output")),
        buffers=tuple(Buffer(b, Scope.UB, float16, tile, copies) for b in ("x_ub", "y_ub", "z_ub")),
        block_dim=blocks,
        programs=(Program(CoreType.AIV, (For("k", per_block, body, comment="tiles of this block"),)),),
        target=ASCEND_910B,
    )


def row_max_sub_kernel(rows: int = 16, cols: int = 64) -> Kernel:
    """y[i, j] = x[i, j] - max_j x[i, j] over float32[rows, cols], one tile of all rows.

    Exercises vec_reduce, vec_brcb and a block-broadcast operand (column stride 0).
    ``cols`` <= 64 (one fp32 repeat per row), ``rows`` a multiple of 8, <= 255.
    """
    assert cols <= 64 and rows % 8 == 0 and rows <= 255 and cols % 8 == 0
    body = (
        Instr("copy_gm_ub", Pipe.MTE2, (view("x_ub", 0, rows, cols, cols),),
              (view("x", 0, rows, cols, cols),), comment="load x"),
        Instr("vec_reduce", Pipe.V, (view("m_ub", 0, rows, 1, 1),),
              (view("x_ub", 0, rows, cols, cols),), (("fn", "max"),), comment="m = max_j x"),
        Instr("vec_brcb", Pipe.V, (view("mb_ub", 0, rows, 8, 8),), (view("m_ub", 0, rows, 1, 1),),
              comment="broadcast m to one block per row"),
        Instr("vec_binary", Pipe.V, (view("y_ub", 0, rows, cols, cols),),
              (view("x_ub", 0, rows, cols, cols), view("mb_ub", 0, rows, 8, cols, 0)),
              (("fn", "sub"),), comment="y = x - m"),
        Instr("copy_ub_gm", Pipe.MTE3, (view("y", 0, rows, cols, cols),),
              (view("y_ub", 0, rows, cols, cols),), comment="store y"),
    )
    return Kernel.build(
        name="row_max_sub",
        params=(GmTensor("x", (rows, cols), float32), GmTensor("y", (rows, cols), float32, "output")),
        buffers=(
            Buffer("x_ub", Scope.UB, float32, rows * cols),
            Buffer("m_ub", Scope.UB, float32, max(rows, 8)),
            Buffer("mb_ub", Scope.UB, float32, rows * 8),
            Buffer("y_ub", Scope.UB, float32, rows * cols),
        ),
        block_dim=1,
        programs=(Program(CoreType.AIV, body),),
        target=ASCEND_910B,
    )


def kernel(params: list[tuple[str, tuple[int, ...], DType, str]],
           buffers: list[tuple[str, DType, int]], body: tuple[Stmt, ...], *,
           blocks: int = 1, name: str = "t") -> Kernel:
    """An AIV kernel from (name, shape, dtype, kind) params and (name, dtype, elems) buffers."""
    return Kernel.build(
        name=name,
        params=tuple(GmTensor(n, s, d, k) for n, s, d, k in params),
        buffers=tuple(Buffer(n, Scope.UB, d, e) for n, d, e in buffers),
        block_dim=blocks,
        programs=(Program(CoreType.AIV, body),),
        target=ASCEND_910B,
    )


def set_flag(src: Pipe, dst: Pipe, eid: int | Affine = 0, comment: str = "") -> SetFlag:
    return SetFlag(src, dst=dst, event_id=Affine.of(eid), comment=comment)


def wait_flag(src: Pipe, dst: Pipe, eid: int | Affine = 0, comment: str = "") -> WaitFlag:
    return WaitFlag(dst, src=src, event_id=Affine.of(eid), comment=comment)


def barrier(pipe: Pipe, comment: str = "") -> Barrier:
    return Barrier(pipe, comment=comment)


def synced_vadd(n: int = 8192, tile: int = 2048, copies: int = 1, blocks: int = 1) -> Kernel:
    """``vadd_kernel`` with hand-placed flags: ping-pong ids per buffer copy, prologue sets and
    epilogue waits so that every set pairs with a wait."""
    k = vadd_kernel(n, tile, copies, blocks)
    (loop,) = k.programs[0].body
    load_x, load_y, add, store = loop.body
    ids = (0, 1) if copies == 2 else (0,)
    eid = Affine.mod("k", 2) if copies == 2 else Affine()
    body = (
        wait_flag(P.V, P.MTE2, eid, "x/y_ub free"),
        load_x, load_y,
        set_flag(P.MTE2, P.V, eid, "x/y_ub loaded"),
        wait_flag(P.MTE2, P.V, eid),
        wait_flag(P.MTE3, P.V, eid, "z_ub free"),
        add,
        set_flag(P.V, P.MTE2, eid),
        set_flag(P.V, P.MTE3, eid, "z_ub computed"),
        wait_flag(P.V, P.MTE3, eid),
        store,
        set_flag(P.MTE3, P.V, eid),
    )
    pro = tuple(s for i in ids for s in (set_flag(P.V, P.MTE2, i), set_flag(P.MTE3, P.V, i)))
    epi = tuple(s for i in ids for s in (wait_flag(P.V, P.MTE2, i), wait_flag(P.MTE3, P.V, i)))
    prog = (*pro, For("k", loop.extent, body, loop.comment), *epi)
    return k.with_programs((Program(CoreType.AIV, prog),))


def hand_plan(k: Kernel, offsets: dict[str, tuple[int, ...]] | None = None, *,
              align: int = 32) -> Kernel:
    """``k`` with a hand-made memory plan: the given byte offset per buffer copy, or (no
    ``offsets``) every copy packed one after another at ``align``-byte boundaries."""
    if offsets is None:
        offsets, cursor = {}, 0
        for b in k.buffers:
            offsets[b.name] = tuple(cursor + c * -(-b.nbytes // align) * align
                                    for c in range(b.copies))
            cursor += b.copies * -(-b.nbytes // align) * align
    return replace(k, buffers=tuple(replace(b, offsets=offsets[b.name]) for b in k.buffers))


def planned(k: Kernel, target: Target | None = None) -> Kernel:
    """``k`` with the memory planner's plan applied (lifetimes, plan_memory, apply_memory_plan)."""
    from ascendsched.lower.apply_memory_plan import apply_memory_plan
    from ascendsched.lower.lifetimes import buffer_lifetimes
    from ascendsched.lower.plan_memory import plan_memory

    return apply_memory_plan(k, plan_memory(k, buffer_lifetimes(k), target or k.target))


def memory_plan(s: Schedule, target: Target | None = None):  # noqa: ANN201 -- (lifetimes, MemoryPlan)
    """The buffer lifetimes and memory plan of ``build_loop_nest(s, target)`` (no warnings)."""
    from ascendsched.lower.build_loop_nest import build_loop_nest
    from ascendsched.lower.lifetimes import buffer_lifetimes
    from ascendsched.lower.plan_memory import plan_memory

    k = build_loop_nest(s, target)
    lt = buffer_lifetimes(k)
    return lt, plan_memory(k, lt, target or s.target, warn=False)
