"""The trace checker: races, deadlocks, flag and budget errors of one dynamic trace.

Independent of lower/'s sync insertion on purpose: it reads only the trace and the target. The
trace is replayed under the pipe semantics of DESIGN.md (``replay.py``: issue order, pipe
queues, flags and barriers as vector clocks), and each report reads that replay.

Reports:
(a) races (``races.py``): accesses to overlapping bytes of one space, at least one a write,
    not ordered by happens-before.
(b) deadlocks: waits (and scalar stalls) left blocked when no queue can make progress.
(c) flag errors: the (k+1)-th set of a (p, q, id) unless the k-th wait resolved before it
    started (double set), sets never waited, waits with no set, illegal HardEvent pairs,
    set/wait on a pipe other than the event's source/destination, cross sets never waited.
(d) budget errors: event ids outside ``target.event_ids``, cross flag ids outside
    ``target.cross_flag_ids``, and a cross set that may find ``cross_flag_max_pending`` earlier
    sets of its (block, core, flag) still pending.
"""

from __future__ import annotations

from ascendsched.sim.check_report import (
    BudgetError,
    CheckReport,
    Deadlock,
    EventRef,
    FlagError,
)
from ascendsched.sim.races import find_races
from ascendsched.sim.replay import Replay, replay
from ascendsched.sim.trace import Trace, core_type
from ascendsched.target.model import Pipe, Target

__all__ = ["check_trace", "concurrent_pipes"]


def check_trace(trace: Trace, target: Target, *, max_races: int = 1000) -> CheckReport:
    """Replay ``trace`` under the pipe semantics of ``target`` and report every violation."""
    r = replay(trace, target)
    deadlocks = _deadlocks(r)
    flag_errors, budget_errors = _flags(r)
    races, truncated = find_races(r, max_races)
    return CheckReport(tuple(races), tuple(deadlocks), tuple(flag_errors),
                       tuple(budget_errors), truncated)


def concurrent_pipes(trace: Trace, target: Target) -> dict[tuple[str, str], int]:
    """How many pairs of instructions on two different pipes of one core and block the syncs
    leave unordered (free to run at the same time), per pipe pair: what double buffering buys.
    """
    r = replay(trace, target)
    ops = [i for i, k in enumerate(r.kinds) if k == "op"]
    out: dict[tuple[str, str], int] = {}
    for x, a in enumerate(ops):
        ea = r.ev[a]
        for b in ops[x + 1:]:
            eb = r.ev[b]
            if (ea.block, ea.core) != (eb.block, eb.core) or ea.pipe == eb.pipe:
                continue
            if not r.hb(a, b) and not r.hb(b, a):
                key = tuple(sorted((ea.pipe, eb.pipe)))
                out[key] = out.get(key, 0) + 1  # type: ignore[index]
    return out


def _deadlocks(r: Replay) -> list[Deadlock]:
    """Waits (and scalar stalls) left blocked when no queue can make progress."""
    out: list[Deadlock] = []
    for st in r.streams:
        heads = [q[0] for q in st.queues.values() if q]
        if st.ptr < len(st.idx):
            heads.append(st.idx[st.ptr])
        found = False
        for i in sorted(heads, key=lambda i: r.ev[i].seq):
            kind = r.kinds[i]
            if kind not in ("wait", "s_wait", "cross_wait"):
                continue
            m = r.match[i]
            if kind == "cross_wait" and r.cross_fired(i) is not None or \
                    kind != "cross_wait" and m is not None and r.fired[m] is not None:
                continue  # a scalar stall on queued work, not on the flag
            e = r.ev[i]
            parts = r.cross_match.get(i, ()) if kind == "cross_wait" else (m,)
            if not parts or None in parts:
                what = (f"cross_set of flag {e.flag_id}" + (
                    " from every Vector core of the block" if len(parts) > 1 else "")
                    if kind == "cross_wait" else f"set_flag {e.src}->{e.dst} id={e.event_id}")
                reason = f"no matching {what} exists"
            else:
                late = next(p for p in parts if r.fired[p] is None)  # type: ignore[index]
                reason = f"its set {EventRef.of(r.ev[late])} never fires"
            out.append(Deadlock(EventRef.of(e), reason))
            found = True
        if not found and heads:
            i = min(heads, key=lambda i: r.ev[i].seq)
            out.append(Deadlock(EventRef.of(r.ev[i]),
                                "it waits for pipes that are blocked by a deadlock"))
    return out


