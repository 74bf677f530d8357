"""The event engine of the timing model: one block's core programs, pipe by pipe.

The scalar unit walks a program in order and issues each instruction into its pipe's queue
(``scalar_issue`` cycles each, ``loop_overhead`` per loop iteration; it stalls while that
queue holds ``queue_depth`` instructions not yet started). Pipes run concurrently, each in
order: an op starts when issued and when its pipe is free. ``SetFlag(p)`` fires once all earlier
``p`` work is done (the vector tail included) without holding later ``p`` work; ``WaitFlag(q)`` holds pipe ``q`` until its flag
fired; ``PipeBarrier(p)`` drains ``p``; a cross-core wait blocks the whole core until the other
core's set arrived (plus ``cross_flag`` latency). Vector and Mmad streams pay their ``head`` when
the stream was interrupted (an idle pipe, a flag or a barrier before them).

Fast path (``fast=True``): at each loop-iteration boundary the engine snapshots its state
relative to the scalar clock (pipe free/done times, pending flags, queue slots). When the
snapshot equals the one ``P`` iterations earlier (P <= 4) and the iterations to come repeat the
loop's cost-relevant values with period P (If outcomes, event ids, UB bank offsets), the
remaining whole periods are skipped: every clock moves by ``k * period`` and the statistics by
``k`` times one period's. The full mode walks every instruction and can record a timeline.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ascendsched.errors import InternalCompilerError
from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import BLOCK_IDX, VECTOR_OPS, For, If, Instr, Kernel, Stmt
from ascendsched.lower.sync_ir import (
    Barrier,
    CrossSet,
    CrossSync,
    CrossWait,
    EventSync,
    SetFlag,
    WaitFlag,
)
from ascendsched.sim.costs import (
    KIND_DMA,
    KIND_MMAD,
    KIND_PIPELINED,
    KIND_VEC,
    PIPE_INDEX,
    PIPES,
    CostTable,
    bank_invariant,
)
from ascendsched.target.model import Pipe

NP = len(PIPES)
EPS = 1e-6
MAX_PERIOD = 4
MIN_TRIPS = 6  # shorter loops are simulated whole


@dataclass(frozen=True)
class LoopInfo:
    """Whether a loop may be extrapolated, and the values its iterations must repeat."""

    ok: bool
    probes: tuple[Callable[[dict[str, int]], object], ...]


@dataclass
class Slice:
    """One recorded pipe activity (timeline)."""

    pipe: int
    start: float
    end: float
    name: str
    flow: tuple | None = None  # ("set" | "wait", flag key, sequence number)


class CrossCounters:
    """The mode-2 cross-core flags of one block in time (asc-devkit docs CrossCoreSetFlag
    (ISASI).md, 模式2): an AIC set reaches every Vector core of the block (``aivs``: their
    names, ``AIV`` or ``AIV0``/``AIV1``); the AIC's counter gains one, at the later fire time,
    when each Vector core has set once."""

    def __init__(self, aivs: tuple[str, ...]) -> None:
        self.aivs = aivs
        self.ready: dict[tuple[str, tuple], deque] = {}  # (receiver, flag) -> fire times
        self.sent: dict[tuple[str, tuple], deque] = {}  # (AIV, flag) -> not yet paired

    def set(self, core: str, key: tuple, fire: float) -> None:
        if core == "AIC":
            for v in self.aivs:
                self.ready.setdefault((v, key), deque()).append(fire)
            return
        self.sent.setdefault((core, key), deque()).append(fire)
        if all(self.sent.get((v, key)) for v in self.aivs):
            t = max(self.sent[(v, key)].popleft() for v in self.aivs)
            self.ready.setdefault(("AIC", key), deque()).append(t)

    def take(self, core: str, key: tuple) -> float | None:
        """The fire time of the set a wait of ``core`` consumes, None while there is none."""
        q = self.ready.get((core, key))
        return q.popleft() if q else None

    def pending(self) -> int:
        return sum(map(len, self.ready.values())) + sum(map(len, self.sent.values()))


class CoreRun:
    """The timing state of one core (the AIC or one AIV) running one block's program."""

    def __init__(self, body: tuple[Stmt, ...], table: CostTable, env: dict[str, int],
                 loops: dict[int, LoopInfo], cross: CrossCounters, *, fast: bool, record: bool,
                 name: str) -> None:
        c = table.c
        self.body, self.table, self.env, self.loops, self.cross = body, table, env, loops, cross
        self.fast, self.name = fast, name
        self.issue_c, self.loop_c, self.q = c.scalar_issue, c.loop_overhead, c.queue_depth
        self.set_c, self.wait_c, self.bar_c, self.cross_c = (c.set_flag, c.wait_flag, c.barrier,
                                                              c.cross_flag)
        self.t = 0.0
        self.free = [0.0] * NP
        self.done = [0.0] * NP
        self.last = [-1.0] * NP  # end of the last compute op of the pipe's stream
        self.dfree = [0.0] * NP  # data clock of pipelined DMA
        self.ring = [deque(maxlen=self.q) for _ in range(NP)]
        self.flags: dict[tuple, deque] = {}
        self.busy = [0.0] * NP
        self.counts = [0.0, 0.0, 0.0]  # instructions, flops, vector repeats
        self.rec: list[Slice] | None = [] if record else None
        self._flag_seq: dict[tuple, int] = {}

    # ------------------------------------------------------------------ driver
    def run(self) -> Iterator[tuple]:
        """Walk the program; yields ``("cross", key)`` while blocked on a cross-core flag."""
        yield from self._body(self.body)

    def end(self) -> float:
        return max(max(self.done), max(self.free), self.t)

    def _body(self, body: tuple[Stmt, ...]) -> Iterator[tuple]:
        env = self.env
        for s in body:
            kind = type(s)
            if kind is For:
                yield from self._for(s)
            elif kind is CrossSet or kind is CrossWait:
                yield from self._cross(s)
            elif kind is not If:
                self._instr(s)
            else:
                self.t += self.issue_c
                self.busy[0] += self.issue_c
                if all(c.evaluate(env) for c in s.conds):
                    yield from self._body(s.body)

    def _for(self, s: For) -> Iterator[tuple]:
        env, n, var = self.env, s.extent, s.var
        info = self.loops.get(id(s))
        try_fast = self.fast and info is not None and info.ok and n >= MIN_TRIPS
        hist: dict[int, tuple] = {}
        j = 0
        while j < n:
            if try_fast:
                snap = self._snap()
                for p in range(1, MAX_PERIOD + 1):
                    h = hist.get(j - p)
                    if h is None or h[0] != snap:
                        continue
                    k = self._periods(info, var, j, p, n)
                    if k:
                        self._shift(k * (self.t - h[1]), k, h[2])
                        j += k * p
                        hist.clear()
                        snap = self._snap()
                        break
                if j >= n:
                    break
                hist[j] = (snap, self.t, self._stats())
            env[var] = j
            yield from self._body(s.body)
            self.t += self.loop_c
            self.busy[0] += self.loop_c
            j += 1
        env.pop(var, None)

    # ------------------------------------------------------------------ one instruction
    def _issue(self, p: int) -> float:
        ring = self.ring[p]
        t = self.t
        if len(ring) == self.q and ring[0] > t:
            t = ring[0]  # the queue is full: wait until its oldest instruction starts
        self.t = t + self.issue_c
        self.busy[0] += self.issue_c  # the scalar unit (PIPES[0] is S) issuing
        return t

    def _instr(self, s: Instr) -> None:
        if isinstance(s, Barrier) and s.pipe == Pipe.ALL:
            issue = self.t
            end = max(max(self.done), max(self.free), issue) + self.bar_c
            for i in range(NP):
                self.free[i] = self.done[i] = end
            self.t = end
            return
        p = PIPE_INDEX[s.pipe]
        issue = self._issue(p)
        start = max(issue, self.free[p])
        self.ring[p].append(start)
        if isinstance(s, SetFlag):
            fire = max(start, self.done[p]) + self.set_c  # later work of p need not wait
            key = (p, PIPE_INDEX[s.dst], s.event_id.evaluate(self.env))
            self.flags.setdefault(key, deque()).append(fire)
            self._record(p, start, fire, s.op, ("set", key))
            return
        if isinstance(s, WaitFlag):
            key = (PIPE_INDEX[s.src], p, s.event_id.evaluate(self.env))
            q = self.flags.get(key)
            if not q:
                raise InternalCompilerError(
                    f"{self.name}: `{s}` waits for a flag no earlier instruction set (the timing "
                    f"model needs every wait's set earlier in program order)")
            end = max(start, q.popleft()) + self.wait_c
            self.free[p] = end
            self._record(p, start, end, s.op, ("wait", key))
            return
        if isinstance(s, Barrier):
            end = max(start, self.done[p]) + self.bar_c
            self.free[p] = self.done[p] = end
            self._record(p, start, end, s.op)
            return
        c = self.table.cost(s, self.env)
        if c.kind == KIND_PIPELINED:
            req_end = start + c.req
            data_end = max(start, self.dfree[p]) + c.data
            end = max(req_end, data_end) + c.head
            self.free[p] = req_end
            self.dfree[p] = data_end
            self.done[p] = max(self.done[p], end)
            self.busy[p] += end - max(start, self.last[p])
            self.last[p] = end
            self.counts[0] += 1
            if self.rec is not None:
                self._record(p, start, end, c.name)
            return
        dur = c.dur
        if c.kind in (KIND_VEC, KIND_MMAD) and start > self.last[p] + EPS:
            dur += c.head
        end = start + dur
        self.free[p] = end
        self.last[p] = end
        self.done[p] = max(self.done[p], end + c.tail)
        self.busy[p] += dur
        cnt = self.counts
        cnt[0] += 1
        cnt[1] += c.flops
        cnt[2] += c.repeats
        if self.rec is not None:
            self._record(p, start, end, c.name)

    def _cross(self, s: CrossSync) -> Iterator[tuple]:
        key = ("cross", s.flag_id.evaluate(self.env))
        if isinstance(s, CrossSet):
            p = PIPE_INDEX[s.pipe]
            issue = self._issue(p)
            start = max(issue, self.free[p])
            fire = max(start, self.done[p]) + self.cross_c
            self.free[p] = fire
            self.cross.set(self.name, key, fire)
            self._record(p, start, fire, s.op, ("set", key))
            return
        fire = self.cross.take(self.name, key)
        while fire is None:
            yield ("cross", key)
            fire = self.cross.take(self.name, key)
        end = max(self.t, fire) + self.wait_c
        self._record(PIPE_INDEX[Pipe.S], self.t, end, s.op, ("wait", key))
        self.t = end  # a cross-core wait blocks the whole core (ASCEND_910B.md)
        for i in range(NP):
            self.free[i] = max(self.free[i], end)

    def _record(self, p: int, start: float, end: float, name: str, flow: tuple | None = None
                ) -> None:
        if self.rec is None:
            return
        if flow is not None:
            seq = self._flag_seq.get((flow[0], flow[1]), 0)
            self._flag_seq[(flow[0], flow[1])] = seq + 1
            flow = (flow[0], flow[1], seq)
        self.rec.append(Slice(p, start, end, name, flow))

    # ------------------------------------------------------------------ fast path
    def _snap(self) -> tuple:
        """The state relative to the scalar clock, rounded; times already past clamp to -1."""
        vals = self.free + self.done + self.last + self.dfree
        lens = []
        for r in self.ring:
            vals.extend(r)
            lens.append(len(r))
        keys = []
        for k, q in self.flags.items():
            if q:
                keys.append((k, len(q)))
                vals.extend(q)
        arr = np.round(np.maximum(np.array(vals) - self.t, -1.0), 3)
        return (tuple(lens), tuple(keys), arr.tobytes())

    def _stats(self) -> tuple:
        return (tuple(self.busy), tuple(self.counts))

    def _periods(self, info: LoopInfo, var: str, j: int, p: int, n: int) -> int:
        """Whole periods ``p`` from iteration ``j`` over which the loop's probes repeat."""
        if not info.probes:
            return (n - j) // p
        env: dict = dict(self.env)
        env[var] = trips = np.arange(j - p, n)  # every probe over the trips at once
        same = np.ones(n - j, bool)
        for f in info.probes:
            v = np.broadcast_to(np.asarray(f(env)), trips.shape)
            same &= v[p:] == v[:-p]
        return (int(np.argmin(same)) if not same.all() else n - j) // p

    def _shift(self, d: float, k: int, old: tuple) -> None:
        self.t += d
        for arr in (self.free, self.done, self.last, self.dfree):
            for i in range(NP):
                arr[i] += d
        for r in self.ring:
            for i in range(len(r)):
                r[i] += d
        for q in self.flags.values():
            for i in range(len(q)):
                q[i] += d
        busy0, cnt0 = old
        for i in range(NP):
            self.busy[i] += k * (self.busy[i] - busy0[i])
        for i in range(len(self.counts)):
            self.counts[i] += k * (self.counts[i] - cnt0[i])


