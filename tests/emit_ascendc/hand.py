"""Hand-planned and hand-synced fixtures (the memory and sync passes are written elsewhere).

``plan`` gives every buffer copy a 32-byte-aligned offset, one after another; ``sync_*`` add the
set/wait/barrier instructions a correct schedule needs, each with the dependence it serves.
"""

from __future__ import annotations

from dataclasses import replace

from ascendsched.lower.ir import Affine, For, Instr, Kernel
from ascendsched.target import CoreType, Pipe


def plan(kernel: Kernel, align: int = 32) -> Kernel:
    cursor = 0
    buffers = []
    for b in kernel.buffers:
        offs = []
        for _ in range(b.copies):
            offs.append(cursor)
            cursor += -(-b.nbytes // align) * align
        buffers.append(replace(b, offsets=tuple(offs)))
    return replace(kernel, buffers=tuple(buffers))


def set_flag(src: Pipe, dst: Pipe, eid: Affine | int, why: str) -> Instr:
    return Instr("set_flag", src, attrs=(("dst", dst), ("event_id", Affine.of(eid))), comment=why)


def wait_flag(src: Pipe, dst: Pipe, eid: Affine | int, why: str) -> Instr:
    return Instr("wait_flag", dst, attrs=(("src", src), ("event_id", Affine.of(eid))), comment=why)


def barrier(pipe: Pipe, why: str) -> Instr:
    return Instr("barrier", pipe, comment=why)


def sync_vadd(kernel: Kernel) -> Kernel:
    """vadd_kernel: loads, add, store per tile; ids ``k % 2`` when double buffered.

    Double-buffered: ping-pong with prologue sets and epilogue waits for the WAR edges
    (V -> MTE2 on x_ub/y_ub[k%2], MTE3 -> V on z_ub[k%2]).
    """
    (loop,) = kernel.program(CoreType.AIV).body
    assert isinstance(loop, For)
    ld_x, ld_y, add, st = loop.body
    double = kernel.buffer_map["x_ub"].copies == 2
    eid = Affine.mod("k", 2) if double else Affine()
    P = Pipe
    body = (
        wait_flag(P.V, P.MTE2, eid, "x_ub/y_ub[k%2]: V read (k-2) -> MTE2 write (WAR)"),
        ld_x, ld_y,
        set_flag(P.MTE2, P.V, eid, "x_ub/y_ub[k%2]: MTE2 write -> V read (RAW)"),
        wait_flag(P.MTE2, P.V, eid, "x_ub/y_ub[k%2]: MTE2 write -> V read (RAW)"),
        wait_flag(P.MTE3, P.V, eid, "z_ub[k%2]: MTE3 read (k-2) -> V write (WAR)"),
        add,
        set_flag(P.V, P.MTE2, eid, "x_ub/y_ub[k%2]: V read -> MTE2 write (k+2) (WAR)"),
        set_flag(P.V, P.MTE3, eid, "z_ub[k%2]: V write -> MTE3 read (RAW)"),
        wait_flag(P.V, P.MTE3, eid, "z_ub[k%2]: V write -> MTE3 read (RAW)"),
        st,
        set_flag(P.MTE3, P.V, eid, "z_ub[k%2]: MTE3 read -> V write (k+2) (WAR)"),
    )
    ids = (0, 1) if double else (0,)
    pro = tuple(set_flag(P.V, P.MTE2, i, "prologue: buffers start free") for i in ids)
    pro += tuple(set_flag(P.MTE3, P.V, i, "prologue: buffers start free") for i in ids)
    epi = tuple(wait_flag(P.V, P.MTE2, i, "epilogue: drain") for i in ids)
    epi += tuple(wait_flag(P.MTE3, P.V, i, "epilogue: drain") for i in ids)
    new_loop = replace(loop, body=body, comment=loop.comment + (" (double buffered)" if double else ""))
    return kernel.replace_body(CoreType.AIV, pro + (new_loop,) + epi)


def sync_row_max_sub(kernel: Kernel) -> Kernel:
    ld, red, brcb, sub, st = kernel.program(CoreType.AIV).body
    P = Pipe
    body = (
        ld,
        set_flag(P.MTE2, P.V, 0, "x_ub: MTE2 write -> V read (RAW)"),
        wait_flag(P.MTE2, P.V, 0, "x_ub: MTE2 write -> V read (RAW)"),
        red,
        barrier(P.V, "m_ub: V write -> V read (RAW)"),
        brcb,
        barrier(P.V, "mb_ub: V write -> V read (RAW)"),
        sub,
        set_flag(P.V, P.MTE3, 0, "y_ub: V write -> MTE3 read (RAW)"),
        wait_flag(P.V, P.MTE3, 0, "y_ub: V write -> MTE3 read (RAW)"),
        st,
    )
    return kernel.replace_body(CoreType.AIV, body)
