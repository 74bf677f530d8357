"""Memory planning: a byte offset for every buffer copy, per scope, reusing dead space.

Which lifetimes to pack and which plan to keep is decided here; the packing of one scope is
``lower/pack_scope.py``. Two packings run per scope and the better one is kept (smaller peak,
then fewer new cross-pipe dependences):

* ``first-fit-decreasing``: largest copies first, each at the lowest aligned offset free of
  every copy whose lifetime overlaps it;
* ``best-fit-by-start``: copies in order of first use, each in the tightest free gap.

Two copies conflict where their live segments meet (``Lifetime.overlaps``): the buffers of the
full-tile and the tail-tile branch of one loop body never do, so they share bytes.

Both prefer, among offsets that do not raise the scope's peak, reuse that adds no new
cross-pipe dependence: the dead copy's last user and the new copy's first user are on the same
pipe (bishengir reuses within one pipe first). Inside a *pipelined* loop (one a multi-copy
buffer alternates over, ``Lifetimes.pipelined``) reuse also makes the next iteration's first
user of the earlier buffer wait for the later one's last user, so it counts both directions.

In UB, two copies one vector instruction reads as its two sources (``lower/bank_groups.py``)
are kept out of each other's bank groups where the bytes allow: a 32-byte block's group is
``(address // 32) % 16`` (``ub_bank_groups`` in ``target/costs.py``, from the ASC bank-conflict
doc, SOURCES.md 2.5), and a repeat whose sources share a group takes a beat per block there.
The second copy placed also gets its candidate offsets shifted by whole 32-byte units within
the 512-byte period and takes one with fewest extra beats, above the current peak by at most
one period and only while the scope has room; each packing is also run without this, and the
plans are ranked by (fits, within 512 B per such buffer of the smallest peak, extra beats,
peak, cross-pipe reuses). In the kept plan, copies that still meet a partner then move,
smallest first, to a slot below the peak where they meet it less, if one is free and adds no
cross-pipe reuse (a greedy packing placed them before it knew every partner). vadd's ``y_ub``
lands 256 B (mod 512) from ``x_ub``, as in the ASC add sample's Case 6; a dense source
against a Brcb'd row block meets it on half the repeats wherever it sits (rows of whole
512-byte periods), so such pairs seldom move.

A mixed kernel's later tile classes whose AIV bodies mirror the first class's
(``lower/class_mirror.py``) are not packed: each of their buffers takes its counterpart's
offsets where that is a packing by the same rules (``pack_scope.mirrored``; else every buffer
is packed), so the sync steps can analyse the first class for all of them.

Up to four plans are tried per scope and the first that fits the scope's *usable* bytes is kept:

0. no reuse across pipes inside *any* loop. A single-copy tile shares no bytes with another
   pipe's buffers, so the next iteration's load waits only for the last read of this one
   (softmax: the cast that reads ``x_ub``), not for a temporary placed on it, and the store
   of a tile runs beside the next tile's vector work; one copy then overlaps like two where
   a tile's first and last vector ops are not the same (softmax 1024x16384 default: cores
   77.7 -> 34.0 us modelled). It costs UB the schedule did not ask for, so it is kept only
   when it fits, silently;
1. the buffering as scheduled: every copy of a multi-copy buffer over its whole loop (the
   lifetimes say so) and no reuse across pipes inside a pipelined loop, even if that raises the
   peak (such reuse would serialise the pipes the copies are there to overlap); the same as
   plan 0 when every loop is pipelined. Inside the other loops it is first tried with the
   back-edge wait a reuse adds capped at three quarters of the loop body (``LATE_WAIT``,
   ``pack_scope.back_edge_wait``; caps of a quarter and a half tried first kept no other plan
   of the 566 kernels of our identity sweep, and each cost a packing where it failed): the
   next iteration's first user may wait for a buffer read early in this one, not for one
   read to its end. LayerNorm
   1024 x 32 000 default (rows in 6400-column chunks): the output chunks' two copies no
   longer share bytes with the row mean's block sums, so the next row's statistics no longer
   wait for this row's last store, 238.8 -> 233.0 us modelled;
2. cross-pipe reuse inside pipelined loops allowed where it lowers the peak;
3. copies of multi-copy buffers over their own uses only, so other buffers may take their bytes.

Plans 2 and 3 give up overlap the schedule asked for: each is a :class:`BufferingWarning` that
names the buffers and why. If none fits, :class:`CapacityError` names the copies live at the
peak. Offsets are multiples of the scope's alignment. Before/after, for row_max_sub::

    UB x_ub 4096 [0,3], m_ub 64 [1,2], mb_ub 512 [2,3], y_ub 4096 [3,4]
    ->  x_ub@0, y_ub@4096, m_ub@4096 (dead before y_ub, both V), mb_ub@8192: peak 8704 B

and for the README softmax (``x_ub`` and ``y_ub`` double buffered over ``i_o_k``), the ``e`` and
``y`` temporaries no longer sit on the copies of ``x_ub`` and ``y_ub``: loads, vector work and
stores of neighbouring tiles overlap.
"""

