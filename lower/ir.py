"""Kernel IR: the contract between lower/, sim/ and emit_ascendc/.

A :class:`Kernel` holds GM tensors, on-chip :class:`Buffer` s and one :class:`Program` per core
type. A program is a tree of :class:`For`, :class:`If` and :class:`Instr`. Every memory access
is a :class:`Region`: a tensor or buffer, an element offset affine in the enclosing loop
variables (and ``block_idx``), and strided dims ``(extent, stride)`` in elements. Region
``copy`` selects the copy of a multi-copy (double-buffered) buffer.

Semantics of the ops (``Instr.op``). "view" = the 2-D array of elements a Region names,
element ``(r, c)`` at ``offset + r*dims[0].stride + c*dims[1].stride`` of its buffer copy.

DMA (AIV):
  ``copy_gm_ub``  MTE2  writes (ub,) reads (gm,): ub view = gm view, both ``(rows, cols)``
                  with column stride 1. ``DataCopy``/``DataCopyPad``.
  ``copy_ub_gm``  MTE3  writes (gm,) reads (ub,): gm view = ub view.
  The UB side of a DMA moves whole 32-byte blocks: each UB row's byte range is rounded out to
  32 B (``dma_ub_bytes``). The GM side is exact.

Vector (AIV, pipe V). Views are ``(rows, cols)``: one hardware repeat per row, ``cols`` lanes
(mask) per repeat, so ``rows <= max_repeat`` and ``cols * max(elem bytes) <= repeat_bytes``.
Row strides are multiples of 32 B (the repeat stride, in blocks); every operand starts on a 32 B
boundary. A source column stride of 0 is a *block broadcast* (hardware block stride 0): the
instruction reads the whole 32-byte block at the row start, which must hold the value in every
lane (as ``vec_brcb`` writes it); semantically element ``(r, c)`` is element ``(r, 0)``. A
source row stride of 0 re-reads the same row for every repeat.
  ``vec_binary``  attrs fn in add sub mul div max min: dst = fn(a, b); reads (a, b)
  ``vec_unary``   attrs fn in exp ln sqrt rsqrt reciprocal abs relu copy: dst = fn(src)
  ``vec_scalar``  attrs fn in adds muls maxs mins, scalar (a number, or an Affine of loop
                  variables: an index value): dst = fn(src, scalar)
  ``vec_dup``     attrs value: dst = value (``Duplicate``); reads nothing
  ``vec_cast``    attrs round in rint trunc floor ceil round none: dst = cast(src)
  ``vec_reduce``  attrs fn in sum max min: src view ``(rows, cols)``, dst view ``(rows, 1)``;
                  dst[r, 0] = reduce(src[r, :]) (``WholeReduceSum/Max/Min``, value only).
                  The dst starts on sizeof(T) for sum, 2 * sizeof(T) for max/min (asc-devkit
                  docs ReduceRepeat.md:165-183; impl kernel_operator_vec_reduce_intf_impl.h:148,
                  177)
  ``vec_brcb``    src view ``(n, 1)``, dst view ``(n, B)`` with B = 32 / elem bytes and row
                  stride B: dst[r, :] = src[r, 0] (``Brcb``); n is a multiple of 8; src and
                  dst must not share bytes (docs Brcb.md:122)
  ``vec_cmp``     attrs fn in lt gt le ge eq ne: writes a uint8 mask region ``(rows, nbytes)``
                  where bit ``c % 8`` of byte ``c // 8`` of mask row r = fn(a[r, c], b[r, c]).
                  The 910B Compare ignores its mask, so lowering gives it whole repeats: operand
                  views of ``256 / elem bytes`` columns and mask rows of ``cols / 8`` bytes
  ``vec_select``  reads (mask, a, b): dst[r, c] = a[r, c] if mask bit (r, c) else b[r, c]

Cube (AIC). Sources: hicann/asc-devkit (the upstream of mirror-cann/asc-devkit), docs/zh/api/
SIMD-API/basic_api/cube_compute_ISASI/ (below: ``ISASI/``), and hicann/catlass
include/catlass/gemm/tile/. Each op is ONE AscendC call; ``attrs`` hold exactly the fields of its
parameter struct, all present, by their API names (``CUBE_PARAMS``), ints/bools/strs (mmad's
``cmatrixInitVal`` may be a :class:`Cond`, e.g. ``k == 0``); ranges in ``CUBE_PARAM_RANGES``.
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

Program prologue and epilogue (AIC): the emitter builds the Cube buffers with a TPipe, whose
constructor sets ``M_MTE1`` event ids 0, 1, 2 on the AIC (asc-devkit impl/basic_api/
kernel_tpipe_impl.h:100-113), so it releases them with ``TPipe::Destroy`` right after taking the
buffers' LocalTensors (as catlass does, include/catlass/arch/resource.hpp:35-37): every event id
of ``target.event_ids`` is then the kernel's own. Without the TPipe's destructor nothing drains
the pipes at the end, so every AIC program ends with :func:`program_epilogue`, a
``PipeBarrier<PIPE_ALL>`` (docs 静态Tensor编程.md:183; catlass kernels end so, e.g.
include/catlass/gemm/kernel/basic_matmul.hpp:140). It is not in ``Program.body``; the emitter
prints it and the simulator runs it (a ``barrier ALL`` trace event after the body).

Synchronisation (ordinary instructions):
  ``set_flag``    pipe = source pipe, attrs dst (Pipe), event_id (Affine)
  ``wait_flag``   pipe = destination pipe, attrs src (Pipe), event_id (Affine)
  ``barrier``     pipe = the pipe to drain (``PipeBarrier<PIPE_X>``)
  ``cross_set``   attrs mode, flag_id (``CrossCoreSetFlag<mode, pipe>``)
  ``cross_wait``  attrs flag_id (``CrossCoreWaitFlag``)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Union

from ascendsched.dtypes import DType
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.affine import Affine, Cond
from ascendsched.target.ascend910b import ASCEND_910B
from ascendsched.target.model import CoreType, Pipe, Scope, Target

BLOCK_IDX = "block_idx"  # the loop-free variable holding GetBlockIdx()


# --------------------------------------------------------------------------- storage
@dataclass(frozen=True)
class GmTensor:
    """A global-memory kernel parameter (``kind`` input/output) or workspace."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    kind: str = "input"  # input | output | workspace

    @property
    def elems(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.elems * self.dtype.bytes


@dataclass(frozen=True)
class Buffer:
    """An on-chip buffer; ``elems`` per copy (padding included), ``offsets`` after planning."""

    name: str
    scope: Scope
    dtype: DType
    elems: int
    copies: int = 1
    shape: tuple[int, ...] = ()  # logical shape, for printing and emission comments
    offsets: tuple[int, ...] | None = None  # byte offset of each copy within its scope
    comment: str = ""

    def __post_init__(self) -> None:
        if self.copies < 1 or self.elems < 1:
            raise InternalCompilerError(f"buffer {self.name}: copies and elems must be >= 1")
        if self.offsets is not None and len(self.offsets) != self.copies:
            raise InternalCompilerError(f"buffer {self.name}: one offset per copy expected")

    @property
    def nbytes(self) -> int:
        """Bytes of one copy."""
        return self.elems * self.dtype.bytes


@dataclass(frozen=True)
class Dim:
    extent: int
    stride: int

    def __iter__(self) -> Iterator[int]:
        return iter((self.extent, self.stride))


@dataclass(frozen=True)
class Region:
    """Elements ``offset + sum(i_d * stride_d)``, ``0 <= i_d < extent_d``, of one tensor copy."""

    tensor: str
    offset: Affine
    dims: tuple[Dim, ...]
    copy: Affine = field(default_factory=Affine)

    def __post_init__(self) -> None:
        if not isinstance(self.offset, Affine) or not isinstance(self.copy, Affine):
            raise InternalCompilerError(f"region of {self.tensor}: offset/copy must be Affine")
        if any(d.extent < 1 for d in self.dims):
            raise InternalCompilerError(f"region of {self.tensor}: empty dim {self.dims}")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.extent for d in self.dims)

    @property
    def count(self) -> int:
        n = 1
        for d in self.dims:
            n *= d.extent
        return n

    def __str__(self) -> str:
        dims = ", ".join(f"{d.extent}:{d.stride}" for d in self.dims)
        copy = "" if self.copy == Affine() else f"[copy {self.copy}]"
        return f"{self.tensor}{copy}@({self.offset})[{dims}]"


