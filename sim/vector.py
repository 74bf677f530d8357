"""Semantics of the AIV ops: GM <-> UB copies, vector instructions and Cast rounding.

Each handler takes a ``_Ctx`` (``sim/machine.py``) of a verified instruction
(``lower/verify_vector.py`` checked its scopes, alignment, strides, repeats, attrs and the
target's dtype and cast tables), records the bytes it reads and writes, and computes the values
with numpy. ``VECTOR_HANDLERS`` maps each op to its handler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ascendsched import dtypes as dt
from ascendsched.dtypes import DType
from ascendsched.lower.affine import Affine
from ascendsched.sim.precision import approx_unary, tree_sum
from ascendsched.sim.trace import Interval, merge_intervals

if TYPE_CHECKING:
    from ascendsched.sim.machine import _Ctx, _Operand

__all__ = ["VECTOR_HANDLERS", "cast_values"]

_merge = merge_intervals


# --------------------------------------------------------------------------- DMA
def _dma_operands(cx: _Ctx, ub_role: str) -> tuple[_Operand, _Operand]:
    """(UB, GM) operands of a DMA: equal views and dtypes, column stride 1, the UB side on
    32 B with whole-block row strides (verified)."""
    ins = cx.ins
    if ub_role == "dst":
        return cx.operand(ins.writes[0], "dst"), cx.operand(ins.reads[0], "src")
    return cx.operand(ins.reads[0], "src"), cx.operand(ins.writes[0], "dst")


def _ub_dma_bytes(cx: _Ctx, ub: _Operand) -> list[Interval]:
    lo, hi = ub.row_bytes(cx.m.t.block_bytes, rounded=True)
    return _merge(ub.space, lo, hi)


def _copy_gm_ub(cx: _Ctx) -> None:
    ub, gm = _dma_operands(cx, "dst")
    cx.read(gm.exact_bytes())
    cx.write(_ub_dma_bytes(cx, ub))
    ub.store_raw(gm.load_raw())  # pad bytes up to the 32 B round-up stay unchanged


def _copy_ub_gm(cx: _Ctx) -> None:
    ub, gm = _dma_operands(cx, "src")
    cx.read(_ub_dma_bytes(cx, ub))
    cx.write(gm.exact_bytes())
    gm.store_raw(ub.load_raw())


# --------------------------------------------------------------------------- vector
def _load_vec(cx: _Ctx, o: _Operand) -> np.ndarray:
    """Values of a source operand, recording its trace bytes (block broadcast aware)."""
    if o.cs == 0:  # block stride 0: the hardware reads the row's whole 32 B block, as the
        # polyhedral byte rules and the C++ runtime record it (one column included)
        blk = cx.m.t.block_bytes
        lanes = min(o.cols, blk // o.eb)
        starts = o.base + (o.off + np.arange(o.rows, dtype=np.int64) * o.rs) * o.eb
        raw = o.mem[starts[:, None] + np.arange(lanes * o.eb)[None, :]]
        raw = raw.reshape(o.rows, lanes, o.eb)
        if not (raw == raw[:, :1, :]).all():
            bad = int(np.flatnonzero(~(raw == raw[:, :1, :]).all(axis=(1, 2)))[0])
            raise cx.fail(f"block-broadcast {o.role} {o.tensor}: row {bad}'s 32 B block does not "
                          f"hold one value in its first {lanes} lanes (write it with vec_brcb)")
        cx.read(_merge(o.space, starts, starts + blk))
        return o.load()
    cx.read(o.exact_bytes())
    return o.load()


def _store_vec(cx: _Ctx, o: _Operand, values: np.ndarray) -> None:
    cx.write(o.exact_bytes())
    o.store(values)


def _compute_in(dtype: DType, *values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Values in the type the arithmetic is done in (ints widen; the store wraps)."""
    if dtype.is_float:
        return tuple(np.asarray(v, dtype=dtype.np) for v in values)
    return tuple(np.asarray(v, dtype=np.int64) for v in values)


_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "max": np.maximum, "min": np.minimum,
}


def _vec_binary(cx: _Ctx) -> None:
    fn = str(cx.ins.attr("fn"))
    d = cx.operand(cx.ins.writes[0], "dst")
    a, b = cx.operand(cx.ins.reads[0], "a"), cx.operand(cx.ins.reads[1], "b")
    va, vb = _compute_in(d.dtype, _load_vec(cx, a), _load_vec(cx, b))
    with np.errstate(all="ignore"):
        _store_vec(cx, d, _BINARY[fn](va, vb))


