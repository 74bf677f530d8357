"""Hand-built GEMM kernels in Cube (AIC) IR, for the sim, polyhedral and sync tests.

``gemm_kernel(GemmCase(...))`` writes the AIC program a GEMM lowering would produce, without
syncs: output tiles (tm x tn) spread over ``blocks`` (tile t = block_idx + blocks * i), per
tile an L1 K loop (``kl``, tile tk, ``l1_copies`` buffers) and inside it an L0 K loop (``k0``,
tile tk0, ``l0_copies`` buffers), then one fixpipe per tile (L0C ``c_copies`` buffers). Tails
of M, N and K get their own instructions under ``If`` conditions (the params are static), an
M tail of one row runs Mmad with m = 16 (never GEMV). Layouts and parameter recipes are the
ones of ``lower/cube_ops.py``'s docstring; ``trans_a`` / ``trans_b`` load A as (K, M) /
B as (N, K) from GM. ``reference`` is the numpy result with the hardware's arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ascendsched import dtypes as dt
from ascendsched.dtypes import DType
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.cube_ops import cube_c0, make_cube_instr
from ascendsched.lower.ir import BLOCK_IDX, Buffer, For, GmTensor, If, Instr, Kernel, Program, Stmt
from ascendsched.target import ASCEND_910B, CoreType, Scope

R = 16  # fractal rows
QUANT = {"float32": "NoQuant", "int32": "NoQuant", "float16": "F322F16",
         "bfloat16": "F322BF16"}


@dataclass(frozen=True)
class GemmCase:
    m: int
    n: int
    k: int
    tm: int
    tn: int
    tk: int  # L1 tile along K
    tk0: int  # L0 tile along K (divides tk)
    dtype: DType = dt.float16
    out: DType = dt.float32
    blocks: int = 1
    l1_copies: int = 1
    l0_copies: int = 1
    c_copies: int = 1
    trans_a: bool = False
    trans_b: bool = False
    name: str = "gemm"


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _up(a: int, b: int) -> int:
    return _ceil(a, b) * b


def _cases(total: int, tile: int) -> list[tuple[int, int, str]]:
    """(size, n_full, kind) of the full tiles and the tail: kind 'full' | 'tail' | 'only'."""
    n = _ceil(total, tile)
    tail = total - (n - 1) * tile
    if n == 1:
        return [(tail, 0, "only")]
    if tail == tile:
        return [(tile, n, "only")]
    return [(tile, n - 1, "full"), (tail, n - 1, "tail")]


def _guard(var: Affine, n_full: int, kind: str, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    if kind == "only":
        return body
    if kind == "full":
        return (If((Cond(var, "<", n_full),), body),)
    return (If((Cond(var, ">=", n_full),), body),)  # the tail: index n_full


def gemm_kernel(c: GemmCase) -> Kernel:
    """The AIC GEMM program for ``c`` (unsynced, unplanned)."""
    a_dt, out = c.dtype, c.out
    acc = dt.int32 if a_dt is dt.int8 else dt.float32
    c0 = cube_c0(a_dt, ASCEND_910B)
    assert c.tk % c.tk0 == 0 and c.tk0 % c0 == 0 and c.tm % R == 0 and c.tn % R == 0
    i8 = a_dt is dt.int8
    b_rows = 32 if i8 else R  # L1 row padding of B (K rows): int8 squares are 32 x 32
    ncol = 32 if i8 and not c.trans_b else R  # Mmad n padding: int8 squares give 32 columns
    mrow = 32 if i8 and c.trans_a else R  # L0A row padding: int8 A^T squares give 32 rows
    nm, nn = _ceil(c.m, c.tm), _ceil(c.n, c.tn)
    tiles = nm * nn
    iters = _ceil(tiles, c.blocks)
    i_var = Affine.of("i")
    t = Affine.of(BLOCK_IDX) + i_var * c.blocks
    bm, bn = t.floordiv(nn), t.modulo(nn)
    nk = _ceil(c.k, c.tk)
    kl = Affine.of("kl")
    k0 = Affine.of("k0")
    l1c = Affine.mod("kl", 2) if c.l1_copies == 2 else Affine()
    l0c = Affine.mod("k0", 2) if c.l0_copies == 2 else Affine()
    cc = Affine.mod("i", 2) if c.c_copies == 2 else Affine()
    # buffer sizes (elements) for the largest tile
    mp = _up(c.tm, R)
    a_l1 = (_up(c.tk, b_rows) * _up(c.tm, c0)) if c.trans_a else mp * _up(c.tk, c0)
    b_l1 = (_up(c.tn, R) * _up(c.tk, c0)) if c.trans_b else _up(c.tk, b_rows) * _up(c.tn, c0)
    a_l0 = _up(c.tm, mrow) * _up(c.tk0, c0)
    b_l0 = _up(c.tk0, c0) * _up(c.tn, ncol)
    c_l0 = mp * _up(c.tn, ncol)

    def k0_body(mc: int, ncs: int, kc: int, kc0: int, first: Affine) -> tuple[Stmt, ...]:
        """L0 loads and the Mmad for one L0 K tile of kc0 columns."""
        # one valid row: m = 2 (m == 1 is GEMV, Mmad.md:284), row 1 loaded too (kl_body)
        m_mmad = 2 if mc == 1 else mc
        rp = _up(mc, R)
        kp0 = _up(kc0, c0)
        n_mmad = _up(ncs, ncol) if ncol > R else ncs
        np_ = _up(n_mmad, R)
        kb0 = k0 * (c.tk0 // c0)  # first C0 column group of this L0 tile in the L1 tile
        f = 512 // a_dt.bytes
        out: list[Stmt] = []
        if c.trans_a and i8:  # L1 holds A^T (kc, mc) nz, rows padded to 32: 32x32 squares
            nk0, nk1 = kp0 // 32, _up(kc, 32) // 32
            t0 = k0 * (c.tk0 // 32)
            out.append(For("mg", _ceil(mc, 32), (make_cube_instr(
                "load_l0a_transpose",
                (("a_l0", Affine.of("mg") * 2 * nk0 * f, l0c, a_dt),
                 ("a_l1", (Affine.of("mg") * nk1 + t0) * 2 * f, l1c, a_dt)),
                "A^T squares -> Zz", startIndex=0, repeatTimes=nk0, srcStride=1, dstGap=0,
                dstFracGap=nk0 - 1, addrMode=0),)))
        elif c.trans_a:  # L1 holds A^T (kc, mc) nz, rows padded to 16: per 16-row block of M
            kp16 = _up(kc, R)
            out.append(For("ma", rp // R, (make_cube_instr(
                "load_l0a", (("a_l0", Affine.of("ma") * (kp0 // c0) * f, l0c, a_dt),
                             ("a_l1", (Affine.of("ma") * (kp16 // R) + kb0) * f, l1c, a_dt)),
                "A^T fractals -> Zz", startIndex=0, repeatTimes=kp0 // c0, srcStride=1, sid=0,
                dstGap=0, ifTranspose=True, addrMode=0),)))
        else:  # L1 holds A (mc, kc) nz: per 16-row block, the row of fractals
            out.append(For("ma", rp // R, (make_cube_instr(
                "load_l0a", (("a_l0", Affine.of("ma") * (kp0 // c0) * f, l0c, a_dt),
                             ("a_l1", (kb0 * (rp // R) + Affine.of("ma")) * f, l1c, a_dt)),
                "A nz -> Zz", startIndex=0, repeatTimes=kp0 // c0, srcStride=rp // R, sid=0,
                dstGap=0, ifTranspose=False, addrMode=0),)))
        if c.trans_b:  # L1 holds B^T (ncs, kc) nz == Zn order: one plain copy
            out.append(make_cube_instr(
                "load_l0b", (("b_l0", 0, l0c, a_dt), ("b_l1", kb0 * (np_ // R) * f, l1c, a_dt)),
                "B^T nz -> Zn", startIndex=0, repeatTimes=(kp0 // c0) * (np_ // R), srcStride=1,
                sid=0, dstGap=0, ifTranspose=False, addrMode=0))
        elif i8:  # 32x32 squares transposed into two Zn fractals each
            kp32 = _up(kc, 32)
            t0 = k0 * (c.tk0 // 32)
            out.append(For("kb", kp0 // 32, (make_cube_instr(
                "load_l0b_transpose",
                (("b_l0", Affine.of("kb") * (np_ // R) * f, l0c, a_dt),
                 ("b_l1", (t0 + Affine.of("kb")) * 2 * f, l1c, a_dt)),
                "B nz -> Zn (int8 squares)", startIndex=0, repeatTimes=np_ // 32,
                srcStride=kp32 // 32, dstGap=1, dstFracGap=0, addrMode=0),)))
        else:  # 16-bit B (kc, ncs) nz: per 16-row block of K, transpose each fractal
            kp16 = _up(kc, R)
            out.append(For("kb", kp0 // R, (make_cube_instr(
                "load_l0b", (("b_l0", Affine.of("kb") * (np_ // R) * f, l0c, a_dt),
                             ("b_l1", (kb0 + Affine.of("kb")) * f, l1c, a_dt)),
                "B nz -> Zn (fractal transpose)", startIndex=0, repeatTimes=np_ // R,
                srcStride=kp16 // R, sid=0, dstGap=0, ifTranspose=True, addrMode=0),)))
        out.append(make_cube_instr(
            "mmad", (("c_l0", 0, cc, acc), ("a_l0", 0, l0c, a_dt), ("b_l0", 0, l0c, a_dt)),
            "C (+)= A x B", m=m_mmad, n=n_mmad, k=kc0, unitFlag=0, kDirectionAlign=False,
            cmatrixSource=False, cmatrixInitVal=Cond(first, "==", 0)))
        return tuple(out)

    def kl_body(mc: int, ncs: int, kc: int) -> tuple[Stmt, ...]:
        """GM -> L1 copies of one L1 K tile (kc columns) and its L0 loop."""
        rp = _up(mc, R)
        row0 = bm * c.tm
        col0 = bn * c.tn
        k_off = kl * c.tk
        if c.trans_a:  # A is (K, M) in GM
            ca = make_cube_instr(
                "copy_gm_l1", (("a_l1", 0, l1c, a_dt), ("a", k_off * c.m + row0, 0, a_dt)),
                "A^T tile -> L1", ndNum=1, nValue=kc, dValue=mc, srcNdMatrixStride=0,
                srcDValue=c.m, dstNzC0Stride=_up(kc, b_rows), dstNzNStride=1,
                dstNzMatrixStride=0)
        else:
            ca = make_cube_instr(
                "copy_gm_l1", (("a_l1", 0, l1c, a_dt), ("a", row0 * c.k + k_off, 0, a_dt)),
                "A tile -> L1", ndNum=2 if mc == 1 else 1, nValue=mc, dValue=kc,
                srcNdMatrixStride=0, srcDValue=c.k, dstNzC0Stride=rp, dstNzNStride=1,
                dstNzMatrixStride=c0 if mc == 1 else 0)  # one row: twice (rows 0, 1)
        if c.trans_b:  # B is (N, K) in GM
            cb = make_cube_instr(
                "copy_gm_l1", (("b_l1", 0, l1c, a_dt), ("b", col0 * c.k + k_off, 0, a_dt)),
                "B^T tile -> L1", ndNum=1, nValue=ncs, dValue=kc, srcNdMatrixStride=0,
                srcDValue=c.k, dstNzC0Stride=_up(ncs, R), dstNzNStride=1, dstNzMatrixStride=0)
        else:
            cb = make_cube_instr(
                "copy_gm_l1", (("b_l1", 0, l1c, a_dt), ("b", k_off * c.n + col0, 0, a_dt)),
                "B tile -> L1", ndNum=1, nValue=kc, dValue=ncs, srcNdMatrixStride=0,
                srcDValue=c.n, dstNzC0Stride=_up(kc, b_rows), dstNzNStride=1,
                dstNzMatrixStride=0)
        body: list[Stmt] = [ca, cb]
        for kc0, cnt, kind in _cases(kc, c.tk0):
            body += _guard(k0, cnt, kind, k0_body(mc, ncs, kc, kc0, kl + k0))
        return (*body[:2], For("k0", _ceil(kc, c.tk0), tuple(body[2:])))

    def tile_body(mc: int, ncs: int) -> tuple[Stmt, ...]:
        body: list[Stmt] = []
        for kc, cnt, kind in _cases(c.k, c.tk):
            body += _guard(kl, cnt, kind, kl_body(mc, ncs, kc))
        rp = _up(mc if mc > 1 else R, R)
        fix = make_cube_instr(
            "fixpipe", (("c", bm * c.tm * c.n + bn * c.tn, 0, out), ("c_l0", 0, cc, acc)),
            "C tile -> GM", nSize=ncs, mSize=mc, srcStride=rp, dstStride=c.n,
            quantPre=QUANT[out.name], reluEn=False, unitFlag=0, ndNum=1, srcNdStride=0,
            dstNdStride=0)
        return (For("kl", nk, tuple(body)), fix)

    per_tile: list[Stmt] = []
    for mc, mcnt, mkind in _cases(c.m, c.tm):
        for ncs, ncnt, nkind in _cases(c.n, c.tn):
            inner = _guard(bn, ncnt, nkind, tile_body(mc, ncs))
            per_tile += _guard(bm, mcnt, mkind, inner)
    body: tuple[Stmt, ...] = tuple(per_tile)
    if tiles % c.blocks:
        body = (If((Cond(t, "<", tiles),), body),)
    a_shape = (c.k, c.m) if c.trans_a else (c.m, c.k)
    b_shape = (c.n, c.k) if c.trans_b else (c.k, c.n)
    return Kernel.build(
        name=c.name,
        params=(GmTensor("a", a_shape, a_dt), GmTensor("b", b_shape, a_dt),
                GmTensor("c", (c.m, c.n), out, "output")),
        buffers=(Buffer("a_l1", Scope.L1, a_dt, a_l1, c.l1_copies),
                 Buffer("b_l1", Scope.L1, a_dt, b_l1, c.l1_copies),
                 Buffer("a_l0", Scope.L0A, a_dt, a_l0, c.l0_copies),
                 Buffer("b_l0", Scope.L0B, a_dt, b_l0, c.l0_copies),
                 Buffer("c_l0", Scope.L0C, acc, c_l0, c.c_copies)),
        block_dim=c.blocks,
        programs=(Program(CoreType.AIC, (For("i", iters, body),)),),
        target=ASCEND_910B,
    )


def inputs(c: GemmCase, seed: int = 0, *, small_ints: bool = True) -> dict[str, np.ndarray]:
    """A and B as the kernel takes them (transposed when trans_a / trans_b).

    ``small_ints``: integers in [-4, 4], so every sum is exact and results compare bit-exactly.
    """
    rng = np.random.default_rng(seed)

    def draw(shape: tuple[int, int]) -> np.ndarray:
        if c.dtype is dt.int8:
            return rng.integers(-128, 128, shape).astype(np.int8)
        v = rng.integers(-4, 5, shape) if small_ints else rng.standard_normal(shape)
        return dt.store(c.dtype, v.astype(np.float32))

    a = draw((c.m, c.k))
    b = draw((c.k, c.n))
    return {"a": a.T.copy() if c.trans_a else a, "b": b.T.copy() if c.trans_b else b}


def reference(c: GemmCase, ins: dict[str, np.ndarray]) -> np.ndarray:
    """C = A x B with the cube's arithmetic: fp32 (int32) accumulation, then the output cast."""
    a = ins["a"].T if c.trans_a else ins["a"]
    b = ins["b"].T if c.trans_b else ins["b"]
    if c.dtype is dt.int8:
        return dt.store(c.out, a.astype(np.int64) @ b.astype(np.int64))
    acc = a.astype(np.float64) @ b.astype(np.float64)
    return dt.store(c.out, acc.astype(np.float32))


