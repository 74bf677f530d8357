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
  ``vec_fma``     attrs fn in fused_mul_add mul_add_dst; reads (dst, src0, src1), the first
                  the same region as the write (the old dst value is an operand, so the
                  dependence analysis and the race checker see its read):
                  fused_mul_add: dst = src0 * dst + src1 (``FusedMulAdd``, vmadd);
                  mul_add_dst: dst = src0 * src1 + dst (``MulAddDst``, vmla); one dtype,
                  half or float (asc-devkit @82b89a15 include/basic_api/
                  kernel_operator_vec_binary_intf.h "@brief dst = src0 * dst + src1" /
                  "dst = src0 * src1 + dst"; docs 复合计算/FusedMulAdd.md, MulAddDst.md). The
                  product is rounded to the dtype before the add, as a Mul then an Add would
                  (the docs do not say whether the hardware rounds once; sim/vector.py)
  ``vec_scalar``  attrs fn in adds muls maxs mins, scalar (a number, or an Affine of loop
                  variables: an index value): dst = fn(src, scalar)
  ``vec_dup``     attrs value: dst = value (``Duplicate``); reads nothing
  ``vec_cast``    attrs round in rint trunc floor ceil round none: dst = cast(src)
  ``vec_reduce``  attrs fn in sum max min: src view ``(rows, cols)``, dst view ``(rows, 1)``;
                  dst[r, 0] = reduce(src[r, :]) (``WholeReduceSum/Max/Min``, value only).
                  The dst starts on sizeof(T) for sum, 2 * sizeof(T) for max/min (asc-devkit
                  docs ReduceRepeat.md:165-183; impl kernel_operator_vec_reduce_intf_impl.h:148,
                  177)
  ``vec_block_reduce``  attrs fn in sum max min: src view ``(n, lanes)`` of whole 256-byte
                  repeats (row stride a multiple of 32 B), dst view ``(n, 8)`` with a row stride
                  of a multiple of 8; dst[r, b] = reduce(src[r, b*B : (b+1)*B]), B = 32 / elem
                  bytes, a sum as a binary tree of adjacent pairs (``BlockReduceSum/Max/Min``;
                  docs BlockReduceSum.md: dstRepStride in units of one repeat's 8 results, dst
                  on 32 B for float, 16 B for half)
  ``vec_brcb``    src view ``(n, 1)``, dst view ``(n, B)`` with B = 32 / elem bytes and row
                  stride B: dst[r, :] = src[r, 0] (``Brcb``); n is a multiple of 8; src and
                  dst must not share bytes (docs Brcb.md:122)
  ``vec_cmp``     attrs fn in lt gt le ge eq ne: writes a uint8 mask region ``(rows, nbytes)``
                  where bit ``c % 8`` of byte ``c // 8`` of mask row r = fn(a[r, c], b[r, c]).
                  The 910B Compare ignores its mask, so lowering gives it whole repeats: operand
                  views of ``256 / elem bytes`` columns and mask rows of ``cols / 8`` bytes
  ``vec_select``  reads (mask, a, b): dst[r, c] = a[r, c] if mask bit (r, c) else b[r, c]

Cube (AIC): ``copy_gm_l1`` (MTE2), ``load_l0a`` / ``load_l0b`` and their ``_transpose`` forms
(MTE1), ``mmad`` (M) and ``fixpipe`` (FIX). Each is ONE AscendC call whose attrs are the fields
of its parameter struct; their semantics, the fractal layouts, the parameter tables and the
footprint of each region are in ``lower/cube_ops.py``.

Program prologue and epilogue (AIC): the emitter builds the Cube buffers with a TPipe, whose
constructor sets ``M_MTE1`` event ids 0, 1, 2 on the AIC (asc-devkit impl/basic_api/
kernel_tpipe_impl.h:100-113), so it releases them with ``TPipe::Destroy`` right after taking the
buffers' LocalTensors (as catlass does, include/catlass/arch/resource.hpp:35-37): every event id
of ``target.event_ids`` is then the kernel's own. Without the TPipe's destructor nothing drains
the pipes at the end, so every AIC program ends with ``sync_ir.program_epilogue``, a
``PipeBarrier<PIPE_ALL>`` (docs 静态Tensor编程.md:183; catlass kernels end so, e.g.
include/catlass/gemm/kernel/basic_matmul.hpp:140). It is not in ``Program.body``; the emitter
prints it and the simulator runs it (a ``barrier ALL`` trace event after the body).