def _vec_fma(cx: _Ctx) -> None:
    """FusedMulAdd (dst = src0 * dst + src1) or MulAddDst (dst = src0 * src1 + dst). The
    product is rounded to the dtype, then the sum: the values of the Mul and Add the
    instruction replaces, so selecting it changes no result. The AscendC docs (FusedMulAdd.md,
    MulAddDst.md) give only the formula, not whether the hardware rounds once; a single
    rounding differs by at most half an ulp of the product, inside the float tolerances the
    ladder compares with. emit_ascendc/runtime/kernel_operator.h rounds the same way."""
    fn = str(cx.ins.attr("fn"))
    d = cx.operand(cx.ins.writes[0], "dst")
    old = cx.operand(cx.ins.reads[0], "dst")
    a, b = cx.operand(cx.ins.reads[1], "src0"), cx.operand(cx.ins.reads[2], "src1")
    vd, va, vb = _compute_in(d.dtype, _load_vec(cx, old), _load_vec(cx, a), _load_vec(cx, b))
    with np.errstate(all="ignore"):
        if fn == "fused_mul_add":
            prod, addend = _compute_in(d.dtype, np.multiply(va, vd), vb)
        else:
            prod, addend = _compute_in(d.dtype, np.multiply(va, vb), vd)
        _store_vec(cx, d, np.add(prod, addend))


def _rsqrt(v: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(v.astype(np.float64))


_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp, "ln": np.log, "sqrt": np.sqrt, "rsqrt": _rsqrt,
    "reciprocal": lambda v: 1.0 / v.astype(np.float64), "abs": np.abs,
    "relu": lambda v: np.maximum(v, v.dtype.type(0)),
}


def _vec_unary(cx: _Ctx) -> None:
    fn = str(cx.ins.attr("fn"))
    d = cx.operand(cx.ins.writes[0], "dst")
    s = cx.operand(cx.ins.reads[0], "src")
    if fn == "copy":
        _load_vec(cx, s)
        cx.write(d.exact_bytes())
        raw = s.load_raw()
        if s.cols > 1 and s.cs == 0:
            raw = np.broadcast_to(raw[:, :1], raw.shape)
        d.store_raw(raw)
        return
    (v,) = _compute_in(d.dtype, _load_vec(cx, s))
    approx = approx_unary(fn, v, d.dtype, cx.m.t)  # Rsqrt/Reciprocal: sim/precision.py
    with np.errstate(all="ignore"):
        _store_vec(cx, d, _UNARY[fn](v) if approx is None else approx)


_SCALAR: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "adds": np.add, "muls": np.multiply, "maxs": np.maximum, "mins": np.minimum,
}


def _vec_scalar(cx: _Ctx) -> None:
    fn = str(cx.ins.attr("fn"))
    d = cx.operand(cx.ins.writes[0], "dst")
    s = cx.operand(cx.ins.reads[0], "src")
    scalar = cx.ins.attr("scalar")
    if isinstance(scalar, Affine):  # a value of the loop variables
        scalar = scalar.evaluate(cx.env)
    v, k = _compute_in(d.dtype, _load_vec(cx, s), dt.store(d.dtype, scalar))
    with np.errstate(all="ignore"):
        _store_vec(cx, d, _SCALAR[fn](v, k))


def _vec_dup(cx: _Ctx) -> None:
    d = cx.operand(cx.ins.writes[0], "dst")
    value = cx.ins.attr("value")
    _store_vec(cx, d, np.full(d.shape, dt.store(d.dtype, value)))


def _vec_cast(cx: _Ctx) -> None:
    mode = cx.ins.attr("round", "none")
    d = cx.operand(cx.ins.writes[0], "dst")
    s = cx.operand(cx.ins.reads[0], "src")
    _store_vec(cx, d, cast_values(_load_vec(cx, s), s.dtype, d.dtype, str(mode)))


def _vec_reduce(cx: _Ctx) -> None:
    fn = str(cx.ins.attr("fn"))
    d = cx.operand(cx.ins.writes[0], "dst")
    s = cx.operand(cx.ins.reads[0], "src")
    (v,) = _compute_in(d.dtype, _load_vec(cx, s))
    if fn == "sum":  # a binary tree per repeat, sim/precision.py
        _store_vec(cx, d, tree_sum(v))
        return
    red = {"max": np.max, "min": np.min}[fn]
    _store_vec(cx, d, red(v, axis=1, keepdims=True).astype(v.dtype))


def _vec_block_reduce(cx: _Ctx) -> None:
    """BlockReduce: each 32 B block of each repeat -> one result (a sum as a binary tree of
    adjacent pairs, docs BlockReduceSum.md)."""
    fn = str(cx.ins.attr("fn"))
    d = cx.operand(cx.ins.writes[0], "dst")
    s = cx.operand(cx.ins.reads[0], "src")
    (v,) = _compute_in(d.dtype, _load_vec(cx, s))
    rows, lanes = v.shape
    blocks = d.shape[1]
    per = v.reshape(rows * blocks, lanes // blocks)
    if fn == "sum":
        out = tree_sum(per)
    else:
        out = {"max": np.max, "min": np.min}[fn](per, axis=1, keepdims=True).astype(v.dtype)
    _store_vec(cx, d, out.reshape(rows, blocks))


def _vec_brcb(cx: _Ctx) -> None:
    d = cx.operand(cx.ins.writes[0], "dst")
    s = cx.operand(cx.ins.reads[0], "src")
    _load_vec(cx, s)
    cx.write(d.exact_bytes())
    d.store_raw(np.broadcast_to(s.load_raw(), d.shape))


_CMP: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "lt": np.less, "gt": np.greater, "le": np.less_equal, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal,
}


