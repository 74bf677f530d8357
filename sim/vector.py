"""Semantics of the AIV ops: GM <-> UB copies, vector instructions and Cast rounding.

Each handler takes a ``_Ctx`` (``sim/machine.py``), checks the op's constraints on its operands
(UB scope, 32 B alignment, row strides in whole blocks up to ``max_rep_stride``, at most
``max_repeat`` repeats of one 256 B repeat each, the target's dtype and cast tables), records
the bytes it reads and writes, and computes the values with numpy. ``VECTOR_HANDLERS`` maps
each op to its handler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ascendsched import dtypes as dt
from ascendsched.dtypes import DType
from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import Region
from ascendsched.sim.precision import approx_unary, tree_sum
from ascendsched.sim.trace import Interval, merge_intervals
from ascendsched.target.model import Scope

if TYPE_CHECKING:
    from ascendsched.sim.machine import _Ctx, _Operand

__all__ = ["VECTOR_HANDLERS", "cast_values"]

_merge = merge_intervals


# --------------------------------------------------------------------------- DMA
def _dma_operands(cx: _Ctx, ub_role: str) -> tuple[_Operand, _Operand]:
    ins = cx.ins
    if len(ins.writes) != 1 or len(ins.reads) != 1:
        raise cx.fail("a DMA has one write and one read region")
    if ub_role == "dst":
        ub, gm = cx.operand(ins.writes[0], "dst"), cx.operand(ins.reads[0], "src")
    else:
        gm, ub = cx.operand(ins.writes[0], "dst"), cx.operand(ins.reads[0], "src")
    if gm.scope != Scope.GM or ub.scope != Scope.UB:
        raise cx.fail(f"{ins.op} moves between GM and UB, not {gm.scope} and {ub.scope}")
    if gm.shape != ub.shape:
        raise cx.fail(f"GM view {gm.shape} and UB view {ub.shape} differ")
    if gm.dtype != ub.dtype:
        raise cx.fail(f"DMA does not convert: GM {gm.dtype} vs UB {ub.dtype}")
    for o in (gm, ub):
        if o.cols > 1 and o.cs != 1:
            raise cx.fail(f"{o.role} {o.tensor}: DMA column stride must be 1, not {o.cs}")
    blk = cx.m.t.block_bytes
    if ub.start % blk:
        raise cx.fail(f"UB {ub.tensor} starts at byte {ub.start}, not {blk}-byte aligned")
    if ub.rows > 1 and (ub.rs * ub.eb) % blk:
        raise cx.fail(f"UB {ub.tensor} row stride {ub.rs * ub.eb} B is not a multiple of {blk}")
    return ub, gm


def _ub_dma_bytes(cx: _Ctx, ub: _Operand) -> list[Interval]:
    lo, hi = ub.row_bytes(cx.m.t.block_bytes, rounded=True)
    if int(hi.max()) > ub.mem.size:
        raise cx.fail(f"UB rows of {ub.tensor} rounded to 32 B reach byte {int(hi.max())} past "
                      f"the {ub.mem.size} B it lives in")
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
_MASK = "mask"


def _vec(cx: _Ctx, region: Region, role: str, *, dst: bool = False,
         elem_row_stride: bool = False, kind: str = "data") -> _Operand:
    """Resolve a vector operand and check the ir.py constraints on it.

    ``elem_row_stride`` (vec_reduce dst, vec_brcb src): any row stride in elements; a reduce
    dst also only needs element alignment (``WholeReduce*`` writes one element per repeat).
    """
    o = cx.operand(region, role)
    t = cx.m.t
    if o.scope != Scope.UB:
        raise cx.fail(f"vector {role} {o.tensor} is in {o.scope}, not UB")
    if o.start % (o.eb if elem_row_stride and dst else t.block_bytes):
        raise cx.fail(f"vector {role} {o.tensor} starts at byte {o.start}, "
                      f"not {t.block_bytes}-byte aligned")
    if kind == _MASK:
        if o.dtype is not dt.uint8:
            raise cx.fail(f"mask {o.tensor} must be uint8, not {o.dtype}")
        if o.cols > 1 and o.cs != 1:
            raise cx.fail(f"mask {o.tensor} column stride must be 1")
        return o
    if o.rows > 1 and not elem_row_stride:
        rb = o.rs * o.eb
        if rb % t.block_bytes or rb < 0:
            raise cx.fail(f"{role} {o.tensor} row stride {rb} B is not a multiple of "
                          f"{t.block_bytes} B")
        if rb // t.block_bytes > t.max_rep_stride:
            raise cx.fail(f"{role} {o.tensor} row stride {rb // t.block_bytes} blocks exceeds "
                          f"{t.max_rep_stride}")
    if o.cols > 1 and o.cs != 1 and not (o.cs == 0 and not dst):
        raise cx.fail(f"{role} {o.tensor} column stride {o.cs}: only 1 (or 0 = block "
                      f"broadcast, sources only) is allowed")
    return o


def _load_vec(cx: _Ctx, o: _Operand) -> np.ndarray:
    """Values of a source operand, recording its trace bytes (block broadcast aware)."""
    if o.cs == 0:  # block stride 0: the hardware reads the row's whole 32 B block, as the
        # polyhedral byte rules and the C++ runtime record it (one column included)
        blk = cx.m.t.block_bytes
        lanes = min(o.cols, blk // o.eb)
        starts = o.base + (o.off + np.arange(o.rows, dtype=np.int64) * o.rs) * o.eb
        if int(starts.max()) + blk > o.mem.size:
            raise cx.fail(f"block-broadcast {o.role} {o.tensor} block passes the end of memory")
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


def _check_repeat(cx: _Ctx, rows: int, cols: int, operands: tuple[_Operand, ...]) -> None:
    t = cx.m.t
    if rows > t.max_repeat:
        raise cx.fail(f"{rows} rows (repeats) exceed max_repeat {t.max_repeat}")
    eb = max(o.eb for o in operands)
    if cols * eb > t.repeat_bytes:
        raise cx.fail(f"{cols} lanes x {eb} B exceed one {t.repeat_bytes} B repeat")


def _check_dtype(cx: _Ctx, fn: str, dtype: DType) -> None:
    ok = cx.m.t.vector_dtypes.get(fn)
    if ok is not None and dtype.name not in ok:
        raise cx.fail(f"{fn} on {dtype} is not supported by the {cx.m.t.name} vector unit "
                      f"(supported: {', '.join(sorted(ok))})")


def _same(cx: _Ctx, ops: tuple[_Operand, ...], *, shape: bool = True) -> None:
    if len({o.dtype for o in ops}) != 1:
        raise cx.fail(f"operand dtypes differ: {[str(o.dtype) for o in ops]}")
    if shape and len({o.shape for o in ops}) != 1:
        raise cx.fail(f"operand views differ: {[o.shape for o in ops]}")


def _n(cx: _Ctx, writes: int, reads: int) -> None:
    if len(cx.ins.writes) != writes or len(cx.ins.reads) != reads:
        raise cx.fail(f"{cx.ins.op} takes {writes} write and {reads} read regions")


def _fn(cx: _Ctx, allowed: tuple[str, ...]) -> str:
    fn = cx.ins.attr("fn")
    if fn not in allowed:
        raise cx.fail(f"attr fn={fn!r}; {cx.ins.op} supports {', '.join(allowed)}")
    return str(fn)


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
    _n(cx, 1, 2)
    fn = _fn(cx, tuple(_BINARY))
    d = _vec(cx, cx.ins.writes[0], "dst", dst=True)
    a, b = _vec(cx, cx.ins.reads[0], "a"), _vec(cx, cx.ins.reads[1], "b")
    _same(cx, (d, a, b))
    _check_repeat(cx, d.rows, d.cols, (d, a, b))
    _check_dtype(cx, fn, d.dtype)
    va, vb = _compute_in(d.dtype, _load_vec(cx, a), _load_vec(cx, b))
    with np.errstate(all="ignore"):
        _store_vec(cx, d, _BINARY[fn](va, vb))


def _rsqrt(v: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(v.astype(np.float64))


_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp, "ln": np.log, "sqrt": np.sqrt, "rsqrt": _rsqrt,
    "reciprocal": lambda v: 1.0 / v.astype(np.float64), "abs": np.abs,
    "relu": lambda v: np.maximum(v, v.dtype.type(0)),
}


def _vec_unary(cx: _Ctx) -> None:
    _n(cx, 1, 1)
    fn = _fn(cx, (*_UNARY, "copy"))
    d = _vec(cx, cx.ins.writes[0], "dst", dst=True)
    s = _vec(cx, cx.ins.reads[0], "src")
    _same(cx, (d, s))
    _check_repeat(cx, d.rows, d.cols, (d, s))
    _check_dtype(cx, fn, d.dtype)
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
    _n(cx, 1, 1)
    fn = _fn(cx, tuple(_SCALAR))
    d = _vec(cx, cx.ins.writes[0], "dst", dst=True)
    s = _vec(cx, cx.ins.reads[0], "src")
    _same(cx, (d, s))
    _check_repeat(cx, d.rows, d.cols, (d, s))
    _check_dtype(cx, fn, d.dtype)
    scalar = cx.ins.attr("scalar")
    if isinstance(scalar, Affine):  # a value of the loop variables
        scalar = scalar.evaluate(cx.env)
    if not isinstance(scalar, (int, float)) or isinstance(scalar, bool):
        raise cx.fail(f"attr scalar must be a number, not {scalar!r}")
    v, k = _compute_in(d.dtype, _load_vec(cx, s), dt.store(d.dtype, scalar))
    with np.errstate(all="ignore"):
        _store_vec(cx, d, _SCALAR[fn](v, k))


def _vec_dup(cx: _Ctx) -> None:
    _n(cx, 1, 0)
    d = _vec(cx, cx.ins.writes[0], "dst", dst=True)
    _check_repeat(cx, d.rows, d.cols, (d,))
    _check_dtype(cx, "dup", d.dtype)
    value = cx.ins.attr("value")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise cx.fail(f"attr value must be a number, not {value!r}")
    _store_vec(cx, d, np.full(d.shape, dt.store(d.dtype, value)))


_ROUND_MODES = ("rint", "trunc", "floor", "ceil", "round", "none")


def _vec_cast(cx: _Ctx) -> None:
    _n(cx, 1, 1)
    mode = cx.ins.attr("round", "none")
    if mode not in _ROUND_MODES:
        raise cx.fail(f"attr round={mode!r}; one of {', '.join(_ROUND_MODES)}")
    d = _vec(cx, cx.ins.writes[0], "dst", dst=True)
    s = _vec(cx, cx.ins.reads[0], "src")
    if d.shape != s.shape:
        raise cx.fail(f"operand views differ: {d.shape} vs {s.shape}")
    _check_repeat(cx, d.rows, d.cols, (d, s))
    modes = cx.m.t.vector_casts.get((s.dtype.name, d.dtype.name))
    if modes is None:
        raise cx.fail(f"Cast {s.dtype} -> {d.dtype} is not supported by {cx.m.t.name}")
    if mode not in modes:
        raise cx.fail(f"Cast {s.dtype} -> {d.dtype} does not take round={mode} on "
                      f"{cx.m.t.name} (it takes {', '.join(sorted(modes))})")
    _store_vec(cx, d, cast_values(_load_vec(cx, s), s.dtype, d.dtype, str(mode)))


def _vec_reduce(cx: _Ctx) -> None:
    _n(cx, 1, 1)
    fn = _fn(cx, ("sum", "max", "min"))
    d = _vec(cx, cx.ins.writes[0], "dst", dst=True, elem_row_stride=True)
    s = _vec(cx, cx.ins.reads[0], "src")
    _same(cx, (d, s), shape=False)
    if d.shape != (s.rows, 1):
        raise cx.fail(f"reduce dst view must be ({s.rows}, 1), not {d.shape}")
    align = _reduce_dst_align(fn, d.eb)
    if d.start % align:
        raise cx.fail(f"WholeReduce {fn} dst {d.tensor} starts at byte {d.start}, not "
                      f"{align}-byte aligned")
    _check_repeat(cx, s.rows, s.cols, (s,))
    _check_dtype(cx, {"sum": "sum", "max": "rmax", "min": "rmin"}[fn], d.dtype)
    (v,) = _compute_in(d.dtype, _load_vec(cx, s))
    if fn == "sum":  # a binary tree per repeat, sim/precision.py
        _store_vec(cx, d, tree_sum(v))
        return
    red = {"max": np.max, "min": np.min}[fn]
    _store_vec(cx, d, red(v, axis=1, keepdims=True).astype(v.dtype))


def _reduce_dst_align(fn: str, eb: int) -> int:
    """WholeReduce dst alignment: sum sizeof(T) (asc-devkit docs ReduceRepeat.md:171-172,
    impl/basic_api/kernel_operator_vec_reduce_intf_impl.h:148); max/min 2 * sizeof(T): the
    docs ask sizeof(T) for ORDER_ONLY_VALUE (ReduceRepeat.md:178, 182) but the library's own
    check asks 2 * sizeof(T) for every order (kernel_operator_vec_reduce_intf_impl.h:177), and
    the stricter rule is the safe one."""
    return eb if fn == "sum" else 2 * eb


def _vec_brcb(cx: _Ctx) -> None:
    _n(cx, 1, 1)
    d = _vec(cx, cx.ins.writes[0], "dst", dst=True)
    s = _vec(cx, cx.ins.reads[0], "src", elem_row_stride=True)
    _same(cx, (d, s), shape=False)
    per_block = cx.m.t.block_bytes // d.eb
    n = s.rows
    if s.cols != 1 or d.shape != (n, per_block) or (n > 1 and d.rs != per_block):
        raise cx.fail(f"brcb needs src ({n}, 1) and dst ({n}, {per_block}) with row stride "
                      f"{per_block}; got src {s.shape}, dst {d.shape} stride {d.rs}")
    if n % 8:
        raise cx.fail(f"brcb broadcasts groups of 8 elements; {n} rows is not a multiple of 8")
    if n // 8 > cx.m.t.max_repeat:
        raise cx.fail(f"brcb of {n} rows needs {n // 8} repeats > {cx.m.t.max_repeat}")
    if d.mem is s.mem and _overlap(d, s):
        # asc-devkit docs Brcb.md:122: "不支持源操作数与目的操作数使用同一块内存地址"
        raise cx.fail(f"brcb in place: dst {d.tensor} overlaps src {s.tensor} (Brcb does not "
                      "support a source sharing memory with its destination)")
    _check_dtype(cx, "brcb", d.dtype)
    _load_vec(cx, s)
    cx.write(d.exact_bytes())
    d.store_raw(np.broadcast_to(s.load_raw(), d.shape))


def _overlap(a: _Operand, b: _Operand) -> bool:
    """Whether the elements of two operands of one memory share a byte."""
    ab = a.base + a.idx.ravel() * a.eb
    bb = b.base + b.idx.ravel() * b.eb
    ia = np.unique((ab[:, None] + np.arange(a.eb)).ravel())
    ib = np.unique((bb[:, None] + np.arange(b.eb)).ravel())
    return bool(np.intersect1d(ia, ib, assume_unique=True).size)


_CMP: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "lt": np.less, "gt": np.greater, "le": np.less_equal, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal,
}


def _mask_check(cx: _Ctx, m: _Operand, rows: int, cols: int) -> None:
    if m.rows != rows or m.cols * 8 < cols:
        raise cx.fail(f"mask view {m.shape} cannot hold ({rows}, {cols}) bits")
    if rows > 1 and m.rs < m.cols:
        raise cx.fail(f"mask rows overlap: row stride {m.rs} B < {m.cols} B")


def _vec_cmp(cx: _Ctx) -> None:
    _n(cx, 1, 2)
    fn = _fn(cx, tuple(_CMP))
    m = _vec(cx, cx.ins.writes[0], "mask", dst=True, kind=_MASK)
    a, b = _vec(cx, cx.ins.reads[0], "a"), _vec(cx, cx.ins.reads[1], "b")
    _same(cx, (a, b))
    _mask_check(cx, m, a.rows, a.cols)
    _check_repeat(cx, a.rows, a.cols, (a, b))
    _check_dtype(cx, "cmp", a.dtype)
    va, vb = _compute_in(a.dtype, _load_vec(cx, a), _load_vec(cx, b))
    with np.errstate(all="ignore"):
        bits = _CMP[fn](va, vb)
    packed = np.zeros(m.shape, dtype=np.uint8)
    p = np.packbits(bits, axis=1, bitorder="little")
    packed[:, :p.shape[1]] = p
    _store_vec(cx, m, packed)


def _vec_select(cx: _Ctx) -> None:
    _n(cx, 1, 3)
    d = _vec(cx, cx.ins.writes[0], "dst", dst=True)
    m = _vec(cx, cx.ins.reads[0], "mask", kind=_MASK)
    a, b = _vec(cx, cx.ins.reads[1], "a"), _vec(cx, cx.ins.reads[2], "b")
    _same(cx, (d, a, b))
    _mask_check(cx, m, d.rows, d.cols)
    _check_repeat(cx, d.rows, d.cols, (d, a, b))
    _check_dtype(cx, "select", d.dtype)
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
    "vec_unary": _vec_unary,
    "vec_scalar": _vec_scalar,
    "vec_dup": _vec_dup,
    "vec_cast": _vec_cast,
    "vec_reduce": _vec_reduce,
    "vec_brcb": _vec_brcb,
    "vec_cmp": _vec_cmp,
    "vec_select": _vec_select,
}
