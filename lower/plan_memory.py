"""Memory planning: a byte offset for every buffer copy, per scope, reusing dead space.

Two packings run per scope and the better one is kept (smaller peak, then fewer new cross-pipe
dependences):

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
   plan 0 when every loop is pipelined;
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

import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace

from ascendsched.errors import BufferingWarning, CapacityError
from ascendsched.lower.bank_groups import ReadTogether, read_together
from ascendsched.lower.ir import Kernel
from ascendsched.lower.lifetimes import Lifetime, Lifetimes, innermost_loop
from ascendsched.target.model import Scope, ScopeSpec, Target


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
    banks = _Banks(read_together(kernel, target) if bank_aware else {}, target)
    scopes = list(dict.fromkeys(e.scope for e in lifetimes.entries))
    for scope in scopes:
        spec = target.scope(scope)
        items = [e for e in lifetimes.entries if e.scope == scope]
        sizes = {(e.buffer, e.copy): _round_up(max(e.nbytes, 1), spec.alignment) for e in items}
        narrow = [_own(e) for e in items]
        # (copies, loops no cross-pipe reuse may happen inside, what the plan gives up)
        tries = [(items, lifetimes.loops, "")]
        if not set(lifetimes.loops) <= set(lifetimes.pipelined):
            tries.append((items, lifetimes.pipelined, ""))
        tries.append((items, (), "pipelined reuse"))
        if narrow != items:  # else no multi-copy buffer: nothing left to give up
            tries.append((narrow, (), "copies"))
        if as_scheduled:
            tries = [t for t in tries if not t[2]]
        chosen = None
        bank = banks if scope == Scope.UB else None
        # the peak of the buffering as scheduled (the last plan giving nothing up): its try,
        # packed only if a later plan is kept and its warning needs the figure
        strict: tuple[list[Lifetime], _Loops] = (items, ())
        for its, refuse, kind in tries:
            if not kind:
                strict = (its, refuse)
            if _live_floor(its, sizes, lifetimes.in_place) > spec.usable:
                continue  # no packing of these lifetimes fits: skip the search
            peak, reuses, name, offs = _best(its, sizes, spec, lifetimes, refuse, bank)
            if peak <= spec.usable:
                chosen = (its, peak, reuses, name, offs, kind)
                break
        if chosen is None:
            if as_scheduled:
                return None
            peak, _, _, _ = _best(items, sizes, spec, lifetimes, lifetimes.pipelined, None)
            facts, fixes = _overflow_message(kernel, lifetimes, scope, items, sizes, peak,
                                             spec.usable, spec.capacity)
            raise CapacityError(f"{facts} Try {' or '.join(fixes)}.", facts)
        its, peak, reuses, name, offs, kind = chosen
        if kind:
            strict_peak = _best(strict[0], sizes, spec, lifetimes, strict[1], bank)[0]
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
_Key = tuple[str, int]
_Loops = tuple[tuple[str, int, int], ...]  # (var, first, last) per loop (``Lifetimes.loops``)


def _round_up(n: int, a: int) -> int:
    return -(-n // a) * a


def _own(e: Lifetime) -> Lifetime:
    """A multi-copy buffer's copy over its own uses only (the last-resort plan)."""
    if e.own is None:
        return e
    return replace(e, start=e.own[0][0], end=e.own[-1][1],
                   segments=e.own if len(e.own) > 1 else ())


def _live_floor(items: list[Lifetime], sizes: dict[_Key, int],
                in_place: frozenset[tuple[str, str]]) -> int:
    """A lower bound of any packing's peak: the most bytes live at one position, where
    in-place partners live together count as their largest (one may sit on the other)."""
    used = [e for e in items if e.used]
    floor = 0
    for at in sorted({lo for e in used for lo, _ in e.spans}):
        live = [(e.buffer, e.copy) for e in used if e.live(at)]
        group = {k: k for k in live}  # union-find over in-place pairs (single-copy buffers)
        for a, b in in_place:
            if (a, 0) in group and (b, 0) in group:
                group[_root(group, (a, 0))] = _root(group, (b, 0))
        most: dict[_Key, int] = {}
        for k in live:
            r = _root(group, k)
            most[r] = max(most.get(r, 0), sizes[k])
        floor = max(floor, sum(most.values()))
    return floor


def _root(group: dict[_Key, _Key], k: _Key) -> _Key:
    while group[k] != k:
        k = group[k]
    return k