def view(tensor: str, offset: Affine | int, rows: int, row_stride: int, cols: int,
         col_stride: int = 1, copy: Affine | int = 0) -> Region:
    """The 2-D region most ops use: ``rows`` rows of ``cols`` elements."""
    return Region(tensor, Affine.of(offset), (Dim(rows, row_stride), Dim(cols, col_stride)),
                  Affine.of(copy))


# --------------------------------------------------------------------------- statements
AttrValue = Union[int, float, str, bool, Pipe, Affine, Cond, None]


@dataclass(frozen=True)
class Instr:
    """One AscendC-level operation on one pipe. ``comment`` ties it to the schedule/dependence."""

    op: str
    pipe: Pipe
    writes: tuple[Region, ...] = ()
    reads: tuple[Region, ...] = ()
    attrs: tuple[tuple[str, AttrValue], ...] = ()
    comment: str = ""

    def attr(self, name: str, default: AttrValue = None) -> AttrValue:
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    @property
    def is_sync(self) -> bool:
        return self.op in SYNC_OPS

    def __str__(self) -> str:
        return format_instr(self)


@dataclass(frozen=True)
class For:
    var: str
    extent: int
    body: tuple[Stmt, ...]
    comment: str = ""

    def __post_init__(self) -> None:
        if self.extent < 0:
            raise InternalCompilerError(f"loop {self.var}: negative extent {self.extent}")


