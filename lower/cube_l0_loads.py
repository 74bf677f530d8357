"""L1 -> L0A/L0B loads of the Cube path (LoadData2D and LoadDataWithTranspose walks), a mixin
of ``build_gemm``'s builder: A slices nz -> Zz, B slices nz -> Zn, in calls whose repeatTimes
stay in the documented range (LoadData2DParams, asc-devkit ``LoadData.md``)."""

from __future__ import annotations

from ascendsched.algo.gemm_spec import GemmSpec
from ascendsched.lower.affine import Affine
from ascendsched.lower.cube_ops import make_cube_instr
from ascendsched.lower.ir import For, Stmt
from ascendsched.schedule.gemm_records import GemmTiling
from ascendsched.target import Target


class L0Loads:
    """The load methods; the builder provides the plan's facts below."""

    sp: GemmSpec
    t: GemmTiling
    target: Target
    c0: int  # K elements per fractal row (cube_c0)
    f: int  # elements per fractal
    rows: int  # rows of a fractal
    int8: bool

    def _load_a(self, kk: Affine, ks: int, m: int, l1copy: Affine, l0copy: Affine) -> list[Stmt]:
        """A slice (the 16-row blocks of Mmad's ``m`` rows x ks at L1 K offset kk*k0) -> L0A Zz
        with Kp = ks padded to C0.

        Zz puts fractal (mb, kg) at ``(mb * Kp/C0 + kg) * F``. Plain LoadData walks either one
        16-row block (repeat over kg) or one K group (repeat over mb): whichever needs fewer
        calls (lower/cube_ops.py ``load_l0a``: src step ``srcStride*F``, dst step ``(dstGap+1)*F``).
        """
        sp, t, f, c0 = self.sp, self.t, self.f, self.c0
        kp = -(-ks // c0) * c0
        ops = (("a_l0", l0copy), ("a_l1", l1copy))
        mbs, kgs = round_up(m, self.rows) // self.rows, kp // c0
        if not sp.trans_a:  # L1 (M, K) nz: fractal (mb, kg) at (kg * tm/16 + mb) * F
            base = kk * (t.k0 // c0 * t.tm * c0)
            return self._either(
                "load_l0a", ops, "A nz -> Zz", dict(ifTranspose=False),
                ("mb", mbs, lambda v: v * (kgs * f), lambda v: base + v * f, kgs,
                 t.tm // self.rows, 0),
                ("kg", kgs, lambda v: v * f, lambda v: base + v * (t.tm * c0), mbs, 1,
                 kgs - 1))
        if not self.int8:  # L1 (K, M) nz, 16-bit: fractal (kb, mb) at (mb * tk/16 + kb) * F
            base = kk * (t.k0 // self.rows * f)
            return self._either(
                "load_l0a", ops, "A^T nz -> Zz (fractal transpose)", dict(ifTranspose=True),
                ("mb", mbs, lambda v: v * (kgs * f), lambda v: base + v * (t.tk // self.rows * f),
                 kgs, 1, 0),
                ("kb", kgs, lambda v: v * f, lambda v: base + v * f, mbs, t.tk // self.rows,
                 kgs - 1))
        # int8 A^T: L1 (K, M) nz, 32 x 32 squares -> two Zz fractals each (catlass nZ -> zZ)
        sq = 2 * f
        return self._per_block(
            "mg", -(-m // c0), "load_l0a_transpose", ops,
            dst=lambda v: v * (2 * kgs * f),
            src=lambda v: v * (t.tk // c0 * sq) + kk * (t.k0 // c0 * sq),
            params=dict(startIndex=0, repeatTimes=kgs, srcStride=1, dstGap=0,
                        dstFracGap=kgs - 1, addrMode=0),
            what="int8 A^T nz -> Zz (LoadDataWithTranspose)")

    def _load_b(self, kk: Affine, ks: int, np_: int, l1copy: Affine,
                l0copy: Affine) -> list[Stmt]:
        """B slice (ks x np_ at L1 K offset kk*k0) -> L0B Zn with Kp = ks padded to C0, where
        np_ is Mmad's n padded to 16 (the tile's, or less on an N edge).

        Zn puts fractal (kg, nb) at ``(kg * np_/16 + nb) * F``.
        """
        sp, t, f, c0 = self.sp, self.t, self.f, self.c0
        kp = -(-ks // c0) * c0
        ops = (("b_l0", l0copy), ("b_l1", l1copy))
        nbs, kgs = np_ // self.rows, kp // c0
        if sp.trans_b and np_ == t.tn:  # L1 (N, K) nz is Zn already: one plain copy
            return self._chunks("load_l0b", ops, kgs * nbs, kk * (t.k0 // c0 * t.tn * c0),
                                "B^T nz -> Zn (plain)")
        if sp.trans_b:  # the first np_ rows of each K group (L1 groups hold tn rows)
            base = kk * (t.k0 // c0 * t.tn * c0)
            return self._per_block(
                "kg", kgs, "load_l0b", ops, dst=lambda v: v * (nbs * f),
                src=lambda v: base + v * (t.tn * c0), what="B^T nz -> Zn (plain, N edge)",
                params=dict(startIndex=0, repeatTimes=nbs, srcStride=1, sid=0, dstGap=0,
                            ifTranspose=False, addrMode=0))
        if not self.int8:  # L1 (K, N) nz, 16-bit: fractal (kb, nb) at (nb * tk/16 + kb) * F
            base = kk * (t.k0 // self.rows * f)
            return self._either(
                "load_l0b", ops, "B nz -> Zn (fractal transpose)", dict(ifTranspose=True),
                ("kb", kgs, lambda v: v * (nbs * f), lambda v: base + v * f, nbs,
                 t.tk // self.rows, 0),
                ("nb", nbs, lambda v: v * f, lambda v: base + v * (t.tk // self.rows * f), kgs,
                 1, nbs - 1))
        sq = 2 * f  # int8 B (K, N): per 32-row block, 32 x 32 squares (catlass SplitBTranspose)
        return self._per_block(
            "kb", kgs, "load_l0b_transpose", ops,
            dst=lambda v: v * (nbs * f),
            src=lambda v: kk * (t.k0 // c0 * sq) + v * sq,
            params=dict(startIndex=0, repeatTimes=np_ // c0, srcStride=t.tk // c0, dstGap=1,
                        dstFracGap=0, addrMode=0),
            what="int8 B nz -> Zn (LoadDataWithTranspose)")

    def _either(self, op: str, ops, what: str, extra: dict, *options) -> list[Stmt]:
        """The LoadData2D walk with the fewest calls among those whose repeatTimes is in
        range (LoadData2DParams: 1..255; a tile too big for both walks is too big for L0 and
        the memory plan says so). Each option: (loop var, calls, dst(v), src(v), repeatTimes,
        srcStride, dstGap)."""
        limit = self.target.cube_param_ranges[op]["repeatTimes"][1]
        legal = [o for o in options if o[4] <= limit] or list(options)
        var, count, dst, src, rep, stride, gap = min(legal, key=lambda o: o[1])
        return self._per_block(var, count, op, ops, dst=dst, src=src, what=what, params=dict(
            startIndex=0, repeatTimes=rep, srcStride=stride, sid=0, dstGap=gap, addrMode=0,
            **extra))

    def _per_block(self, var: str, count: int, op: str, ops, dst, src, params: dict,
                   what: str) -> list[Stmt]:
        """One load per block ``var < count`` (a loop when count > 1)."""
        v = Affine.of(var) if count > 1 else Affine()
        (dn, dc), (sn, sc) = ops
        d = self.sp.in_dtype
        ins = make_cube_instr(op, ((dn, dst(v), dc, d), (sn, src(v), sc, d)), comment=what,
                              target=self.target, **params)
        return [For(var, count, (ins,), what)] if count > 1 else [ins]

    def _chunks(self, op: str, ops, total: int, src0: Affine, what: str) -> list[Stmt]:
        """Plain fractal copy of ``total`` fractals, in calls within the repeat limit."""
        (dn, dc), (sn, sc) = ops
        dd = sd = self.sp.in_dtype
        out: list[Stmt] = []
        done = 0
        limit = self.target.cube_param_ranges[op]["repeatTimes"][1]  # LoadData2DParams
        while done < total:
            n = min(limit, total - done)
            out.append(make_cube_instr(
                op, ((dn, done * self.f, dc, dd), (sn, src0 + done * self.f, sc, sd)),
                comment=what, target=self.target, startIndex=0, repeatTimes=n, srcStride=1,
                sid=0, dstGap=0, ifTranspose=False, addrMode=0))
            done += n
        return out


def round_up(x: int, to: int) -> int:
    """``x`` rounded up to a multiple of ``to``."""
    return -(-x // to) * to
