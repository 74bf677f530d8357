"""Fused multiply-add selection: ``p * q + c`` -> one ``vec_fma`` when an operand can be the
destination.

The 910B vector unit computes ``dst = src0 * dst + src1`` (``FusedMulAdd``) and
``dst = src0 * src1 + dst`` (``MulAddDst``) in one instruction (asc-devkit @82b89a15
include/basic_api/kernel_operator_vec_binary_intf.h; docs/zh/api/SIMD-API/基础API/Memory矢量计算/
复合计算/FusedMulAdd.md, MulAddDst.md: half and float on Atlas A2). Both overwrite an operand, so
the selector uses one only when that operand is a value this expression has just computed into
a fresh temporary (or into the stage's own tile): it dies at the add, and nothing else (an
input tile, a value hoisted before the tile loops such as LayerNorm's ``float32(gamma)``) is
clobbered. ``FusedMulAdd`` is preferred (a factor of the product in place), ``MulAddDst`` takes
a computed addend. Otherwise the Mul and the Add are emitted as before.

It replaces two full passes and the V barrier between them by one pass. The pass itself is not
cheaper: with dst, src0 and src1 at three addresses a repeat reads 24 blocks from 16 UB bank
groups, two beats (FusedMulAdd.md: "只能达到一半的理论并行度"; the timing model charges the
beats, sim/costs.py). LayerNorm's ``(d * r) * gamma + beta`` before and after::

    [V] vec_binary fn=mul  y_t15 <- y_t13, y_t1_once
    barrier V
    [V] vec_binary fn=add  y_t16 <- y_t15, y_t2_once
    ->
    [V] vec_fma fn=fused_mul_add  y_t13 <- y_t13, y_t1_once, y_t2_once

The product is rounded before the sum (sim/vector.py ``_vec_fma``), so the values equal the
unfused pair's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ascendsched.algo.expr import Binary, Cast, Const, Expr, Reduce, Select, Unary

if TYPE_CHECKING:
    from ascendsched.lower.vector_instrs import Val


class _MulAdds:
    """A part of ``_ExprGen`` (lower/select_vector.py): ``value``, ``temp``, ``vec`` and the
    builder ``b`` are its."""

    def mul_add(self, e: Binary, dst: Val | None) -> Val | None:
        """``e`` (an add) as one ``vec_fma`` if it is ``p * q + c`` (either order) with an
        operand computed here; None (nothing emitted) when its shape does not allow one."""
        plan = self._fma_plan(e)
        if plan is None:
            return None
        m, c, mul_first, acc_at = plan  # acc_at: 0 = m.a, 1 = m.b, 2 = c
        first_temp = self.v.temps  # the temporaries this expression makes come after it
        exprs = (m.a, m.b, c)
        vals: list[Val | None] = [None, None, None]
        for n in ((0, 1, 2) if mul_first else (2, 0, 1)):
            # the operand to overwrite may be computed straight into the stage's tile
            vals[n] = self.value(exprs[n], dst if n == acc_at else None)
        p, q, cv = vals
        assert p is not None and q is not None and cv is not None
        acc = (p, q, cv)[acc_at]
        axes = tuple(sorted(set(p.varying()) | set(q.varying()) | set(cv.varying())))
        made = {f"{self.stage}_t{n}{self.v.suffix}"
                for n in range(first_temp + 1, self.v.temps + 1)}
        if self._dies_here(acc, axes, e, dst, made) and all(
                v.const is None for v in (p, q, cv)):
            if acc_at == 2:  # MulAddDst: dst = src0 * src1 + dst
                fn, srcs = "mul_add_dst", (p, q)
            else:  # FusedMulAdd: dst = src0 * dst + src1
                fn, srcs = "fused_mul_add", ((q if acc_at == 0 else p), cv)
            self.vec("vec_fma", acc, (acc, *srcs), fn, (("fn", fn),))
            return acc
        prod = self.binary_vals("mul", p, q, m.dtype, str(m), str(m.b), None)
        a, b = (prod, cv) if mul_first else (cv, prod)
        return self.binary_vals("add", a, b, e.dtype, str(e), str(e.b), dst)

    def _fma_plan(self, e: Binary) -> tuple[Binary, Expr, bool, int] | None:
        """(the product, the addend, product evaluated first, which of (p, q, c) is
        overwritten) or None."""
        if e.op != "add" or e.dtype.name not in self.t.vector_dtypes.get("fused_mul_add", ()):
            return None
        for m, c, first in ((e.a, e.b, True), (e.b, e.a, False)):
            if not (isinstance(m, Binary) and m.op == "mul" and m.dtype == c.dtype == e.dtype
                    and m.a.dtype == m.b.dtype == e.dtype) or any(
                    isinstance(x, Const) for x in (m.a, m.b, c)):
                continue  # a constant operand is a Muls / Adds already
            if self._computed(m.a):
                return m, c, first, 0
            if self._computed(m.b):
                return m, c, first, 1
            if self._computed(c) and e.dtype.name in self.t.vector_dtypes.get("mul_add_dst", ()):
                return m, c, first, 2
        return None

    def _computed(self, x: Expr) -> bool:
        """``x`` will be computed per tile into a buffer of its own (not a load, a constant,
        an index value or a value hoisted before the tile loops)."""
        if not isinstance(x, (Binary, Unary, Cast, Select, Reduce)):
            return False
        if self.v is not self.b.once and self.b.invariant_axes(x, self.dom, self.env) is not None:
            return False
        return True

    def _dies_here(self, acc: Val, axes: tuple[int, ...], e: Binary, dst: Val | None,
                   made: set[str]) -> bool:
        """``acc`` is a dense value over all of ``axes`` in ``e``'s dtype, in a buffer made by
        this expression (``made``: the temporaries it made; or the stage's tile the caller
        asked for): overwriting it loses nothing. (Made, not new to the kernel: a tail version
        whose temporaries share the full version's names must fuse the same way, or one name
        would stand for buffers of two dtypes.)"""
        if acc.const is not None or acc.block or acc.dtype != e.dtype or acc.varying() != axes:
            return False
        if dst is not None and acc == dst:
            return True
        kept = {v.buf for v in self.b.once_vals.values()} | {v.buf for v in self.common.values()}
        return acc.buf in made and acc.buf not in kept and acc.offset.is_const \
            and acc.offset.const == 0
