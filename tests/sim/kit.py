"""Small kernel builders shared by the sim tests."""

from __future__ import annotations

from dataclasses import replace

from ascendsched.dtypes import DType, float16
from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import Buffer, For, GmTensor, Instr, Kernel, Program, Stmt
from ascendsched.target import ASCEND_910B, CoreType, Pipe, Scope
from tests.ir_fixtures import vadd_kernel

P = Pipe


def kernel(params: list[tuple[str, tuple[int, ...], DType, str]],
           buffers: list[tuple[str, DType, int]], body: tuple[Stmt, ...], *,
           blocks: int = 1, name: str = "t") -> Kernel:
    """An AIV kernel from (name, shape, dtype, kind) params and (name, dtype, elems) buffers."""
    return Kernel(
        name=name,
        params=tuple(GmTensor(n, s, d, k) for n, s, d, k in params),
        buffers=tuple(Buffer(n, Scope.UB, d, e) for n, d, e in buffers),
        block_dim=blocks,
        programs=(Program(CoreType.AIV, body),),
        target=ASCEND_910B,
    )


def set_flag(src: Pipe, dst: Pipe, eid: int | Affine = 0, comment: str = "") -> Instr:
    return Instr("set_flag", src, attrs=(("dst", dst), ("event_id", Affine.of(eid))),
                 comment=comment)


def wait_flag(src: Pipe, dst: Pipe, eid: int | Affine = 0, comment: str = "") -> Instr:
    return Instr("wait_flag", dst, attrs=(("src", src), ("event_id", Affine.of(eid))),
                 comment=comment)


def barrier(pipe: Pipe) -> Instr:
    return Instr("barrier", pipe)


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
    return replace(k, programs=(Program(CoreType.AIV, prog),))


def plan(k: Kernel, offsets: dict[str, tuple[int, ...]]) -> Kernel:
    """``k`` with the given byte offset per buffer copy (a hand-made memory plan)."""
    return replace(k, buffers=tuple(replace(b, offsets=offsets[b.name]) for b in k.buffers))


__all__ = ["P", "barrier", "float16", "kernel", "plan", "set_flag", "synced_vadd", "wait_flag"]