CASES: dict[str, GemmCase] = {
    # one tile, nothing divides: 33 x 47 x 70
    "fp16_single": GemmCase(33, 47, 70, 48, 48, 80, 80, name="fp16_single"),
    # K loop, L1 and L0 double buffered, K tails (150 = 64 + 64 + 22, 22 = 16 + 6), L0 split 16
    "fp16_kloop_db": GemmCase(33, 47, 150, 48, 48, 64, 16, l1_copies=2, l0_copies=2,
                              name="fp16_kloop_db"),
    # 3 blocks over 2 x 3 output tiles with M and N tails, L0C double buffered
    "fp16_blocks": GemmCase(40, 70, 48, 32, 32, 32, 16, blocks=3, l1_copies=2, l0_copies=2,
                            c_copies=2, name="fp16_blocks"),
    "bf16_out_bf16": GemmCase(33, 47, 70, 48, 48, 32, 32, dt.bfloat16, dt.bfloat16,
                              l1_copies=2, name="bf16_out_bf16"),
    "fp16_out_fp16": GemmCase(17, 31, 45, 32, 32, 48, 16, out=dt.float16, l0_copies=2,
                              name="fp16_out_fp16"),
    "int8": GemmCase(33, 47, 70, 48, 48, 64, 32, dt.int8, dt.int32, l1_copies=2,
                     l0_copies=2, name="int8"),
    "fp16_trans": GemmCase(33, 47, 70, 48, 48, 32, 16, trans_a=True, trans_b=True,
                           l0_copies=2, name="fp16_trans"),
    "m_tail_1": GemmCase(17, 20, 16, 16, 32, 16, 16, blocks=2, name="m_tail_1"),
    "int8_trans": GemmCase(40, 47, 100, 48, 48, 64, 32, dt.int8, dt.int32, trans_a=True,
                           trans_b=True, l0_copies=2, name="int8_trans"),
}