from __future__ import annotations

import bisect
import warnings
from dataclasses import dataclass, replace

from ascendsched.errors import BufferingWarning, CapacityError
from ascendsched.lower.bank_groups import read_together
from ascendsched.lower.class_mirror import ClassMirror, class_mirror
from ascendsched.lower.ir import Kernel
from ascendsched.lower.lifetimes import Lifetime, Lifetimes
from ascendsched.lower.pack_scope import (
    Banks,
    Key,
    Loops,
    best_packing,
    mirrored,
    reuse_cost,
    round_up,
    sharing,
)
from ascendsched.target.model import Scope, ScopeSpec, Target

LATE_WAIT = 0.75  # plan 1's first try: the latest back-edge wait allowed (fraction of a body)


@dataclass(frozen=True)
class Placement:
    buffer: str
    copy: int
    scope: Scope
    offset: int
    size: int  # bytes reserved: one copy rounded up to the scope alignment
    start: int | None
    end: int | None
    segments: tuple[tuple[int, int], ...] = ()  # the lifetime's live segments, () = whole


@dataclass(frozen=True)
class ScopeUsage:
    scope: Scope
    peak: int  # bytes from the scope base to the end of the highest placed copy
    total: int  # sum of all copies: what no reuse would need
    usable: int
    strategy: str
    cross_pipe_reuses: int  # address reuses that add a dependence between two pipes


@dataclass(frozen=True)
class MemoryPlan:
    kernel: str
    placements: tuple[Placement, ...]
    usage: tuple[ScopeUsage, ...]
    compromises: tuple[str, ...] = ()  # what the plan gave up of the schedule's buffering

    def offsets(self, buffer: str) -> tuple[int, ...]:
        ps = sorted((p for p in self.placements if p.buffer == buffer), key=lambda p: p.copy)
        if not ps:
            raise KeyError(buffer)
        return tuple(p.offset for p in ps)

    def peak(self, scope: Scope) -> int:
        return next((u.peak for u in self.usage if u.scope == scope), 0)

    def total(self, scope: Scope) -> int:
        return next((u.total for u in self.usage if u.scope == scope), 0)

    def __str__(self) -> str:
        lines = [f"memory plan of {self.kernel}:",
                 "  buffer      copy  scope  offset   size     live"]
        for p in self.placements:
            live = (" ".join(f"[{lo}, {hi}]" for lo, hi in p.segments or ((p.start, p.end),))
                    if p.start is not None else "unused")
            lines.append(f"  {p.buffer:<11} {p.copy:<5} {p.scope!s:<6} {p.offset:<8} "
                         f"{p.size:<8} {live}")
        for u in self.usage:
            lines.append(f"  {u.scope}: peak {u.peak} B of {u.usable} B usable; all buffers "
                         f"without reuse {u.total} B ({u.strategy}, {u.cross_pipe_reuses} "
                         "cross-pipe reuses)")
        return "\n".join(lines)


