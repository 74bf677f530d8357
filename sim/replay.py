"""Replay of a dynamic trace under the pipe semantics: happens-before as vector clocks.

The trace checker (``checker.py``) and the race finder (``races.py``) ask this replay which
accesses are ordered. Independent of lower/'s sync insertion on purpose: it reads only the
trace and the target.

Execution model (DESIGN.md "execution model", 910B). Per stream (= block + core):

* The scalar unit walks the stream in ``seq`` order and issues each instruction into the FIFO
  queue of its pipe. It never waits for a pipe, except at three *scalar stalls*:
  ``barrier`` on pipe ALL (waits until every earlier instruction completed), ``cross_wait``
  (until its cross-core set fired; on 910B it blocks the whole core) and ``wait_flag`` whose
  destination is pipe S (the scalar is pipe S). Queues are unbounded (real MTE1/M queues hold 32;
  deadlocks caused by full queues are not modelled).
* Each pipe starts its instructions in queue order (in-order issue). A pipe with
  ``target.needs_same_pipe_barrier[p]`` False also completes each instruction before starting
  the next; on the others, instructions may overlap, so completion is only known through:
* ``barrier(p)`` completes after every earlier p instruction completed; later p instructions
  start after it.
* ``set_flag(p, q, id)`` fires when every earlier p instruction completed (it does not hold
  back later p instructions). ``wait_flag(p, q, id)`` sits in q's queue; it resolves when its
  set fired, and later q instructions start after it. The k-th wait on (stream, p, q, id)
  consumes the k-th set. A wait does NOT order q instructions before it against q instructions
  after it (that needs a barrier or a q->q flag); it orders only what preceded its set.
* ``cross_set`` on pipe p fires when every earlier p instruction completed. Mode 2 is assumed
  (the trace has no mode; asc-devkit docs CrossCoreSetFlag(ISASI).md, 模式2: "在AIC核执行
  CrossCoreSetFlag之后，两个AIV上CrossCoreWaitFlag后续的指令才会继续执行；两个AIV都执行
  CrossCoreSetFlag后，AIC上CrossCoreWaitFlag后续的指令才能执行"): the k-th ``cross_wait`` of
  an AIV stream consumes the k-th AIC set of its block; the k-th ``cross_wait`` of the AIC
  consumes the k-th set of *every* AIV stream of its block (one in a 1:1 kernel; ``AIV0`` and
  ``AIV1`` in a 1:2 one) and resolves when all of them fired.
* Different blocks are never ordered.
* The Cube core's stream (AIC: MTE2 GM->L1, MTE1 L1->L0A/L0B, M Mmad, FIX Fixpipe) follows the
  same rules as the vector core's; which pipes complete in order comes from
  ``target.needs_same_pipe_barrier`` (on 910B every AIC pipe needs ``PipeBarrier``), except that
  an Mmad of at least ``target.mmad_ordered_fractals`` output fractals completes before later M
  instructions start (the hardware orders consecutive big Mmads, Mmad.md); two small Mmads
  accumulating into one L0C tile race unless a barrier or a flag chain orders them.

Happens-before. Knowledge is a vector clock with two counters per (core, pipe) of a block:
``started[p] = n`` (every p instruction with seq < n has started) and ``completed[p] = n``.
Every fact the model can produce has this prefix shape (barriers and sets cover all earlier
instructions of a pipe; in-order pipes complete in order), so two counters suffice. The queues
are simulated to a fixpoint; each instruction gets the clock known when it starts; an access A
happens before an access B iff ``B.clock.completed[A.core, A.pipe] > A.seq`` (same block).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ascendsched.sim.trace import Trace, TraceEvent
from ascendsched.target.model import Pipe, Target

__all__ = ["Replay", "replay"]


def replay(trace: Trace, target: Target) -> Replay:
    """``trace`` replayed under the pipe semantics of ``target``."""
    return Replay(trace, target).simulate()


_SCALAR = "SCALAR"  # pseudo-pipe of scalar stalls (barrier ALL, cross_wait, wait on S)
Clock = list[int]


def _kind(e: TraceEvent) -> str:
    if e.op == "set_flag":
        return "set"
    if e.op == "wait_flag":
        return "s_wait" if e.pipe == Pipe.S.value else "wait"
    if e.op == "barrier":
        return "gate" if e.pipe == Pipe.ALL.value else "barrier"
    if e.op in ("cross_set", "cross_wait"):
        return e.op
    return "op"


def _join(*clocks: Clock) -> Clock:
    out = list(clocks[0])
    for c in clocks[1:]:
        out = [x if x >= y else y for x, y in zip(out, c, strict=True)]
    return out


def _bump(c: Clock, updates: tuple[tuple[int, int], ...]) -> Clock:
    out = list(c)
    for i, v in updates:
        if out[i] < v:
            out[i] = v
    return out


@dataclass
class _Stream:
    key: tuple[int, str]
    idx: list[int]  # event indices in seq order
    ptr: int = 0
    queues: dict[str, deque[int]] = field(default_factory=dict)
    issue: dict[str, Clock] = field(default_factory=dict)
    scalar: Clock = field(default_factory=list)


class Replay:
    """The replay of one trace: each event's kind, the set each wait consumes, and after
    :meth:`simulate` the clock each event started with and the order the events ran in.

    ``hb(a, b)`` and ``resolved_before(w, b)`` answer happens-before questions on it; the
    reports (``checker.py``, ``races.py``) read its fields."""

    def __init__(self, trace: Trace, target: Target) -> None:
        self.t = target
        self.ev = list(trace.events)
        n = len(self.ev)
        self.kinds = [_kind(e) for e in self.ev]
        self.kstart: list[Clock | None] = [None] * n
        self.pre: list[Clock | None] = [None] * n
        self.fired: list[Clock | None] = [None] * n
        self.order: list[int] = []  # events in simulation order (a linear extension of hb)
        # streams and clock components (per block: (core, pipe) -> index of started counter)
        by_stream: dict[tuple[int, str], list[int]] = {}
        for i, e in enumerate(self.ev):
            by_stream.setdefault((e.block, e.core), []).append(i)
        self.comp: dict[int, dict[tuple[str, str], int]] = {}
        for (block, core), idx in sorted(by_stream.items()):
            idx.sort(key=lambda i: self.ev[i].seq)
            comp = self.comp.setdefault(block, {})
            for p in sorted({self.ev[i].pipe for i in idx} | {_SCALAR}):
                comp.setdefault((core, p), 2 * len(comp))
        self.streams = [_Stream(k, v) for k, v in sorted(by_stream.items())]
        for st in self.streams:
            zero = [0] * (2 * len(self.comp[st.key[0]]))
            st.scalar = zero
            for i in st.idx:
                p = self.ev[i].pipe
                st.queues.setdefault(p, deque())
                st.issue.setdefault(p, zero)
        self._match()

    # ---- pairing of sets and waits
    def _match(self) -> None:
        self.match: list[int | None] = [None] * len(self.ev)
        self.flag_sets: dict[tuple, list[int]] = {}
        self.flag_waits: dict[tuple, list[int]] = {}
        self.cross_sets: dict[tuple, list[int]] = {}
        self.cross_waits: dict[tuple, list[int]] = {}
        for st in self.streams:
            for i in st.idx:
                e, kind = self.ev[i], self.kinds[i]
                if kind == "set":
                    self.flag_sets.setdefault(self.fkey(e), []).append(i)
                elif kind in ("wait", "s_wait"):
                    self.flag_waits.setdefault(self.fkey(e), []).append(i)
                elif kind == "cross_wait":
                    self.cross_waits.setdefault((e.block, e.core, e.flag_id), []).append(i)
        # cross sets: per (block, receiving stream, flag) the list of the k-th increments, each
        # the sets that make it (one AIC set; or one set of every AIV stream of the block)
        aivs: dict[int, list[str]] = {}
        for st in self.streams:
            if st.key[1] != "AIC":
                aivs.setdefault(st.key[0], []).append(st.key[1])
        by_sender: dict[tuple, list[int]] = {}
        for st in self.streams:
            for i in st.idx:
                if self.kinds[i] == "cross_set":
                    e = self.ev[i]
                    by_sender.setdefault((e.block, e.core, e.flag_id), []).append(i)
        self.cross_parts: dict[tuple, list[tuple[int | None, ...]]] = {}
        for (block, core, flag), sets in by_sender.items():
            if core == "AIC":
                for recv in aivs.get(block, ["AIV"]):
                    self.cross_parts[(block, recv, flag)] = [(i,) for i in sets]
        for block, names in aivs.items():
            flags = {f for (b, c, f) in by_sender if b == block and c != "AIC"}
            for flag in flags:
                lists = [by_sender.get((block, n, flag), []) for n in names]
                n = max(len(x) for x in lists)
                self.cross_parts[(block, "AIC", flag)] = [
                    tuple(x[k] if k < len(x) else None for x in lists) for k in range(n)]
        # the last set of each increment stands for it in the reports
        self.cross_sets = {k: [next(i for i in reversed(p) if i is not None) for p in v]
                           for k, v in self.cross_parts.items()}
        self.cross_match: dict[int, tuple[int | None, ...]] = {}
        for key, ws in self.cross_waits.items():
            parts = self.cross_parts.get(key, [])
            for k, w in enumerate(ws):
                if k < len(parts):
                    self.cross_match[w] = parts[k]
                    if None not in parts[k]:
                        self.match[w] = parts[k][-1]
        for key, ws in self.flag_waits.items():
            ss = self.flag_sets.get(key, [])
            for k, w in enumerate(ws):
                if k < len(ss):
                    self.match[w] = ss[k]

    def cross_fired(self, w: int) -> Clock | None:
        """The clock at which every set cross wait ``w`` needs had fired, None while one has
        not (or never will: a set that does not exist)."""
        parts = self.cross_match.get(w)
        if not parts or any(p is None or self.fired[p] is None for p in parts):
            return None
        return _join(*(self.fired[p] for p in parts))  # type: ignore[misc]

    @staticmethod
    def fkey(e: TraceEvent) -> tuple:
        """(block, core, src, dst, id): the flag a set or wait uses."""
        src = e.src if e.src is not None else e.pipe
        dst = e.dst if e.dst is not None else e.pipe
        return (e.block, e.core, src, dst, e.event_id)

    # ---- clock helpers
    def _c(self, e: TraceEvent, pipe: str | None = None) -> int:
        """Index of the started counter of (e.core, pipe or e.pipe); +1 is completed."""
        return self.comp[e.block][(e.core, e.pipe if pipe is None else pipe)]

    def hb(self, a: int, b: int) -> bool:
        """Access ``a`` completed before access ``b`` started."""
        ea, eb = self.ev[a], self.ev[b]
        k = self.kstart[b]
        if ea.block != eb.block or k is None:
            return False
        return k[self._c(ea) + 1] > ea.seq

    def resolved_before(self, w: int, b: int) -> bool:
        """Wait ``w`` resolved before ``b`` started."""
        ew, eb = self.ev[w], self.ev[b]
        k = self.kstart[b]
        if ew.block != eb.block or k is None:
            return False
        pipe = _SCALAR if self.kinds[w] == "cross_wait" else None
        return k[self._c(ew, pipe)] > ew.seq

    def _inorder(self, e: TraceEvent) -> bool:
        """Whether ``e`` completes before later instructions of its pipe start: its pipe runs
        in order, or it is an Mmad of at least ``target.mmad_ordered_fractals`` output
        fractals (its write covers whole 1 KB L0C fractals: 16 x 16 x 4 B)."""
        try:
            if not self.t.needs_same_pipe_barrier.get(Pipe(e.pipe), True):
                return True
        except ValueError:
            return False
        fractal = self.t.cube_rows * self.t.cube_rows * 4
        return (e.op in ("mmad", "mmad_bias") and self.t.mmad_ordered_fractals > 0
                and sum(hi - lo for _, lo, hi in e.writes) // fractal
                >= self.t.mmad_ordered_fractals)

    # ---- simulation
    def simulate(self) -> Replay:
        """Run the queues to a fixpoint; events left blocked have no start clock."""
        progress = True
        while progress:
            progress = False
            for st in self.streams:
                while True:
                    moved = self._issue(st)
                    best = None
                    for q in st.queues.values():
                        if q and self._ready(q[0]):
                            if best is None or self.ev[q[0]].seq < self.ev[best].seq:
                                best = q[0]
                    if best is None:
                        if not moved:
                            break
                        progress = True
                        continue
                    st.queues[self.ev[best].pipe].popleft()
                    self._process(st, best)
                    progress = True
        return self

    def _ready(self, i: int) -> bool:
        if self.kinds[i] == "wait":
            m = self.match[i]
            return m is not None and self.fired[m] is not None
        return True

    def _issue(self, st: _Stream) -> bool:
        moved = False
        while st.ptr < len(st.idx):
            i = st.idx[st.ptr]
            e, kind = self.ev[i], self.kinds[i]
            sc = self._c(e, _SCALAR)
            if kind == "gate":
                if any(st.queues.values()):
                    break
                ups = [(sc, e.seq + 1)]
                for p in st.queues:
                    ups += [(self._c(e, p), e.seq + 1), (self._c(e, p) + 1, e.seq + 1)]
                k = _bump(_join(st.scalar, *st.issue.values()), tuple(ups))
            elif kind in ("cross_wait", "s_wait"):
                m = self.match[i]
                fired = self.cross_fired(i) if kind == "cross_wait" else (
                    None if m is None else self.fired[m])
                if fired is None:
                    break
                if kind == "s_wait":
                    if st.queues[e.pipe]:
                        break
                    s = self._c(e)
                    k = _bump(_join(st.scalar, st.issue[e.pipe], fired),
                              ((s, e.seq + 1), (sc, e.seq + 1)))
                    st.issue[e.pipe] = k
                else:
                    k = _bump(_join(st.scalar, fired), ((sc, e.seq + 1),))
            else:
                self.pre[i] = st.scalar
                st.queues[e.pipe].append(i)
                st.ptr += 1
                moved = True
                continue
            st.scalar = k
            self.kstart[i] = k
            self.order.append(i)
            st.ptr += 1
            moved = True
        return moved

    def _process(self, st: _Stream, i: int) -> None:
        e, kind = self.ev[i], self.kinds[i]
        p = e.pipe
        s = self._c(e)
        k = _bump(_join(st.issue[p], self.pre[i]), ((s, e.seq),))
        if kind == "wait":
            k = _join(k, self.fired[self.match[i]])
        self.kstart[i] = k
        done = ((s, e.seq + 1), (s + 1, e.seq + 1))
        started = ((s, e.seq + 1),)
        inorder = self._inorder(e)
        if kind in ("set", "cross_set"):
            self.fired[i] = _bump(k, done)
            st.issue[p] = self.fired[i] if inorder else _bump(k, started)
        elif kind == "barrier" or inorder:
            st.issue[p] = _bump(k, done)
        else:
            st.issue[p] = _bump(k, started)
        self.order.append(i)
