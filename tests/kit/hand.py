"""Hand-planned and hand-synced fixtures (the memory and sync passes are written elsewhere).

``sync_*`` add the set/wait/barrier instructions a correct schedule needs, each with the
dependence it serves (memory plans and the sync builders are in ``tests.kit.ir``).
"""

from __future__ import annotations

from dataclasses import replace

from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import For, Instr, Kernel
from ascendsched.target import CoreType, Pipe
from tests.kit.ir import barrier, set_flag, wait_flag


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


def ops_kernel(rows: int = 16, cols: int = 20) -> Kernel:
    """One kernel exercising every other template: DataCopyPad with gaps, exp, muls, dup,
    compare (packed and per-row masks), select, casts, copy and a sum reduction.

        y1 = where(x > 1, exp(x), 0.5 x);  y = float32(float16(y1));  r = sum_j y
        z  = where(x <= 1, 0.5 x, exp(x))   (a mask with a 32-byte row stride)
    """
    from ascendsched.dtypes import float16, float32, uint8
    from ascendsched.lower.ir import Buffer, GmTensor, Program, view
    from ascendsched.target import ASCEND_910B, Scope

    P = Pipe
    ld = 32  # UB row pitch in elements (128 B for float32): DataCopyPad UB gap of 1 block
    hp = 32  # float16 pitch (64 B)

    def v(t: str, rs: int = ld, c: int = cols, cs: int = 1, r: int = rows) -> object:
        return view(t, 0, r, rs, c, cs)

    def vec(op: str, w, r, why: str, **attrs) -> Instr:
        return Instr(op, P.V, (w,), tuple(r), tuple(attrs.items()), comment=why)

    def bar(why: str) -> Instr:
        return barrier(P.V, why)

    body = (
        Instr("copy_gm_ub", P.MTE2, (v("x_ub"),), (view("x", 0, rows, cols, cols),),
              comment="load x (unaligned rows)"),
        set_flag(P.MTE2, P.V, 0, "x_ub: MTE2 write -> V read (RAW)"),
        wait_flag(P.MTE2, P.V, 0, "x_ub: MTE2 write -> V read (RAW)"),
        vec("vec_unary", v("e_ub"), [v("x_ub")], "e = exp(x)", fn="exp"),
        vec("vec_scalar", v("s_ub"), [v("x_ub")], "s = 0.5 x", fn="muls", scalar=0.5),
        vec("vec_dup", v("d_ub"), [], "d = 1", value=1.0),
        bar("d_ub: V write -> V read (RAW)"),
        vec("vec_cmp", view("m_ub", 0, rows, 8, 3), [v("x_ub"), v("d_ub")], "m = x > 1",
            fn="gt"),
        vec("vec_cmp", view("m2_ub", 0, rows, 32, 3), [v("x_ub"), v("d_ub")], "m2 = x <= 1",
            fn="le"),
        bar("m_ub, m2_ub, e_ub, s_ub: V write -> V read (RAW)"),
        vec("vec_select", v("y1_ub"), [view("m_ub", 0, rows, 8, 3), v("e_ub"), v("s_ub")],
            "y1 = m ? e : s"),
        vec("vec_select", v("z1_ub"), [view("m2_ub", 0, rows, 32, 3), v("s_ub"), v("e_ub")],
            "z1 = m2 ? s : e"),
        bar("y1_ub, z1_ub: V write -> V read (RAW)"),
        vec("vec_cast", v("h_ub", hp), [v("y1_ub")], "h = float16(y1)", round="rint"),
        vec("vec_unary", v("z_ub"), [v("z1_ub")], "z = copy(z1)", fn="copy"),
        bar("h_ub: V write -> V read (RAW)"),
        vec("vec_cast", v("y_ub"), [v("h_ub", hp)], "y = float32(h)", round="none"),
        bar("y_ub: V write -> V read (RAW)"),
        vec("vec_reduce", view("r_ub", 0, rows, 1, 1), [v("y_ub")], "r = sum_j y", fn="sum"),
        set_flag(P.V, P.MTE3, 0, "y_ub, z_ub, r_ub: V write -> MTE3 read (RAW)"),
        wait_flag(P.V, P.MTE3, 0, "y_ub, z_ub, r_ub: V write -> MTE3 read (RAW)"),
        Instr("copy_ub_gm", P.MTE3, (view("y", 0, rows, cols, cols),), (v("y_ub"),),
              comment="store y"),
        Instr("copy_ub_gm", P.MTE3, (view("z", 0, rows, cols, cols),), (v("z_ub"),),
              comment="store z"),
        Instr("copy_ub_gm", P.MTE3, (view("r", 0, 1, rows, rows),), (view("r_ub", 0, 1, rows, rows),),
              comment="store r"),
    )
    f32 = [("x_ub", float32), ("e_ub", float32), ("s_ub", float32), ("d_ub", float32),
           ("y1_ub", float32), ("z1_ub", float32), ("y_ub", float32), ("z_ub", float32)]
    buffers = [Buffer(n, Scope.UB, d, rows * ld, shape=(rows, ld)) for n, d in f32]
    buffers += [
        Buffer("h_ub", Scope.UB, float16, rows * hp, shape=(rows, hp)),
        Buffer("m_ub", Scope.UB, uint8, rows * 8, comment="packed compare mask"),
        Buffer("m2_ub", Scope.UB, uint8, rows * 32, comment="mask rows 32 B apart"),
        Buffer("r_ub", Scope.UB, float32, max(rows, 8)),
    ]
    return Kernel.build(
        name="ops",
        params=(GmTensor("x", (rows, cols), float32),
                GmTensor("y", (rows, cols), float32, "output"),
                GmTensor("z", (rows, cols), float32, "output"),
                GmTensor("r", (rows,), float32, "output")),
        buffers=tuple(buffers), block_dim=1,
        programs=(Program(CoreType.AIV, body),), target=ASCEND_910B,
    )
