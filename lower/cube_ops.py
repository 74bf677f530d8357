"""The Cube (AIC) ops of kernel IR: their semantics, parameter tables and element footprints.

Each op is one AscendC call whose ``attrs`` are its parameter struct (``CUBE_PARAMS``; their
contract, with the documented ranges of ``target.cube_param_ranges``, is checked by
``lower/verify_cube.py``); ``cube_footprints`` derives the element box each region touches from
the params and the target's fractal geometry, and ``make_cube_instr`` builds an Instr whose
regions are those boxes. The instruction
classes, statements and the other ops are in ``lower/ir.py``.

Cube (AIC). Sources: hicann/asc-devkit (the upstream of mirror-cann/asc-devkit), docs/zh/api/
SIMD-API/basic_api/cube_compute_ISASI/ (below: ``ISASI/``), and hicann/catlass
include/catlass/gemm/tile/. Each op is ONE AscendC call; ``attrs`` hold exactly the fields of its
parameter struct, all present, by their API names (``CUBE_PARAMS``), ints/bools/strs (mmad's
``cmatrixInitVal`` may be a :class:`Cond`, e.g. ``k == 0``); ranges in ``target.cube_param_ranges``.
Regions: ``offset`` = the element offset of the LocalTensor/GlobalTensor operand passed to the
call (what the emitter prints as ``t[offset]``), ``copy`` as usual, and ``dims`` = the exact
element box the call touches, as :func:`cube_footprints` derives it from the params (build cube
instructions with :func:`make_cube_instr`). Sim, polyhedral byte relations and the C++ runtime
all derive the bytes from the params; the sim rejects regions whose dims disagree.
Notation: eb = element bytes, C0 = 32 / eb (fp16/bf16 16, fp32/int32 8, int8 32), a fractal =
512 B = F = 512 / eb elements = 16 rows x C0. A logical (R, C) matrix is padded to
Rp = ceil(R/16)*16, Cp = ceil(C/C0)*C0. Layouts (element offset of logical (r, c)):
  nz  (L1, A as (M, K) or B as (K, N) or their transposes, as Nd2Nz writes it with
       dstNzNStride = 1, dstNzC0Stride = Rp):   (c // C0) * Rp * C0 + r * C0 + c % C0
  Zz  (L0A, A as (M, K)):  ((r // 16) * (Kp // C0) + c // C0) * F + (r % 16) * C0 + c % C0
  Zn  (L0B, B as (K, N), C0 along K, 16 along N):
        ((k // C0) * (Np // 16) + n // 16) * F + (n % 16) * C0 + k % C0
  Nz  (L0C, C as (M, N), fp32/int32, 16 x 16 = 1 KB fractals):
        (n // 16) * Mp * 16 + m * 16 + n % 16        (Mmad: ISASI/mmad_compute/Mmad.md 表2)
Initial contents: L1/L0A/L0B/L0C bytes nobody wrote are garbage (the sim fills them with 0xFF:
NaN for floats, -1 for ints), so a lowering that relies on unwritten padding gets wrong numbers.

  ``copy_gm_l1``  MTE2  writes (l1,) reads (gm,). ``DataCopy(l1, gm, Nd2NzParams{ndNum, nValue,
                  dValue, srcNdMatrixStride, srcDValue, dstNzC0Stride, dstNzNStride,
                  dstNzMatrixStride})`` (ISASI/cube_compute_load/DataCopy_GMToL1_ND2NZ.md).
                  For nd matrix i < ndNum, row r < nValue, column c < dValue:
                  l1[i*dstNzMatrixStride + (c//C0)*dstNzC0Stride*C0 + r*dstNzNStride*C0 + c%C0]
                  = gm[i*srcNdMatrixStride + r*srcDValue + c]. Strides dstNzC0Stride and
                  dstNzNStride are in 32 B units, the matrix strides in elements. The last
                  column group is written whole: columns dValue..ceil(dValue/C0)*C0-1 become 0
                  ("在目的矩阵中会补0对齐到32字节"); rows nValue.. of a group are NOT written.
                  Writes must not overlap. L1 start 32 B aligned, GM any element.
                  Transposed operands are loaded as the logical matrix they are in GM (A^T as
                  (K, M), B^T as (N, K)); the L1->L0 load does the transpose.
  ``load_l0a``    MTE1  writes (l0a,) reads (l1,). ``LoadData(l0a, l1, LoadData2DParams{
                  startIndex, repeatTimes, srcStride, sid, dstGap, ifTranspose, addrMode})``
                  (ISASI/cube_compute_load/LoadData_2D.md and its pseudo-code
                  examples/.../load_data_l12l0/scripts/load2d.py): for repeat j < repeatTimes
                  the fractal at src + (startIndex + j*srcStride)*F goes to dst + j*(dstGap+1)*F,
                  as raw bytes, or (``ifTranspose``, 16-bit types only) transposed as a 16x16
                  matrix: dst[16*a + b] = src[16*b + a]. repeatTimes 1..255; sid = 0; addrMode
                  = 0 (increment); startIndex = 0 (fold the start into the region offset). L1
                  start 32 B aligned, L0A/L0B start 512 B aligned.
                  A (M, K) nz -> Zz: per 16-row block mb, repeatTimes = Kp/C0, srcStride = Mp/16,
                  src offset mb*F, dst offset mb*(Kp/C0)*F. A^T (K, M) nz, 16-bit: one call,
                  repeatTimes = (Mp/16)*(Kp/16), srcStride 1, ifTranspose.
  ``load_l0b``    MTE1  writes (l0b,) reads (l1,). Same call and semantics into L0B. B^T (N, K)
                  nz -> Zn is a plain copy (any dtype; one call, repeatTimes = all fractals,
                  srcStride 1); B (K, N) nz -> Zn needs a per-fractal transpose: 16-bit types
                  per 16-row block kb: repeatTimes = Np/16, srcStride = Kp/16, ifTranspose, src
                  offset kb*F, dst offset kb*(Np/16)*F; int8 via ``load_l0b_transpose``
                  (ifTranspose is b16 only).
  ``load_l0a_transpose`` / ``load_l0b_transpose``  MTE1  writes (l0,) reads (l1,).
                  ``LoadDataWithTranspose(l0, l1, LoadData2dTransposeParams{startIndex,
                  repeatTimes, srcStride, dstGap, dstFracGap, addrMode})``
                  (ISASI/cube_compute_load/LoadDataWithTranspose.md and
                  .../scripts/load_data_with_transpose.py). One repeat transposes one square
                  S (b16: one 16x16 fractal; b8: two consecutive 16x32 fractals = 32x32;
                  b32: two 16x8 fractals = 16x16): square j at src + (startIndex +
                  j*srcStride)*S_elems; it splits into S_elems/F destination fractals, fractal q
                  at dst + j*(dstGap+1)*F + q*(dstFracGap+1)*F. b8: with square[r][c] at
                  r*32 + c, dst fractal q row a (32 elements) holds square[0..31][16q + a].
                  b16: as ``ifTranspose``. b32 is not modelled (no float32 GEMM inputs).
                  int8 B (K, N) nz (rows padded to 32: dstNzC0Stride = ceil(K/32)*32) -> Zn:
                  per 32-row block t: repeatTimes = ceil(N/32), srcStride = ceil(K/32),
                  dstGap = 1, dstFracGap = 0, src offset t*2F, dst offset t*(Np32/16)*F where
                  Np32 = ceil(N/32)*32 (catlass / asc-devkit examples mmad.asc
                  SplitBTranspose); Mmad then needs n = Np32 so its Zn row of fractals matches.
  ``mmad``        M  writes (l0c,) reads (l0a, l0b). ``Mmad(c, a, b, MmadParams{m, n, k,
                  unitFlag, kDirectionAlign, cmatrixSource, cmatrixInitVal})``
                  (ISASI/mmad_compute/Mmad.md): C = A x B (cmatrixInitVal) or C += A x B, with
                  A Zz (m, k), B Zn (k, n), C Nz (m, n) at the layouts above (Kp from A's C0,
                  Np = ceil(n/16)*16, Mp = ceil(m/16)*16). Only logical elements enter the sum
                  ("其他无效数据在计算中会被忽略": k not a multiple of C0 is exact, pad data is
                  ignored); C's pad entries (m.. < Mp, n.. < Np) are garbage (sim: poison).
                  Every A/B element it reads (rows < m, k < k, columns < n) must have been
                  written by a copy or load since the kernel started: other L1/L0 bytes are
                  garbage that may be NaN, "Mmad指令应避免NaN输入，否则可能会产生执行报错"
                  (Mmad.md:329); the simulator and the CPU runtime fail such a read. So m, n
                  are the valid region (build_gemm ``_mmad_mn``), not the padded tile.
                  It reads whole fractals: A bytes [a, a + Mp*Kp*eb), B [b, b + Kp*Np*eb), and
                  (accumulating) C [c, c + Mp*Np*4). dtypes: fp16 x fp16 -> fp32, bf16 x bf16
                  -> fp32 (products exact, sums in fp32), int8 x int8 -> int32 (wrapping).
                  m, n, k in 1..4095; m == 1 switches the hardware to GEMV (A read as ND) and is
                  an error here: pad m to 16. unitFlag = 0, cmatrixSource = False,
                  kDirectionAlign = False (float32 inputs only; not modelled). Starts: C 1 KB,
                  A and B 512 B aligned. Consecutive Mmads are ordered by the hardware
                  when both have (m/16)*(n/16) >= ``target.mmad_ordered_fractals`` (10 on
                  910B, Mmad.md 同步优化说明); smaller ones need PipeBarrier<PIPE_M>
                  (``same_pipe_ordered``).
  ``copy_l1_bt``  MTE1  writes (bt,) reads (l1,). ``DataCopy(bt, l1, DataCopyParams{blockCount,
                  blockLen, srcStride, dstStride})`` into the bias table (TPosition C2), on PIPE_MTE1
                  (asc-devkit docs 矩阵计算（ISASI）/矩阵计算的搬入/DataCopy（L1ToBiasTable-Buffer数据搬运）.md;
                  impl/basic_api/dav_c220/kernel_operator_data_copy_impl.h DataCopyL12BTImpl is
                  ``__inout_pipe__(MTE1)``): blockLen in 64 B units on 910B, one block
                  (blockCount 1, no gaps): bt[e] = l1[e] for e < blockLen * 64 / eb. The 910B BT
                  holds 1 KB; dst 64 B aligned, src 32 B aligned. Only float32 -> float32 and
                  int32 -> int32 are modelled (the table converts half -> float too).
                  GM -> L1 of the bias goes through ``copy_gm_l1`` as one ND row (Nd2Nz with
                  nValue 1, dstNzC0Stride 1: contiguous in L1, the 32 B round-up zeroed), as the
                  docs' example does because DataCopyPad has no GM -> L1 path
                  (examples/01_simd_cpp_api/03_basic_api/00_data_movement/data_copy_gm2l1, CopyInBias).
  ``mmad_bias``   M  writes (l0c,) reads (l0a, l0b, bt). ``Mmad(c, a, b, bias, MmadParams{...})``
                  (Mmad.md, 传入bias的原型): C = A x B + bias, bias[n] broadcast over the m rows,
                  bias in the bias table (C2, 64 B aligned), dtypes fp16/bf16 -> float32 with a
                  float32 bias, int8 -> int32 with an int32 bias (Mmad.md 表8). The API derives
                  cmatrixSource from the bias position (BT: true); cmatrixInitVal must be false
                  (true would clear C instead: docs BT-Buffer bias guide and data_copy_gm2l1
                  example set ``mmadParams.cmatrixInitVal = false``). Params as ``mmad`` with
                  cmatrixSource True, cmatrixInitVal False; it reads bias[0, Np) (Np = n rounded
                  up to 16) and, like an initialising mmad, not C. Only the first K step of a
                  tile uses it; the later steps accumulate with ``mmad``.
  ``fixpipe``     FIX  writes (gm,) reads (l0c,). ``Fixpipe<T, U, CFG_ROW_MAJOR>(gm, l0c,
                  FixpipeParamsV220{nSize, mSize, srcStride, dstStride, quantPre, reluEn,
                  unitFlag, ndNum, srcNdStride, dstNdStride})`` with NZ2ND
                  (ISASI/cube_compute_store/Fixpipe_L0CToGM.md, .../NZ2ND.md): for i < ndNum,
                  m < mSize, n < nSize: gm[i*dstNdStride + m*dstStride + n] =
                  cast(l0c[i*srcNdStride*256 + (n//16)*srcStride*16 + m*16 + n%16]).
                  srcStride (in 16-element units) = the Mp of the L0C tile; dstStride = GM row
                  length in elements. Only the mSize x nSize valid region is written (nSize need
                  not be a multiple of 16: catlass copy_l0c_to_gm.hpp passes the tile's actual
                  shape); it reads whole 16-element row blocks (ceil(nSize/16) per row).
                  quantPre: ``NoQuant`` (fp32 -> fp32, int32 -> int32), ``F322F16`` (fp32 ->
                  fp16), ``F322BF16`` (fp32 -> bf16), both round to nearest even (CAST_RINT).
                  reluEn: max(x, 0) before the cast. nSize 1..4095, mSize 1..8192, unitFlag 0.
                  L0C start 1 KB aligned (the doc asks 64 B; we keep Mmad's 1 KB).
  ``copy_gm_l1_cont``  MTE2  writes (l1,) reads (gm,). ``DataCopy(l1, gm, count)``
                  (ISASI/矩阵计算的搬入/DataCopy（GMToL1连续数据搬运）.md: b8..b64 on 910B):
                  l1[e] = gm[e] for e < count, as they are; count * eb a multiple of 32 (else
                  the hardware rounds down: refused). Here: one tile's Fixpipe quant words.
  ``fixpipe_quant``  FIX  writes (gm,) reads (l0c, quant). ``Fixpipe<T, U, CFG_ROW_MAJOR>(gm,
                  l0c, quant, FixpipeParamsV220{...})``, the per-channel ("tensor") overload with
                  ``cbufWorkspace`` = a ``LocalTensor<uint64_t>`` in L1, 32 B aligned
                  (Fixpipe（L0C到GM数据搬运）.md 表2; impl/basic_api/dav_c220/
                  kernel_operator_fixpipe_v2_impl.h: the API itself copies the words L1 -> Fixpipe
                  buffer, in 128 B units, 128 columns at a time past 256, and sets the FPC, so no
                  SetFixPipeConfig call is needed). Params and the gm/l0c boxes as ``fixpipe``;
                  quantPre = VDEQF16 (int32 -> float16 with quant[n] for column n, formula in
                  lower/fixpipe_quant.py); it reads quant[0, ceil(nSize/16)*16) (whole 128 B).
"""

