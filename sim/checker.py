"""Race, deadlock, flag and budget checker over a dynamic trace.

Independent of lower/'s sync insertion on purpose: it reads only the trace and the target.

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
  (the trace has no mode): an AIC set releases the AIV waits of its block, an AIV set the AIC
  wait; the k-th ``cross_wait`` of (block, core, flag) consumes the k-th set of the other core
  type in that block. The trace has one AIV stream per block, so "an AIC wait needs sets from
  both AIVs" reduces to one set.
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

Reports:
(a) races: accesses to overlapping bytes of one space (on-chip spaces per block and core, GM
    across blocks), at least one a write, not ordered by happens-before. Accesses are checked
    in simulation order (a linear extension of happens-before) against, per byte segment, the
    latest write and read of each (stream, pipe) not yet covered by an ordered later write
    (FastTrack style): every racy location is reported, but an access hidden behind a later
    access of the same pipe is reported through that later access.
(b) deadlocks: waits (and scalar stalls) left blocked when no queue can make progress.
(c) flag errors: the (k+1)-th set of a (p, q, id) unless the k-th wait resolved before it
    started (double set), sets never waited, waits with no set, illegal HardEvent pairs,
    set/wait on a pipe other than the event's source/destination, cross sets never waited.
(d) budget errors: event ids outside ``target.event_ids``, cross flag ids outside
    ``target.cross_flag_ids``, and a cross set that may find ``cross_flag_max_pending`` earlier
    sets of its (block, core, flag) still pending.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from dataclasses import dataclass, field

from ascendsched.sim.check_report import (
    BudgetError,
    CheckReport,
    Deadlock,
    EventRef,
    FlagError,
    Race,
)
from ascendsched.sim.trace import Trace, TraceEvent
from ascendsched.target.model import CoreType, Pipe, Target

__all__ = ["check_trace"]


def check_trace(trace: Trace, target: Target, *, max_races: int = 1000) -> CheckReport:
    """Replay ``trace`` under the pipe semantics of ``target`` and report every violation."""
    return _Checker(trace, target, max_races).run()


def concurrent_pipes(trace: Trace, target: Target) -> dict[tuple[str, str], int]:
    """How many pairs of instructions on two different pipes of one core and block the syncs
    leave unordered (free to run at the same time), per pipe pair: what double buffering buys.
    """
    c = _Checker(trace, target, 1)
    c._simulate()
    ops = [i for i, k in enumerate(c.kinds) if k == "op"]
    out: dict[tuple[str, str], int] = {}
    for x, a in enumerate(ops):
        ea = c.ev[a]
        for b in ops[x + 1:]:
            eb = c.ev[b]
            if (ea.block, ea.core) != (eb.block, eb.core) or ea.pipe == eb.pipe:
                continue
            if not c.hb(a, b) and not c.hb(b, a):
                key = tuple(sorted((ea.pipe, eb.pipe)))
                out[key] = out.get(key, 0) + 1  # type: ignore[index]
    return out


# --------------------------------------------------------------------------- machinery
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


class _Checker:
    def __init__(self, trace: Trace, target: Target, max_races: int) -> None:
        self.t = target
        self.max_races = max_races
        self.ev = list(trace.events)
        n = len(self.ev)
        self.kinds = [_kind(e) for e in self.ev]
        self.kstart: list[Clock | None] = [None] * n
        self.pre: list[Clock | None] = [None] * n
        self.fired: list[Clock | None] = [None] * n
        self.order: list[int] = []
        self.flag_errors: list[FlagError] = []
        self.budget_errors: list[BudgetError] = []
        self._seen: set[tuple] = set()
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
                    self.flag_sets.setdefault(self._fkey(e), []).append(i)
                elif kind in ("wait", "s_wait"):
                    self.flag_waits.setdefault(self._fkey(e), []).append(i)
                elif kind == "cross_set":
                    other = "AIV" if e.core == "AIC" else "AIC"
                    self.cross_sets.setdefault((e.block, other, e.flag_id), []).append(i)
                elif kind == "cross_wait":
                    self.cross_waits.setdefault((e.block, e.core, e.flag_id), []).append(i)
        for sets, waits in ((self.flag_sets, self.flag_waits),
                            (self.cross_sets, self.cross_waits)):
            for key, ws in waits.items():
                ss = sets.get(key, [])
                for k, w in enumerate(ws):
                    if k < len(ss):
                        self.match[w] = ss[k]

    @staticmethod
    def _fkey(e: TraceEvent) -> tuple:
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
    def _simulate(self) -> None:
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
                if m is None or self.fired[m] is None:
                    break
                if kind == "s_wait":
                    if st.queues[e.pipe]:
                        break
                    s = self._c(e)
                    k = _bump(_join(st.scalar, st.issue[e.pipe], self.fired[m]),
                              ((s, e.seq + 1), (sc, e.seq + 1)))
                    st.issue[e.pipe] = k
                else:
                    k = _bump(_join(st.scalar, self.fired[m]), ((sc, e.seq + 1),))
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

    # ---- reports
    def run(self) -> CheckReport:
        self._simulate()
        deadlocks = self._deadlocks()
        self._flags()
        races, truncated = self._races()
        return CheckReport(tuple(races), tuple(deadlocks), tuple(self.flag_errors),
                           tuple(self.budget_errors), truncated)

    def _deadlocks(self) -> list[Deadlock]:
        out: list[Deadlock] = []
        for st in self.streams:
            heads = [q[0] for q in st.queues.values() if q]
            if st.ptr < len(st.idx):
                heads.append(st.idx[st.ptr])
            found = False
            for i in sorted(heads, key=lambda i: self.ev[i].seq):
                kind = self.kinds[i]
                if kind not in ("wait", "s_wait", "cross_wait"):
                    continue
                m = self.match[i]
                if m is not None and self.fired[m] is not None:
                    continue  # a scalar stall on queued work, not on the flag
                e = self.ev[i]
                if m is None:
                    what = (f"cross_set of flag {e.flag_id}" if kind == "cross_wait" else
                            f"set_flag {e.src}->{e.dst} id={e.event_id}")
                    reason = f"no matching {what} exists"
                else:
                    reason = f"its set {EventRef.of(self.ev[m])} never fires"
                out.append(Deadlock(EventRef.of(e), reason))
                found = True
            if not found and heads:
                i = min(heads, key=lambda i: self.ev[i].seq)
                out.append(Deadlock(EventRef.of(self.ev[i]),
                                    "it waits for pipes that are blocked by a deadlock"))
        return out

    def _once(self, key: tuple) -> bool:
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    def _flags(self) -> None:
        t = self.t
        fe, be = self.flag_errors, self.budget_errors
        for i, e in enumerate(self.ev):
            kind = self.kinds[i]
            ref = EventRef.of(e)
            if kind in ("set", "wait", "s_wait"):
                src, dst = self._fkey(e)[2:4]
                pipe_should = src if kind == "set" else dst
                if e.pipe != pipe_should and self._once(("pipe", e.core, e.op, src, dst)):
                    fe.append(FlagError("wrong pipe", ref, f"{e.op} of {src}->{dst} issued on "
                                        f"pipe {e.pipe}, expected {pipe_should}"))
                try:
                    legal = t.is_legal_event(CoreType(e.core), Pipe(src), Pipe(dst))
                except (ValueError, KeyError):
                    legal = False
                if not legal and self._once(("event", e.core, src, dst)):
                    fe.append(FlagError("illegal event", ref, f"HardEvent {src}_{dst} does not "
                                        f"exist on {e.core} of {t.name}"))
                if e.event_id not in t.event_ids and self._once(
                        ("id", e.core, src, dst, e.event_id)):
                    be.append(BudgetError(ref, f"event id {e.event_id} of {src}->{dst} is outside "
                                          f"the usable ids {list(t.event_ids)}"))
            elif kind in ("cross_set", "cross_wait"):
                if e.flag_id not in t.cross_flag_ids and self._once(("flag", e.core, e.flag_id)):
                    be.append(BudgetError(ref, f"cross-core flag {e.flag_id} is outside the "
                                          f"usable ids {list(t.cross_flag_ids)}"))
        for key, sets in self.flag_sets.items():
            waits = self.flag_waits.get(key, [])
            for k in range(1, len(sets)):
                s = sets[k]
                if k - 1 >= len(waits):
                    fe.append(FlagError("double set", EventRef.of(self.ev[s]),
                                        "set again while an earlier set is never waited",
                                        EventRef.of(self.ev[sets[k - 1]])))
                elif self.kstart[s] is not None and not self.resolved_before(waits[k - 1], s):
                    fe.append(FlagError(
                        "double set", EventRef.of(self.ev[s]),
                        "may be set before the previous set of this event id was waited",
                        EventRef.of(self.ev[waits[k - 1]])))
            for s in sets[len(waits):]:
                fe.append(FlagError("unconsumed set", EventRef.of(self.ev[s]),
                                    "no wait_flag ever consumes this set"))
        for key, waits in self.flag_waits.items():
            for w in waits[len(self.flag_sets.get(key, [])):]:
                fe.append(FlagError("wait without set", EventRef.of(self.ev[w]),
                                    "no set_flag matches this wait"))
        cap = t.cross_flag_max_pending
        for key, sets in self.cross_sets.items():
            waits = self.cross_waits.get(key, [])
            for k in range(cap, len(sets)):
                s = sets[k]
                if self.kstart[s] is None:
                    continue
                if k - cap >= len(waits) or not self.resolved_before(waits[k - cap], s):
                    be.append(BudgetError(EventRef.of(self.ev[s]), f"cross flag {key[2]} may "
                                          f"have more than {cap} pending sets for {key[1]}"))
            for s in sets[len(waits):]:
                fe.append(FlagError("unconsumed set", EventRef.of(self.ev[s]),
                                    f"no {key[1]} cross_wait consumes this cross_set"))
        for key, waits in self.cross_waits.items():
            for w in waits[len(self.cross_sets.get(key, [])):]:
                fe.append(FlagError("wait without set", EventRef.of(self.ev[w]),
                                    "no cross_set matches this cross_wait"))

    def _races(self) -> tuple[list[Race], bool]:
        maps: dict[tuple, _SpaceMap] = {}
        found: dict[tuple[int, int, str], list] = {}
        for x in self.order:
            e = self.ev[x]
            if not e.reads and not e.writes:
                continue
            skey = (e.block, e.core, e.pipe)
            for is_write, ivs in ((False, e.reads), (True, e.writes)):
                for space, lo, hi in ivs:
                    mkey = (space,) if space.startswith("GM") else (e.block, e.core, space)
                    smap = maps.get(mkey)
                    if smap is None:
                        smap = maps[mkey] = _SpaceMap()
                    for seg in smap.segments(lo, hi):
                        self._access(x, is_write, skey, space, smap, seg, found)
                    if len(found) >= self.max_races:
                        return self._race_records(found), True
        return self._race_records(found), False

    def _access(self, x: int, is_write: bool, skey: tuple, space: str, smap: _SpaceMap,
                seg: int, found: dict) -> None:
        writes, reads = smap.states[seg]
        lo, hi = smap.starts[seg], smap.ends[seg]

        def note(a: int, kind: str) -> None:
            rec = found.get((a, x, kind))
            if rec is None:
                found[(a, x, kind)] = [space, lo, hi, hi - lo]
            else:
                rec[1], rec[2], rec[3] = min(rec[1], lo), max(rec[2], hi), rec[3] + hi - lo

        for w in writes.values():
            if w != x and not self.hb(w, x):
                note(w, "WAW" if is_write else "RAW")
        if is_write:
            for r in reads.values():
                if r != x and not self.hb(r, x):
                    note(r, "WAR")
            smap.states[seg] = (
                {k: w for k, w in writes.items() if not self.hb(w, x)} | {skey: x},
                {k: r for k, r in reads.items() if not self.hb(r, x)},
            )
        else:
            reads[skey] = x

    def _race_records(self, found: dict) -> list[Race]:
        out = []
        for (a, b, kind), (space, lo, hi, n) in found.items():
            out.append(Race(kind, space, lo, hi, n, EventRef.of(self.ev[a]),
                            EventRef.of(self.ev[b])))
        return out


class _SpaceMap:
    """Disjoint byte segments of one space, each with its access state (writes, reads)."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.states: list[tuple[dict, dict]] = []

    def _split(self, x: int) -> None:
        j = bisect_right(self.starts, x) - 1
        if j >= 0 and self.starts[j] < x < self.ends[j]:
            w, r = self.states[j]
            self.starts.insert(j + 1, x)
            self.ends.insert(j + 1, self.ends[j])
            self.ends[j] = x
            self.states.insert(j + 1, (dict(w), dict(r)))

    def segments(self, lo: int, hi: int) -> list[int]:
        """Indices of the segments exactly covering [lo, hi), created where missing."""
        self._split(lo)
        self._split(hi)
        i = bisect_left(self.starts, lo)
        pos, out = lo, []
        while pos < hi:
            if i < len(self.starts) and self.starts[i] == pos:
                out.append(i)
                pos = self.ends[i]
            else:
                nxt = self.starts[i] if i < len(self.starts) and self.starts[i] < hi else hi
                self.starts.insert(i, pos)
                self.ends.insert(i, nxt)
                self.states.insert(i, ({}, {}))
                out.append(i)
                pos = nxt
            i += 1
        return out
