"""Packing one scope: a byte offset for each buffer copy given the lifetimes (``plan_memory``
chooses which lifetimes and which loops refuse cross-pipe reuse; this packs them).

Two strategies (``first-fit-decreasing``, ``best-fit-by-start``), each with and without
bank-aware offsets in UB; the plans are ranked by (fits, within one bank period per buffer
read together with another of the smallest peak, extra bank-conflict beats, peak,
cross-pipe reuses), and copies of the kept plan that still meet a partner in the bank groups
then move where they meet it less. The rules and their reasons: ``plan_memory``'s module
docstring.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable

from ascendsched.lower.bank_groups import ReadTogether
from ascendsched.lower.lifetimes import Lifetime, Lifetimes, innermost_loop, innermost_span
from ascendsched.target.model import ScopeSpec, Target

Key = tuple[str, int]
Loops = tuple[tuple[str, int, int], ...]  # (var, first, last) per loop (``Lifetimes.loops``)


def round_up(n: int, a: int) -> int:
    return -(-n // a) * a


def _first_fit_order(e: Lifetime, sizes: dict[Key, int]) -> tuple:
    return (-sizes[(e.buffer, e.copy)], e.start if e.used else -1, e.buffer, e.copy)


def _start_order(e: Lifetime, sizes: dict[Key, int]) -> tuple:
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


class Banks:
    """The bank-conflict side of placement: pairs of copies one vector instruction reads
    (``lower/bank_groups.py``) and the target's bank geometry (``ub_bank_groups`` x 32 B
    blocks, ``target/costs.py``, from the ASC bank-conflict doc)."""

    def __init__(self, pairs: dict[Key, list[ReadTogether]], target: Target) -> None:
        self.pairs = pairs
        self.block = target.block_bytes
        self.groups = target.costs.ub_bank_groups if target.costs is not None else 1
        self.period = self.block * self.groups

    def cost(self, key: Key, off: int, offs: dict[Key, int]) -> float:
        """Extra beats of the instructions reading ``key`` at ``off`` with the copies placed
        so far (``offs``)."""
        return sum(p.extra_beats(off, offs[p.b], self.block, self.groups)
                   for p in self.pairs.get(key, ()) if p.b in offs)

    def total(self, offs: dict[Key, int]) -> float:
        return sum(p.extra_beats(offs[p.a], offs[p.b], self.block, self.groups)
                   for ps in self.pairs.values() for p in ps
                   if p.a in offs and p.b in offs) / 2


def best_packing(items: list[Lifetime], sizes: dict[Key, int], spec: ScopeSpec, lifetimes: Lifetimes,
          refuse: Loops, banks: Banks | None, late: float | None = None, *,
          fits_first: bool = False) -> tuple[int, int, str, dict[Key, int]]:
    """(peak, cross-pipe reuses, strategy, offsets) of the best packing: one that fits the
    scope and needs at most one bank period (512 B) per buffer read together with another
    over the smallest peak, then fewest bank-conflict beats, then the smallest peak, then
    fewest reuses. Each strategy packs with and without bank-aware offsets (the shifted
    offsets may cost the bytes another buffering needs); copies of the kept packing that still
    meet a partner in the bank groups then move where they meet it less (``_repair``).
    ``fits_first``: when no packing without bank-aware offsets fits, the best of those at once
    (a plan that cannot fit is not worth the bank search: ``plan_memory`` tries the next)."""
    facts = _PairFacts(lifetimes, refuse, late)
    bank_too = banks is not None and bool(banks.pairs)
    packed: dict[tuple[str, bool], tuple] = {}
    for aware in (False, True) if bank_too else (False,):
        for name, order, pick in _STRATEGIES:
            offs = _pack(sorted(items, key=lambda e, o=order: o(e, sizes)), sizes,
                         spec, pick, lifetimes.in_place, facts, banks if aware else None)
            peak = max((offs[k] + sizes[k] for k in offs), default=0)
            reuses = sum(facts(a, b)[1] for a, b in sharing(items, offs, sizes))
            conflicts = round(banks.total(offs)) if banks is not None else 0
            packed[(name, aware)] = (peak, reuses, conflicts,
                                     name + (", bank-aware" if aware else ""), offs)
        if fits_first and not aware and all(p[0] > spec.usable for p in packed.values()):
            peak, reuses, _, name, offs = min(packed.values(), key=lambda p: (p[0], p[1]))
            return peak, reuses, name, offs
    plans = [packed[(name, aware)] for name, _, _ in _STRATEGIES
             for aware in ((False, True) if bank_too else (False,))]
    # offsetting a buffer within the bank period costs it < 512 B: a plan needing more than
    # that per buffer read together with another over the smallest peak is a repacking
    least = min(p[0] for p in plans)
    slack = banks.period * len(banks.pairs) if banks is not None else 0
    peak, reuses, conflicts, name, offs = min(
        plans, key=lambda p: (p[0] > spec.usable, p[0] > least + slack, p[2], p[0], p[1]))
    if conflicts and banks is not None:  # then move what still conflicts, within the peak
        _repair(items, offs, sizes, spec.alignment, lifetimes.in_place, facts, banks)
        reuses = sum(facts(a, b)[1] for a, b in sharing(items, offs, sizes))
    return peak, reuses, name, offs


class _PairFacts:
    """Per pair of used copies, either order: (lifetimes overlap, the cross-pipe dependences
    sharing their bytes adds, sharing refused inside a loop of ``refuse``); computed once for
    every packing of one ``_best`` (the same pairs come up in each)."""

    def __init__(self, lifetimes: Lifetimes, refuse: Loops, late: float | None = None) -> None:
        self.lifetimes, self.refuse, self.late = lifetimes, refuse, late
        self.memo: dict[tuple[Key, Key], tuple[bool, int, bool]] = {}

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
                refused = bool(hold and reuse_cost(a, b, hold)) or (
                    self.late is not None and back_edge_wait(self.lifetimes, a, b) > self.late)
                got = (False, reuse_cost(a, b, self.lifetimes.pipelined_loop(a, b)), refused)
            self.memo[key] = self.memo[(key[1], key[0])] = got
        return got


def _pack(items: list[Lifetime], sizes: dict[Key, int], spec: ScopeSpec,
          pick: Callable[[list[tuple]], tuple], in_place: frozenset[tuple[str, str]],
          facts: _PairFacts, banks: Banks | None) -> dict[Key, int]:
    """Place ``items`` in order. ``facts`` (``_PairFacts``) refuses reuse of bytes across
    pipes inside the loops it was made for (the pipelined ones, or every loop; such offsets
    are not candidates, the top of the scope always is one). ``banks``:
    a copy read by one vector instruction together with a copy already placed also gets the
    candidates shifted by whole alignment units within the bank period, and takes one with
    fewest conflict beats: within the current peak if that removes as many, else at most one
    bank period above where it would go otherwise, while the scope has room."""
    align = spec.alignment
    placed: list[tuple[Lifetime, int, int]] = []  # (lifetime, offset, size)
    offs: dict[Key, int] = {}
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
           offs: dict[Key, int], align: int, in_place: frozenset[tuple[str, str]],
           facts: _PairFacts, banks: Banks | None, also: tuple[int, ...] = ()
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
    partner_bufs = {b for b, _ in partner}
    live: list[tuple[str, int, int]] = []
    # the placed copies not live with e whose bytes e may not share (refused) and those
    # sharing whose bytes costs cross-pipe reuses: (offset, end) and (offset, end, reuses)
    refused_at: list[tuple[int, int]] = []
    costly: list[tuple[int, int, int]] = []
    for p, o, s in placed:
        overlap, cost, refused = facts(p, e)
        if overlap:
            live.append((p.buffer, o, s))
        elif p.used and refused:
            refused_at.append((o, o + s))
        elif p.used and cost:
            costly.append((o, o + s, cost))
    starts = ({0, *also} | {round_up(o + s, align) for _, o, s in placed}
              | {o for _, o in partner})
    if banks is not None:
        starts |= {o + d for o in starts for d in range(align, banks.period, align)}
    # the bytes of the live copies that are nobody's in-place partner, merged into disjoint
    # sorted spans: a candidate overlaps one iff it overlaps the last span starting before
    # its end (bisect, not a scan of every live copy for each of the hundreds of candidates
    # bank-aware offsets make)
    spans = _merged((o, o + s) for b, o, s in live if b not in partner_bufs)
    span_starts = [lo for lo, _ in spans]
    no_share = _merged(refused_at)  # the same for the bytes e may not reuse
    no_share_starts = [lo for lo, _ in no_share]
    partners_live = [(b, o, s) for b, o, s in live if b in partner_bufs]
    live_starts = sorted(o for _, o, _ in live)
    cands: list[tuple[int, int, int, float]] = []
    for off in sorted(starts):
        end = off + size
        j = bisect.bisect_left(span_starts, end) - 1
        if j >= 0 and spans[j][1] > off:
            continue
        if any(off < o + s and o < end and (b, off) not in partner for b, o, s in partners_live):
            continue
        k = bisect.bisect_left(live_starts, end)
        nxt = live_starts[k] if k < len(live_starts) else max(peak, end)
        j = bisect.bisect_left(no_share_starts, end) - 1
        if j >= 0 and no_share[j][1] > off:
            continue
        cost = sum(rc for lo, hi, rc in costly if off < hi and lo < end)
        beats = banks.cost(key, off, offs) if banks is not None else 0.0
        cands.append((off, cost, nxt - off - size, beats))
    return cands


def _merged(spans: Iterable[tuple[int, int]]) -> list[list[int]]:
    """Byte ranges merged into disjoint sorted ``[lo, hi)`` spans: a range overlaps one of the
    originals iff it overlaps the last span starting before its end."""
    out: list[list[int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out


def _repair(items: list[Lifetime], offs: dict[Key, int], sizes: dict[Key, int], align: int,
            in_place: frozenset[tuple[str, str]], facts: _PairFacts, banks: Banks) -> None:
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


def reuse_cost(a: Lifetime, b: Lifetime, loop: str | None = None) -> int:
    """How many dependences between two different pipes sharing bytes between a and b adds:
    the later one's first user waits for the earlier one's last user, and inside a pipelined
    ``loop`` the next iteration's first user of the earlier one also waits for the later one's
    last user."""
    first, second = (a, b) if a.end < b.start else (b, a)
    n = 1 if len(first.last_pipes | second.first_pipes) > 1 else 0
    if loop is not None and len(second.last_pipes | first.first_pipes) > 1:
        n += 1
    return n


def back_edge_wait(lifetimes: Lifetimes, a: Lifetime, b: Lifetime) -> float:
    """How much of an iteration of the innermost loop holding two used copies that share
    bytes the next iteration's first user of the earlier one waits for, when it is on another
    pipe than the later one's last user: the later one's last use as a fraction of the loop
    body (0: no such wait, 1: the next iteration's fill waits for this one's end). A
    single-copy tile's load (MTE2) under a temporary whose last read comes early still
    overlaps the rest of the iteration; under the centred row a LayerNorm reads to the end
    it overlaps nothing."""
    first, second = (a, b) if a.end < b.start else (b, a)
    loop = innermost_span(lifetimes.loops, a, b)
    if loop is None or len(second.last_pipes | first.first_pipes) <= 1:
        return 0.0
    _, begin, last = loop
    return (second.end - begin) / max(last - begin, 1)


def sharing(items: list[Lifetime], offs: dict[Key, int], sizes: dict[Key, int]
             ) -> list[tuple[Lifetime, Lifetime]]:
    """Pairs of used copies at overlapping bytes with disjoint lifetimes (reuses), in the order
    of ``items``. A sweep over the copies by offset: each meets only the copies starting
    below its end."""
    used = [(offs[(e.buffer, e.copy)], n, e) for n, e in enumerate(items) if e.used]
    used.sort(key=lambda t: (t[0], t[1]))
    found = []
    for i, (oa, na, a) in enumerate(used):
        end = oa + sizes[(a.buffer, a.copy)]
        for ob, nb, b in used[i + 1:]:
            if ob >= end:
                break
            if not a.overlaps(b):  # in-place partners: one instruction reads one, writes the other
                found.append(((na, nb), (a, b)) if na < nb else ((nb, na), (b, a)))
    found.sort(key=lambda t: t[0])
    return [pair for _, pair in found]


def mirrored(items: list[Lifetime], offs: dict[Key, int], sizes: dict[Key, int],
             lifetimes: Lifetimes, refuse: Loops, pairs: dict[str, str],
             apart: Callable[[str, str], bool] = lambda _a, _b: False,
             late: float | None = None) -> tuple[dict[Key, int], int, int] | None:
    """(offsets, peak, cross-pipe reuses) of the packing ``offs`` of every copy of ``items``
    but the buffers of ``pairs`` (mirror -> counterpart, ``lower/class_mirror.py``), with each
    mirror copy at its counterpart's offset, when that is a packing under the same rules: no
    two copies live together share bytes (an in-place partner may sit at its own offset) and
    no sharing is refused inside a loop of ``refuse``, but for buffers ``apart`` (of runs on
    different Vector cores, ``ClassMirror.apart``). None otherwise."""
    new = dict(offs)
    for e in items:
        if e.buffer in pairs:
            got = offs.get((pairs[e.buffer], e.copy))
            if got is None:
                return None
            new[(e.buffer, e.copy)] = got if e.used else 0
    facts = _PairFacts(lifetimes, refuse, late)
    used = [e for e in items if e.used]
    for i, a in enumerate(used):
        ka = (a.buffer, a.copy)
        for b in used[i + 1:]:
            kb = (b.buffer, b.copy)
            if a.buffer not in pairs and b.buffer not in pairs:
                continue  # the packing's own verdict stands
            if apart(a.buffer, b.buffer):
                continue  # never on one core
            oa, ob = new[ka], new[kb]
            if not (oa < ob + sizes[kb] and ob < oa + sizes[ka]):
                continue
            overlap, _, refused = facts(a, b)
            partners = (a.buffer, b.buffer) in lifetimes.in_place or (
                b.buffer, a.buffer) in lifetimes.in_place
            if refused or overlap and not (partners and oa == ob):
                return None
    peak = max((new[k] + sizes[k] for k in new), default=0)
    return new, peak, sum(facts(a, b)[1] for a, b in sharing(items, new, sizes))