def _vec_cmp(cx: _Ctx) -> None:
    fn = str(cx.ins.attr("fn"))
    m = cx.operand(cx.ins.writes[0], "mask")
    a, b = cx.operand(cx.ins.reads[0], "a"), cx.operand(cx.ins.reads[1], "b")
    va, vb = _compute_in(a.dtype, _load_vec(cx, a), _load_vec(cx, b))
    with np.errstate(all="ignore"):
        bits = _CMP[fn](va, vb)
    packed = np.zeros(m.shape, dtype=np.uint8)
    p = np.packbits(bits, axis=1, bitorder="little")
    packed[:, :p.shape[1]] = p
    _store_vec(cx, m, packed)


def _vec_select(cx: _Ctx) -> None:
    d = cx.operand(cx.ins.writes[0], "dst")
    m = cx.operand(cx.ins.reads[0], "mask")
    a, b = cx.operand(cx.ins.reads[1], "a"), cx.operand(cx.ins.reads[2], "b")
    cx.read(m.exact_bytes())
    bits = np.unpackbits(m.load_raw(), axis=1, bitorder="little")[:, :d.cols].astype(bool)
    va, vb = _load_vec(cx, a), _load_vec(cx, b)
    _store_vec(cx, d, np.where(bits, va, vb))


# --------------------------------------------------------------------------- casts
_BITS = {2: (np.uint16, np.int32, 0x8000), 4: (np.uint32, np.int64, 0x80000000)}


def _step(r: np.ndarray, dtype: DType, up: bool) -> np.ndarray:
    """The next representable ``dtype`` value above (``up``) or below each value of ``r``."""
    if dtype is dt.bfloat16:
        bits = dt.bf16_bits(r.astype(np.float32))
    else:
        bits = r.astype(dtype.np).view(_BITS[dtype.bytes][0])
    ut, it, sign = _BITS[dtype.bytes]
    b = bits.astype(it)
    key = np.where(b & sign, -(b & (sign - 1)), b)  # monotone in the value; +-0 -> 0
    key = key + (1 if up else -1)
    out = np.where(key < 0, sign | -key, key).astype(ut)
    if dtype is dt.bfloat16:
        return dt.from_bf16_bits(out).astype(np.float64)
    return out.view(dtype.np).astype(np.float64)


def cast_values(v: np.ndarray, src: DType, dst: DType, mode: str) -> np.ndarray:
    """``Cast`` of values ``v`` (of ``src``) to ``dst`` storage with round mode ``mode``.

    Float targets: ``rint``/``none`` round to nearest even, ``trunc``/``floor``/``ceil`` are
    directed, ``round`` is nearest with ties away from zero; a float32 -> float32 cast rounds to
    an integer (``none`` keeps the value). Integer targets use ``dtypes.store``, saturating
    (asc-devkit docs precision_conversion.md:30).
    """
    if not dst.is_float:
        return dt.store(dst, np.asarray(v), "rint" if mode == "none" else mode, saturate=True)
    with np.errstate(over="ignore", invalid="ignore"):
        return _cast_float(np.asarray(v).astype(np.float64), src, dst, mode)


def _cast_float(x: np.ndarray, src: DType, dst: DType, mode: str) -> np.ndarray:
    if src == dst:
        if mode == "none":
            return dt.store(dst, x)
        f = {"rint": np.rint, "trunc": np.trunc, "floor": np.floor, "ceil": np.ceil,
             "round": lambda a: np.sign(a) * np.floor(np.abs(a) + 0.5)}[mode]
        return dt.store(dst, f(x))
    near = dt.store(dst, x.astype(np.float32) if dst is dt.bfloat16 else x).astype(np.float64)
    if mode in ("rint", "none"):
        return dt.store(dst, near)
    lower = np.where(near <= x, near, _step(near, dst, up=False))
    upper = np.where(near >= x, near, _step(near, dst, up=True))
    if mode == "floor":
        out = lower
    elif mode == "ceil":
        out = upper
    elif mode == "trunc":
        out = np.where(x >= 0, lower, upper)
    else:  # nearest, ties away from zero (overflow as in round-to-nearest)
        tie = (x - lower == upper - x) & np.isfinite(lower) & np.isfinite(upper)
        out = np.where(tie, np.where(x >= 0, upper, lower), near)
    out = np.where(np.isnan(x), near, out)
    return dt.store(dst, out)


VECTOR_HANDLERS: dict[str, Callable[[_Ctx], None]] = {
    "copy_gm_ub": _copy_gm_ub,
    "copy_ub_gm": _copy_ub_gm,
    "vec_binary": _vec_binary,
    "vec_fma": _vec_fma,
    "vec_unary": _vec_unary,
    "vec_scalar": _vec_scalar,
    "vec_dup": _vec_dup,
    "vec_cast": _vec_cast,
    "vec_reduce": _vec_reduce,
    "vec_block_reduce": _vec_block_reduce,
    "vec_brcb": _vec_brcb,
    "vec_cmp": _vec_cmp,
    "vec_select": _vec_select,
}
