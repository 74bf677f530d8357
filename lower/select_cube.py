"""Cube instruction selection: one output tile of a GEMM -> its copies, loads, Mmads and
Fixpipe (a mixin of ``build_gemm``'s builder, which makes the tile loops; ``build_mixed``
overrides the Fixpipe to write a workspace slot instead).

Per output tile (``m x n``, coordinates from the persistent loop and the swizzle)::

    for kt in 0..K/k:                                   # L1 K steps (the K tail peeled)
      [MTE2] copy_gm_l1  a_l1 <- A tile   (Nd2Nz)        # only the valid rows/columns
      [MTE2] copy_gm_l1  b_l1 <- B tile
      for kk in 0..k/k0:                                # L0 K steps
        [MTE1] load_l0a  a_l0 <- a_l1     (LoadData, per 16-row block: nz -> Zz)
        [MTE1] load_l0b  b_l0 <- b_l1     (nz -> Zn)
        [M]    mmad      c_l0 <- a_l0, b_l0   cmatrixInitVal = (first K step)
    [FIX] fixpipe C tile <- c_l0          (NZ -> ND, f32 -> f16/bf16, valid region only)

Epilogue (algo/gemm_spec.py ``Epilogue``): a bias vector goes per tile GM -> L1 (one Nd2Nz row)
-> bias table (``copy_l1_bt``) before the K loop, and the tile's first K step runs
``mmad_bias`` (C = A x B + bias); ReLU is the Fixpipe's ``reluEn``. A per-column dequantisation
scale (int32 -> float16, Fixpipe VDEQF16) is a GM tensor of uint64 quant words that the host
converts from the user's float32 scale before launch (``lower/fixpipe_quant.py``, as
aclnnTransQuantParam does); after the K loop each tile copies its columns' words GM -> L1
(``copy_gm_l1_cont``, into ``quant_l1``, one copy per L0C copy) and ``fixpipe_quant`` reads them,
so the sync analysis derives the MTE2 -> FIX and FIX -> MTE2 flags. Stages the epilogue absorbs
are never stored: the kernel's GM tensors are A, B, the epilogue's vectors and the output.

Padding (lower/cube_ops.py): tiles are whole fractals on chip, but Mmad reads only what the
copies loaded: its m and n are the tile's valid rows and columns (``_mmad_mn``) and k the exact K
of each step; the rest of a fractal is ignored (asc-devkit docs Mmad.md:285-287). L1 bytes no
copy wrote (rows of an edge tile beyond the valid ones) would be stale or, on a core's first
tile, never written, possibly NaN, which may raise an execution error (Mmad.md:329); the
simulator and the CPU runtime fail an Mmad that reads them. catlass passes m, n rounded up from
the valid region the same way (block_mmad_pingpong.hpp:193-194). Exceptions, still reading only
loaded bytes: m == 1 would switch the Cube to GEMV (Mmad.md:284), so m = 2 and a non-transposed
A copies its one row twice (Nd2Nz ndNum = 2 with a zero source stride); int8 B (K, N) goes
through 32 x 32 squares, so its n is the 32-column round-up, which Nd2Nz fills with zeros. The
L0B (Zn) and L0C (Nz) layouts follow Mmad's padded n and m (Np, Mp), so the loads of B and the
Fixpipe (srcStride = Mp) take the tile class's sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ascendsched import dtypes as dt
from ascendsched.algo.gemm_spec import GemmSpec
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.cube_l0_loads import L0Loads, round_up
from ascendsched.lower.cube_ops import make_cube_instr
from ascendsched.lower.fixpipe_quant import padded_words
from ascendsched.lower.ir import For, If, Instr, Stmt
from ascendsched.schedule.gemm_records import GemmTiling
from ascendsched.target import Target


@dataclass(frozen=True)
class Tile:
    """Coordinates of the tile being generated (affine in block_idx and the loop vars)."""

    b: Affine
    mi: Affine
    ni: Affine
    t: Affine  # persistent-loop iteration (for buffer copy counters)
    mv: int = 0  # valid rows and columns of this tile version
    nv: int = 0


class CubeTile(L0Loads):
    """The tile-body methods; the builder provides the plan's facts below."""

    sp: GemmSpec
    t: GemmTiling
    target: Target
    bias: str | None  # the bias vector's GM tensor (mmad_bias on a tile's first K step)
    scale: str | None  # the per-column quant words' GM tensor (fixpipe_quant)
    quant: str  # the Fixpipe's quantPre
    k_full: int  # full L1 K steps
    k_tail: int  # K of the peeled last L1 step (0: none)
    steps: list[int]  # L0 K steps of each L1 K step
    steps_per_tile: int  # L0 steps a tile numbers its L0 copies over

    def _tile_body(self, tile: Tile) -> list[Stmt]:
        t = self.t
        body: list[Stmt] = []
        ccopy = _mod2(tile.t) if t.l0c_copies == 2 else Affine()
        if self.bias is not None:
            body.extend(self._bias(tile))
        if self.k_full > 1:
            inner = self._l1_step(tile, Affine.of("kt"), t.tk, ccopy)
            body.append(For("kt", self.k_full, tuple(inner), f"L1 K steps of {t.tk}"))
        elif self.k_full == 1:
            body.extend(self._l1_step(tile, Affine(), t.tk, ccopy))
        if self.k_tail:
            body.extend(self._l1_step(tile, Affine(self.k_full), self.k_tail, ccopy))
        body.extend(self._fixpipe(tile, ccopy))
        return body

    def _l1_step(self, tile: Tile, kt: Affine, kv: int, ccopy: Affine) -> list[Stmt]:
        """One L1 K step of ``kv`` valid K (kt: its index, affine)."""
        t = self.t
        l1_counter = tile.t * len(self.steps) + kt
        l1copy = _mod2(l1_counter) if t.l1_copies == 2 else Affine()
        out: list[Stmt] = []
        out.extend(self._copy_a(tile, kt, kv, l1copy))
        out.extend(self._copy_b(tile, kt, kv, l1copy))
        nfull, krem = kv // t.k0, kv % t.k0
        first_step = tile.t * self.steps_per_tile + kt * t.kk  # kt < k_full here, or the tail
        if nfull > 1:
            kk = Affine.of("kk")
            steps = self._l0_step(tile, kt, kk, t.k0, first_step + kk, l1copy, ccopy)
            out.append(For("kk", nfull, tuple(steps), f"L0 K steps of {t.k0}"))
        elif nfull == 1:
            out.extend(self._l0_step(tile, kt, Affine(), t.k0, first_step, l1copy, ccopy))
        if krem:
            out.extend(self._l0_step(tile, kt, Affine(nfull), krem, first_step + nfull,
                                     l1copy, ccopy))
        return out

    def _l0_step(self, tile: Tile, kt: Affine, kk: Affine, ks: int, step: Affine,
                 l1copy: Affine, ccopy: Affine) -> list[Stmt]:
        """Loads of one L0 K step (``ks`` valid K at L1 column ``kk * k0``) and its Mmad."""
        t, sp = self.t, self.sp
        l0copy = _mod2(step) if t.l0_copies == 2 else Affine()
        m, n = self._mmad_mn(tile)
        out = (self._load_a(kk, ks, m, l1copy, l0copy)
               + self._load_b(kk, ks, round_up(n, self.rows), l1copy, l0copy))
        first = (step - tile.t * self.steps_per_tile)  # K step within the tile
        # over the L1 and L0 K loops: a step of the K tail's loop is never the first
        lo, hi = first.bounds({"kt": (0, max(self.k_full - 1, 0)), "kk": (0, t.kk - 1)})
        init: bool | Cond = True if hi == 0 else False if lo >= 1 else Cond(first, "==", 0)
        ops = (("c_l0", 0, ccopy, sp.acc_dtype), ("a_l0", 0, l0copy, sp.in_dtype),
               ("b_l0", 0, l0copy, sp.in_dtype))
        if self.bias is None:
            note = ("C = A x B" if init is True else "C += A x B" if init is False
                    else "C = A x B on the first K step, C += A x B after")
            out.append(make_cube_instr(
                "mmad", ops, target=self.target, comment=note, m=m, n=n, k=ks, unitFlag=0,
                kDirectionAlign=False, cmatrixSource=False, cmatrixInitVal=init))
            return out
        with_bias = make_cube_instr(
            "mmad_bias", ops + (("bias_bt", 0, 0, sp.acc_dtype),), target=self.target,
            comment="C = A x B + bias on the first K step", m=m, n=n, k=ks, unitFlag=0,
            kDirectionAlign=False, cmatrixSource=True, cmatrixInitVal=False)
        acc = make_cube_instr(
            "mmad", ops, target=self.target, comment="C += A x B", m=m, n=n, k=ks, unitFlag=0,
            kDirectionAlign=False, cmatrixSource=False, cmatrixInitVal=False)
        if isinstance(init, bool):
            out.append(with_bias if init else acc)
        else:  # the first step inside a K loop: the bias Mmad on it, accumulation after
            out.append(If((init,), (with_bias,), "first K step: C = A x B + bias"))
            out.append(If((Cond(first, ">=", 1),), (acc,), "later K steps: C += A x B"))
        return out

    def _bias(self, tile: Tile) -> list[Stmt]:
        """The tile's bias columns GM -> L1 (one ND row through Nd2Nz: contiguous, the 32 B
        round-up zeroed; docs example data_copy_gm2l1 CopyInBias, since DataCopyPad has no
        GM -> L1 path) -> bias table (whole 64 B blocks covering Mmad's n rounded to 16)."""
        acc = self.sp.acc_dtype
        assert self.bias is not None
        np_ = round_up(self._mmad_mn(tile)[1], self.rows)
        unit = self.target.bias_block_bytes
        return [
            make_cube_instr(
                "copy_gm_l1", (("bias_l1", 0, 0, acc), (self.bias, tile.ni * self.t.tn, 0, acc)),
                comment=f"bias[{tile.nv}] -> L1 (one ND row)", target=self.target, ndNum=1,
                nValue=1, dValue=tile.nv, srcNdMatrixStride=0, srcDValue=tile.nv,
                dstNzC0Stride=1, dstNzNStride=1, dstNzMatrixStride=0),
            make_cube_instr(
                "copy_l1_bt", (("bias_bt", 0, 0, acc), ("bias_l1", 0, 0, acc)),
                comment=f"bias[{np_}] -> bias table", target=self.target, blockCount=1,
                blockLen=-(-np_ * acc.bytes // unit), srcStride=0, dstStride=0)]

    def _mmad_mn(self, tile: Tile) -> tuple[int, int]:
        """Mmad's m and n for ``tile``: its valid rows and columns (module docstring), except
        m = 2 for one valid row (m == 1 is GEMV mode, Mmad.md:284; _copy_a loads a second row)
        and the 32-column round-up of an int8 B (K, N) (its Zn layout comes from 32 x 32
        squares; Nd2Nz zero-fills the round-up, DataCopy_GMToL1_ND2NZ.md)."""
        m = max(tile.mv, 2)
        n = tile.nv
        if self.int8 and not self.sp.trans_b:
            n = round_up(n, self.c0)
        return m, n

    # ----------------------------------------------------------------- GM -> L1 (Nd2Nz)
    def _copy_a(self, tile: Tile, kt: Affine, kv: int, l1copy: Affine) -> list[Stmt]:
        sp, t = self.sp, self.t
        batch = tile.b * (sp.m * sp.k)
        if sp.trans_a:  # GM (K, M): rows k, columns m; L1 (K, M) nz with tk rows
            off = batch + kt * (t.tk * sp.m) + tile.mi * t.tm
            return [self._nd2nz("a_l1", sp.a, off, l1copy, kv, tile.mv, sp.m, t.tk,
                                f"A^T tile {kv} x {tile.mv}")]
        off = batch + tile.mi * (t.tm * sp.k) + kt * t.tk
        if tile.mv == 1:  # Mmad takes m = 2 (_mmad_mn): L1 row 1 repeats row 0 (ND matrix 1)
            return [self._nd2nz("a_l1", sp.a, off, l1copy, 1, kv, sp.k, t.tm,
                                f"A tile 1 x {kv}, twice (rows 0 and 1: Mmad m = 2, not GEMV)",
                                nd_num=2)]
        return [self._nd2nz("a_l1", sp.a, off, l1copy, tile.mv, kv, sp.k, t.tm,
                            f"A tile {tile.mv} x {kv}")]

    def _copy_b(self, tile: Tile, kt: Affine, kv: int, l1copy: Affine) -> list[Stmt]:
        sp, t = self.sp, self.t
        batch = tile.b * (sp.n * sp.k) if sp.b_batched else Affine()
        if sp.trans_b:  # GM (N, K): rows n, columns k; L1 (N, K) nz with tn rows
            off = batch + tile.ni * (t.tn * sp.k) + kt * t.tk
            return [self._nd2nz("b_l1", sp.b, off, l1copy, tile.nv, kv, sp.k, t.tn,
                                f"B^T tile {tile.nv} x {kv}")]
        off = batch + kt * (t.tk * sp.n) + tile.ni * t.tn
        return [self._nd2nz("b_l1", sp.b, off, l1copy, kv, tile.nv, sp.n, t.tk,
                            f"B tile {kv} x {tile.nv}")]

    def _nd2nz(self, l1: str, gm: str, off: Affine, l1copy: Affine, rows: int, cols: int,
               src_cols: int, l1_rows: int, what: str, nd_num: int = 1) -> Instr:
        """GM row-major ``rows x cols`` (row length ``src_cols``) -> L1 nz with ``l1_rows``
        rows per column group (Nd2NzParams: lower/cube_ops.py ``copy_gm_l1``). ``nd_num`` > 1
        copies the same rows again below them (ND matrix i at L1 row ``i * rows``)."""
        d = self.sp.in_dtype
        return make_cube_instr(
            "copy_gm_l1", ((l1, 0, l1copy, d), (gm, off, 0, d)), comment=what, target=self.target,
            ndNum=nd_num, nValue=rows, dValue=cols, srcNdMatrixStride=0, srcDValue=src_cols,
            dstNzC0Stride=l1_rows, dstNzNStride=1,
            dstNzMatrixStride=rows * self.c0 if nd_num > 1 else 0)

    # ----------------------------------------------------------------- L0C -> GM
    def _fixpipe(self, tile: Tile, ccopy: Affine) -> list[Stmt]:
        sp, t = self.sp, self.t
        off = tile.b * (sp.m * sp.n) + tile.mi * (t.tm * sp.n) + tile.ni * t.tn
        mp = round_up(self._mmad_mn(tile)[0], self.rows)  # the L0C Nz tile's rows (Mmad's Mp)
        ops: tuple = ((sp.c, off, 0, sp.out_dtype), ("c_l0", 0, ccopy, sp.acc_dtype))
        out: list[Stmt] = []
        if self.scale is not None:  # the tile's quant words GM -> L1 (whole 128 B), then VDEQF16
            words = padded_words(tile.nv, self.target)
            out.append(make_cube_instr(
                "copy_gm_l1_cont", (("quant_l1", 0, ccopy, dt.uint64),
                                    (self.scale, tile.ni * t.tn, 0, dt.uint64)),
                comment=f"quant words of columns [{tile.nv}] -> L1", target=self.target,
                count=words))
            ops += (("quant_l1", 0, ccopy, dt.uint64),)
        out.append(make_cube_instr(
            "fixpipe_quant" if self.scale is not None else "fixpipe", ops,
            target=self.target, comment=f"C tile {tile.mv} x {tile.nv} (NZ -> ND, {self.quant}"
            + (", ReLU)" if sp.epilogue.relu else ")"),
            nSize=tile.nv, mSize=tile.mv, srcStride=mp, dstStride=sp.n, quantPre=self.quant,
            reluEn=sp.epilogue.relu, unitFlag=0, ndNum=1, srcNdStride=0, dstNdStride=0))
        return out


def _mod2(e: Affine) -> Affine:
    """``e mod 2`` for a counter of plain loop variables, with coefficients reduced mod 2 so
    ``(2*t + kt) mod 2`` becomes ``kt mod 2`` (simpler isl sets, same value)."""
    if e.mods or e.divs:
        return e.modulo(2)
    terms = tuple((v, c % 2) for v, c in e.terms if c % 2)
    r = Affine(e.const % 2, terms)
    if not terms:
        return r
    if len(terms) == 1 and r.const == 0:
        return Affine.mod(terms[0][0], 2)
    return r.modulo(2)
