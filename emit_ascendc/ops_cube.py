"""AscendC call templates of the Cube (AIC) ops: GM -> L1 copies, L0A/L0B loads, Mmad, Fixpipe.

Cube (AIC) programs (lower/cube_ops.py): each cube op's attrs ARE the fields of its
AscendC parameter struct, so the printer passes them through in constructor order:
  Nd2NzParams(ndNum, nValue, dValue, srcNdMatrixStride, srcDValue, dstNzC0Stride, dstNzNStride,
      dstNzMatrixStride)  include/basic_api/kernel_struct_data_copy.h
  LoadData2DParams(startIndex, repeatTimes, srcStride, sid, dstGap, ifTranspose, addrMode),
  LoadData2dTransposeParams(startIndex, repeatTimes, srcStride, dstGap, dstFracGap, addrMode),
  MmadParams(m, n, k, unitFlag, cmatrixSource, cmatrixInitVal) (+ .kDirectionAlign)
      include/basic_api/kernel_struct_mm.h
  FixpipeParamsV220(nSize, mSize, srcStride, dstStride, reluEn, quantPre, deqScalar, ndNum,
      srcNdStride, dstNdStride, unitFlag)  include/basic_api/kernel_struct_fixpipe.h
  DataCopyParams(blockCount, blockLen, srcStride, dstStride) (L1 -> bias table, blockLen in
      64 B)  include/basic_api/kernel_struct_data_copy.h
  DataCopy(l1, gm, count) (GM -> L1 contiguous, docs DataCopy（GMToL1连续数据搬运）.md) and
      Fixpipe(gm, l0c, cbufWorkspace, FixpipeParamsV220) with quantPre VDEQF16 (the per-channel
      overload, docs Fixpipe（L0C到GM数据搬运）.md; include/basic_api/kernel_operator_fixpipe_intf.h)
  Mmad(c, a, b, bias, MmadParams) with the bias in C2 (the with-bias prototype of Mmad.md)
Every call's params were verified against the footprint its regions describe (lower/verify_cube.py).
``CUBE_TEMPLATES`` maps each op to its template.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ascendsched.emit_ascendc.c_syntax import _cexpr, _ctype
from ascendsched.lower.affine import Cond
from ascendsched.lower.ir import Instr

if TYPE_CHECKING:
    from ascendsched.emit_ascendc.kernel_printer import _KernelPrinter


def _cbool(v: object) -> str:
    return "true" if v else "false"


def _cube_args(p: _KernelPrinter, i: Instr) -> dict:
    """The API params by name. The verifier checked them (all present, in their documented
    ranges, bools where the struct has bools) and that the regions' dims are the box they
    imply: the printed call moves the bytes the polyhedral analysis and the syncs saw."""
    return dict(i.attrs)


def _copy_gm_l1(p: _KernelPrinter, i: Instr) -> None:
    a = _cube_args(p, i)
    l1, gm = i.writes[0], i.reads[0]
    args = ", ".join(str(a[n]) for n in ("ndNum", "nValue", "dValue", "srcNdMatrixStride",
                                         "srcDValue", "dstNzC0Stride", "dstNzNStride",
                                         "dstNzMatrixStride"))
    note = (f"ND {a['nValue']} x {a['dValue']} -> NZ, column groups {a['dstNzC0Stride']} x 32 B "
            f"apart" + (f", {a['ndNum']} matrices" if a["ndNum"] != 1 else ""))
    p._line(i, f"DataCopy({p._ub(l1)}, {p._gm(gm)}, Nd2NzParams({args}));", note)


def _load2d(p: _KernelPrinter, i: Instr) -> None:
    a = _cube_args(p, i)
    dst, src = i.writes[0], i.reads[0]
    args = (f"{a['startIndex']}, {a['repeatTimes']}, {a['srcStride']}, {a['sid']}, {a['dstGap']}, "
            f"{_cbool(a['ifTranspose'])}, {a['addrMode']}")
    note = (f"{a['repeatTimes']} fractals, src stride {a['srcStride']} x 512 B"
            + (", each transposed" if a["ifTranspose"] else ""))
    p._line(i, f"LoadData({p._ub(dst)}, {p._ub(src)}, LoadData2DParams({args}));", note)


def _load_transpose(p: _KernelPrinter, i: Instr) -> None:
    a = _cube_args(p, i)
    dst, src = i.writes[0], i.reads[0]
    args = ", ".join(str(a[n]) for n in ("startIndex", "repeatTimes", "srcStride", "dstGap",
                                         "dstFracGap", "addrMode"))
    p._line(i, f"LoadDataWithTranspose({p._ub(dst)}, {p._ub(src)}, "
               f"LoadData2dTransposeParams({args}));",
            f"{a['repeatTimes']} transposed squares")


def _init_expr(v: object) -> str:
    if isinstance(v, Cond):
        return f"({_cexpr(v.lhs)} {v.op} {v.rhs})"
    return _cbool(v)


def _mmad(p: _KernelPrinter, i: Instr) -> None:
    a = _cube_args(p, i)
    c, (fm, filt) = i.writes[0], i.reads
    init = _init_expr(a["cmatrixInitVal"])
    params = (f"MmadParams({a['m']}, {a['n']}, {a['k']}, {a['unitFlag']}, "
              f"{_cbool(a['cmatrixSource'])}, {init})")
    note = "" if i.comment else (
        f"C[{a['m']} x {a['n']}] " + ("= A x B" if a["cmatrixInitVal"] is True else
                                      "+= A x B" if a["cmatrixInitVal"] is False else
                                      f"= A x B when {init}, else += A x B"))
    call = f"Mmad({p._ub(c)}, {p._ub(fm)}, {p._ub(filt)}, {{}});"
    if a["kDirectionAlign"] is not True:
        p._line(i, call.format(params), note)
        return
    p.emit("{")
    p.indent += 1
    p.emit(f"MmadParams mmadParams = {params};")
    p.emit("mmadParams.kDirectionAlign = true;  // float K aligned to 16 in L0A/L0B")
    p._line(i, call.format("mmadParams"), note)
    p.indent -= 1
    p.emit("}")


def _mmad_bias(p: _KernelPrinter, i: Instr) -> None:
    a = _cube_args(p, i)
    c, (fm, filt, bias) = i.writes[0], i.reads
    params = (f"MmadParams({a['m']}, {a['n']}, {a['k']}, {a['unitFlag']}, "
              f"{_cbool(a['cmatrixSource'])}, {_cbool(a['cmatrixInitVal'])})")
    p._line(i, f"Mmad({p._ub(c)}, {p._ub(fm)}, {p._ub(filt)}, {p._ub(bias)}, {params});",
            "" if i.comment else f"C[{a['m']} x {a['n']}] = A x B + bias")


def _copy_gm_l1_cont(p: _KernelPrinter, i: Instr) -> None:
    a = _cube_args(p, i)
    l1, gm = i.writes[0], i.reads[0]
    p._line(i, f"DataCopy({p._ub(l1)}, {p._gm(gm)}, {a['count']});",
            f"{a['count']} contiguous elements GM -> L1")


def _copy_l1_bt(p: _KernelPrinter, i: Instr) -> None:
    a = _cube_args(p, i)
    bt, l1 = i.writes[0], i.reads[0]
    args = ", ".join(str(a[n]) for n in ("blockCount", "blockLen", "srcStride", "dstStride"))
    p._line(i, f"DataCopy({p._ub(bt)}, {p._ub(l1)}, DataCopyParams({args}));",
            f"{a['blockLen']} x 64 B into the bias table")


_QUANT = {"NoQuant": "QuantMode_t::NoQuant", "F322F16": "QuantMode_t::F322F16",
          "F322BF16": "QuantMode_t::F322BF16", "VDEQF16": "QuantMode_t::VDEQF16"}


def _fixpipe(p: _KernelPrinter, i: Instr) -> None:
    a = _cube_args(p, i)
    gm, l0c = i.writes[0], i.reads[0]
    # fixpipe_quant: the per-channel overload, quant words in L1 (cbufWorkspace); the API
    # copies them to the Fixpipe buffer itself (kernel_operator_fixpipe_v2_impl.h)
    qarg = f"{p._ub(i.reads[1])}, " if i.op == "fixpipe_quant" else ""
    quant = _QUANT[str(a["quantPre"])]  # one of FIXPIPE_QUANT / FIXPIPE_VQUANT (verified)
    t, u = _ctype(p.k.dtype_of(gm.tensor)), _ctype(p.k.dtype_of(l0c.tensor))
    params = (f"FixpipeParamsV220({a['nSize']}, {a['mSize']}, {a['srcStride']}, {a['dstStride']}, "
              f"{_cbool(a['reluEn'])}, {quant}, 0, {a['ndNum']}, {a['srcNdStride']}, "
              f"{a['dstNdStride']}, {a['unitFlag']})")
    note = "" if i.comment else f"{a['mSize']} x {a['nSize']} valid region, NZ -> ND"
    p._line(i, f"Fixpipe<{t}, {u}, CFG_ROW_MAJOR>({p._gm(gm)}, {p._ub(l0c)}, {qarg}{params});",
            note)


CUBE_TEMPLATES = {
    "copy_gm_l1": _copy_gm_l1, "load_l0a": _load2d, "load_l0b": _load2d,
    "load_l0a_transpose": _load_transpose, "load_l0b_transpose": _load_transpose,
    "mmad": _mmad, "mmad_bias": _mmad_bias, "copy_l1_bt": _copy_l1_bt, "fixpipe": _fixpipe,
    "copy_gm_l1_cont": _copy_gm_l1_cont, "fixpipe_quant": _fixpipe,
}