def _first_fit_order(e: Lifetime, sizes: dict[_Key, int]) -> tuple:
    return (-sizes[(e.buffer, e.copy)], e.start if e.used else -1, e.buffer, e.copy)


def _start_order(e: Lifetime, sizes: dict[_Key, int]) -> tuple:
    return (e.start if e.used else -1, -sizes[(e.buffer, e.copy)], e.buffer, e.copy)


def _lowest(cands: list[tuple]) -> tuple:
    return min(cands, key=lambda c: c[0])


def _tightest(cands: list[tuple]) -> tuple:
    return min(cands, key=lambda c: (c[2], c[0]))


# (name, order of placement, choice among feasible (offset, cross-pipe cost, gap) candidates)
_STRATEGIES: tuple[tuple[str, Callable, Callable], ...] = (
    ("first-fit-decreasing", _first_fit_order, _lowest),
    ("best-fit-by-start", _start_order, _tightest),
)


class _Banks:
    """The bank-conflict side of placement: pairs of copies one vector instruction reads
    (``lower/bank_groups.py``) and the target's bank geometry (``ub_bank_groups`` x 32 B
    blocks, ``target/costs.py``, from the ASC bank-conflict doc)."""

    def __init__(self, pairs: dict[_Key, list[ReadTogether]], target: Target) -> None:
        self.pairs = pairs
        self.block = target.block_bytes
        self.groups = target.costs.ub_bank_groups if target.costs is not None else 1
        self.period = self.block * self.groups

    def cost(self, key: _Key, off: int, offs: dict[_Key, int]) -> float:
        """Extra beats of the instructions reading ``key`` at ``off`` with the copies placed
        so far (``offs``)."""
        return sum(p.extra_beats(off, offs[p.b], self.block, self.groups)
                   for p in self.pairs.get(key, ()) if p.b in offs)

    def total(self, offs: dict[_Key, int]) -> float:
        return sum(p.extra_beats(offs[p.a], offs[p.b], self.block, self.groups)
                   for ps in self.pairs.values() for p in ps
                   if p.a in offs and p.b in offs) / 2


def _best(items: list[Lifetime], sizes: dict[_Key, int], spec: ScopeSpec, lifetimes: Lifetimes,
          refuse: _Loops, banks: _Banks | None) -> tuple[int, int, str, dict[_Key, int]]:
    """(peak, cross-pipe reuses, strategy, offsets) of the best packing: one that fits the
    scope and needs at most one bank period (512 B) per buffer read together with another
    over the smallest peak, then fewest bank-conflict beats, then the smallest peak, then
    fewest reuses. Each strategy packs with and without bank-aware offsets (the shifted
    offsets may cost the bytes another buffering needs); copies of the kept packing that still
    meet a partner in the bank groups then move where they meet it less (``_repair``)."""
    plans = []
    facts = _PairFacts(lifetimes, refuse)
    for name, order, pick in _STRATEGIES:
        for bk in (None, banks) if banks is not None and banks.pairs else (None,):
            offs = _pack(sorted(items, key=lambda e, o=order: o(e, sizes)), sizes,
                         spec, pick, lifetimes.in_place, facts, bk)
            peak = max((offs[k] + sizes[k] for k in offs), default=0)
            reuses = sum(facts(a, b)[1] for a, b in _sharing(items, offs, sizes))
            conflicts = round(banks.total(offs)) if banks is not None else 0
            plans.append((peak, reuses, conflicts, name + (", bank-aware" if bk else ""), offs))
    # offsetting a buffer within the bank period costs it < 512 B: a plan needing more than
    # that per buffer read together with another over the smallest peak is a repacking
    least = min(p[0] for p in plans)
    slack = banks.period * len(banks.pairs) if banks is not None else 0
    peak, reuses, conflicts, name, offs = min(
        plans, key=lambda p: (p[0] > spec.usable, p[0] > least + slack, p[2], p[0], p[1]))
    if conflicts and banks is not None:  # then move what still conflicts, within the peak
        _repair(items, offs, sizes, spec.alignment, lifetimes.in_place, facts, banks)
        reuses = sum(facts(a, b)[1] for a, b in _sharing(items, offs, sizes))
    return peak, reuses, name, offs