@dataclass(frozen=True)
class If:
    conds: tuple[Cond, ...]  # conjunction
    body: tuple[Stmt, ...]
    comment: str = ""

    def evaluate(self, env: dict[str, int]) -> bool:
        return all(c.evaluate(env) for c in self.conds)


Stmt = Union[Instr, For, If]


@dataclass(frozen=True)
class Program:
    core: CoreType
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class Kernel:
    """A complete kernel. ``block_dim`` blocks run each program with ``block_idx`` bound."""

    name: str
    params: tuple[GmTensor, ...]
    buffers: tuple[Buffer, ...]
    block_dim: int
    programs: tuple[Program, ...]
    target: Target
    notes: tuple[str, ...] = ()  # e.g. schedule text, warnings; printed as comments

    def __post_init__(self) -> None:
        names = [t.name for t in self.params] + [b.name for b in self.buffers]
        if len(names) != len(set(names)):
            raise InternalCompilerError(f"kernel {self.name}: duplicate tensor/buffer names")

    @cached_property
    def buffer_map(self) -> dict[str, Buffer]:
        return {b.name: b for b in self.buffers}

    @cached_property
    def param_map(self) -> dict[str, GmTensor]:
        return {t.name: t for t in self.params}

    def dtype_of(self, tensor: str) -> DType:
        if tensor in self.buffer_map:
            return self.buffer_map[tensor].dtype
        return self.param_map[tensor].dtype

    def scope_of(self, tensor: str) -> Scope:
        if tensor in self.buffer_map:
            return self.buffer_map[tensor].scope
        return Scope.GM

    def program(self, core: CoreType) -> Program | None:
        for p in self.programs:
            if p.core == core:
                return p
        return None

    def replace_body(self, core: CoreType, body: tuple[Stmt, ...]) -> Kernel:
        from dataclasses import replace

        return replace(self, programs=tuple(
            Program(p.core, body) if p.core == core else p for p in self.programs))

    def __str__(self) -> str:
        return format_kernel(self)


def program_epilogue(core: CoreType) -> tuple[Instr, ...]:
    """What every ``core`` program runs after its body (module docstring, "Program prologue
    and epilogue"): a ``barrier ALL`` on the AIC, nothing on the AIV (its TPipe lives to the
    end, and the destructor's ``TPipe::Destroy`` drains the pipes, kernel_tpipe_impl.h:80-86,
    595-600)."""
    if core == CoreType.AIC:
        return (Instr("barrier", Pipe.ALL, comment="kernel end: drain every pipe (the TPipe was "
                      "destroyed at the start)"),)
    return ()


SYNC_OPS = frozenset(["set_flag", "wait_flag", "barrier", "cross_set", "cross_wait"])
DMA_OPS = frozenset(["copy_gm_ub", "copy_ub_gm"])
VECTOR_OPS = frozenset(["vec_binary", "vec_unary", "vec_scalar", "vec_dup", "vec_cast",
                        "vec_reduce", "vec_brcb", "vec_cmp", "vec_select"])