def _flags(r: Replay) -> tuple[list[FlagError], list[BudgetError]]:
    """The flag errors (c) and budget errors (d) of the replay."""
    t = r.t
    fe: list[FlagError] = []
    be: list[BudgetError] = []
    seen: set[tuple] = set()

    def once(key: tuple) -> bool:
        if key in seen:
            return False
        seen.add(key)
        return True

    for i, e in enumerate(r.ev):
        kind = r.kinds[i]
        ref = EventRef.of(e)
        if kind in ("set", "wait", "s_wait"):
            src, dst = r.fkey(e)[2:4]
            pipe_should = src if kind == "set" else dst
            if e.pipe != pipe_should and once(("pipe", e.core, e.op, src, dst)):
                fe.append(FlagError("wrong pipe", ref, f"{e.op} of {src}->{dst} issued on "
                                    f"pipe {e.pipe}, expected {pipe_should}"))
            try:
                legal = t.is_legal_event(core_type(e.core), Pipe(src), Pipe(dst))
            except (ValueError, KeyError):
                legal = False
            if not legal and once(("event", e.core, src, dst)):
                fe.append(FlagError("illegal event", ref, f"HardEvent {src}_{dst} does not "
                                    f"exist on {e.core} of {t.name}"))
            if e.event_id not in t.event_ids and once(
                    ("id", e.core, src, dst, e.event_id)):
                be.append(BudgetError(ref, f"event id {e.event_id} of {src}->{dst} is outside "
                                      f"the usable ids {list(t.event_ids)}"))
        elif kind in ("cross_set", "cross_wait"):
            if e.flag_id not in t.cross_flag_ids and once(("flag", e.core, e.flag_id)):
                be.append(BudgetError(ref, f"cross-core flag {e.flag_id} is outside the "
                                      f"usable ids {list(t.cross_flag_ids)}"))
    for key, sets in r.flag_sets.items():
        waits = r.flag_waits.get(key, [])
        for k in range(1, len(sets)):
            s = sets[k]
            if k - 1 >= len(waits):
                fe.append(FlagError("double set", EventRef.of(r.ev[s]),
                                    "set again while an earlier set is never waited",
                                    EventRef.of(r.ev[sets[k - 1]])))
            elif r.kstart[s] is not None and not r.resolved_before(waits[k - 1], s):
                fe.append(FlagError(
                    "double set", EventRef.of(r.ev[s]),
                    "may be set before the previous set of this event id was waited",
                    EventRef.of(r.ev[waits[k - 1]])))
        for s in sets[len(waits):]:
            fe.append(FlagError("unconsumed set", EventRef.of(r.ev[s]),
                                "no wait_flag ever consumes this set"))
    for key, waits in r.flag_waits.items():
        for w in waits[len(r.flag_sets.get(key, [])):]:
            fe.append(FlagError("wait without set", EventRef.of(r.ev[w]),
                                "no set_flag matches this wait"))
    cap = t.cross_flag_max_pending
    # a counter gains one when the last set of an increment fires (one AIC set; one set of
    # each AIV of a 1:2 block): it overflows unless the wait cap increments back resolved
    # before one of them started
    for key, parts in r.cross_parts.items():
        waits = r.cross_waits.get(key, [])
        for k in range(cap, len(parts)):
            sets = [p for p in parts[k] if p is not None]
            if len(sets) < len(parts[k]) or any(r.kstart[p] is None for p in sets):
                continue
            if k - cap >= len(waits) or not any(r.resolved_before(waits[k - cap], p)
                                                for p in sets):
                be.append(BudgetError(EventRef.of(r.ev[sets[-1]]), f"cross flag {key[2]} may "
                                      f"have more than {cap} pending sets for {key[1]}"))
        for part in parts[len(waits):]:
            for s in part:
                if s is not None:
                    fe.append(FlagError("unconsumed set", EventRef.of(r.ev[s]),
                                        f"no {key[1]} cross_wait consumes this cross_set"))
    for key, waits in r.cross_waits.items():
        for w in waits[len(r.cross_parts.get(key, [])):]:
            fe.append(FlagError("wait without set", EventRef.of(r.ev[w]),
                                "no cross_set matches this cross_wait"))
    return fe, be
