"""Execution of the Cube (AIC) ops of kernel IR, straight from their AscendC parameters.

Every handler computes the element addresses an op touches from its params alone (the layout
formulas of ``lower/cube_ops.py``'s docstring, written out here independently of
``cube_ops.cube_footprints``), moves or computes the values with numpy, and records the exact
bytes for the trace. The regions only supply tensor, copy and start offset; the verifier
(``lower/verify_cube.py``, run by ``run_kernel``) has checked that their dims equal the
footprint the params imply, so the polyhedral model, which uses the dims, sees the same bytes,
and that params, scopes, alignment, bounds, dtypes and modes keep the contract. The one check
left here needs the data: an Mmad reading bytes no copy or load wrote
(``InternalCompilerError`` naming the instruction).

Arithmetic: fp16 x fp16 and bf16 x bf16 products are exact in float32 and summed in float32
(numpy float32 matmul); int8 x int8 is summed exactly and stored wrapped to int32. Entries of
C outside the logical m x n (but inside the fractal padding) are written as poison. Fixpipe
applies ReLU, then casts with round-to-nearest-even (F322F16 / F322BF16) or keeps the value. An
Mmad with a bias (``mmad_bias``) starts C from the bias-table row instead of zero: float32
``bias + sum`` rounded once per Mmad like the accumulation, int32 wrapping. ``fixpipe_quant``
(VDEQF16) multiplies each column by the M1 of its quant word (``lower/fixpipe_quant.py``
``vdeqf16``, the one statement of its arithmetic); ``copy_gm_l1_cont`` moves words as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ascendsched import dtypes as dt
from ascendsched.dtypes import DType
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.affine import Cond
from ascendsched.lower.fixpipe_quant import padded_words, vdeqf16
from ascendsched.sim.trace import Interval
from ascendsched.target.model import Scope

__all__ = ["CUBE_HANDLERS", "POISON_BYTE", "Storage"]

POISON_BYTE = 0xFF  # unwritten cube memory: NaN for every float type, -1 for ints
_RAW = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@dataclass(frozen=True)
class Storage:
    """The memory holding one tensor / buffer copy (from ``_Machine.storage``)."""

    tensor: str
    dtype: DType
    scope: Scope
    space: str  # trace space
    mem: np.ndarray  # uint8
    base: int  # byte address of element 0 (= trace address)
    elems: int
    # L1/L0A/L0B: 0xFF per byte a copy or load has written (the rest was never loaded)
    loaded: np.ndarray | None = None


@dataclass(frozen=True)
class _Opnd:
    st: Storage
    off: int  # element offset of the operand (the region's offset)
    role: str

    @property
    def eb(self) -> int:
        return self.st.dtype.bytes

    @property
    def start(self) -> int:
        return self.st.base + self.off * self.eb

    def raw(self) -> np.ndarray:
        """The copy's elements as unsigned integers of the element width (a view)."""
        st = self.st
        return st.mem[st.base:st.base + st.elems * self.eb].view(_RAW[self.eb])

    def loaded_raw(self) -> np.ndarray | None:
        """Per element: all ones where every byte was loaded (a view), None if not tracked."""
        st = self.st
        if st.loaded is None:
            return None
        return st.loaded[st.base:st.base + st.elems * self.eb].view(_RAW[self.eb])

    def bytes_of(self, idx: np.ndarray) -> list[Interval]:
        """Coalesced byte intervals of the elements ``idx`` (runs of consecutive elements)."""
        flat = idx.ravel()
        if flat.size == 0:
            return []
        if flat.size > 1 and not (flat[1:] >= flat[:-1]).all():
            flat = np.sort(flat)
        brk = np.flatnonzero(np.diff(flat) > 1)
        starts = np.concatenate((flat[:1], flat[brk + 1]))
        ends = np.concatenate((flat[brk], flat[-1:])) + 1
        base, eb, sp = self.st.base, self.eb, self.st.space
        return [(sp, base + int(a) * eb, base + int(b) * eb)
                for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


def _values(dtype: DType, raw: np.ndarray) -> np.ndarray:
    """Raw element bits -> values (floats as float32/float16, ints as int64)."""
    if dtype is dt.bfloat16:
        return dt.from_bf16_bits(raw)
    if dtype is dt.float16:
        return raw.view(np.float16)
    if dtype is dt.float32:
        return raw.view(np.float32)
    if dtype is dt.int32:
        return raw.view(np.int32).astype(np.int64)
    if dtype is dt.int8:
        return raw.view(np.int8).astype(np.int64)
    raise InternalCompilerError(f"cube ops do not handle dtype {dtype}")


def _bits(dtype: DType, values: np.ndarray) -> np.ndarray:
    """Values -> raw element bits of ``dtype`` (floats round to nearest even, ints wrap)."""
    if dtype is dt.bfloat16:
        return dt.bf16_bits(np.asarray(values, dtype=np.float32))
    return np.ascontiguousarray(dt.store(dtype, values)).view(_RAW[dtype.bytes])


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


# --------------------------------------------------------------------------- operands
def _operands(cx: Any) -> tuple[dict, list[_Opnd]]:
    """The params by name and the operands, writes first (params in range, operands in their
    scopes, aligned, in bounds, equal to the params' footprint, written once: verified)."""
    ins = cx.ins
    regions = ins.writes + ins.reads
    roles = ["dst", "src"] if len(regions) == 2 else ["dst"] + [
        f"src{i}" for i in range(len(regions) - 1)]
    return dict(ins.attrs), [_Opnd(cx.m.storage(cx, r, role), r.offset.evaluate(cx.env), role)
                             for r, role in zip(regions, roles, strict=True)]


def _move(cx: Any, dst: _Opnd, didx: np.ndarray, src: _Opnd, sidx: np.ndarray,
          sset: np.ndarray | None = None) -> None:
    """Raw copy src[sidx] -> dst[didx] (same shapes), with the trace.

    ``sset``: the same source elements as ``sidx`` in ascending order (cheaper to trace)."""
    cx.read(src.bytes_of(sidx if sset is None else sset))
    cx.write(dst.bytes_of(didx))
    vals = src.raw()[sidx].copy()
    dst.raw()[didx] = vals
    _mark_loaded(dst, didx, src, sidx)


_ALL = {1: np.uint8(0xFF), 2: np.uint16(0xFFFF), 4: np.uint32(0xFFFFFFFF),
        8: np.uint64(0xFFFFFFFFFFFFFFFF)}


def _mark_loaded(dst: _Opnd, didx: np.ndarray, src: _Opnd | None = None,
                 sidx: np.ndarray | None = None) -> None:
    """dst[didx] now holds loaded data (from GM), or src[sidx]'s loaded state (a copy)."""
    d = dst.loaded_raw()
    if d is None:
        return
    s = src.loaded_raw() if src is not None else None
    d[didx] = _ALL[dst.eb] if s is None else s[sidx]


def _check_loaded(cx: Any, o: _Opnd, idx: np.ndarray, what: str, dims: tuple[str, str]) -> None:
    """Mmad must not read bytes no copy loaded: stale or, on the first tile, garbage that may be
    NaN, which "may raise an execution error" (Mmad.md:329). Pass m/n of the valid region
    (the rest of a fractal is ignored, Mmad.md:285-287) or fill the padding."""
    flags = o.loaded_raw()
    if flags is None:
        return
    bad = np.argwhere(flags[idx] != _ALL[o.eb])
    if bad.size:
        i, j = (int(v) for v in bad[0])
        raise cx.fail(f"Mmad reads {o.st.tensor} ({what}) {dims[0]} {i}, {dims[1]} {j}, which no "
                      f"copy loaded ({len(bad)} such elements): Mmad.md:329 warns that NaN "
                      "inputs may raise an execution error; pass m/n of the valid region "
                      "(Mmad.md:285-287: the rest of a fractal is ignored) or fill the padding")


# --------------------------------------------------------------------------- GM -> L1
def _copy_gm_l1(cx: Any) -> None:
    p, (l1, gm) = _operands(cx)
    c0 = cx.m.t.block_bytes // l1.eb
    nd, n, d = p["ndNum"], p["nValue"], p["dValue"]
    dp = _ceil(d, c0) * c0
    i = np.arange(nd, dtype=np.int64)[:, None, None]
    r = np.arange(n, dtype=np.int64)[None, :, None]
    c = np.arange(dp, dtype=np.int64)[None, None, :]
    didx = (l1.off + i * p["dstNzMatrixStride"] + (c // c0) * p["dstNzC0Stride"] * c0
            + r * p["dstNzNStride"] * c0 + c % c0)
    didx = np.broadcast_to(didx, (nd, n, dp))
    sidx = gm.off + i * p["srcNdMatrixStride"] + r * p["srcDValue"] + c[:, :, :d]
    sidx = np.broadcast_to(sidx, (nd, n, d))
    cx.read(gm.bytes_of(sidx))
    cx.write(l1.bytes_of(didx.reshape(nd, n, dp // c0, c0).transpose(0, 2, 1, 3)))
    vals = np.zeros((nd, n, dp), dtype=_RAW[l1.eb])  # the 32 B round-up of a row is zeroed
    vals[:, :, :d] = gm.raw()[sidx]
    l1.raw()[didx] = vals
    _mark_loaded(l1, didx)


def _copy_gm_l1_cont(cx: Any) -> None:
    """GM -> L1 DataCopy of ``count`` contiguous elements, as they are."""
    p, (l1, gm) = _operands(cx)
    idx = np.arange(p["count"], dtype=np.int64)
    _move(cx, l1, l1.off + idx, gm, gm.off + idx)


# --------------------------------------------------------------------------- L1 -> L0A / L0B
def _load2d(cx: Any) -> None:
    p, (dst, src) = _operands(cx)
    fr = cx.m.t.cube_rows  # rows of a fractal (L0C fractals: fr x fr)
    f = cx.m.t.cube_fractal_bytes // dst.eb
    rep = p["repeatTimes"]
    j = np.arange(rep, dtype=np.int64)[:, None]
    e = np.arange(f, dtype=np.int64)[None, :]
    frac = src.off + (p["startIndex"] + j * p["srcStride"]) * f  # source fractal starts
    sset = frac + e
    if p["ifTranspose"]:  # 16-bit types only (verified)
        e = (e % fr) * fr + e // fr  # dst element 16a+b takes src element 16b+a
    didx = dst.off + j * (p["dstGap"] + 1) * f + np.arange(f, dtype=np.int64)[None, :]
    _move(cx, dst, didx, src, frac + e, sset)


def _load_transpose(cx: Any) -> None:
    p, (dst, src) = _operands(cx)
    fr = cx.m.t.cube_rows  # rows of a fractal (L0C fractals: fr x fr)
    eb = dst.eb
    f = cx.m.t.cube_fractal_bytes // eb
    rep = p["repeatTimes"]
    j = np.arange(rep, dtype=np.int64)[:, None, None, None]
    if eb == 2:  # one 16x16 fractal per repeat, transposed
        side, nfrac = fr, 1
    else:  # b8 (b32 is not modelled: refused by the verifier): two 16x32 fractals = a 32x32
        side, nfrac = 2 * fr, 2  # square, transposed, split in two
    sq = side * side
    q = np.arange(nfrac, dtype=np.int64)[None, :, None, None]  # destination fractal
    a = np.arange(fr, dtype=np.int64)[None, None, :, None]  # its row
    i = np.arange(side, dtype=np.int64)[None, None, None, :]  # element within the row
    # dst fractal q, row a, element i = square[i][16q + a]
    sidx = src.off + (p["startIndex"] + j * p["srcStride"]) * sq + i * side + fr * q + a
    didx = (dst.off + j * (p["dstGap"] + 1) * f + q * (p["dstFracGap"] + 1) * f + a * side + i)
    shape = (rep, nfrac, fr, side)
    sset = (src.off + (p["startIndex"] + j.reshape(rep, 1) * p["srcStride"]) * sq
            + np.arange(sq, dtype=np.int64)[None, :])  # whole squares, ascending
    _move(cx, dst, np.broadcast_to(didx, shape), src, np.broadcast_to(sidx, shape), sset)


# --------------------------------------------------------------------------- Mmad
def _init_val(cx: Any, v: bool | Cond) -> bool:
    return v.evaluate(cx.env) if isinstance(v, Cond) else v


def _copy_l1_bt(cx: Any) -> None:
    """L1 -> bias table: blockLen x ``bias_block_bytes`` contiguous bytes, as they are."""
    p, (bt, l1) = _operands(cx)
    n = p["blockCount"] * p["blockLen"] * cx.m.t.bias_block_bytes // bt.eb
    idx = np.arange(n, dtype=np.int64)
    _move(cx, bt, bt.off + idx, l1, l1.off + idx)


def _mmad(cx: Any) -> None:
    p, (c, a, b, *bias) = _operands(cx)
    fr = cx.m.t.cube_rows  # rows of a fractal (L0C fractals: fr x fr)
    m, n, k = p["m"], p["n"], p["k"]  # m > 1, modelled dtypes and modes (verified)
    init = _init_val(cx, p["cmatrixInitVal"])
    c0 = cx.m.t.block_bytes // a.eb
    mp, kp, np_ = _ceil(m, fr) * fr, _ceil(k, c0) * c0, _ceil(n, fr) * fr
    f = cx.m.t.cube_fractal_bytes // a.eb
    r = np.arange(m, dtype=np.int64)[:, None]
    kk = np.arange(k, dtype=np.int64)[None, :]
    aidx = a.off + ((r // fr) * (kp // c0) + kk // c0) * f + (r % fr) * c0 + kk % c0  # Zz
    kr = np.arange(k, dtype=np.int64)[:, None]
    nn = np.arange(n, dtype=np.int64)[None, :]
    bidx = b.off + ((kr // c0) * (np_ // fr) + nn // fr) * f + (nn % fr) * c0 + kr % c0  # Zn
    rr = np.arange(mp, dtype=np.int64)[:, None]
    cn = np.arange(np_, dtype=np.int64)[None, :]
    cidx = c.off + (cn // fr) * mp * fr + rr * fr + cn % fr  # Nz, the whole padded tile
    # The hardware reads whole fractals: the trace records the padded boxes.
    afull = a.off + np.arange(mp * kp, dtype=np.int64)
    bfull = b.off + np.arange(kp * np_, dtype=np.int64)
    cx.read(a.bytes_of(afull))
    cx.read(b.bytes_of(bfull))
    _check_loaded(cx, a, aidx, "L0A", ("row", "k"))
    _check_loaded(cx, b, bidx, "L0B", ("k", "column"))
    av = _values(a.st.dtype, a.raw()[aidx])
    bv = _values(b.st.dtype, b.raw()[bidx])
    if c.st.dtype.is_float:
        # einsum, not BLAS: threaded sgemm on a busy 2-core machine takes ~1000x longer for
        # these small tiles, and einsum's float32 sums are the same on every machine.
        with np.errstate(all="ignore"):
            prod = np.einsum("ik,kj->ij", av.astype(np.float32), bv.astype(np.float32))
    else:
        prod = av @ bv
    ctile = c.off + np.arange(mp * np_, dtype=np.int64)  # the tile is contiguous (Nz)
    if bias:  # C = A x B + bias[n], the bias row broadcast over m (verified: init is False)
        (bt,) = bias
        cx.read(bt.bytes_of(bt.off + np.arange(np_, dtype=np.int64)))
        row = _values(bt.st.dtype, bt.raw()[bt.off + np.arange(n, dtype=np.int64)])
        with np.errstate(all="ignore"):
            prod = row[None, :].astype(prod.dtype) + prod
    elif not init:
        cx.read(c.bytes_of(ctile))
        old = _values(c.st.dtype, c.raw()[cidx[:m, :n]])
        with np.errstate(all="ignore"):
            prod = old.astype(prod.dtype) + prod
    cx.write(c.bytes_of(ctile))
    craw = c.raw()
    craw[cidx] = np.array(-1).astype(_RAW[c.eb])  # pad entries of the tile: garbage
    craw[cidx[:m, :n]] = _bits(c.st.dtype, prod)


# --------------------------------------------------------------------------- L0C -> GM
def _fixpipe(cx: Any) -> None:
    p, (gm, l0c, *quant) = _operands(cx)
    fr = cx.m.t.cube_rows  # rows of a fractal (L0C fractals: fr x fr)
    nd, ms, ns = p["ndNum"], p["mSize"], p["nSize"]
    i = np.arange(nd, dtype=np.int64)[:, None, None]
    m = np.arange(ms, dtype=np.int64)[None, :, None]
    nfull = np.arange(_ceil(ns, fr) * fr, dtype=np.int64)[None, None, :]
    sidx = (l0c.off + i * p["srcNdStride"] * fr * fr + (nfull // fr) * p["srcStride"] * fr
            + m * fr + nfull % fr)
    sidx = np.broadcast_to(sidx, (nd, ms, nfull.shape[2]))
    didx = gm.off + i * p["dstNdStride"] + m * p["dstStride"] + nfull[:, :, :ns]
    didx = np.broadcast_to(didx, (nd, ms, ns))
    # whole 16-element row blocks, traced in (matrix, column block, row) order
    cx.read(l0c.bytes_of(sidx.reshape(nd, ms, -1, fr).transpose(0, 2, 1, 3)))
    cx.write(gm.bytes_of(didx))
    v = _values(l0c.st.dtype, l0c.raw()[sidx[:, :, :ns]])
    if quant:  # VDEQF16 (the only per-channel mode, verified): the API copies whole 128 B
        (q,) = quant
        cx.read(q.bytes_of(q.off + np.arange(padded_words(ns, cx.m.t), dtype=np.int64)))
        words = q.raw()[q.off + np.arange(ns, dtype=np.int64)]
        gm.raw()[didx] = _bits(gm.st.dtype, vdeqf16(v, words, bool(p["reluEn"])))
        return
    if p["reluEn"]:
        v = np.where(v < 0, v.dtype.type(0), v)
    gm.raw()[didx] = _bits(gm.st.dtype, v)


CUBE_HANDLERS: dict[str, Callable[[Any], None]] = {
    "copy_gm_l1": _copy_gm_l1,
    "load_l0a": _load2d,
    "load_l0b": _load2d,
    "load_l0a_transpose": _load_transpose,
    "load_l0b_transpose": _load_transpose,
    "mmad": _mmad,
    "mmad_bias": _mmad,
    "copy_l1_bt": _copy_l1_bt,
    "fixpipe": _fixpipe,
    "copy_gm_l1_cont": _copy_gm_l1_cont,
    "fixpipe_quant": _fixpipe,
}