# --------------------------------------------------------------------------- cube (AIC) ops
CUBE_LOAD_OPS = frozenset(["load_l0a", "load_l0b", "load_l0a_transpose", "load_l0b_transpose"])
CUBE_OPS = frozenset(["copy_gm_l1", "mmad", "fixpipe"]) | CUBE_LOAD_OPS
CUBE_PIPES: dict[str, Pipe] = {
    "copy_gm_l1": Pipe.MTE2, **{op: Pipe.MTE1 for op in CUBE_LOAD_OPS}, "mmad": Pipe.M,
    "fixpipe": Pipe.FIX,
}
# Scopes of (writes..., reads...) per op.
CUBE_SCOPES: dict[str, tuple[Scope, ...]] = {
    "copy_gm_l1": (Scope.L1, Scope.GM),
    "load_l0a": (Scope.L0A, Scope.L1), "load_l0a_transpose": (Scope.L0A, Scope.L1),
    "load_l0b": (Scope.L0B, Scope.L1), "load_l0b_transpose": (Scope.L0B, Scope.L1),
    "mmad": (Scope.L0C, Scope.L0A, Scope.L0B),
    "fixpipe": (Scope.GM, Scope.L0C),
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
    "fixpipe": ("nSize", "mSize", "srcStride", "dstStride", "quantPre", "reluEn", "unitFlag",
                "ndNum", "srcNdStride", "dstNdStride"),
}
CUBE_PARAMS["load_l0b"] = CUBE_PARAMS["load_l0a"]
CUBE_PARAMS["load_l0b_transpose"] = CUBE_PARAMS["load_l0a_transpose"]
# The Cube op contract is the 910B API's: its fractal geometry and the documented ranges of the
# integer parameters live with the other hardware numbers in target/ascend910b.py.
CUBE_PARAM_RANGES: dict[str, dict[str, tuple[int, int]]] = ASCEND_910B.cube_param_ranges
FIXPIPE_QUANT: dict[str, tuple[str, str]] = {  # quantPre -> (L0C dtype, GM dtype) pairs allowed
    "NoQuant": ("float32|int32", "float32|int32"), "F322F16": ("float32", "float16"),
    "F322BF16": ("float32", "bfloat16"),
}
MMAD_DTYPES: dict[tuple[str, str], str] = {  # (A, B) -> C (Mmad.md 表7, the modelled subset)
    ("float16", "float16"): "float32", ("bfloat16", "bfloat16"): "float32",
    ("int8", "int8"): "int32",
}
_CUBE_BOOL_PARAMS = frozenset(["ifTranspose", "kDirectionAlign", "cmatrixSource", "reluEn"])
CUBE_FRACTAL_BYTES = ASCEND_910B.cube_fractal_bytes  # one L0A/L0B fractal
CUBE_ROWS = ASCEND_910B.cube_rows  # rows of a fractal; L0C fractals are CUBE_ROWS square
CUBE_BLOCK_BYTES = ASCEND_910B.block_bytes  # C0_SIZE: a fractal row (Nd2Nz dstNzC0Stride unit)


def cube_c0(dtype: DType) -> int:
    """Elements in one 32 B fractal row (C0): fp16/bf16 16, fp32/int32 8, int8 32."""
    return CUBE_BLOCK_BYTES // dtype.bytes


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def cube_params(ins: Instr) -> dict[str, AttrValue]:
    """The API parameters of a cube instruction by name (all of ``CUBE_PARAMS[op]``)."""
    names = CUBE_PARAMS.get(ins.op)
    if names is None:
        raise InternalCompilerError(f"{ins.op!r} is not a cube op ({', '.join(sorted(CUBE_OPS))})")
    got = dict(ins.attrs)
    missing = [n for n in names if n not in got]
    extra = [n for n in got if n not in names]
    if missing or extra:
        raise InternalCompilerError(
            f"`{ins}`: {ins.op} attrs must be exactly {', '.join(names)}"
            + (f"; missing {missing}" if missing else "") + (f"; unknown {extra}" if extra else ""))
    for name in CUBE_PARAMS[ins.op]:
        v = got[name]
        if name in _CUBE_BOOL_PARAMS and not isinstance(v, bool):
            raise InternalCompilerError(f"`{ins}`: {ins.op} {name}={v!r} must be a bool")
        if name == "cmatrixInitVal" and not isinstance(v, (bool, Cond)):
            raise InternalCompilerError(f"`{ins}`: cmatrixInitVal={v!r} must be a bool or a Cond")
        if name == "quantPre" and v not in FIXPIPE_QUANT:
            raise InternalCompilerError(f"`{ins}`: quantPre={v!r}; one of "
                                        f"{', '.join(FIXPIPE_QUANT)}")
    for name, (lo, hi) in CUBE_PARAM_RANGES[ins.op].items():
        v = got[name]
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise InternalCompilerError(
                f"`{ins}`: {ins.op} {name}={v!r} outside the documented range [{lo}, {hi}]")
    return got