def plan_memory(kernel: Kernel, lifetimes: Lifetimes, target: Target, *, warn: bool = True
                ) -> MemoryPlan:
    """Offsets for every buffer copy of ``kernel``; CapacityError if a scope overflows.

    Per scope, the first plan that fits is kept (see the module docstring): no cross-pipe
    reuse inside any loop, the buffering as scheduled, then cross-pipe reuse inside pipelined
    loops, then copies that share bytes with other buffers. The last two are compromises: each becomes a
    :class:`BufferingWarning` (when ``warn``) and a line of ``MemoryPlan.compromises``.
    """
    plan = _plan(kernel, lifetimes, target, warn=warn, as_scheduled=False)
    assert plan is not None
    return plan


def plan_as_scheduled(kernel: Kernel, lifetimes: Lifetimes, target: Target
                      ) -> MemoryPlan | None:
    """``plan_memory``'s plan when it gives nothing up (no compromise in any scope), else None,
    without the searches and messages of the compromises (``schedule_for`` asks this of each
    default candidate and falls back to ``plan_memory`` only when none fits so)."""
    return _plan(kernel, lifetimes, target, warn=False, as_scheduled=True)


def fits_as_scheduled(kernel: Kernel, lifetimes: Lifetimes, target: Target) -> bool:
    """Whether ``plan_as_scheduled`` finds a plan, asked of the plain packings alone: one
    that fits is a plan, and the bank-group search only moves buffers within what fits
    (about half the cost: the epilogue of a GEMM + softmax 1000 x 1000 x 128 asks this of
    three step heights)."""
    return _plan(kernel, lifetimes, target, warn=False, as_scheduled=True,
                 bank_aware=False) is not None


def _plan(kernel: Kernel, lifetimes: Lifetimes, target: Target, *, warn: bool,
          as_scheduled: bool, bank_aware: bool = True) -> MemoryPlan | None:
    """``plan_memory``; with ``as_scheduled``, None where it would give something up or
    raise; without ``bank_aware``, no bank-group placement."""
    placements: list[Placement] = []
    usage: list[ScopeUsage] = []
    compromises: list[str] = []
    banks = Banks(read_together(kernel, target) if bank_aware else {}, target)
    mirror = class_mirror(kernel)
    scopes = list(dict.fromkeys(e.scope for e in lifetimes.entries))
    for scope in scopes:
        spec = target.scope(scope)
        items = [e for e in lifetimes.entries if e.scope == scope]
        sizes = {(e.buffer, e.copy): round_up(max(e.nbytes, 1), spec.alignment) for e in items}
        narrow = [_own(e) for e in items]
        # (copies, loops no cross-pipe reuse may happen inside, the latest back-edge wait
        # allowed in the other loops (None: any), what the plan gives up)
        tries: list[tuple[list[Lifetime], Loops, float | None, str]] = [
            (items, lifetimes.loops, None, "")]
        if not set(lifetimes.loops) <= set(lifetimes.pipelined):
            tries.append((items, lifetimes.pipelined, LATE_WAIT, ""))
            tries.append((items, lifetimes.pipelined, None, ""))
        tries.append((items, (), None, "pipelined reuse"))
        if narrow != items:  # else no multi-copy buffer: nothing left to give up
            tries.append((narrow, (), None, "copies"))
        if as_scheduled:
            tries = [t for t in tries if not t[3]]
        chosen = None
        bank = banks if scope == Scope.UB else None
        # the peak of the buffering as scheduled (the last plan giving nothing up): its try,
        # packed only if a later plan is kept and its warning needs the figure
        strict: tuple[list[Lifetime], Loops] = (items, ())
        for its, refuse, late, kind in tries:
            if not kind:
                strict = (its, refuse)
            if _live_floor(its, sizes, lifetimes.in_place) > spec.usable:
                continue  # no packing of these lifetimes fits: skip the search
            got = _mirrored(its, sizes, spec, lifetimes, refuse, bank, mirror, late) \
                if mirror is not None else None
            peak, reuses, name, offs = got or best_packing(its, sizes, spec, lifetimes,
                                                           refuse, bank, late, fits_first=True)
            if peak <= spec.usable:
                chosen = (its, peak, reuses, name, offs, kind)
                break
        if chosen is None:
            if as_scheduled:
                return None
            peak, _, _, _ = best_packing(items, sizes, spec, lifetimes, lifetimes.pipelined, None)
            facts, fixes = _overflow_message(kernel, lifetimes, scope, items, sizes, peak,
                                             spec.usable, spec.capacity)
            raise CapacityError(f"{facts} Try {' or '.join(fixes)}.", facts)
        its, peak, reuses, name, offs, kind = chosen
        if kind:
            strict_peak = best_packing(strict[0], sizes, spec, lifetimes, strict[1], bank)[0]
            why = _compromise(kernel, lifetimes, scope, items, its, sizes, offs, kind,
                              strict_peak, spec.usable)
            compromises.append(why)
            if warn:
                warnings.warn(BufferingWarning(why), stacklevel=3)  # plan_memory's caller
            name += f", {kind} allowed"
        for e in its:
            placements.append(Placement(e.buffer, e.copy, scope, offs[(e.buffer, e.copy)],
                                        sizes[(e.buffer, e.copy)], e.start, e.end,
                                        e.segments))
        usage.append(ScopeUsage(scope, peak, sum(sizes.values()), spec.usable, name, reuses))
    return MemoryPlan(kernel.name, tuple(placements), tuple(usage), tuple(compromises))