# ---------------------------------------------------------------------- static loop analysis
def loop_infos(kernel: Kernel, body: tuple[Stmt, ...]) -> dict[int, LoopInfo]:
    """For every For: may it be extrapolated, and which values must its iterations repeat."""
    out: dict[int, LoopInfo] = {}
    period = kernel.target.block_bytes * (kernel.target.costs.ub_bank_groups
                                          if kernel.target.costs else 16)

    def visit(stmts: tuple[Stmt, ...]) -> None:
        for s in stmts:
            if isinstance(s, For):
                out[id(s)] = _loop_info(kernel, s, period)
                visit(s.body)
            elif isinstance(s, If):
                visit(s.body)

    visit(body)
    return out


def _loop_info(kernel: Kernel, loop: For, period: int) -> LoopInfo:
    inner: set[str] = set()
    probes: list[Callable[[dict[str, int]], object]] = []
    ok = True

    def add(a: Affine, probe: Callable[[dict[str, int]], object]) -> None:
        nonlocal ok
        vs = a.vars()
        if loop.var in vs:
            if vs & inner:
                ok = False
            probes.append(probe)

    def visit(stmts: tuple[Stmt, ...]) -> None:
        nonlocal ok
        for s in stmts:
            if isinstance(s, For):
                inner.add(s.var)
                visit(s.body)
            elif isinstance(s, If):
                for c in s.conds:
                    add(c.lhs, c.evaluate)
                visit(s.body)
            elif isinstance(s, CrossSync):
                ok = False
            elif isinstance(s, EventSync):
                add(s.event_id, s.event_id.evaluate)
            elif s.op in VECTOR_OPS:
                for r in s.reads:
                    buf = kernel.buffer_map.get(r.tensor)
                    if buf is None or bank_invariant(r, buf.offsets, buf.dtype.bytes, period):
                        continue
                    add(r.offset + r.copy, _bank_probe(buf.offsets, r.offset, r.copy,
                                                       buf.dtype.bytes, period))

    # inner vars first (a probe mixing the loop var with an inner var disables the loop)
    def collect(stmts: tuple[Stmt, ...]) -> None:
        for s in stmts:
            if isinstance(s, For):
                inner.add(s.var)
                collect(s.body)
            elif isinstance(s, If):
                collect(s.body)

    collect(loop.body)
    visit(loop.body)
    return LoopInfo(ok, tuple(probes))