def case(name: str, **changes: object) -> GemmCase:
    return replace(CASES[name], **changes)


def instrs(k: Kernel) -> list[Instr]:
    from ascendsched.lower.ir import iter_instrs

    return [i for p in k.programs for i, _ in iter_instrs(p.body)]


def mutate(kern: Kernel, op: str, nth: int = 0, /, *, keep_dims: bool = False,
           **changes: object) -> Kernel:
    """``k`` with the params of the ``nth`` static ``op`` instruction changed; its region dims
    are re-derived from the new params unless ``keep_dims``."""
    from ascendsched.lower.ir import StmtMutator

    seen = [0]

    class _M(StmtMutator):
        def visit_Instr(self, s: Instr) -> tuple[Stmt, ...]:
            if s.op != op:
                return (s,)
            seen[0] += 1
            if seen[0] - 1 != nth:
                return (s,)
            attrs = tuple((n, changes.get(n, v)) for n, v in s.attrs)
            if keep_dims:
                return (replace(s, attrs=attrs),)
            regions = s.writes + s.reads
            operands = tuple((r.tensor, r.offset, r.copy, kern.dtype_of(r.tensor))
                             for r in regions)
            return (make_cube_instr(op, operands, s.comment, **dict(attrs)),)

    prog = kern.programs[0]
    out = kern.replace_body(prog.core, _M().visit_body(prog.body))
    assert seen[0] > nth, f"no {op} #{nth}"
    return out


