"""Functional execution of kernel IR with numpy, optionally recording the dynamic trace.

``run_kernel(kernel, inputs)`` runs every program of every block (``block_idx`` bound) in
program order. Memory is bytes: GM tensors are byte arrays (bfloat16 as 16-bit patterns); for a
memory-planned kernel (every buffer has ``offsets``) each on-chip scope of each block is ONE byte
array of the scope's capacity and every buffer copy lives at its planned offset, so two live
buffers that overlap produce wrong numbers; unplanned kernels give every buffer copy its own
array. Ops follow the semantics in ``lower/ir.py``'s docstring; each op is one entry of
``_HANDLERS`` (AIC ops get added there). Violations of the op constraints raise
``InternalCompilerError`` naming the instruction.

Choices where ir.py is silent (each a single place below):
- Output tensors start as 0xFF bytes (NaN for floats), so unwritten outputs show; workspaces
  start zeroed; on-chip memory starts zeroed. DMA pad bytes (between a UB row's last element and
  its 32 B round-up) are left unchanged.
- A block-broadcast source (column stride 0) must hold the same bytes in the lanes it feeds
  (``min(cols, 32 / elem)`` lanes of the block at each row start), else the hardware would read
  different values than the IR means: an ``InternalCompilerError``.
- ``vec_reduce`` dst needs the ``WholeReduce*`` alignment only (``_reduce_dst_align``: one
  element for sum, two for max/min; lowering splits reductions of more than ``max_repeat`` rows
  at element offsets); every other vector operand starts on a 32 B boundary, as do DMA UB sides,
  whose row strides must be whole 32 B blocks. Vector row strides are also limited to ``max_rep_stride`` blocks.
- Compare-mask operands (``vec_cmp`` dst, ``vec_select`` mask) may have any row stride in bytes;
  mask bits beyond ``cols`` in the written bytes are 0.
- float16 math is done in float16, float32 in float32 (numpy rounds per op); ``rsqrt`` and
  ``reciprocal`` carry the target's modelled error (``sim/precision.py``: a deterministic
  relative error within ``target.approx_rel_error``), a ``vec_reduce`` sum is a binary tree
  per row (one repeat), as the hardware sums (same module); bfloat16 results are rounded with
  ``dtypes.store``; integer results wrap, except a Cast's, which saturate. Vector dtypes, cast
  pairs and their round modes are checked against the target's ``vector_dtypes`` /
  ``vector_casts`` tables.
- Cube (AIC) ops live in ``sim/cube.py``; L1/L0A/L0B/L0C start as 0xFF bytes (poison), UB and
  the rest as zeros. Vector/DMA ops must run in the AIV program, cube ops in the AIC program.
- Cross-core flags use mode-2 counters with ONE AIV per block (the IR has no sub-block index).
- After its body each program runs ``ir.program_epilogue`` (AIC: a ``barrier ALL``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ascendsched import dtypes as dt
from ascendsched.dtypes import DType
from ascendsched.errors import AscendSchedError, InternalCompilerError
from ascendsched.lower.ir import (
    BLOCK_IDX,
    CUBE_PIPES,
    Affine,
    For,
    If,
    Instr,
    Kernel,
    Program,
    Region,
    Stmt,
    program_epilogue,
)
from ascendsched.sim.cube import CUBE_HANDLERS, POISON_BYTE, Storage
from ascendsched.sim.precision import approx_unary, tree_sum
from ascendsched.sim.trace import Interval, Trace, TraceEvent, merge_intervals
from ascendsched.target.model import CoreType, Pipe, Scope

__all__ = ["SimResult", "run_kernel"]


@dataclass(frozen=True)
class SimResult:
    """Every GM output tensor (numpy storage dtype, tensor shape) and the trace if requested."""

    outputs: dict[str, np.ndarray]
    trace: Trace | None = None


def run_kernel(kernel: Kernel, inputs: dict[str, np.ndarray], *, trace: bool = False
               ) -> SimResult:
    """Execute ``kernel`` on ``inputs`` (one array per GM input tensor, by name)."""
    m = _Machine(kernel, inputs, trace)
    m.run()
    return SimResult(m.outputs(), Trace(tuple(m.events)) if trace else None)


# --------------------------------------------------------------------------- storage helpers
def _storage(dtype: DType) -> np.dtype:
    """numpy type of the bytes in memory (bfloat16: its 16-bit pattern)."""
    return np.dtype(np.uint16) if dtype is dt.bfloat16 else dtype.np


def _to_bits(dtype: DType, values: np.ndarray | float | int) -> np.ndarray:
    v = dt.store(dtype, values)
    return dt.bf16_bits(v) if dtype is dt.bfloat16 else v


def _from_bits(dtype: DType, raw: np.ndarray) -> np.ndarray:
    return dt.from_bf16_bits(raw) if dtype is dt.bfloat16 else raw


def _round_up(x: int, a: int) -> int:
    return -(-x // a) * a


_merge = merge_intervals
# Cube scopes start as garbage: bytes nobody wrote read as NaN (floats) / -1 (ints), so a lowering
# that relies on unwritten fractal padding gets wrong numbers (ir.py "Cube (AIC)").
_POISONED = frozenset([Scope.L1, Scope.L0A, Scope.L0B, Scope.L0C])
# Mmad's inputs: the simulator tracks which of their bytes a copy or load wrote (sim/cube.py)
_TRACK_LOADED = frozenset([Scope.L1, Scope.L0A, Scope.L0B])


def _fresh(scope: Scope, nbytes: int) -> np.ndarray:
    if scope in _POISONED:
        return np.full(nbytes, POISON_BYTE, np.uint8)
    return np.zeros(nbytes, np.uint8)


@dataclass
class _Operand:
    """A Region resolved under the current loop environment."""

    instr: Instr
    role: str
    tensor: str
    dtype: DType
    scope: Scope
    space: str  # trace space
    mem: np.ndarray  # uint8 array holding the copy
    base: int  # byte address of element 0 of the copy in ``mem`` (= trace address)
    elems: int  # elements of the copy
    off: int
    rows: int
    rs: int
    cols: int
    cs: int

    @property
    def eb(self) -> int:
        return self.dtype.bytes

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    @property
    def start(self) -> int:
        """Byte address of element (0, 0)."""
        return self.base + self.off * self.eb

    @cached_property
    def idx(self) -> np.ndarray:
        r = np.arange(self.rows, dtype=np.int64)[:, None] * self.rs
        c = np.arange(self.cols, dtype=np.int64)[None, :] * self.cs
        return self.off + r + c

    @property
    def _typed(self) -> np.ndarray:
        return self.mem[self.base:self.base + self.elems * self.eb].view(_storage(self.dtype))

    def load_raw(self) -> np.ndarray:
        return self._typed[self.idx]

    def store_raw(self, raw: np.ndarray) -> None:
        self._typed[self.idx] = raw

    def load(self) -> np.ndarray:
        return _from_bits(self.dtype, self.load_raw())

    def store(self, values: np.ndarray) -> None:
        self.store_raw(_to_bits(self.dtype, np.broadcast_to(values, self.shape)))

    def exact_bytes(self) -> list[Interval]:
        lo = (self.base + self.idx.ravel() * self.eb)
        return _merge(self.space, lo, lo + self.eb)

    def row_bytes(self, block: int, *, rounded: bool) -> tuple[np.ndarray, np.ndarray]:
        """Per row [lo, hi) of a contiguous row, optionally rounded out to ``block`` bytes."""
        lo = self.base + (self.off + np.arange(self.rows, dtype=np.int64) * self.rs) * self.eb
        hi = lo + self.cols * self.eb
        if rounded:
            lo, hi = lo // block * block, -(-hi // block) * block
        return lo, hi


# --------------------------------------------------------------------------- machine
@dataclass
class _Ctx:
    """What a handler sees: the machine, the instruction, the environment, trace accesses."""

    m: _Machine
    ins: Instr
    env: dict[str, int]
    block: int
    core: str = ""
    reads: list[Interval] = field(default_factory=list)
    writes: list[Interval] = field(default_factory=list)

    def fail(self, msg: str) -> InternalCompilerError:
        env = ", ".join(f"{k}={v}" for k, v in self.env.items())
        return InternalCompilerError(
            f"kernel {self.m.k.name}: instruction `{self.ins}` ({env}): {msg}")

    def operand(self, region: Region, role: str) -> _Operand:
        return self.m.resolve(self, region, role)

    def read(self, ivs: list[Interval]) -> None:
        if self.m.tracing:
            self.reads.extend(ivs)

    def write(self, ivs: list[Interval]) -> None:
        if self.m.tracing:
            self.writes.extend(ivs)


class _Machine:
    def __init__(self, kernel: Kernel, inputs: dict[str, np.ndarray], tracing: bool) -> None:
        self.k = kernel
        self.t = kernel.target
        self.tracing = tracing
        self.events: list[TraceEvent] = []
        self.gm = self._init_gm(inputs)
        planned = [b.offsets is not None for b in kernel.buffers]
        if any(planned) and not all(planned):
            missing = [b.name for b in kernel.buffers if b.offsets is None]
            raise InternalCompilerError(
                f"kernel {kernel.name}: memory plan is partial, no offsets for {missing}")
        self.planned = all(planned)
        if self.planned:
            self._check_plan()
        self.onchip: dict[tuple, np.ndarray] = {}
        self.loaded: dict[tuple, np.ndarray] = {}  # L1/L0A/L0B: which bytes were loaded
        self.cross: dict[tuple[int, str, int], int] = {}

    # ---- setup
    def _init_gm(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        unknown = set(inputs) - {t.name for t in self.k.params}
        if unknown:
            raise AscendSchedError(f"kernel {self.k.name} has no GM tensors {sorted(unknown)}; "
                                   f"its tensors are {[t.name for t in self.k.params]}")
        gm = {}
        for t in self.k.params:
            if t.name in inputs:
                a = np.asarray(inputs[t.name])
                if a.shape != tuple(t.shape):
                    raise AscendSchedError(f"kernel {self.k.name}: input {t.name} has shape "
                                           f"{a.shape}, expected {tuple(t.shape)}")
                raw = np.ascontiguousarray(_to_bits(t.dtype, a).astype(_storage(t.dtype)))
                gm[t.name] = raw.reshape(-1).view(np.uint8).copy()
            elif t.kind == "input":
                raise AscendSchedError(f"kernel {self.k.name}: missing input {t.name}")
            elif t.kind == "output":
                gm[t.name] = np.full(t.nbytes, 0xFF, dtype=np.uint8)
            else:
                gm[t.name] = np.zeros(t.nbytes, dtype=np.uint8)
        return gm

    def _check_plan(self) -> None:
        for b in self.k.buffers:
            spec = self.t.scope(b.scope)
            for c, off in enumerate(b.offsets or ()):
                if off % spec.alignment or off < 0 or off + b.nbytes > spec.usable:
                    raise InternalCompilerError(
                        f"kernel {self.k.name}: buffer {b.name} copy {c} at {off} (+{b.nbytes} B)"
                        f" breaks {b.scope} alignment {spec.alignment} / usable {spec.usable} B")

    def outputs(self) -> dict[str, np.ndarray]:
        out = {}
        for t in self.k.params:
            if t.kind == "output":
                raw = self.gm[t.name].view(_storage(t.dtype))
                out[t.name] = _from_bits(t.dtype, raw).astype(t.dtype.np).reshape(t.shape)
        return out

    # ---- operands
    def storage(self, cx: _Ctx, region: Region, role: str) -> Storage:
        """Where the copy a region names lives: its bytes, base address and trace space."""
        k = self.k
        if region.tensor in k.param_map:
            t = k.param_map[region.tensor]
            if region.copy.evaluate(cx.env) != 0:
                raise cx.fail(f"{role}: GM tensor {t.name} has no copies")
            return Storage(t.name, t.dtype, Scope.GM, f"GM:{t.name}", self.gm[t.name], 0,
                           t.elems)
        if region.tensor not in k.buffer_map:
            raise cx.fail(f"{role}: unknown tensor {region.tensor!r}")
        b = k.buffer_map[region.tensor]
        copy = region.copy.evaluate(cx.env)
        if not 0 <= copy < b.copies:
            raise cx.fail(f"{role}: copy {copy} of {b.name} out of range 0..{b.copies - 1}")
        if self.planned:
            key: tuple = (cx.block, b.scope)
            if key not in self.onchip:
                self.onchip[key] = _fresh(b.scope, self.t.scope(b.scope).capacity)
            mem, base, space = self.onchip[key], b.offsets[copy], str(b.scope)
        else:
            key = (cx.block, b.name, copy)
            if key not in self.onchip:
                self.onchip[key] = _fresh(b.scope, _round_up(b.nbytes, self.t.block_bytes))
            mem, base, space = self.onchip[key], 0, f"{b.scope}:{b.name}:{copy}"
        loaded = None
        if b.scope in _TRACK_LOADED:
            if key not in self.loaded:
                self.loaded[key] = np.zeros(mem.size, np.uint8)
            loaded = self.loaded[key]
        return Storage(b.name, b.dtype, b.scope, space, mem, base, b.elems, loaded)

    def resolve(self, cx: _Ctx, region: Region, role: str) -> _Operand:
        st = self.storage(cx, region, role)
        dtype, scope, elems, mem, base, space = (st.dtype, st.scope, st.elems, st.mem, st.base,
                                                 st.space)
        dims = region.dims
        if len(dims) == 2:
            (rows, rs), (cols, cs) = dims
        elif len(dims) == 1:
            rows, rs, (cols, cs) = 1, 0, dims[0]
        elif not dims:
            rows, rs, cols, cs = 1, 0, 1, 1
        else:
            raise cx.fail(f"{role}: {len(dims)}-D region {region}; ops take 2-D views")
        o = _Operand(cx.ins, role, region.tensor, dtype, scope, space, mem, base, elems,
                     region.offset.evaluate(cx.env), rows, rs, cols, cs)
        lo, hi = int(o.idx.min()), int(o.idx.max())
        if lo < 0 or hi >= elems:
            raise cx.fail(f"{role} {region} reaches elements [{lo}, {hi}] outside "
                          f"{region.tensor} (0..{elems - 1})")
        return o

    # ---- execution
    def run(self) -> None:
        runners: list[tuple[int, CoreType, Iterator[tuple[int, str, int]]]] = []
        for block in range(self.k.block_dim):
            for prog in self.k.programs:
                if prog.body:
                    runners.append((block, prog.core, self._run_core(block, prog)))
        blocked: dict[int, tuple[int, str, int] | None] = {i: None for i in range(len(runners))}
        while blocked:
            progressed = False
            for i in list(blocked):
                key = blocked[i]
                if key is not None:
                    if self.cross.get(key, 0) == 0:
                        continue
                    self.cross[key] -= 1
                progressed = True
                try:
                    blocked[i] = next(runners[i][2])
                except StopIteration:
                    del blocked[i]
            if not progressed:
                stuck = [f"block {runners[i][0]} {runners[i][1]} waits on cross flag {key[2]}"
                         for i, key in blocked.items() if key is not None]
                raise InternalCompilerError(
                    f"kernel {self.k.name}: cross-core deadlock: {'; '.join(stuck)}")

    def _run_core(self, block: int, prog: Program) -> Iterator[tuple[int, str, int]]:
        seq = [0]
        env = {BLOCK_IDX: block}
        yield from self._run_body(prog.body, env, block, str(prog.core), seq)
        yield from self._run_body(program_epilogue(prog.core), env, block, str(prog.core), seq)

    def _run_body(self, body: tuple[Stmt, ...], env: dict[str, int], block: int, core: str,
                  seq: list[int]) -> Iterator[tuple[int, str, int]]:
        for s in body:
            if isinstance(s, Instr):
                yield from self._run_instr(s, env, block, core, seq[0])
                seq[0] += 1
            elif isinstance(s, For):
                if s.var in env:
                    raise InternalCompilerError(f"loop variable {s.var} rebound")
                for i in range(s.extent):
                    yield from self._run_body(s.body, {**env, s.var: i}, block, core, seq)
            elif isinstance(s, If):
                if s.evaluate(env):
                    yield from self._run_body(s.body, env, block, core, seq)
            else:
                raise InternalCompilerError(f"unknown statement {s!r}")

    def _run_instr(self, ins: Instr, env: dict[str, int], block: int, core: str, seq: int
                   ) -> Iterator[tuple[int, str, int]]:
        cx = _Ctx(self, ins, env, block, core)
        src = dst = event_id = flag_id = None
        if ins.op in ("set_flag", "wait_flag"):
            other = ins.attr("dst" if ins.op == "set_flag" else "src")
            if not isinstance(other, Pipe):
                raise cx.fail("set_flag needs attr dst, wait_flag attr src (a Pipe)")
            src, dst = (ins.pipe, other) if ins.op == "set_flag" else (other, ins.pipe)
            src, dst = str(src), str(dst)
            event_id = _int_attr(cx, "event_id")
        elif ins.op in ("cross_set", "cross_wait"):
            flag_id = _int_attr(cx, "flag_id")
            if ins.op == "cross_set":
                mode = ins.attr("mode", 2)
                if mode != 2:
                    raise cx.fail(f"cross-core mode {mode} is not simulated (only mode 2)")
                to = "AIV" if core == "AIC" else "AIC"
                key = (block, to, flag_id)
                self.cross[key] = self.cross.get(key, 0) + 1
            else:
                yield (block, core, flag_id)
        elif ins.op == "barrier":
            pass
        else:
            handler = _HANDLERS.get(ins.op)
            if handler is None:
                raise cx.fail(f"unknown op {ins.op!r} on {core} (simulated: "
                              f"{', '.join(sorted(_HANDLERS))})")
            want = _PIPE_OF[ins.op]
            need = "AIC" if ins.op in CUBE_PIPES else "AIV"
            if core != need:
                raise cx.fail(f"{ins.op} runs on the {need} core, not in the {core} program")
            if ins.pipe != want:
                raise cx.fail(f"{ins.op} runs on pipe {want}, not {ins.pipe}")
            handler(cx)
        if self.tracing:
            label_env = ", ".join(f"{k}={v}" for k, v in env.items() if k != BLOCK_IDX)
            label = " ".join(x for x in (ins.comment, f"[{label_env}]" if label_env else "") if x)
            self.events.append(TraceEvent(
                block, core, seq, ins.op, str(ins.pipe), _coalesce(cx.reads),
                _coalesce(cx.writes), src, dst, event_id, flag_id, label))


def _int_attr(cx: _Ctx, name: str) -> int:
    v = cx.ins.attr(name)
    if isinstance(v, Affine):
        return v.evaluate(cx.env)
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise cx.fail(f"attr {name} must be an int or Affine, not {v!r}")


def _coalesce(ivs: list[Interval]) -> tuple[Interval, ...]:
    out: list[list] = []
    for s, lo, hi in sorted(ivs):
        if out and out[-1][0] == s and lo <= out[-1][2]:
            out[-1][2] = max(out[-1][2], hi)
        else:
            out.append([s, lo, hi])
    return tuple((s, lo, hi) for s, lo, hi in out)


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


# --------------------------------------------------------------------------- op table
_HANDLERS: dict[str, Callable[[_Ctx], None]] = {
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
    **CUBE_HANDLERS,
}
_PIPE_OF: dict[str, Pipe] = {
    "copy_gm_ub": Pipe.MTE2, "copy_ub_gm": Pipe.MTE3,
    **{op: Pipe.V for op in _HANDLERS if op.startswith("vec_")},
    **CUBE_PIPES,
}