from __future__ import annotations

from ascendsched.dtypes import DType
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.affine import Affine
from ascendsched.lower.fixpipe_quant import padded_words
from ascendsched.lower.ir import AttrValue, Dim, Instr, Region
from ascendsched.target import DEFAULT_TARGET
from ascendsched.target.model import Pipe, Scope, Target

CUBE_LOAD_OPS = frozenset(["load_l0a", "load_l0b", "load_l0a_transpose", "load_l0b_transpose"])
MMAD_OPS = frozenset(["mmad", "mmad_bias"])
FIXPIPE_OPS = frozenset(["fixpipe", "fixpipe_quant"])
CUBE_OPS = (frozenset(["copy_gm_l1", "copy_gm_l1_cont", "copy_l1_bt"]) | FIXPIPE_OPS
            | CUBE_LOAD_OPS | MMAD_OPS)
CUBE_PIPES: dict[str, Pipe] = {
    "copy_gm_l1": Pipe.MTE2, **{op: Pipe.MTE1 for op in CUBE_LOAD_OPS}, "mmad": Pipe.M,
    "mmad_bias": Pipe.M, "copy_l1_bt": Pipe.MTE1, "fixpipe": Pipe.FIX,
    "copy_gm_l1_cont": Pipe.MTE2, "fixpipe_quant": Pipe.FIX,
}
# Scopes of (writes..., reads...) per op.
CUBE_SCOPES: dict[str, tuple[Scope, ...]] = {
    "copy_gm_l1": (Scope.L1, Scope.GM),
    "load_l0a": (Scope.L0A, Scope.L1), "load_l0a_transpose": (Scope.L0A, Scope.L1),
    "load_l0b": (Scope.L0B, Scope.L1), "load_l0b_transpose": (Scope.L0B, Scope.L1),
    "mmad": (Scope.L0C, Scope.L0A, Scope.L0B),
    "mmad_bias": (Scope.L0C, Scope.L0A, Scope.L0B, Scope.BT),
    "copy_l1_bt": (Scope.BT, Scope.L1),
    "fixpipe": (Scope.GM, Scope.L0C),
    "copy_gm_l1_cont": (Scope.L1, Scope.GM),
    "fixpipe_quant": (Scope.GM, Scope.L0C, Scope.L1),
}
# The fields of each op's AscendC parameter struct, in struct order (all required as attrs).
CUBE_PARAMS: dict[str, tuple[str, ...]] = {
    "copy_gm_l1": ("ndNum", "nValue", "dValue", "srcNdMatrixStride", "srcDValue",
                   "dstNzC0Stride", "dstNzNStride", "dstNzMatrixStride"),
    "load_l0a": ("startIndex", "repeatTimes", "srcStride", "sid", "dstGap", "ifTranspose",
                 "addrMode"),
    "load_l0a_transpose": ("startIndex", "repeatTimes", "srcStride", "dstGap", "dstFracGap",
                           "addrMode"),
    "mmad": ("m", "n", "k", "unitFlag", "kDirectionAlign", "cmatrixSource", "cmatrixInitVal"),
    "copy_l1_bt": ("blockCount", "blockLen", "srcStride", "dstStride"),
    "fixpipe": ("nSize", "mSize", "srcStride", "dstStride", "quantPre", "reluEn", "unitFlag",
                "ndNum", "srcNdStride", "dstNdStride"),
}
CUBE_PARAMS["copy_gm_l1_cont"] = ("count",)
CUBE_PARAMS["fixpipe_quant"] = CUBE_PARAMS["fixpipe"]
CUBE_PARAMS["mmad_bias"] = CUBE_PARAMS["mmad"]
CUBE_PARAMS["load_l0b"] = CUBE_PARAMS["load_l0a"]
CUBE_PARAMS["load_l0b_transpose"] = CUBE_PARAMS["load_l0a_transpose"]
# The fractal geometry and the documented ranges of the integer parameters are the target's
# (``cube_rows``, ``cube_fractal_bytes``, ``block_bytes``, ``cube_param_ranges``).
FIXPIPE_QUANT: dict[str, tuple[str, str]] = {  # quantPre -> (L0C dtype, GM dtype) pairs allowed
    "NoQuant": ("float32|int32", "float32|int32"), "F322F16": ("float32", "float16"),
    "F322BF16": ("float32", "bfloat16"),
}
# quantPre of ``fixpipe_quant`` (a per-channel quant tensor in L1) -> (L0C dtype, GM dtype)
FIXPIPE_VQUANT: dict[str, tuple[str, str]] = {"VDEQF16": ("int32", "float16")}
MMAD_DTYPES: dict[tuple[str, str], str] = {  # (A, B) -> C (Mmad.md 表7, the modelled subset)
    ("float16", "float16"): "float32", ("bfloat16", "bfloat16"): "float32",
    ("int8", "int8"): "int32",
}


