"""AscendC call templates of the AIV ops: GM <-> UB copies and the vector instructions.

Each template prints one instruction as one AscendC call (a Compare or Select whose mask rows
are not where the hardware packs them: one call per row). ``VECTOR_TEMPLATES`` maps each op to
its template.

API units, verified against the AscendC sources (mirror-cann/asc-devkit):
  DataCopyParams{blockCount, blockLen, srcStride, dstStride}: lengths and gaps in 32 B blocks
      (include/basic_api/kernel_struct_data_copy.h, impl/basic_api/dav_c220/kernel_operator_data_copy_impl.h)
  DataCopyExtParams{blockCount, blockLen, srcStride, dstStride, rsv}: blockLen in bytes, gaps in
      bytes on the GM side and 32 B blocks on the UB side; each UB row takes ceil(blockLen/32)
      blocks (docs DataCopyPad(ISASI))
  Binary/UnaryRepeatParams: block strides and repeat strides in 32 B blocks
      (include/basic_api/kernel_struct_binary.h, kernel_struct_unary.h)
  WholeReduce*: dstRepStride in units of one result (sizeof(T) for ORDER_ONLY_VALUE)
      (docs WholeReduceMax; include/basic_api/kernel_operator_vec_reduce_intf.h)
  BlockReduce*(dst, src, repeatTime, mask, dstRepStride, srcBlkStride, srcRepStride):
      dstRepStride in units of one repeat's 8 results (docs BlockReduceSum.md)
  Compare (910B): mask ignored, bits packed 256/sizeof(T) per repeat; Select
      VSEL_TENSOR_TENSOR_MODE consumes selMask contiguously, 256/sizeof(T) bits per repeat
      (docs Compare/Select; impl/basic_api/dav_c220/kernel_operator_vec_cmp_impl.h)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ascendsched.emit_ascendc.c_syntax import _ctype, _dims2, _scalar
from ascendsched.lower.ir import Instr, Region

if TYPE_CHECKING:
    from ascendsched.emit_ascendc.kernel_printer import _KernelPrinter

_CMP = {"lt": "LT", "gt": "GT", "le": "LE", "ge": "GE", "eq": "EQ", "ne": "NE"}
_ROUND = {"rint": "CAST_RINT", "trunc": "CAST_TRUNC", "floor": "CAST_FLOOR", "ceil": "CAST_CEIL",
          "round": "CAST_ROUND", "none": "CAST_NONE"}
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "max": "Max", "min": "Min"}
_FMA = {"fused_mul_add": "FusedMulAdd", "mul_add_dst": "MulAddDst"}
_UNARY = {"exp": "Exp", "ln": "Ln", "sqrt": "Sqrt", "rsqrt": "Rsqrt", "reciprocal": "Reciprocal",
          "abs": "Abs", "relu": "Relu"}
_SCALAR = {"adds": "Adds", "muls": "Muls", "maxs": "Maxs", "mins": "Mins"}
_REDUCE = {"sum": "WholeReduceSum", "max": "WholeReduceMax", "min": "WholeReduceMin"}
_BLOCK_REDUCE = {"sum": "BlockReduceSum", "max": "BlockReduceMax", "min": "BlockReduceMin"}


# --------------------------------------------------------------------------- op templates
def _dma(p: _KernelPrinter, i: Instr) -> None:
    to_ub = i.op == "copy_gm_ub"
    ub_r, gm_r = (i.writes[0], i.reads[0]) if to_ub else (i.reads[0], i.writes[0])
    rows, rs_ub, cols, cs_ub = _dims2(ub_r)
    _rows, rs_gm, _cols, _cs = _dims2(gm_r)  # the same view, column stride 1 (verified)
    e = p._esize(ub_r)
    blk = p.t.block_bytes
    row = cols * e
    ub_pitch = rs_ub * e if rows > 1 else -(-row // blk) * blk
    gm_pitch = rs_gm * e if rows > 1 else row
    dst, src = (p._ub(ub_r), p._gm(gm_r)) if to_ub else (p._gm(gm_r), p._ub(ub_r))
    what = f"{rows} x {row} B"
    if row % blk == 0 and gm_pitch % blk == 0 and ub_pitch >= row and gm_pitch >= row:
        ub_gap, gm_gap = (ub_pitch - row) // blk, (gm_pitch - row) // blk
        src_gap, dst_gap = (gm_gap, ub_gap) if to_ub else (ub_gap, gm_gap)
        params = f"DataCopyParams({rows}, {row // blk}, {src_gap}, {dst_gap})"
        p._line(i, f"DataCopy({dst}, {src}, {params});", f"{what}; lengths in {blk} B blocks")
        return
    ub_row_blocks = -(-row // blk)  # (rows do not overlap: verified)
    ub_gap = (ub_pitch - ub_row_blocks * blk) // blk
    gm_gap = gm_pitch - row
    src_gap, dst_gap = (gm_gap, ub_gap) if to_ub else (ub_gap, gm_gap)
    params = f"DataCopyExtParams({rows}, {row}, {src_gap}, {dst_gap}, 0)"
    units = "GM gap in bytes, UB gap in blocks"
    if to_ub:
        ct = _ctype(p.k.dtype_of(ub_r.tensor))
        pad = f"DataCopyPadExtParams<{ct}>(false, 0, 0, 0)"
        p._line(i, f"DataCopyPad({dst}, {src}, {params}, {pad});", f"{what}; {units}")
    else:
        p._line(i, f"DataCopyPad({dst}, {src}, {params});", f"{what}; {units}")


def _binary_params(p: _KernelPrinter, i: Instr, dst: Region, a: Region, b: Region) -> str:
    (db, dr), (ab, ar), (bb, br) = p._rep(dst), p._rep(a), p._rep(b)
    return f"BinaryRepeatParams({db}, {ab}, {bb}, {dr}, {ar}, {br})"


def _unary_params(p: _KernelPrinter, i: Instr, dst: Region, src: Region) -> str:
    (db, dr), (sb, sr) = p._rep(dst), p._rep(src)
    return f"UnaryRepeatParams({db}, {sb}, {dr}, {sr})"


def _vec_binary(p: _KernelPrinter, i: Instr) -> None:
    d, (a, b) = i.writes[0], i.reads
    rows, cols = p._vec_shape(d)
    fn = _BINARY[str(i.attr("fn"))]
    p._line(i, f"{fn}({p._ub(d)}, {p._ub(a)}, {p._ub(b)}, {cols}, {rows}, "
               f"{_binary_params(p, i, d, a, b)});")


def _vec_fma(p: _KernelPrinter, i: Instr) -> None:
    """FusedMulAdd(dst, src0, src1, mask, repeatTime, BinaryRepeatParams): dst = src0 * dst +
    src1; MulAddDst(...): dst = src0 * src1 + dst (asc-devkit @82b89a15 include/basic_api/
    kernel_operator_vec_binary_intf.h, level 0, mask continuous mode). reads[0] is dst."""
    d, (_old, a, b) = i.writes[0], i.reads
    rows, cols = p._vec_shape(d)
    fn = _FMA[str(i.attr("fn"))]
    p._line(i, f"{fn}({p._ub(d)}, {p._ub(a)}, {p._ub(b)}, {cols}, {rows}, "
               f"{_binary_params(p, i, d, a, b)});")


def _vec_unary(p: _KernelPrinter, i: Instr) -> None:
    d, s = i.writes[0], i.reads[0]
    rows, cols = p._vec_shape(d)
    fn = str(i.attr("fn"))
    if fn == "copy":
        (db, dr), (sb, sr) = p._rep(d), p._rep(s)
        p._line(i, f"Copy({p._ub(d)}, {p._ub(s)}, {cols}, {rows}, "
                   f"CopyRepeatParams({db}, {sb}, {dr}, {sr}));")
        return
    p._line(i, f"{_UNARY[fn]}({p._ub(d)}, {p._ub(s)}, {cols}, {rows}, "
               f"{_unary_params(p, i, d, s)});")


def _vec_scalar(p: _KernelPrinter, i: Instr) -> None:
    d, s = i.writes[0], i.reads[0]
    rows, cols = p._vec_shape(d)
    fn = _SCALAR[str(i.attr("fn"))]
    scalar = _scalar(i.attr("scalar"), p.k.dtype_of(d.tensor))  # type: ignore[arg-type]
    p._line(i, f"{fn}({p._ub(d)}, {p._ub(s)}, {scalar}, {cols}, {rows}, "
               f"{_unary_params(p, i, d, s)});")


def _vec_dup(p: _KernelPrinter, i: Instr) -> None:
    d = i.writes[0]
    rows, cols = p._vec_shape(d)
    blk, rep = p._rep(d)
    value = _scalar(i.attr("value"), p.k.dtype_of(d.tensor))  # type: ignore[arg-type]
    p._line(i, f"Duplicate({p._ub(d)}, {value}, {cols}, {rows}, {blk}, {rep});")


def _vec_cast(p: _KernelPrinter, i: Instr) -> None:
    d, s = i.writes[0], i.reads[0]
    rows, cols = p._vec_shape(d)
    mode = _ROUND[str(i.attr("round", "none"))]
    p._line(i, f"Cast({p._ub(d)}, {p._ub(s)}, RoundMode::{mode}, {cols}, {rows}, "
               f"{_unary_params(p, i, d, s)});")


def _vec_reduce(p: _KernelPrinter, i: Instr) -> None:
    d, s = i.writes[0], i.reads[0]
    rows, cols = p._vec_shape(s)
    _sb, sr = p._rep(s)
    _drows, drs, _dc, _dcs = _dims2(d)
    dst_rep = drs if rows > 1 else 1  # units of one result (sizeof(T)), docs WholeReduceMax
    fn = str(i.attr("fn"))
    order = "" if fn == "sum" else ", ReduceOrder::ORDER_ONLY_VALUE"
    p._line(i, f"{_REDUCE[fn]}({p._ub(d)}, {p._ub(s)}, {cols}, {rows}, {dst_rep}, 1, {sr}{order});")


def _vec_block_reduce(p: _KernelPrinter, i: Instr) -> None:
    d, s = i.writes[0], i.reads[0]
    rows, cols = p._vec_shape(s)
    _sb, sr = p._rep(s)
    _drows, drs, dcols, _dcs = _dims2(d)
    dst_rep = drs // dcols if rows > 1 else 1  # units of one repeat's 8 results
    fn = str(i.attr("fn"))
    p._line(i, f"{_BLOCK_REDUCE[fn]}({p._ub(d)}, {p._ub(s)}, {rows}, {cols}, {dst_rep}, 1, "
               f"{sr});")


def _vec_brcb(p: _KernelPrinter, i: Instr) -> None:
    d, s = i.writes[0], i.reads[0]
    n, _srs, _one, _ = _dims2(s)
    e = p._esize(d)
    per = p.t.repeat_bytes // p.t.block_bytes  # src elements (= dst blocks) per repeat
    _drows, drs, _dcols, _ = _dims2(d)
    # a contiguous source of whole groups, destination rows one block apart (verified; docs
    # Brcb.md:123: dstBlkStride = 0 is undefined behaviour)
    blk = p._blocks(drs, e)
    p._line(i, f"Brcb({p._ub(d)}, {p._ub(s)}, {n // per}, BrcbRepeatParams({blk}, {blk * per}));")


def _cmp_rows(p: _KernelPrinter, i: Instr, mask: Region, data: Region) -> tuple[int, int, bool]:
    """(rows, cols, packed): packed when the mask rows sit where the hardware packs them."""
    e = p._esize(data)
    rows, cols = p._vec_shape(data)
    lane_bytes = p.t.repeat_bytes // e // 8  # mask bytes one repeat produces/consumes
    _mrows, mrs, _mcols, _ = _dims2(mask)
    return rows, cols, rows == 1 or mrs == lane_bytes


def _per_row(p: _KernelPrinter, i: Instr, regions: list[Region], make_call) -> None:
    """One repeat per row, for masks whose row stride differs from the packed layout."""
    rows = _dims2(regions[0])[0]
    p.emit(f"for (int64_t row_ = 0; row_ < {rows}; ++row_) {{  // one repeat per mask row:"
           " the hardware packs mask bits per repeat")
    p.indent += 1
    exprs = [p._ub(r, f"row_ * {_dims2(r)[1]}") for r in regions]
    p._line(i, make_call(exprs))
    p.indent -= 1
    p.emit("}")


def _vec_cmp(p: _KernelPrinter, i: Instr) -> None:
    m, (a, b) = i.writes[0], i.reads
    rows, cols, packed = _cmp_rows(p, i, m, a)
    mode = _CMP[str(i.attr("fn"))]
    (ab, ar), (bb, br) = p._rep(a), p._rep(b)
    params = f"BinaryRepeatParams(1, {ab}, {bb}, 8, {ar}, {br})"
    if packed:
        p._line(i, f"Compare({p._ub(m)}, {p._ub(a)}, {p._ub(b)}, CMPMODE::{mode}, {cols}, {rows}, "
                   f"{params});", "dst strides unused: mask bits are packed per repeat")
    else:
        _per_row(p, i, [m, a, b], lambda ex: f"Compare({ex[0]}, {ex[1]}, {ex[2]}, CMPMODE::{mode}, "
                                             f"{cols}, 1, {params});")


def _vec_select(p: _KernelPrinter, i: Instr) -> None:
    d, (m, a, b) = i.writes[0], i.reads
    rows, cols, packed = _cmp_rows(p, i, m, d)
    params = _binary_params(p, i, d, a, b)
    if packed:
        p._line(i, f"Select({p._ub(d)}, {p._ub(m)}, {p._ub(a)}, {p._ub(b)}, "
                   f"SELMODE::VSEL_TENSOR_TENSOR_MODE, {cols}, {rows}, {params});")
    else:
        _per_row(p, i, [d, m, a, b], lambda ex: f"Select({ex[0]}, {ex[1]}, {ex[2]}, {ex[3]}, "
                                                f"SELMODE::VSEL_TENSOR_TENSOR_MODE, {cols}, 1, {params});")


VECTOR_TEMPLATES = {
    "copy_gm_ub": _dma, "copy_ub_gm": _dma,
    "vec_binary": _vec_binary, "vec_fma": _vec_fma, "vec_unary": _vec_unary, "vec_scalar": _vec_scalar,
    "vec_dup": _vec_dup, "vec_cast": _vec_cast, "vec_reduce": _vec_reduce,
    "vec_block_reduce": _vec_block_reduce,
    "vec_brcb": _vec_brcb, "vec_cmp": _vec_cmp, "vec_select": _vec_select,
}