class _PairFacts:
    """Per pair of used copies, either order: (lifetimes overlap, the cross-pipe dependences
    sharing their bytes adds, sharing refused inside a loop of ``refuse``); computed once for
    every packing of one ``_best`` (the same pairs come up in each)."""

    def __init__(self, lifetimes: Lifetimes, refuse: _Loops) -> None:
        self.lifetimes, self.refuse = lifetimes, refuse
        self.memo: dict[tuple[_Key, _Key], tuple[bool, int, bool]] = {}

    def __call__(self, a: Lifetime, b: Lifetime) -> tuple[bool, int, bool]:
        key = ((a.buffer, a.copy), (b.buffer, b.copy))
        got = self.memo.get(key)
        if got is None:
            if not a.used or not b.used:
                got = (False, 0, False)
            elif a.overlaps(b):
                got = (True, 0, False)
            else:
                hold = innermost_loop(self.refuse, a, b)
                got = (False, _reuse_cost(a, b, self.lifetimes.pipelined_loop(a, b)),
                       bool(hold and _reuse_cost(a, b, hold)))
            self.memo[key] = self.memo[(key[1], key[0])] = got
        return got


def _pack(items: list[Lifetime], sizes: dict[_Key, int], spec: ScopeSpec,
          pick: Callable[[list[tuple]], tuple], in_place: frozenset[tuple[str, str]],
          facts: _PairFacts, banks: _Banks | None) -> dict[_Key, int]:
    """Place ``items`` in order. ``facts`` (``_PairFacts``) refuses reuse of bytes across
    pipes inside the loops it was made for (the pipelined ones, or every loop; such offsets
    are not candidates, the top of the scope always is one). ``banks``:
    a copy read by one vector instruction together with a copy already placed also gets the
    candidates shifted by whole alignment units within the bank period, and takes one with
    fewest conflict beats: within the current peak if that removes as many, else at most one
    bank period above where it would go otherwise, while the scope has room."""
    align = spec.alignment
    placed: list[tuple[Lifetime, int, int]] = []  # (lifetime, offset, size)
    offs: dict[_Key, int] = {}
    for e in items:
        key = (e.buffer, e.copy)
        size = sizes[key]
        if not e.used:
            offs[key] = 0  # never touched: any address will do
            continue
        peak = max((o + s for _, o, s in placed), default=0)
        aware = banks is not None and any(p.b in offs for p in banks.pairs.get(key, ()))
        cands = _slots(e, size, placed, offs, align, in_place, facts, banks if aware else None)
        within = [c for c in cands if c[0] + size <= peak]
        free = [c for c in within if c[1] == 0]
        pool = free or within or cands
        if aware:
            assert banks is not None
            # above the peak by at most one bank period more than the plain choice
            top = max(peak, pick(pool)[0] + size) + banks.period
            room = [c for c in cands if c[1] == 0 and c[0] + size <= min(top, spec.usable)]
            if room and min(c[3] for c in room) < min(c[3] for c in pool):
                pool = room
            least = min(c[3] for c in pool)
            pool = [c for c in pool if c[3] == least]
        off = pick(pool)[0]
        placed.append((e, off, size))
        offs[key] = off
    return offs


def _slots(e: Lifetime, size: int, placed: list[tuple[Lifetime, int, int]],
           offs: dict[_Key, int], align: int, in_place: frozenset[tuple[str, str]],
           facts: _PairFacts, banks: _Banks | None, also: tuple[int, ...] = ()
           ) -> list[tuple[int, int, int, float]]:
    """Where copy ``e`` may go among the ``placed`` copies: (offset, cross-pipe reuses its
    bytes add, gap to the next live copy above, bank-conflict beats) per candidate offset: 0,
    the end of every placed copy, an in-place partner's own offset and ``also``; with
    ``banks``, each shifted by whole alignment units within the bank period too."""
    key = (e.buffer, e.copy)
    peak = max((o + s for _, o, s in placed), default=0)
    # a live in-place partner does not conflict at exactly its own offset
    partner = {(p.buffer, o) for p, o, _ in placed if (p.buffer, e.buffer) in in_place
               or (e.buffer, p.buffer) in in_place}
    live: list[tuple[str, int, int]] = []
    # the placed copies not live with e, each with what sharing its bytes would cost:
    # (offset, size, cross-pipe reuses, refused), computed once per copy
    others: list[tuple[int, int, int, bool]] = []
    for p, o, s in placed:
        overlap, cost, refused = facts(p, e)
        if overlap:
            live.append((p.buffer, o, s))
        elif p.used:
            others.append((o, s, cost, refused))
    starts = ({0, *also} | {_round_up(o + s, align) for _, o, s in placed}
              | {o for _, o in partner})
    if banks is not None:
        starts |= {o + d for o in starts for d in range(align, banks.period, align)}
    cands: list[tuple[int, int, int, float]] = []
    for off in sorted(starts):
        if any(off < o + s and o < off + size and (b, off) not in partner
               for b, o, s in live):
            continue
        nxt = min((o for _, o, _ in live if o >= off + size), default=max(peak, off + size))
        shared = [(rc, refused) for o, s, rc, refused in others
                  if off < o + s and o < off + size]
        if any(refused for _, refused in shared):
            continue
        cost = sum(rc for rc, _ in shared)
        beats = banks.cost(key, off, offs) if banks is not None else 0.0
        cands.append((off, cost, nxt - off - size, beats))
    return cands