# --------------------------------------------------------------------------- private helpers
def _mirrored(items: list[Lifetime], sizes: dict[Key, int], spec: ScopeSpec,
              lifetimes: Lifetimes, refuse: Loops, bank: Banks | None, mirror: ClassMirror,
              late: float | None) -> tuple[int, int, str, dict[Key, int]] | None:
    """``best_packing`` of ``items`` with the mirror tile classes' buffers
    (``lower/class_mirror.py``) left out of the packing and put at their counterparts'
    offsets (the sync steps then analyse one class for all), when that is a packing
    (``pack_scope.mirrored``); else None (pack them all). Half the copies to pack for the LM
    head's two row-block classes."""
    pairs = mirror.buffer_map
    rest = [e for e in items if e.buffer not in pairs]
    if len(rest) == len(items):
        return None
    _, _, name, offs = best_packing(rest, sizes, spec, lifetimes, refuse, bank, late)
    got = mirrored(items, offs, sizes, lifetimes, refuse, pairs, mirror.apart, late)
    if got is None:
        return None
    offs, peak, reuses = got
    return peak, reuses, name + ", tile classes mirrored", offs


def _own(e: Lifetime) -> Lifetime:
    """A multi-copy buffer's copy over its own uses only (the last-resort plan)."""
    if e.own is None:
        return e
    return replace(e, start=e.own[0][0], end=e.own[-1][1],
                   segments=e.own if len(e.own) > 1 else ())


def _live_floor(items: list[Lifetime], sizes: dict[Key, int],
                in_place: frozenset[tuple[str, str]]) -> int:
    """A lower bound of any packing's peak: the most bytes live at one position, where
    in-place partners live together count as their largest (one may sit on the other)."""
    used = [e for e in items if e.used]
    points = sorted({lo for e in used for lo, _ in e.spans})
    live: list[list[Key]] = [[] for _ in points]  # per point, the copies live there
    for e in used:
        for lo, hi in e.spans:
            for i in range(bisect.bisect_left(points, lo), bisect.bisect_right(points, hi)):
                live[i].append((e.buffer, e.copy))
    floor = 0
    for keys in live:
        group = {k: k for k in keys}  # union-find over in-place pairs (single-copy buffers)
        for a, b in in_place:
            if (a, 0) in group and (b, 0) in group:
                group[_root(group, (a, 0))] = _root(group, (b, 0))
        most: dict[Key, int] = {}
        for k in keys:
            r = _root(group, k)
            most[r] = max(most.get(r, 0), sizes[k])
        floor = max(floor, sum(most.values()))
    return floor


def _root(group: dict[Key, Key], k: Key) -> Key:
    while group[k] != k:
        k = group[k]
    return k