def batched_kernel(batch: int = 3, m: int = 20, n: int = 24, k: int = 40,
                   copies: int = 2) -> Kernel:
    """C[b] = A[b] x B[b] (fp16 -> fp32) with one ndNum = batch Nd2Nz copy per operand, per-batch
    L0 loads and Mmads into one L0C tile per batch, and one ndNum = batch Fixpipe."""
    f16, f = dt.float16, 256
    mp, kp, np_ = _up(m, R), _up(k, R), _up(n, R)
    bt = Affine.of("bt")
    cp = Affine.mod("bt", 2) if copies == 2 else Affine()
    body: tuple[Stmt, ...] = (
        make_cube_instr("copy_gm_l1", (("a_l1", 0, 0, f16), ("a", 0, 0, f16)), "A[b] -> L1",
                        ndNum=batch, nValue=m, dValue=k, srcNdMatrixStride=m * k, srcDValue=k,
                        dstNzC0Stride=mp, dstNzNStride=1, dstNzMatrixStride=mp * kp),
        make_cube_instr("copy_gm_l1", (("b_l1", 0, 0, f16), ("b", 0, 0, f16)), "B[b] -> L1",
                        ndNum=batch, nValue=k, dValue=n, srcNdMatrixStride=k * n, srcDValue=n,
                        dstNzC0Stride=kp, dstNzNStride=1, dstNzMatrixStride=kp * np_),
        For("bt", batch, (
            For("ma", mp // R, (make_cube_instr(
                "load_l0a", (("a_l0", Affine.of("ma") * (kp // R) * f, cp, f16),
                             ("a_l1", bt * mp * kp + Affine.of("ma") * f, 0, f16)),
                startIndex=0, repeatTimes=kp // R, srcStride=mp // R, sid=0, dstGap=0,
                ifTranspose=False, addrMode=0),)),
            For("kb", kp // R, (make_cube_instr(
                "load_l0b", (("b_l0", Affine.of("kb") * (np_ // R) * f, cp, f16),
                             ("b_l1", bt * kp * np_ + Affine.of("kb") * f, 0, f16)),
                startIndex=0, repeatTimes=np_ // R, srcStride=kp // R, sid=0, dstGap=0,
                ifTranspose=True, addrMode=0),)),
            make_cube_instr("mmad", (("c_l0", bt * mp * np_, 0, dt.float32),
                                     ("a_l0", 0, cp, f16), ("b_l0", 0, cp, f16)),
                            m=m, n=n, k=k, unitFlag=0, kDirectionAlign=False,
                            cmatrixSource=False, cmatrixInitVal=True),
        )),
        make_cube_instr("fixpipe", (("c", 0, 0, dt.float32), ("c_l0", 0, 0, dt.float32)),
                        "C[b] -> GM", nSize=n, mSize=m, srcStride=mp, dstStride=n,
                        quantPre="NoQuant", reluEn=False, unitFlag=0, ndNum=batch,
                        srcNdStride=mp * np_ // (R * R), dstNdStride=m * n),
    )
    return Kernel.build(
        name="batched",
        params=(GmTensor("a", (batch, m, k), f16), GmTensor("b", (batch, k, n), f16),
                GmTensor("c", (batch, m, n), dt.float32, "output")),
        buffers=(Buffer("a_l1", Scope.L1, f16, batch * mp * kp),
                 Buffer("b_l1", Scope.L1, f16, batch * kp * np_),
                 Buffer("a_l0", Scope.L0A, f16, mp * kp, copies),
                 Buffer("b_l0", Scope.L0B, f16, kp * np_, copies),
                 Buffer("c_l0", Scope.L0C, dt.float32, batch * mp * np_)),
        block_dim=1,
        programs=(Program(CoreType.AIC, body),),
        target=ASCEND_910B,
    )


# A part with 4 event ids per HardEvent (the 910B has 6, target/ascend910b.py): GEMMs with tile
# classes and peeled tails run them out, so the event-id fallbacks get exercised.
FOUR_IDS = replace(ASCEND_910B, event_ids=(0, 1, 2, 3))
# And one with 2: since GEMM tile classes take their template's syncs (lower/sync_template.py)
# no GEMM of a scan of 400 random small schedules ran 4 ids out to a tight pair; 2 ids do.
TWO_IDS = replace(ASCEND_910B, event_ids=(0, 1))


def tight_fallback_gemm():  # noqa: ANN201 -- a GemmSchedule
    """A GEMM whose ids run out on ``TWO_IDS`` even after ping-pong pairs fell back to one
    id, so allocation makes a channel a tight pair (set immediately followed by its wait)."""
    from ascendsched.algo import library as L
    from ascendsched.schedule.gemm import GemmSchedule
    a = L.gemm(578, 67, 179, "int8", "int32")
    return GemmSchedule(a).tile(64, 32, 128).split_k(64).buffer("l1", 1).buffer(
        "l0", 1).buffer("l0c", 1).bind(3)