def cube_footprints(op: str, params: dict[str, AttrValue], dtypes: tuple[DType, ...]
                    ) -> tuple[tuple[Dim, ...], ...]:
    """The exact element boxes an op touches, relative to each region's offset.

    ``dtypes`` are the operands' dtypes in region order (writes then reads); the result has one
    box per region in the same order. mmad's accumulating read of C is the box of its write.
    """
    p = params
    if op == "copy_gm_l1":
        c0 = cube_c0(dtypes[0])
        l1 = (Dim(p["ndNum"], p["dstNzMatrixStride"]),
              Dim(_ceil(p["dValue"], c0), p["dstNzC0Stride"] * c0),
              Dim(p["nValue"], p["dstNzNStride"] * c0), Dim(c0, 1))
        gm = (Dim(p["ndNum"], p["srcNdMatrixStride"]), Dim(p["nValue"], p["srcDValue"]),
              Dim(p["dValue"], 1))
        return (l1, gm)
    if op in CUBE_LOAD_OPS:
        f = CUBE_FRACTAL_BYTES // dtypes[0].bytes
        if op.endswith("_transpose"):
            nfrac = 2 if dtypes[0].bytes in (1, 4) else 1  # fractals per transposed square
            dst = (Dim(p["repeatTimes"], (p["dstGap"] + 1) * f),
                   Dim(nfrac, (p["dstFracGap"] + 1) * f), Dim(f, 1))
            src = (Dim(p["repeatTimes"], p["srcStride"] * nfrac * f), Dim(nfrac * f, 1))
        else:
            dst = (Dim(p["repeatTimes"], (p["dstGap"] + 1) * f), Dim(f, 1))
            src = (Dim(p["repeatTimes"], p["srcStride"] * f), Dim(f, 1))
        return (dst, src)
    if op == "mmad":
        c0 = cube_c0(dtypes[1])
        mp, kp, np_ = (_ceil(p["m"], CUBE_ROWS) * CUBE_ROWS, _ceil(p["k"], c0) * c0,
                       _ceil(p["n"], CUBE_ROWS) * CUBE_ROWS)
        return ((Dim(mp * np_, 1),), (Dim(mp * kp, 1),), (Dim(kp * np_, 1),))
    if op == "fixpipe":
        r = CUBE_ROWS
        gm = (Dim(p["ndNum"], p["dstNdStride"]), Dim(p["mSize"], p["dstStride"]),
              Dim(p["nSize"], 1))
        l0c = (Dim(p["ndNum"], p["srcNdStride"] * r * r),
               Dim(_ceil(p["nSize"], r), p["srcStride"] * r), Dim(p["mSize"], r), Dim(r, 1))
        return (gm, l0c)
    raise InternalCompilerError(f"{op!r} is not a cube op")