Synchronisation: ordinary instructions of their own types, subclasses of :class:`Instr`
without regions or attrs (``lower/sync_ir.py``: ``SetFlag``, ``WaitFlag``, ``Barrier``,
``CrossSet``, ``CrossWait``), so passes tell them apart with ``isinstance``.

Instruction ids: every instruction in a kernel has an ``id`` unique in that kernel, which every
pass keeps (``dataclasses.replace`` copies it), so passes and analyses find an instruction again
by it. The kernel hands them out: ``Kernel.build`` numbers a freshly built kernel in program
order, ``Kernel.with_programs`` gives an instruction a pass adds (``id`` left ``UNNUMBERED``) the
next fresh id from ``Kernel.next_id``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Union

from ascendsched.dtypes import DType
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.affine import Affine, Cond
from ascendsched.target.model import CoreType, Pipe, Scope, Target

BLOCK_IDX = "block_idx"  # the loop-free variable holding the block (AI Core) index
# The loop-free variable of the AIV program of a 1:2 mixed kernel (``Kernel.sub_blocks`` = 2):
# which of the block's two Vector cores runs it, GetSubBlockIdx() (0 or 1; asc-devkit docs
# GetSubBlockIdx(ISASI).md: "可以用于区分同一个核上的两个不同Vector Core，取值分别为0和1").
# Every other program (and every kernel with ``sub_blocks`` = 1) has it fixed at 0.
SUB_BLOCK_IDX = "sub_block_idx"


# --------------------------------------------------------------------------- storage
@dataclass(frozen=True)
class HostInput:
    """What the user hands a GM input that the host converts before launch: an array of
    ``dtype`` and ``shape``, turned into the kernel's format by ``convert`` (a name in
    ``lower/fixpipe_quant.py`` ``HOST_CONVERSIONS``), as frameworks do (e.g. a float32 scale
    into Fixpipe quant words)."""

    convert: str
    dtype: DType
    shape: tuple[int, ...]