def _bank_probe(offsets: tuple[int, ...] | None, off: Affine, copy: Affine, eb: int,
                period: int) -> Callable[[dict[str, int]], object]:
    table = None if offsets is None else np.asarray(offsets)

    def f(env: dict) -> object:  # an int, or an array where env holds arrays
        base = 0 if table is None else table[copy.evaluate(env)]
        return (base + off.evaluate(env) * eb) % period
    return f


def block_signature(body: tuple[Stmt, ...], block: int, limit: int = 200_000) -> tuple | None:
    """What of the program's control flow depends on ``block_idx``: the outcome of every If
    that mentions it, over the enclosing loop variables it also mentions (None: too many)."""
    sig: list[object] = []
    extents: dict[str, int] = {}

    def visit(stmts: tuple[Stmt, ...]) -> bool:
        for s in stmts:
            if isinstance(s, For):
                extents[s.var] = s.extent
                if not visit(s.body):
                    return False
            elif isinstance(s, If):
                for c in s.conds:
                    vs = c.lhs.vars()
                    if BLOCK_IDX not in vs:
                        continue
                    free = sorted(vs - {BLOCK_IDX})
                    if any(v not in extents for v in free):
                        return False
                    total = 1
                    for v in free:
                        total *= extents[v]
                    if total > limit:
                        return False
                    sig.append(tuple(_cond_values(c, free, extents, block)))
                if not visit(s.body):
                    return False
            elif isinstance(s, (EventSync, CrossSync)):
                a = s.event_id if isinstance(s, EventSync) else s.flag_id
                if BLOCK_IDX in a.vars():
                    return False
        return True

    return tuple(sig) if visit(body) else None


def _cond_values(c, free: list[str], extents: dict[str, int], block: int) -> list[bool]:
    """``c`` at ``block`` over every value of the loop variables ``free`` (the last varying
    fastest), evaluated at once."""
    grids = np.meshgrid(*(np.arange(extents[v]) for v in free), indexing="ij")
    env: dict = {BLOCK_IDX: block, **{v: g.ravel() for v, g in zip(free, grids, strict=True)}}
    total = int(np.prod([extents[v] for v in free]))
    return np.broadcast_to(np.asarray(c.evaluate(env)), (total,)).tolist()


__all__ = ["CoreRun", "LoopInfo", "Slice", "block_signature", "loop_infos", "KIND_DMA"]