def _compromise(kernel: Kernel, lifetimes: Lifetimes, scope: Scope, items: list[Lifetime],
                placed: list[Lifetime], sizes: dict[Key, int], offs: dict[Key, int],
                kind: str, need: int, usable: int) -> str:
    """The warning text of a plan that gave up part of the schedule's overlap."""
    multi = sorted({e.buffer for e in items if e.own is not None})
    fixes = [f"copies=1 on {b}" for b in multi]
    fixes.append("a smaller tile (split the tiled axis by a smaller factor)")
    head = (f"In kernel '{kernel.name}': keeping the pipelined loops of the schedule "
            f"overlapping needs {need} B of {scope} but {kernel.target.name} has {usable} B "
            "usable, so ")
    whole = {(e.buffer, e.copy): e for e in items}
    if kind == "copies":
        by: dict[str, set[str]] = {}
        for a, b in sharing(placed, offs, sizes):
            for x, y in ((a, b), (b, a)):
                wx = whole[(x.buffer, x.copy)]
                if wx.own is not None and y.buffer != x.buffer and wx.overlaps(y):
                    by.setdefault(x.buffer, set()).add(y.buffer)
        listing = "; ".join(f"the copies of {b} share bytes with {', '.join(sorted(o))} inside "
                            f"the loop they alternate over"
                            for b, o in sorted(by.items()))
        cause = (f"{listing or 'copies share bytes with other buffers'}: the buffering is not "
                 "honoured (the next copy's fill waits for the reusing buffer's last use)")
    else:
        pairs = []
        for a, b in sharing(placed, offs, sizes):
            loop = lifetimes.pipelined_loop(a, b)
            if loop is None or not reuse_cost(a, b, loop):
                continue
            first, second = (a, b) if a.end < b.start else (b, a)
            waits = []  # (waiting pipes and buffer, pipes and buffer waited for) across pipes
            if len(first.last_pipes | second.first_pipes) > 1:
                waits.append((_users(second.first_pipes, second), _users(first.last_pipes,
                                                                        first)))
            if len(second.last_pipes | first.first_pipes) > 1:
                waits.append((_users(first.first_pipes, first) + " of the next iteration",
                              _users(second.last_pipes, second)))
            why = "; ".join(f"{w} waits for {f}" for w, f in waits)
            pairs.append(f"{second.buffer} reuses the bytes of {first.buffer} inside pipelined "
                         f"loop {loop} ({why}, every iteration)")
        cause = "; ".join(dict.fromkeys(pairs)) or "buffers reuse bytes across pipes"
    return f"{head}{cause}. Try {' or '.join(fixes)}."


def _users(pipes: frozenset, e: Lifetime) -> str:
    return f"{'/'.join(sorted(str(p) for p in pipes))} on {e.buffer}"


def _overflow_message(kernel: Kernel, lifetimes: Lifetimes, scope: Scope, items: list[Lifetime],
                      sizes: dict[Key, int], peak: int, usable: int, capacity: int
                      ) -> tuple[str, list[str]]:
    """What does not fit (the buffers live at the peak), and the ways out."""
    used = [e for e in items if e.used]
    points = sorted({lo for e in used for lo, _ in e.spans})
    at = max(points, key=lambda p: sum(sizes[(e.buffer, e.copy)] for e in used if e.live(p)))
    live = [e for e in used if e.live(at)]
    by_buf: dict[str, list[Lifetime]] = {}
    for e in live:
        by_buf.setdefault(e.buffer, []).append(e)
    need = sum(sizes[(e.buffer, e.copy)] for e in live)
    listing = ", ".join(
        f"{b}: {len(es)} cop{'y' if len(es) == 1 else 'ies'} x {sizes[(b, es[0].copy)]} B"
        for b, es in sorted(by_buf.items(), key=lambda kv: -sum(sizes[(kv[0], e.copy)]
                                                               for e in kv[1])))
    fixes = [f"copies=1 on {b}" for b, es in by_buf.items()
             if kernel.buffer_map[b].copies > 1]
    fixes.append("a smaller tile (split the tiled axis by a smaller factor)")
    where = lifetimes.positions[at] if at < len(lifetimes.positions) else f"position {at}"
    return (f"In kernel '{kernel.name}': {scope} buffers need {peak} B but {kernel.target.name} "
            f"{scope} has {usable} B usable (of {capacity} B). Live at the peak ({need} B, at "
            f"{where}): {listing}.", fixes)