def cube_c0(dtype: DType, target: Target) -> int:
    """Elements in one fractal row of ``target.block_bytes`` (C0; 32 B on the 910B: fp16/bf16
    16, fp32/int32 8, int8 32)."""
    return target.block_bytes // dtype.bytes


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def cube_params(ins: Instr) -> dict[str, AttrValue]:
    """The API parameters of a cube instruction by name (exactly ``CUBE_PARAMS[op]``, in their
    documented ranges: ``lower/verify_cube.py`` checks them)."""
    return dict(ins.attrs)


def cube_footprints(op: str, params: dict[str, AttrValue], dtypes: tuple[DType, ...],
                    target: Target | None = None) -> tuple[tuple[Dim, ...], ...]:
    """The exact element boxes an op touches, relative to each region's offset, in the fractal
    geometry of ``target`` (None: the default target's, for callers that do not pass their
    kernel's yet).

    ``dtypes`` are the operands' dtypes in region order (writes then reads); the result has one
    box per region in the same order. mmad's accumulating read of C is the box of its write.
    """
    p, t = params, target or DEFAULT_TARGET
    rows = t.cube_rows  # rows of a fractal; L0C fractals are rows x rows
    if op == "copy_gm_l1":
        c0 = cube_c0(dtypes[0], t)
        l1 = (Dim(p["ndNum"], p["dstNzMatrixStride"]),
              Dim(_ceil(p["dValue"], c0), p["dstNzC0Stride"] * c0),
              Dim(p["nValue"], p["dstNzNStride"] * c0), Dim(c0, 1))
        gm = (Dim(p["ndNum"], p["srcNdMatrixStride"]), Dim(p["nValue"], p["srcDValue"]),
              Dim(p["dValue"], 1))
        return (l1, gm)
    if op in CUBE_LOAD_OPS:
        f = t.cube_fractal_bytes // dtypes[0].bytes
        if op.endswith("_transpose"):
            nfrac = 2 if dtypes[0].bytes in (1, 4) else 1  # fractals per transposed square
            dst = (Dim(p["repeatTimes"], (p["dstGap"] + 1) * f),
                   Dim(nfrac, (p["dstFracGap"] + 1) * f), Dim(f, 1))
            src = (Dim(p["repeatTimes"], p["srcStride"] * nfrac * f), Dim(nfrac * f, 1))
        else:
            dst = (Dim(p["repeatTimes"], (p["dstGap"] + 1) * f), Dim(f, 1))
            src = (Dim(p["repeatTimes"], p["srcStride"] * f), Dim(f, 1))
        return (dst, src)
    if op in MMAD_OPS:
        c0 = cube_c0(dtypes[1], t)
        mp, kp, np_ = (_ceil(p["m"], rows) * rows, _ceil(p["k"], c0) * c0,
                       _ceil(p["n"], rows) * rows)
        bias = ((Dim(np_, 1),),) if op == "mmad_bias" else ()
        return ((Dim(mp * np_, 1),), (Dim(mp * kp, 1),), (Dim(kp * np_, 1),)) + bias
    if op == "copy_l1_bt":
        n = p["blockCount"] * p["blockLen"] * t.bias_block_bytes // dtypes[0].bytes
        return ((Dim(n, 1),), (Dim(n, 1),))
    if op == "copy_gm_l1_cont":
        return ((Dim(p["count"], 1),), (Dim(p["count"], 1),))
    if op in FIXPIPE_OPS:
        r = rows
        gm = (Dim(p["ndNum"], p["dstNdStride"]), Dim(p["mSize"], p["dstStride"]),
              Dim(p["nSize"], 1))
        l0c = (Dim(p["ndNum"], p["srcNdStride"] * r * r),
               Dim(_ceil(p["nSize"], r), p["srcStride"] * r), Dim(p["mSize"], r), Dim(r, 1))
        if op == "fixpipe":
            return (gm, l0c)
        return (gm, l0c, (Dim(padded_words(p["nSize"], t), 1),))
    raise InternalCompilerError(f"{op!r} is not a cube op")