def mmad_fractals(ins: Instr) -> int:
    """Output fractals of an Mmad as the docs count them: (m / 16) * (n / 16)."""
    return (int(ins.attr("m")) // CUBE_ROWS) * (int(ins.attr("n")) // CUBE_ROWS)


def same_pipe_ordered(target: Target, a: Instr, b: Instr) -> bool:
    """Whether ``b``, after ``a`` on the same pipe, starts only once ``a`` is done without a
    PipeBarrier: the pipe runs in order, or both are Mmads big enough for the hardware to order
    them (``target.mmad_ordered_fractals``)."""
    if not target.needs_same_pipe_barrier.get(a.pipe, True):
        return True
    return (a.op == b.op == "mmad" and target.mmad_ordered_fractals > 0
            and min(mmad_fractals(a), mmad_fractals(b)) >= target.mmad_ordered_fractals)


def squeeze_dims(dims: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """``dims`` without extent-1 dims (they do not change the element set)."""
    return tuple(d for d in dims if d.extent != 1)


def make_cube_instr(op: str, operands: tuple[tuple[str, Affine | int, Affine | int, DType], ...],
                    comment: str = "", **params: AttrValue) -> Instr:
    """A cube Instr whose region dims are derived from its params.

    ``operands``: ``(tensor, offset, copy, dtype)`` per region, writes first (order as in the
    module docstring: copy_gm_l1 (l1, gm), loads (l0, l1), mmad (l0c, l0a, l0b), fixpipe
    (gm, l0c)). ``params``: every field of ``CUBE_PARAMS[op]``.
    """
    ins = Instr(op, CUBE_PIPES[op], attrs=tuple((n, params[n]) for n in CUBE_PARAMS[op]
                                                if n in params), comment=comment)
    got = cube_params(ins)
    boxes = cube_footprints(op, got, tuple(o[3] for o in operands))
    if len(boxes) != len(operands):
        raise InternalCompilerError(f"{op} takes {len(boxes)} operands, got {len(operands)}")
    regions = tuple(Region(t, Affine.of(off), box, Affine.of(cp))
                    for (t, off, cp, _), box in zip(operands, boxes, strict=True))
    nw = 1
    return Instr(op, ins.pipe, regions[:nw], regions[nw:], ins.attrs, comment)


# --------------------------------------------------------------------------- traversal
def iter_instrs(body: tuple[Stmt, ...], enclosing: tuple[For | If, ...] = ()
                ) -> Iterator[tuple[Instr, tuple[For | If, ...]]]:
    """Every Instr in program order with its enclosing For/If nodes (outermost first)."""
    for s in body:
        if isinstance(s, Instr):
            yield s, enclosing
        else:
            yield from iter_instrs(s.body, enclosing + (s,))


class StmtMutator:
    """Rebuilds a statement tree bottom-up; a node is rebuilt only when a child changed.

    Override ``visit_Instr`` / ``visit_For`` / ``visit_If``; each returns a tuple of statements
    (so one node may become zero or several).
    """

    def visit_body(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        changed = False
        for s in body:
            new = getattr(self, f"visit_{type(s).__name__}")(s)
            if len(new) != 1 or new[0] is not s:
                changed = True
            out.extend(new)
        return tuple(out) if changed else body

    def visit_Instr(self, s: Instr) -> tuple[Stmt, ...]:
        return (s,)

    def visit_For(self, s: For) -> tuple[Stmt, ...]:
        body = self.visit_body(s.body)
        if body is s.body:
            return (s,)
        return (For(s.var, s.extent, body, s.comment),)

    def visit_If(self, s: If) -> tuple[Stmt, ...]:
        body = self.visit_body(s.body)
        if body is s.body:
            return (s,)
        return (If(s.conds, body, s.comment),)


# --------------------------------------------------------------------------- printing
def format_instr(i: Instr) -> str:
    if i.op == "set_flag":
        head = f"set_flag {i.pipe}->{i.attr('dst')} id={i.attr('event_id')}"
    elif i.op == "wait_flag":
        head = f"wait_flag {i.attr('src')}->{i.pipe} id={i.attr('event_id')}"
    elif i.op == "barrier":
        head = f"barrier {i.pipe}"
    elif i.op in ("cross_set", "cross_wait"):
        head = f"{i.op} {i.pipe} flag={i.attr('flag_id')} mode={i.attr('mode')}"
    else:
        attrs = " ".join(f"{k}={v}" for k, v in i.attrs)
        w = ", ".join(map(str, i.writes))
        r = ", ".join(map(str, i.reads))
        head = f"[{i.pipe}] {i.op}{(' ' + attrs) if attrs else ''}  {w} <- {r}"
    return head + (f"   # {i.comment}" if i.comment else "")


def format_body(body: tuple[Stmt, ...], indent: int = 0) -> list[str]:
    pad = "  " * indent
    lines: list[str] = []
    for s in body:
        if isinstance(s, Instr):
            lines.append(pad + format_instr(s))
        elif isinstance(s, For):
            c = f"   # {s.comment}" if s.comment else ""
            lines.append(f"{pad}for {s.var} in 0..{s.extent}:{c}")
            lines.extend(format_body(s.body, indent + 1))
        else:
            c = f"   # {s.comment}" if s.comment else ""
            lines.append(f"{pad}if {' and '.join(map(str, s.conds))}:{c}")
            lines.extend(format_body(s.body, indent + 1))
    return lines


def format_kernel(k: Kernel) -> str:
    lines = [f"kernel {k.name}  (target {k.target.name}, {k.block_dim} blocks)"]
    for n in k.notes:
        lines.append(f"  # {n}")
    for t in k.params:
        lines.append(f"  gm {t.kind} {t.name}: {t.dtype}{list(t.shape)}")
    for b in k.buffers:
        off = "" if b.offsets is None else f" at {list(b.offsets)}"
        lines.append(f"  {b.scope} {b.name}: {b.dtype}[{b.elems}] x{b.copies}{off}"
                     + (f"   # {b.comment}" if b.comment else ""))
    for p in k.programs:
        lines.append(f"  program {p.core}:")
        lines.extend(format_body(p.body, 2))
    return "\n".join(lines)
