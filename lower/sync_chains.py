"""Which statement instances a barrier, a flag or a chain of flags orders: isl relations.

The relation engine of the happens-before oracle (``happens_before.py`` states the argument;
``sync_text.py`` settles, without isl, what the program text alone proves).
For a source statement ``s`` and a sink ``t`` it builds, per candidate sync, the ``s -> t``
instance pairs that sync orders:

* a barrier ``x`` on their pipe: ``s < x < t`` (program order in one block);
* a flag ``f`` from s's pipe to t's: ``s`` before a set of ``f`` whose id a wait of ``f`` before
  ``t`` carries (``links``);
* a flag ``f`` from another pipe r (a *relay*): ``s`` known done at that set (the same relations
  from ``s`` to the set, recursively, at most ``max_hops`` flags in all).

``cover`` subtracts these from a dependence relation until nothing is left, the likeliest syncs
first, and names the syncs it used. Relations are cached per statement (and sync) pair; none
depends on the problem size. It also checks that a flag's sets and waits alternate.
"""

from __future__ import annotations

from collections.abc import Iterator

import islpy as isl

from ascendsched.lower.affine import Affine
from ascendsched.lower.flag_patterns import Flag, _apart, _shared, standard_pattern
from ascendsched.lower.instances import (
    InstrInfo,
    affine_text,
    coalesced,
    never_before,
    program_order,
)
from ascendsched.lower.ir import BLOCK_IDX
from ascendsched.lower.sync_ir import EventSync, SetFlag, WaitFlag
from ascendsched.lower.sync_text_carried import CarriedText
from ascendsched.target.model import Target

# a flag's relation of more pieces is left as it is: isl's coalesce costs most on those and,
# for relays unioned over several sets, seldom merges them (gemm_softmax: 19 such calls took
# 0.05 s); the relation is the same either way
COALESCE_PIECES = 4


