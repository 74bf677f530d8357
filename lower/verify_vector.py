"""The IR contract of the AIV ops (DMA and vector), for ``lower/verify.py``: scopes, views,
alignment, strides, repeat limits, attrs and the target's dtype and cast tables, as lower/ir.py's
docstring states them (one ``OpRule`` per op in ``VECTOR_CHECKS``)."""

from __future__ import annotations

from ascendsched.dtypes import uint8
from ascendsched.lower.affine import Affine
from ascendsched.lower.verify_site import OpRule, Site, View, aligned, fail_unaligned, view
from ascendsched.target.model import Pipe, Scope

BINARY = ("add", "sub", "mul", "div", "max", "min")
FMA = ("fused_mul_add", "mul_add_dst")
UNARY = ("exp", "ln", "sqrt", "rsqrt", "reciprocal", "abs", "relu", "copy")
SCALAR = ("adds", "muls", "maxs", "mins")
REDUCE = ("sum", "max", "min")
COMPARE = ("lt", "gt", "le", "ge", "eq", "ne")
ROUND_MODES = ("rint", "trunc", "floor", "ceil", "round", "none")


# --------------------------------------------------------------------------- DMA
def _dma(site: Site) -> None:
    ins, t = site.ins, site.kernel.target
    w, r = view(site, ins.writes[0], "dst"), view(site, ins.reads[0], "src")
    ub, gm = (w, r) if ins.op == "copy_gm_ub" else (r, w)
    if gm.scope != Scope.GM or ub.scope != Scope.UB:
        raise site.fail("scope", f"{ins.op} moves between GM and UB, not {gm.scope} and "
                                 f"{ub.scope}")
    if gm.shape != ub.shape:
        raise site.fail("shape", f"GM view {gm.shape} and UB view {ub.shape} differ")
    if gm.dtype != ub.dtype:
        raise site.fail("dtype", f"DMA does not convert: GM {gm.dtype} vs UB {ub.dtype}")
    for o in (gm, ub):
        if o.cs != 1:
            raise site.fail("stride", f"{o.role} {o.tensor}: DMA column stride must be 1, "
                                      f"not {o.cs}")
    blk = t.block_bytes
    if not aligned(site, ub.region, blk):
        raise fail_unaligned(site, ub, blk, "UB")
    if ub.rows > t.max_dma_block_count:
        raise site.fail("repeat", f"{ub.rows} rows exceed the {t.max_dma_block_count} of one "
                                  "DataCopy")
    if ub.rows > 1:
        row = ub.cols * ub.eb
        if (ub.rs * ub.eb) % blk:
            raise site.fail("stride", f"UB {ub.tensor} row stride {ub.rs * ub.eb} B is not a "
                                      f"multiple of {blk}")
        if ub.rs * ub.eb < -(-row // blk) * blk or gm.rs * gm.eb < row:
            raise site.fail("stride", f"rows overlap ({ub.rows} x {row} B, UB pitch "
                                      f"{ub.rs * ub.eb} B, GM pitch {gm.rs * gm.eb} B)")


# --------------------------------------------------------------------------- vector operands
def _vec(site: Site, j: int, role: str, *, dst: bool = False, repeat_params: bool = True,
         elem_row_stride: bool = False, mask: bool = False) -> View:
    """Region ``j`` (writes first) as a vector operand, with the checks of ir.py's "Vector".

    ``repeat_params``: the emitter passes its strides as Binary/UnaryRepeatParams (block
    stride 0 or 1). ``elem_row_stride`` (reduce dst, brcb src): any row stride in elements; a
    reduce dst only needs element alignment. ``mask``: a compare mask (uint8, any row stride).
    """
    ins, t = site.ins, site.kernel.target
    o = view(site, (ins.writes + ins.reads)[j], role)
    if o.scope != Scope.UB:
        raise site.fail("scope", f"vector {role} {o.tensor} is in {o.scope}, not UB")
    align = o.eb if elem_row_stride and dst else t.block_bytes
    if not aligned(site, o.region, align):
        raise fail_unaligned(site, o, align, f"vector {role}")
    if mask:
        if o.dtype is not uint8:
            raise site.fail("dtype", f"mask {o.tensor} must be uint8, not {o.dtype}")
        if o.cols > 1 and o.cs != 1:
            raise site.fail("stride", f"mask {o.tensor} column stride must be 1")
        return o
    if o.rows > 1 and not elem_row_stride:
        rb = o.rs * o.eb
        if rb % t.block_bytes or rb < 0:
            raise site.fail("stride", f"{role} {o.tensor} row stride {rb} B is not a multiple "
                                      f"of {t.block_bytes} B")
        if rb // t.block_bytes > t.max_rep_stride:
            raise site.fail("stride", f"{role} {o.tensor} row stride {rb // t.block_bytes} "
                                      f"blocks exceeds {t.max_rep_stride}")
    if (o.cols > 1 and o.cs != 1 and not (o.cs == 0 and not dst)) or (
            repeat_params and o.cs not in (0, 1)):
        raise site.fail("stride", f"{role} {o.tensor} column stride {o.cs}: only 1 (or 0 = "
                                  "block broadcast, sources only) is allowed")
    return o


def _repeat(site: Site, rows: int, cols: int, *ops: View) -> None:
    t = site.kernel.target
    if rows > t.max_repeat:
        raise site.fail("repeat", f"{rows} rows (repeats) exceed max_repeat {t.max_repeat}")
    eb = max(o.eb for o in ops)
    if cols * eb > t.repeat_bytes:
        raise site.fail("repeat", f"{cols} lanes x {eb} B exceed one {t.repeat_bytes} B repeat")


def _fn(site: Site, allowed: tuple[str, ...], dtype_key: dict[str, str] | None = None,
        dtype: View | None = None) -> str:
    """The ``fn`` attr, one of ``allowed``; with ``dtype``, checked against the target's
    vector dtypes (under ``dtype_key[fn]`` when the table names it differently)."""
    fn = site.ins.attr("fn")
    if fn not in allowed:
        raise site.fail("attr", f"attr fn={fn!r}; {site.ins.op} supports {', '.join(allowed)}")
    if dtype is not None:
        _dtype(site, (dtype_key or {}).get(str(fn), str(fn)), dtype)
    return str(fn)


def _dtype(site: Site, fn: str, o: View) -> None:
    t = site.kernel.target
    ok = t.vector_dtypes.get(fn)
    if ok is not None and o.dtype.name not in ok:
        raise site.fail("dtype", f"{fn} on {o.dtype} is not supported by the {t.name} vector "
                                 f"unit (supported: {', '.join(sorted(ok))})")


def _same(site: Site, *ops: View, shape: bool = True) -> None:
    if len({o.dtype for o in ops}) != 1:
        raise site.fail("dtype", f"operand dtypes differ: {[str(o.dtype) for o in ops]}")
    if shape and len({o.shape for o in ops}) != 1:
        raise site.fail("shape", f"operand views differ: {[o.shape for o in ops]}")


def _number(site: Site, name: str, *, affine: bool) -> None:
    v = site.ins.attr(name)
    if not (isinstance(v, (int, float)) and not isinstance(v, bool)) and not (
            affine and isinstance(v, Affine)):
        raise site.fail("attr", f"attr {name} must be a number, not {v!r}")


# --------------------------------------------------------------------------- vector ops
def _binary(site: Site) -> None:
    d, a, b = _vec(site, 0, "dst", dst=True), _vec(site, 1, "a"), _vec(site, 2, "b")
    _same(site, d, a, b)
    _repeat(site, d.rows, d.cols, d, a, b)
    _fn(site, BINARY, dtype=d)


def _fma(site: Site) -> None:
    """dst is read too: its read region is the write region (lower/ir.py, ``vec_fma``)."""
    ins = site.ins
    d = _vec(site, 0, "dst", dst=True)
    a, b = _vec(site, 2, "src0"), _vec(site, 3, "src1")
    if ins.reads[0] != ins.writes[0]:
        raise site.fail("operands", f"{ins.op} reads its destination: its first read "
                                    f"region must be the write region {ins.writes[0]}")
    _same(site, d, a, b)
    _repeat(site, d.rows, d.cols, d, a, b)
    _fn(site, FMA, dtype=d)


def _unary(site: Site) -> None:
    d, s = _vec(site, 0, "dst", dst=True), _vec(site, 1, "src")
    _same(site, d, s)
    _repeat(site, d.rows, d.cols, d, s)
    _fn(site, UNARY, dtype=d)


def _scalar(site: Site) -> None:
    d, s = _vec(site, 0, "dst", dst=True), _vec(site, 1, "src")
    _same(site, d, s)
    _repeat(site, d.rows, d.cols, d, s)
    _fn(site, SCALAR, dtype=d)
    _number(site, "scalar", affine=True)


def _dup(site: Site) -> None:
    d = _vec(site, 0, "dst", dst=True)
    _repeat(site, d.rows, d.cols, d)
    _dtype(site, "dup", d)
    _number(site, "value", affine=False)


def _cast(site: Site) -> None:
    t = site.kernel.target
    mode = site.ins.attr("round", "none")
    if mode not in ROUND_MODES:
        raise site.fail("attr", f"attr round={mode!r}; one of {', '.join(ROUND_MODES)}")
    d, s = _vec(site, 0, "dst", dst=True), _vec(site, 1, "src")
    if d.shape != s.shape:
        raise site.fail("shape", f"operand views differ: {d.shape} vs {s.shape}")
    _repeat(site, d.rows, d.cols, d, s)
    modes = t.vector_casts.get((s.dtype.name, d.dtype.name))
    if modes is None:
        raise site.fail("dtype", f"Cast {s.dtype} -> {d.dtype} is not supported by {t.name}")
    if mode not in modes:
        raise site.fail("dtype", f"Cast {s.dtype} -> {d.dtype} does not take round={mode} on "
                                 f"{t.name} (it takes {', '.join(sorted(modes))})")


def _reduce(site: Site) -> None:
    fn = _fn(site, REDUCE)
    d = _vec(site, 0, "dst", dst=True, elem_row_stride=True, repeat_params=False)
    s = _vec(site, 1, "src")
    _same(site, d, s, shape=False)
    if d.shape != (s.rows, 1):
        raise site.fail("shape", f"reduce dst view must be ({s.rows}, 1), not {d.shape}")
    align = reduce_dst_align(fn, d.eb)
    if not aligned(site, d.region, align):
        raise fail_unaligned(site, d, align, f"WholeReduce {fn} dst")
    _repeat(site, s.rows, s.cols, s)
    _fn(site, REDUCE, {"max": "rmax", "min": "rmin"}, d)


def _block_reduce(site: Site) -> None:
    """BlockReduce: whole repeats in, 8 results per repeat out (ir.py ``vec_block_reduce``)."""
    t = site.kernel.target
    d = _vec(site, 0, "dst", dst=True, elem_row_stride=True, repeat_params=False)
    s = _vec(site, 1, "src")
    _same(site, d, s, shape=False)
    per_rep = t.repeat_bytes // t.block_bytes
    if s.cols * s.eb != t.repeat_bytes or s.cs != 1:
        raise site.fail("shape", f"block reduce src rows must be whole {t.repeat_bytes} B "
                                 f"repeats of stride 1, not {s.cols} x {s.eb} B")
    if d.shape != (s.rows, per_rep) or d.cs != 1 or (d.rows > 1 and d.rs % per_rep):
        raise site.fail("shape", f"block reduce dst view must be ({s.rows}, {per_rep}) with a "
                                 f"row stride of a multiple of {per_rep}; got {d.shape} stride "
                                 f"{d.rs}")
    # docs BlockReduceSum.md: dst 32 B aligned for float, 16 B for half
    align = min(t.block_bytes, 16 * d.eb // 2) if d.eb < 4 else t.block_bytes
    if not aligned(site, d.region, align):
        raise fail_unaligned(site, d, align, "BlockReduce dst")
    _repeat(site, s.rows, s.cols, s)
    _fn(site, REDUCE, {"max": "rmax", "min": "rmin"}, d)


def reduce_dst_align(fn: str, eb: int) -> int:
    """WholeReduce dst alignment: sum sizeof(T) (asc-devkit docs ReduceRepeat.md:171-172,
    impl/basic_api/kernel_operator_vec_reduce_intf_impl.h:148); max/min 2 * sizeof(T): the
    docs ask sizeof(T) for ORDER_ONLY_VALUE (ReduceRepeat.md:178, 182) but the library's own
    check asks 2 * sizeof(T) for every order (kernel_operator_vec_reduce_intf_impl.h:177), and
    the stricter rule is the safe one."""
    return eb if fn == "sum" else 2 * eb


def _brcb(site: Site) -> None:
    t = site.kernel.target
    d = _vec(site, 0, "dst", dst=True, repeat_params=False)
    s = _vec(site, 1, "src", elem_row_stride=True, repeat_params=False)
    _same(site, d, s, shape=False)
    per_block, group = t.block_bytes // d.eb, t.brcb_elems_per_repeat
    n = s.rows
    if s.cols != 1 or d.shape != (n, per_block) or (n > 1 and (d.rs != per_block or s.rs != 1)):
        raise site.fail("shape", f"brcb needs a contiguous src ({n}, 1) and dst ({n}, "
                                 f"{per_block}) with row stride {per_block}; got src {s.shape} "
                                 f"stride {s.rs}, dst {d.shape} stride {d.rs}")
    if n % group:
        raise site.fail("repeat", f"brcb broadcasts groups of {group} elements; {n} rows is "
                                  f"not a multiple of {group}")
    if n // group > t.max_repeat:
        raise site.fail("repeat", f"brcb of {n} rows needs {n // group} repeats > "
                                  f"{t.max_repeat}")
    if _may_overlap(site, d, s):
        # asc-devkit docs Brcb.md:122: "不支持源操作数与目的操作数使用同一块内存地址"
        raise site.fail("overlap", f"brcb in place: dst {d.tensor} may share bytes with src "
                                   f"{s.tensor} (Brcb does not support a source sharing "
                                   "memory with its destination)")
    _dtype(site, "brcb", d)


def _may_overlap(site: Site, a: View, b: View) -> bool:
    """Whether the byte hulls of two operands in one memory intersect."""
    k = site.kernel

    def hulls(o: View) -> list[tuple[str, int, int]]:
        lo, hi = site.interval(o.region.offset)
        lo += min(0, (o.rows - 1) * o.rs) + min(0, (o.cols - 1) * o.cs)
        hi += max(0, (o.rows - 1) * o.rs) + max(0, (o.cols - 1) * o.cs)
        buf = k.buffer_map[o.tensor]
        clo, chi = site.interval(o.region.copy)
        out = []
        for c in range(max(clo, 0), min(chi, buf.copies - 1) + 1):
            space, base = (str(buf.scope), buf.offsets[c]) if buf.offsets is not None else \
                (f"{buf.name}:{c}", 0)
            out.append((space, base + lo * o.eb, base + (hi + 1) * o.eb))
        return out

    return any(sa == sb and lo_a < hi_b and lo_b < hi_a
               for sa, lo_a, hi_a in hulls(a) for sb, lo_b, hi_b in hulls(b))


def _mask_fits(site: Site, m: View, rows: int, cols: int) -> None:
    if m.rows != rows or m.cols * 8 < cols:
        raise site.fail("shape", f"mask view {m.shape} cannot hold ({rows}, {cols}) bits")
    if rows > 1 and m.rs < m.cols:
        raise site.fail("stride", f"mask rows overlap: row stride {m.rs} B < {m.cols} B")


def _compare(site: Site) -> None:
    m = _vec(site, 0, "mask", dst=True, mask=True)
    a, b = _vec(site, 1, "a"), _vec(site, 2, "b")
    _same(site, a, b)
    _mask_fits(site, m, a.rows, a.cols)
    _repeat(site, a.rows, a.cols, a, b)
    _fn(site, COMPARE)
    _dtype(site, "cmp", a)


def _select(site: Site) -> None:
    d = _vec(site, 0, "dst", dst=True)
    m = _vec(site, 1, "mask", mask=True)
    a, b = _vec(site, 2, "a"), _vec(site, 3, "b")
    _same(site, d, a, b)
    _mask_fits(site, m, d.rows, d.cols)
    _repeat(site, d.rows, d.cols, d, a, b)
    _dtype(site, "select", d)


VECTOR_CHECKS: dict[str, OpRule] = {
    "copy_gm_ub": OpRule(Pipe.MTE2, 1, 1, _dma),
    "copy_ub_gm": OpRule(Pipe.MTE3, 1, 1, _dma),
    "vec_binary": OpRule(Pipe.V, 1, 2, _binary),
    "vec_fma": OpRule(Pipe.V, 1, 3, _fma),
    "vec_unary": OpRule(Pipe.V, 1, 1, _unary),
    "vec_scalar": OpRule(Pipe.V, 1, 1, _scalar),
    "vec_dup": OpRule(Pipe.V, 1, 0, _dup),
    "vec_cast": OpRule(Pipe.V, 1, 1, _cast),
    "vec_reduce": OpRule(Pipe.V, 1, 1, _reduce),
    "vec_block_reduce": OpRule(Pipe.V, 1, 1, _block_reduce),
    "vec_brcb": OpRule(Pipe.V, 1, 1, _brcb),
    "vec_cmp": OpRule(Pipe.V, 1, 2, _compare),
    "vec_select": OpRule(Pipe.V, 1, 3, _select),
}