def mmad_fractals(ins: Instr, target: Target) -> int:
    """Output fractals of an Mmad as the docs count them: (m / 16) * (n / 16) on the 910B."""
    rows = target.cube_rows
    return (int(ins.attr("m")) // rows) * (int(ins.attr("n")) // rows)


def same_pipe_ordered(target: Target, a: Instr, b: Instr) -> bool:
    """Whether ``b``, after ``a`` on the same pipe, starts only once ``a`` is done without a
    PipeBarrier: the pipe runs in order, or both are Mmads big enough for the hardware to order
    them (``target.mmad_ordered_fractals``)."""
    if not target.needs_same_pipe_barrier.get(a.pipe, True):
        return True
    return (a.op in MMAD_OPS and b.op in MMAD_OPS and target.mmad_ordered_fractals > 0
            and min(mmad_fractals(a, target), mmad_fractals(b, target))
            >= target.mmad_ordered_fractals)


def squeeze_dims(dims: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """``dims`` without extent-1 dims (they do not change the element set)."""
    return tuple(d for d in dims if d.extent != 1)


def make_cube_instr(op: str, operands: tuple[tuple[str, Affine | int, Affine | int, DType], ...],
                    comment: str = "", *, target: Target | None = None,
                    **params: AttrValue) -> Instr:
    """A cube Instr whose region dims are derived from its params (in ``target``'s fractal
    geometry; None: the default target's). Whether the params keep their documented ranges is
    the verifier's question (``lower/verify_cube.py``), asked of the kernel.

    ``operands``: ``(tensor, offset, copy, dtype)`` per region, writes first (order as in the
    module docstring: copy_gm_l1 (l1, gm), loads (l0, l1), mmad (l0c, l0a, l0b), mmad_bias
    (l0c, l0a, l0b, bt), copy_l1_bt (bt, l1), fixpipe (gm, l0c), copy_gm_l1_cont (l1, gm),
    fixpipe_quant (gm, l0c, quant)). ``params``: every field of ``CUBE_PARAMS[op]``.
    """
    missing = [n for n in CUBE_PARAMS[op] if n not in params]
    if missing:
        raise InternalCompilerError(f"make_cube_instr({op!r}): missing params {missing}")
    ins = Instr(op, CUBE_PIPES[op], attrs=tuple((n, params[n]) for n in CUBE_PARAMS[op]),
                comment=comment)
    boxes = cube_footprints(op, dict(ins.attrs), tuple(o[3] for o in operands), target)
    if len(boxes) != len(operands):
        raise InternalCompilerError(f"{op} takes {len(boxes)} operands, got {len(operands)}")
    regions = tuple(Region(t, Affine.of(off), box, Affine.of(cp))
                    for (t, off, cp, _), box in zip(operands, boxes, strict=True))
    nw = 1
    return Instr(op, ins.pipe, regions[:nw], regions[nw:], ins.attrs, comment)