class ChainRelations(CarriedText):
    """Instance relations of one kernel's statements and syncs, cached (see the module doc)."""

    def __init__(self, infos: tuple[InstrInfo, ...], target: Target, flags: dict[tuple, Flag],
                 barriers: list[tuple[tuple, InstrInfo]], max_hops: int) -> None:
        super().__init__(infos, flags, barriers)
        self.target = target
        self.max_hops = max_hops

    def _cover(self, rel: isl.Map, s: InstrInfo, t: InstrInfo, dropped: frozenset,
               hint: frozenset[str], *, probe: bool = False) -> tuple[isl.Map, frozenset]:
        """The pairs of ``rel`` (s -> t instances) no chain orders, and the syncs that ordered
        the others: the syncs placed for these dependences first (``hint``: their reasons,
        found in the sync comments), then barriers and single flags, then longer chains.
        ``probe``: the caller needs only whether some pair is left, not which: if the pairs
        of one source instance are left unordered (``_probe``), those are returned."""
        if probe:
            bad = self._probe(rel, s, t, dropped)
            if bad is not None:
                return bad, frozenset()
        used: set = set()
        for keys, make in self._candidates(s, t, dropped, hint, self.max_hops):
            cov = make()
            if cov is None or rel.intersect(cov).is_empty():
                continue
            rel = rel.subtract(cov)
            used.update(keys)
            if rel.is_empty():
                break
        return rel, frozenset(used)

    def _candidates(self, s: InstrInfo, t: InstrInfo, dropped: frozenset,
                    hint: frozenset[str], hops: int):  # noqa: ANN202
        """(sync keys, function giving the s -> t instance pairs they order) for each barrier
        and flag that may order pipe-s work before t, the hinted ones first; flags from another
        pipe relay what their sets know (chains of up to ``hops`` flags)."""
        bars, ones, relays = self._cached(("ranked", s.id, t.id, hint),
                                          lambda: self._ranked(s, t, hint))
        for k, x in bars:
            if k not in dropped:
                yield (k,), lambda x=x: self._via_barrier(s, x, t)
        for f in ones:
            if f.key not in dropped:
                yield (f.key,), lambda f=f: self._via_flag(s, f, t, None, hops)
        if hops < 2:
            return
        for f in relays:
            if f.key in dropped:
                continue
            support = self._relay_deps(s, f, hops)
            inner = dropped & support
            yield (f.key,) + tuple(support - dropped), lambda f=f, inner=inner: self._via_flag(
                s, f, t, inner, hops)

    def _probe(self, rel: isl.Map, s: InstrInfo, t: InstrInfo, dropped: frozenset
               ) -> isl.Map | None:
        """The pairs of ``rel`` from one of its source instances that no chain orders, or
        None if that instance's are all ordered. Every chain is followed from that instance
        alone, as the set of instances it reaches (the full relations restricted to it, so a
        pair left here is left by ``_cover`` too): much cheaper than the full relations where
        most covers that reach isl end unordered (a single-id flag whose source pipe runs an
        iteration ahead during placement, a needed sync tried during pruning)."""
        for one in _probe_points(rel.domain()):
            left = one.apply(rel)
            known: dict[tuple[int, int], isl.Set | None] = {}
            for cov in self._reached(s, t, one, dropped, self.max_hops, known):
                left = left.subtract(cov)
                if left.is_empty():
                    break
            else:
                return isl.Map.from_domain_and_range(one, left)
        return None

    def _reached(self, s: InstrInfo, t: InstrInfo, one: isl.Set, dropped: frozenset,
                 hops: int, known: dict[tuple[int, int], isl.Set | None]
                 ) -> Iterator[isl.Set]:
        """The t instances each candidate sync (``_candidates``' order) orders after the s
        instances of ``one``: sets, one per sync that orders any. ``known``: ``_known_at``
        per (statement, hops) from this ``one`` (its memo)."""
        bars, ones, relays = self._cached(("ranked", s.id, t.id, frozenset()),
                                          lambda: self._ranked(s, t, frozenset()))
        for k, x in bars:
            if k not in dropped and not never_before(s, x):
                yield one.apply(self._po(s, x)).apply(self._po(x, t))
        for f in ones + (relays if hops >= 2 else []):
            if f.key in dropped:
                continue
            out = None
            for x, links in self._set_links(s, f, t):
                lead = one.apply(self._po(s, x)) if f.src == s.pipe else \
                    self._known_at(s, x, one, dropped, hops - 1, known)
                if lead is not None:
                    step = lead.apply(links)
                    out = step if out is None else out.union(step)
            if out is not None:
                yield out

    def _known_at(self, s: InstrInfo, x: InstrInfo, one: isl.Set, dropped: frozenset,
                  hops: int, known: dict[tuple[int, int], isl.Set | None]) -> isl.Set | None:
        """The x instances that start with the s instances of ``one`` known done (chains of
        at most ``hops`` flags; ``_hb`` from ``one``), memoised in ``known``."""
        key = (x.id, hops)
        if key not in known:
            out = None
            for cov in self._reached(s, x, one, dropped, hops, known):
                out = cov if out is None else out.union(cov)
            known[key] = out
        return known[key]

    def _ranked(self, s: InstrInfo, t: InstrInfo, hint: frozenset[str]
                ) -> tuple[list[tuple[tuple, InstrInfo]], list[Flag], list[Flag]]:
        """``_menu`` for s and t, the likeliest first: placed for these dependences (their
        reason in the comment), then nearest in the loop tree (a sibling branch's copy of a
        pair rarely orders this one)."""
        bars, ones, relays = self._menu_inside(s, t)

        def rank(sets: tuple[InstrInfo, ...], waits: tuple[InstrInfo, ...]) -> tuple:
            mine = bool(hint) and any(r in i.instr.comment for i in sets for r in hint)
            near = max(_shared(x.path, s.path) for x in sets) + max(
                _shared(y.path, t.path) for y in waits)
            return (not mine, -near)

        return (sorted(bars, key=lambda b: rank((b[1],), (b[1],))),
                sorted(ones, key=lambda f: rank(f.sets, f.waits)),
                sorted(relays, key=lambda f: rank(f.sets, f.waits)))

    def _menu_inside(self, s: InstrInfo, t: InstrInfo
                     ) -> tuple[list[tuple[tuple, InstrInfo]], list[Flag], list[Flag]]:
        """``_menu`` for s before t without the syncs that cannot order them: when both sit in
        one top-level compound statement (a tile class's loop), which a block runs once, every
        instance of a chain from s to t runs between them, so inside it; a flag helps only
        with a set and a wait there. (Leaving the others out changes no relation: each would
        order no pair.)"""
        bars, ones, relays = self._menu(s.pipe, t.pipe, t.core)
        lo, hi = s.path[0], t.path[0]
        if lo > hi or (lo == hi and (len(s.path) < 2 or len(t.path) < 2)):
            return bars, ones, relays
        key = ("menu inside", s.pipe, t.pipe, t.core, lo, hi)
        got = self._cache.get(key)
        if got is None:
            def inside(f: Flag) -> bool:
                return any(lo <= x.path[0] <= hi for x in f.sets) and any(
                    lo <= y.path[0] <= hi for y in f.waits)

            got = self._cache[key] = ([(k, x) for k, x in bars if lo <= x.path[0] <= hi],
                                      [f for f in ones if inside(f)],
                                      [f for f in relays if inside(f)])
        return got  # type: ignore[return-value]

    def _via_barrier(self, s: InstrInfo, x: InstrInfo, t: InstrInfo) -> isl.Map | None:
        key = ("via barrier", s.id, x.id, t.id)
        if key not in self._cache:
            rel = self._po(s, x).apply_range(self._po(x, t))
            self._cache[key] = None if rel.is_empty() else rel
        return self._cache[key]  # type: ignore[return-value]

    def _via_flag(self, s: InstrInfo, f: Flag, t: InstrInfo, dropped: frozenset | None,
                  hops: int) -> isl.Map | None:
        """Pairs (a, b) of s and t instances with a done before a set of ``f`` that a wait of
        ``f`` before b meets: ``a`` before the set (f from s's pipe, ``dropped`` None), or known
        done at the set through flags into f's source pipe (a relay)."""
        key = ("via flag", s.id, f.key, t.id, dropped, hops)
        if key in self._cache:
            return self._cache[key]  # type: ignore[return-value]
        out = None
        for x, links in self._set_links(s, f, t):
            if dropped is None:
                lead = self._po(s, x)
            else:
                lead = self._hb(s, x, dropped, hops - 1)
                if lead is None:
                    continue
            step = lead.apply_range(links)
            out = step if out is None else out.union(step)
        if out is not None and out.is_empty():
            out = None
        elif out is not None and out.n_basic_map() <= COALESCE_PIECES:
            out = coalesced(out)
        self._cache[key] = out
        return out

    def _hb(self, s: InstrInfo, x: InstrInfo, dropped: frozenset, hops: int
            ) -> isl.Map | None:
        """Pairs (a, c) of s and x instances with a known done when c starts (chains of at most
        ``hops`` flags, none of ``dropped``). Cached per the dropped syncs that matter here."""
        dropped = dropped & self._hb_deps(s, x, hops)
        key = ("hb", s.id, x.id, dropped, hops)
        if key in self._cache:
            return self._cache[key]  # type: ignore[return-value]
        out = None
        for _, make in self._candidates(s, x, dropped, frozenset(), hops):
            cov = make()
            if cov is not None:
                out = cov if out is None else out.union(cov)
        out = None if out is None else coalesced(out)
        self._cache[key] = out
        return out

    def _hb_deps(self, s: InstrInfo, x: InstrInfo, hops: int) -> frozenset:
        """Keys of the syncs that contribute to ``_hb(s, x)`` with nothing dropped: dropping
        any other sync cannot change it."""
        key = ("hb deps", s.id, x.id, hops)
        got = self._cache.get(key)
        if got is None:
            bars, ones, relays = self._menu_inside(s, x)
            out = {k for k, b in bars if self._via_barrier(s, b, x) is not None}
            out |= {f.key for f in ones if self._via_flag(s, f, x, None, hops) is not None}
            if hops > 1:
                for f in relays:
                    if self._via_flag(s, f, x, frozenset(), hops) is not None:
                        out |= {f.key} | self._relay_deps(s, f, hops)
            got = self._cache[key] = frozenset(out)
        return got  # type: ignore[return-value]

    def _relay_deps(self, s: InstrInfo, f: Flag, hops: int) -> frozenset:
        """Keys of the syncs a relay through ``f`` may lean on (before its sets)."""
        key = ("relay deps", s.id, f.key, hops)
        got = self._cache.get(key)
        if got is None:
            out: frozenset = frozenset()
            for x in f.sets:
                out |= self._hb_deps(s, x, hops - 1)
            got = self._cache[key] = out
        return got  # type: ignore[return-value]

    def _set_links(self, s: InstrInfo, f: Flag, t: InstrInfo
                   ) -> Iterator[tuple[InstrInfo, isl.Map]]:
        """The sets x of ``f`` a chain from s may reach, each with ``_links(f, x, t)``."""
        for x in f.sets:
            if never_before(s, x):
                continue  # no chain from s reaches a set it never precedes
            links = self._links(f, x, t)
            if links is not None:
                yield x, links

    def _links(self, f: Flag, x: InstrInfo, t: InstrInfo) -> isl.Map | None:
        """Pairs (c, b) of set-x and t instances where a wait of ``f`` between them has c's id
        (so the set that wait meets is c or later)."""
        key = ("links", f.key, x.id, t.id)
        if key not in self._cache:
            out = None
            for y in f.waits:
                if never_before(x, y) or never_before(y, t):
                    continue
                rel = self._flag_rel(x, y)
                if rel.is_empty():
                    continue
                step = rel.apply_range(self._po(y, t))
                out = step if out is None else out.union(step)
            self._cache[key] = None if out is None or out.is_empty() else coalesced(out)
        return self._cache[key]  # type: ignore[return-value]

    def _alternation(self, f: Flag) -> list[str]:
        """Messages for each way the instances of ``f`` fail to alternate set, wait, set, ...
        per event id (empty: they alternate). Channels of the patterns insert_sync places, in
        disjoint stretches of the program text, alternate by construction (each runs
        set-first, wait-last within any enclosing iteration), so isl is asked only otherwise."""
        chans: dict[object, list[InstrInfo]] = {}
        for i in f.sets + f.waits:
            chans.setdefault(i.instr.channel, []).append(i)  # type: ignore[attr-defined]
        if None not in chans and _apart(list(chans.values())) and all(
                standard_pattern(Flag(f.key, f.core, f.src, f.dst,
                                        tuple(i for i in g if isinstance(i.instr, SetFlag)),
                                        tuple(i for i in g if isinstance(i.instr, WaitFlag)), c))
                for c, g in chans.items()):
            return []
        return self.alternation_by_isl(f)

    def alternation_by_isl(self, f: Flag) -> list[str]:
        """``_alternation`` decided by isl alone (also where the patterns vouch for it)."""
        out: list[str] = []
        for kind, firsts, seconds in (("sets", f.sets, f.waits), ("waits", f.waits, f.sets)):
            for a in firsts:
                for b in firsts:
                    pairs = self._flag_rel(a, b)
                    if pairs.is_empty():
                        continue
                    left = pairs
                    for m in seconds:
                        left = left.subtract(self._flag_rel(a, m).apply_range(self._po(m, b)))
                    if not left.is_empty():
                        other = "wait" if kind == "sets" else "set"
                        out.append(f"{f.name}: two {kind} with no {other} of their id between "
                                   f"(S{a.id}, S{b.id} at {point_text(left)})")
        for group, others, after in ((f.sets, f.waits, True), (f.waits, f.sets, False)):
            for a in group:
                left = a.domain
                for m in others:
                    rel = self._flag_rel(a, m) if after else self._flag_rel(m, a).reverse()
                    left = left.subtract(rel.domain())
                if not left.is_empty():
                    what = "is never waited for" if after else "has no set before it (deadlock)"
                    out.append(f"{f.name}: S{a.id} ({a.instr}) {what} at {point_text(left)}")
        return out

    # ----------------------------------------------------------------- vector clocks

    def _po(self, a: InstrInfo, b: InstrInfo) -> isl.Map:
        """Instances of ``a`` before instances of ``b`` in program order, in one block."""
        key = ("po", a.id, b.id)
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = program_order(a, b, self._cache)
        return got  # type: ignore[return-value]

    def _flag_rel(self, a: InstrInfo, b: InstrInfo) -> isl.Map:
        """Instances of ``a`` before instances of ``b`` with the same event id."""
        key = ("flag rel", a.id, b.id)
        got = self._cache.get(key)
        if got is None:
            got = self._po(a, b)
            ea, eb = a.instr, b.instr
            if isinstance(ea, EventSync) and isinstance(eb, EventSync):
                got = got.intersect(self._id_eq(a, b, ea.event_id, eb.event_id))
            self._cache[key] = got
        return got  # type: ignore[return-value]

    def _id_eq(self, a: InstrInfo, b: InstrInfo, ea: Affine, eb: Affine) -> isl.Map:
        """Instance pairs of ``a`` and ``b`` whose event ids ``ea`` and ``eb`` are equal."""
        key = ("id eq", a.loop_vars, b.loop_vars, ea, eb)
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = self._id_eq_map(a, b, ea, eb)
        return got.set_tuple_name(isl.dim_type.in_, a.name).set_tuple_name(  # type: ignore
            isl.dim_type.out, b.name)

    @staticmethod
    def _id_eq_map(a: InstrInfo, b: InstrInfo, ea: Affine, eb: Affine) -> isl.Map:
        na, nb = _names(a, "a"), _names(b, "b")
        ta = affine_text(ea.rename(na), frozenset(na.values()), f"S{a.id}")
        tb = affine_text(eb.rename(nb), frozenset(nb.values()), f"S{b.id}")
        da = ", ".join(na[v] for v in (BLOCK_IDX,) + a.loop_vars)
        db = ", ".join(nb[v] for v in (BLOCK_IDX,) + b.loop_vars)
        return isl.Map(f"{{ {a.name}[{da}] -> {b.name}[{db}] : {ta} = {tb} }}")