def _repair(items: list[Lifetime], offs: dict[_Key, int], sizes: dict[_Key, int], align: int,
            in_place: frozenset[tuple[str, str]], facts: _PairFacts, banks: _Banks) -> None:
    """Move copies that still meet a partner in the bank groups, smallest first, to the
    offset with fewest beats that keeps the peak and adds no cross-pipe reuse (in place).
    A greedy packing places a copy before it knows every partner, and its bank-aware variant
    may shift large copies past the scope's room; a small Brcb'd block then sits in its dense
    partner's groups although a free slot of the right groups is below the peak (LayerNorm
    4096x12288: the mean and rstd broadcasts against the 48 KB centred row)."""
    used = {(e.buffer, e.copy): e for e in items if e.used}
    peak = max((offs[k] + sizes[k] for k in used), default=0)
    for key in sorted((k for k in banks.pairs if k in used), key=lambda k: (sizes[k], k)):
        now = banks.cost(key, offs[key], offs)
        if now <= 0:
            continue
        e, size = used[key], sizes[key]
        placed = [(p, offs[k], sizes[k]) for k, p in used.items() if k != key]
        cands = _slots(e, size, placed, offs, align, in_place, facts, banks, (offs[key],))
        here = next((c for c in cands if c[0] == offs[key]), None)
        if here is None:
            continue  # (its own slot is always a candidate: placed there under these rules)
        better = [c for c in cands if c[0] + size <= peak and c[1] <= here[1] and c[3] < now]
        if better:
            offs[key] = min(better, key=lambda c: (c[3], c[1], c[0]))[0]


def _reuse_cost(a: Lifetime, b: Lifetime, loop: str | None = None) -> int:
    """How many dependences between two different pipes sharing bytes between a and b adds:
    the later one's first user waits for the earlier one's last user, and inside a pipelined
    ``loop`` the next iteration's first user of the earlier one also waits for the later one's
    last user."""
    first, second = (a, b) if a.end < b.start else (b, a)
    n = 1 if len(first.last_pipes | second.first_pipes) > 1 else 0
    if loop is not None and len(second.last_pipes | first.first_pipes) > 1:
        n += 1
    return n


def _sharing(items: list[Lifetime], offs: dict[_Key, int], sizes: dict[_Key, int]
             ) -> list[tuple[Lifetime, Lifetime]]:
    """Pairs of used copies at overlapping bytes with disjoint lifetimes (reuses)."""
    out = []
    used = [e for e in items if e.used]
    for i, a in enumerate(used):
        for b in used[i + 1:]:
            oa, ob = offs[(a.buffer, a.copy)], offs[(b.buffer, b.copy)]
            if a.overlaps(b):
                continue  # in-place partners: one instruction reads one and writes the other
            if oa < ob + sizes[(b.buffer, b.copy)] and ob < oa + sizes[(a.buffer, a.copy)]:
                out.append((a, b))
    return out


def _compromise(kernel: Kernel, lifetimes: Lifetimes, scope: Scope, items: list[Lifetime],
                placed: list[Lifetime], sizes: dict[_Key, int], offs: dict[_Key, int],
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
        for a, b in _sharing(placed, offs, sizes):
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
        for a, b in _sharing(placed, offs, sizes):
            loop = lifetimes.pipelined_loop(a, b)
            if loop is None or not _reuse_cost(a, b, loop):
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
                      sizes: dict[_Key, int], peak: int, usable: int, capacity: int
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