@dataclass(frozen=True)
class GmTensor:
    """A global-memory kernel parameter (``kind`` input/output) or workspace. ``host``: the
    user's array the host launcher converts into this tensor (None: passed as it is)."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    kind: str = "input"  # input | output | workspace
    host: HostInput | None = None

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


UNNUMBERED = -1  # the id of an instruction not yet in a kernel


@dataclass(frozen=True)
class Instr:
    """One AscendC-level operation on one pipe. ``comment`` ties it to the schedule/dependence;
    ``id`` names it within its kernel (module docstring, "Instruction ids")."""

    op: str
    pipe: Pipe
    writes: tuple[Region, ...] = ()
    reads: tuple[Region, ...] = ()
    attrs: tuple[tuple[str, AttrValue], ...] = ()
    comment: str = ""
    id: int = field(default=UNNUMBERED, kw_only=True)

    def attr(self, name: str, default: AttrValue = None) -> AttrValue:
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    def printed_comment(self) -> str:
        """The comment as ``format_instr`` prints it (a sync shortens its list of reasons)."""
        return self.comment

    def head(self) -> str:
        """The printed form without the comment (``format_instr``); each sync type has its own."""
        attrs = " ".join(f"{k}={v}" for k, v in self.attrs)
        w = ", ".join(map(str, self.writes))
        r = ", ".join(map(str, self.reads))
        return f"[{self.pipe}] {self.op}{(' ' + attrs) if attrs else ''}  {w} <- {r}"

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
    """A complete kernel. ``block_dim`` blocks run each program with ``block_idx`` bound.

    ``sub_blocks``: how many Vector cores of each block run the AIV program (2 in a mixed
    ``KERNEL_TYPE_MIX_AIC_1_2`` kernel, each with its own ``sub_block_idx`` and its own UB;
    1 otherwise). ``block_dim`` counts blocks (AI Cores), not Vector cores: with 1:2 it launches
    ``block_dim`` AICs and ``2 * block_dim`` AIVs (docs GetBlockNum.md).

    ``next_id``: above the ``id`` of every instruction, where fresh ids start (module docstring,
    "Instruction ids"); build kernels with :meth:`build`, add instructions with
    :meth:`with_programs`."""

    name: str
    params: tuple[GmTensor, ...]
    buffers: tuple[Buffer, ...]
    block_dim: int
    programs: tuple[Program, ...]
    target: Target
    notes: tuple[str, ...] = ()  # e.g. schedule text, warnings; printed as comments
    next_id: int = 0
    sub_blocks: int = 1

    def __post_init__(self) -> None:
        if self.sub_blocks not in (1, 2):
            raise InternalCompilerError(f"kernel {self.name}: sub_blocks {self.sub_blocks}; "
                                        "a block runs 1 or 2 Vector cores")
        names = [t.name for t in self.params] + [b.name for b in self.buffers]
        if len(names) != len(set(names)):
            raise InternalCompilerError(f"kernel {self.name}: duplicate tensor/buffer names")
        seen: set[int] = set()
        for p in self.programs:
            for ins, _ in iter_instrs(p.body):
                if ins.id in seen or not 0 <= ins.id < self.next_id:
                    why = ("has no id" if ins.id == UNNUMBERED else
                           f"has the id {ins.id} of another instruction" if ins.id in seen else
                           f"has id {ins.id}, not below next_id {self.next_id}")
                    raise InternalCompilerError(
                        f"kernel {self.name}: `{ins}` in the {p.core} program {why} (build "
                        "kernels with Kernel.build, add instructions with Kernel.with_programs)")
                seen.add(ins.id)

    @classmethod
    def build(cls, name: str, params: tuple[GmTensor, ...], buffers: tuple[Buffer, ...],
              block_dim: int, programs: tuple[Program, ...], target: Target,
              notes: tuple[str, ...] = (), sub_blocks: int = 1) -> Kernel:
        """A kernel of freshly built programs: each instruction without an id gets one, in
        program order, after the largest id already there."""
        start = 1 + max((i.id for p in programs for i, _ in iter_instrs(p.body)), default=-1)
        programs, next_id = _numbered(programs, start)
        return cls(name, params, buffers, block_dim, programs, target, notes, next_id,
                   sub_blocks)

    def with_programs(self, programs: tuple[Program, ...]) -> Kernel:
        """This kernel with ``programs``, in which each instruction without an id (one a pass
        added) gets a fresh one, from ``next_id`` on in program order."""
        programs, next_id = _numbered(programs, self.next_id)
        return replace(self, programs=programs, next_id=next_id)

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

    def subs(self, core: CoreType) -> int:
        """How many cores of each block run the program of ``core``."""
        return self.sub_blocks if core == CoreType.AIV else 1

    def streams(self, core: CoreType) -> tuple[tuple[int, str], ...]:
        """The cores of one block that run ``core``'s program: (``sub_block_idx``, trace
        name); the trace names the two AIVs of a 1:2 kernel ``AIV0`` and ``AIV1``."""
        n = self.subs(core)
        return tuple((s, f"{core}{s}" if n > 1 else str(core)) for s in range(n))

    def var_ranges(self, core: CoreType) -> dict[str, tuple[int, int]]:
        """Inclusive ranges of the loop-free variables of ``core``'s program (``sub_block_idx``
        only where two Vector cores run it)."""
        out = {BLOCK_IDX: (0, self.block_dim - 1)}
        if self.subs(core) > 1:
            out[SUB_BLOCK_IDX] = (0, self.subs(core) - 1)
        return out

    def program(self, core: CoreType) -> Program | None:
        for p in self.programs:
            if p.core == core:
                return p
        return None

    def replace_body(self, core: CoreType, body: tuple[Stmt, ...]) -> Kernel:
        return self.with_programs(tuple(
            Program(p.core, body) if p.core == core else p for p in self.programs))

    def with_bodies(self, change: Callable[[tuple[Stmt, ...]], tuple[Stmt, ...]]) -> Kernel:
        """This kernel with ``change`` applied to each program's body; itself when every
        body comes back as the same object (``change`` returns its argument when it has
        nothing to do)."""
        programs = tuple(p if (body := change(p.body)) is p.body else Program(p.core, body)
                         for p in self.programs)
        if all(new is old for new, old in zip(programs, self.programs)):
            return self
        return self.with_programs(programs)

    def __str__(self) -> str:
        return format_kernel(self)


def _numbered(programs: tuple[Program, ...], start: int) -> tuple[tuple[Program, ...], int]:
    """``programs`` with ids ``start, start + 1, ...`` given to the instructions without one,
    in program order, and the next fresh id."""
    number = _Number(start)
    out = []
    for p in programs:
        body = number.visit_body(p.body)
        out.append(p if body is p.body else Program(p.core, body))
    return tuple(out), number.fresh


def copied(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """``body`` as new instructions (each id reset to ``UNNUMBERED``), for a second copy of
    statements in a kernel or statements from another kernel: the kernel they go into
    (``Kernel.with_programs``) gives them fresh ids."""
    return _Unnumber().visit_body(body)


DMA_OPS = frozenset(["copy_gm_ub", "copy_ub_gm"])
VECTOR_OPS = frozenset(["vec_binary", "vec_fma", "vec_unary", "vec_scalar", "vec_dup", "vec_cast",
                        "vec_reduce", "vec_block_reduce", "vec_brcb", "vec_cmp", "vec_select"])


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

    Override ``visit_Instr`` / ``visit_For`` / ``visit_If``, or the visitor of a sync type
    (``visit_SetFlag``, ``visit_Sync``, ...: an instruction goes to the visitor of its nearest
    type that has one); each returns a tuple of statements (so one node may become zero or
    several).
    """

    def visit_body(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        changed = False
        for s in body:
            new = getattr(self, _visitor(type(self), type(s)))(s)
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


@lru_cache(maxsize=512)
def _visitor(mutator: type, node: type) -> str:
    """The name of ``mutator``'s visitor for a ``node``: of its nearest type that has one
    (asked once per statement visited: kept per pair of classes)."""
    for cls in node.__mro__:
        if hasattr(mutator, f"visit_{cls.__name__}"):
            return f"visit_{cls.__name__}"
    raise InternalCompilerError(f"{mutator.__name__} cannot visit a {node.__name__}")


# the mutators of ``_numbered`` and ``copied``: module-level (a class made per call costs its
# creation and a reference cycle for the cyclic collector)
class _Number(StmtMutator):
    """Fresh ids, from ``fresh`` on, for the instructions without one (``_numbered``)."""

    def __init__(self, fresh: int) -> None:
        self.fresh = fresh

    def visit_Instr(self, s: Instr) -> tuple[Stmt, ...]:
        if s.id != UNNUMBERED:
            return (s,)
        self.fresh += 1
        return (replace(s, id=self.fresh - 1),)


class _Unnumber(StmtMutator):
    """Every instruction's id reset (``copied``)."""

    def visit_Instr(self, s: Instr) -> tuple[Stmt, ...]:
        return (s,) if s.id == UNNUMBERED else (replace(s, id=UNNUMBERED),)


# --------------------------------------------------------------------------- printing
def format_instr(i: Instr) -> str:
    c = i.printed_comment()
    return i.head() + (f"   # {c}" if c else "")


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
    subs = f", {k.sub_blocks} Vector cores per block" if k.sub_blocks > 1 else ""
    lines = [f"kernel {k.name}  (target {k.target.name}, {k.block_dim} blocks{subs})"]
    for n in k.notes:
        lines.append(f"  # {n}")
    for t in k.params:
        lines.append(f"  gm {t.kind} {t.name}: {t.dtype}{list(t.shape)}"
                     + (f"   # host: {t.host.convert}({t.host.dtype}{list(t.host.shape)})"
                        if t.host else ""))
    for b in k.buffers:
        off = "" if b.offsets is None else f" at {list(b.offsets)}"
        lines.append(f"  {b.scope} {b.name}: {b.dtype}[{b.elems}] x{b.copies}{off}"
                     + (f"   # {b.comment}" if b.comment else ""))
    for p in k.programs:
        lines.append(f"  program {p.core}:")
        lines.extend(format_body(p.body, 2))
    return "\n".join(lines)