def _probe_points(dom: isl.Set) -> Iterator[isl.Set]:
    """The source instances ``_probe`` follows: a sample point of ``dom``, then its
    lexicographic maximum, asked for only if needed; isl cannot compute that of some sets
    with existentially quantified floors (a reduced RMSNorm 300 x 5000 of fused tiles:
    "affine expression involves some of the domain dimensions"), and the probe then follows
    the first alone: the full cover decides."""
    yield isl.Set.from_point(dom.sample_point())
    try:
        top = dom.lexmax()
    except isl.Error:
        return
    yield top


def union_of(maps: list[isl.Map]) -> isl.Map:
    out = maps[0]
    for m in maps[1:]:
        out = out.union(m)
    return out


def _names(info: InstrInfo, side: str) -> dict[str, str]:
    """Positional isl names for an instance's variables (``a0`` is block_idx)."""
    return {v: f"{side}{j}" for j, v in enumerate((BLOCK_IDX,) + info.loop_vars)}


def point_text(rel: isl.Map | isl.Set) -> str:
    """One instance (pair) of a non-empty relation, for messages."""
    pt = rel.sample_point() if isinstance(rel, isl.Set) else rel.wrap().sample_point()
    n = pt.get_space().dim(isl.dim_type.set)
    vals = [pt.get_coordinate_val(isl.dim_type.set, i).to_python() for i in range(n)]
    if isinstance(rel, isl.Set):
        return str(tuple(vals))
    k = rel.dim(isl.dim_type.in_)
    return f"{tuple(vals[:k])} -> {tuple(vals[k:])}"
