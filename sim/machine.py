"""The simulated machine: memories, operands, and program-order execution of every core.

``_Machine`` holds GM (one byte array per tensor) and the on-chip memories of each block (one
byte array per scope when the kernel is memory-planned, else one per buffer copy), resolves a
``Region`` under the loop environment into an ``_Operand`` (a 2-D view of bytes with the
dtype's storage type), and runs each block's programs statement by statement, the cores of a
block interleaved at cross-core waits (mode-2 counters; a round without progress is a
deadlock). A 1:2 kernel's block runs its AIV program on two cores (``AIV0``, ``AIV1``, each
with ``sub_block_idx`` bound and its own UB). Mode 2 between an AIC and its two AIVs (asc-devkit
docs CrossCoreSetFlag(ISASI).md, 模式2): an AIC set adds one to the flag's counter on each
AIV; the AIC's counter gains one when both AIVs have set (the scheduler collects the sets of
every core that takes part), so an AIC wait needs a set from each AIV. Each instruction goes to its handler in ``_HANDLERS`` through a ``_Ctx``, which
also collects the bytes it reads and writes for the trace. The semantics are listed in
``sim/execute.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ascendsched import dtypes as dt
from ascendsched.dtypes import DType
from ascendsched.errors import AscendSchedError, InternalCompilerError
from ascendsched.lower.fixpipe_quant import HOST_CONVERSIONS
from ascendsched.lower.ir import BLOCK_IDX, SUB_BLOCK_IDX, For, Instr, Kernel, Program, Region, Stmt
from ascendsched.lower.sync_ir import CrossSet, CrossSync, EventSync, Sync, program_epilogue
from ascendsched.sim.cube import CUBE_HANDLERS, POISON_BYTE, Storage
from ascendsched.sim.trace import Interval, TraceEvent, merge_intervals
from ascendsched.sim.vector import VECTOR_HANDLERS
from ascendsched.target.model import CoreType, Scope


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
# that relies on unwritten fractal padding gets wrong numbers (lower/cube_ops.py).
_POISONED = frozenset([Scope.L1, Scope.L0A, Scope.L0B, Scope.L0C, Scope.BT])
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
    core: str = ""  # the trace's name of the core: AIC, AIV, or AIV0/AIV1 of a 1:2 kernel
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
        self.planned = all(b.offsets is not None for b in kernel.buffers)  # all or none: verified
        self.onchip: dict[tuple, np.ndarray] = {}
        self.loaded: dict[tuple, np.ndarray] = {}  # L1/L0A/L0B: which bytes were loaded
        self.cross: dict[tuple[int, str, int], int] = {}  # (block, core, flag) -> counter
        # (block, flag) -> sets each AIV made that the AIC's counter has not taken yet
        self.aiv_sets: dict[tuple[int, int], list[int]] = {}

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
                if t.host is not None:  # the user's array, converted as the host launcher does
                    if a.shape != tuple(t.host.shape):
                        raise AscendSchedError(
                            f"kernel {self.k.name}: input {t.name} has shape {a.shape}, "
                            f"expected {tuple(t.host.shape)}")
                    a = HOST_CONVERSIONS[t.host.convert](a, tuple(t.shape))
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
            return Storage(t.name, t.dtype, Scope.GM, f"GM:{t.name}", self.gm[t.name], 0,
                           t.elems)
        b = k.buffer_map[region.tensor]
        copy = region.copy.evaluate(cx.env)
        if self.planned:
            key: tuple = (cx.block, cx.core, b.scope)
            if key not in self.onchip:
                self.onchip[key] = _fresh(b.scope, self.t.scope(b.scope).capacity)
            mem, base, space = self.onchip[key], b.offsets[copy], str(b.scope)
        else:
            key = (cx.block, cx.core, b.name, copy)
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
        if len(region.dims) == 2:  # one or two dims (verified); one is a single row
            (rows, rs), (cols, cs) = region.dims
        else:
            rows, rs, (cols, cs) = 1, 0, region.dims[0]
        return _Operand(cx.ins, role, region.tensor, dtype, scope, space, mem, base, elems,
                        region.offset.evaluate(cx.env), rows, rs, cols, cs)

    # ---- execution
    def run(self) -> None:
        runners: list[tuple[int, CoreType, Iterator[tuple[int, str, int]]]] = []
        for block in range(self.k.block_dim):
            for prog in self.k.programs:
                if prog.body:
                    for sub, name in self.k.streams(prog.core):
                        runners.append((block, prog.core, self._run_core(block, prog, sub,
                                                                          name)))
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
                stuck = [f"block {runners[i][0]} {key[1]} waits on cross flag {key[2]}"
                         for i, key in blocked.items() if key is not None]
                raise InternalCompilerError(
                    f"kernel {self.k.name}: cross-core deadlock: {'; '.join(stuck)}")

    def _run_core(self, block: int, prog: Program, sub: int, name: str
                  ) -> Iterator[tuple[int, str, int]]:
        seq = [0]
        env = {BLOCK_IDX: block, SUB_BLOCK_IDX: sub}
        yield from self._run_body(prog.body, env, block, name, seq)
        yield from self._run_body(program_epilogue(self.k, prog.core), env, block, name, seq)

    def _cross_set(self, block: int, core: str, flag: int) -> None:
        """Mode 2 (module docstring): AIC -> each AIV of the block; AIV -> the AIC once every
        AIV of the block has set."""
        if core == "AIC":
            for _, name in self.k.streams(CoreType.AIV):
                key = (block, name, flag)
                self.cross[key] = self.cross.get(key, 0) + 1
            return
        subs = self.k.sub_blocks
        pend = self.aiv_sets.setdefault((block, flag), [0] * subs)
        pend[int(core[3:]) if subs > 1 else 0] += 1
        if all(pend):
            for s in range(subs):
                pend[s] -= 1
            key = (block, "AIC", flag)
            self.cross[key] = self.cross.get(key, 0) + 1

    def _run_body(self, body: tuple[Stmt, ...], env: dict[str, int], block: int, core: str,
                  seq: list[int]) -> Iterator[tuple[int, str, int]]:
        for s in body:
            if isinstance(s, Instr):
                yield from self._run_instr(s, env, block, core, seq[0])
                seq[0] += 1
            elif isinstance(s, For):
                for i in range(s.extent):
                    yield from self._run_body(s.body, {**env, s.var: i}, block, core, seq)
            elif s.evaluate(env):  # an If
                yield from self._run_body(s.body, env, block, core, seq)

    def _run_instr(self, ins: Instr, env: dict[str, int], block: int, core: str, seq: int
                   ) -> Iterator[tuple[int, str, int]]:
        cx = _Ctx(self, ins, env, block, core)
        src = dst = event_id = flag_id = None
        if isinstance(ins, EventSync):
            src, dst = str(ins.src), str(ins.dst)
            event_id = ins.event_id.evaluate(env)
        elif isinstance(ins, CrossSync):
            flag_id = ins.flag_id.evaluate(env)
            if isinstance(ins, CrossSet):  # mode 2 (verified)
                self._cross_set(block, core, flag_id)
            else:
                yield (block, core, flag_id)
        elif isinstance(ins, Sync):  # a barrier
            pass
        else:  # a known op in its core's program, on its pipe (verified)
            _HANDLERS[ins.op](cx)
        if self.tracing:
            label_env = ", ".join(f"{k}={v}" for k, v in env.items()
                                  if k not in (BLOCK_IDX, SUB_BLOCK_IDX))
            label = " ".join(x for x in (ins.comment, f"[{label_env}]" if label_env else "") if x)
            self.events.append(TraceEvent(
                block, core, seq, ins.op, str(ins.pipe), _coalesce(cx.reads),
                _coalesce(cx.writes), src, dst, event_id, flag_id, label))


def _coalesce(ivs: list[Interval]) -> tuple[Interval, ...]:
    out: list[list] = []
    for s, lo, hi in sorted(ivs):
        if out and out[-1][0] == s and lo <= out[-1][2]:
            out[-1][2] = max(out[-1][2], hi)
        else:
            out.append([s, lo, hi])
    return tuple((s, lo, hi) for s, lo, hi in out)


# --------------------------------------------------------------------------- op table
_HANDLERS: dict[str, Callable[[_Ctx], None]] = {**VECTOR_HANDLERS, **CUBE_HANDLERS}
