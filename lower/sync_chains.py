"""Which statement instances a barrier, a flag or a chain of flags orders: isl relations.

The relation engine of the happens-before oracle (``happens_before.py`` states the argument).
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

from dataclasses import dataclass

import islpy as isl

from ascendsched.lower.ir import BLOCK_IDX, Affine
from ascendsched.lower.polyhedral import InstrInfo, affine_text, coalesced, program_order
from ascendsched.target.model import CoreType, Pipe, Target


@dataclass(frozen=True, eq=False)
class Flag:
    """The set and wait statements of one flag (a channel, or a HardEvent)."""

    key: tuple
    core: CoreType
    src: Pipe
    dst: Pipe
    sets: tuple[InstrInfo, ...]
    waits: tuple[InstrInfo, ...]
    channel: object  # the channel attr (None: several or none)

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst}" + (f" (channel {self.channel})"
                                            if self.channel is not None else "")


class ChainRelations:
    """Instance relations of one kernel's statements and syncs, cached (see the module doc)."""

    def __init__(self, infos: tuple[InstrInfo, ...], target: Target, flags: dict[tuple, Flag],
                 barriers: list[tuple[tuple, InstrInfo]], max_hops: int) -> None:
        self.infos = infos
        self.target = target
        self.flags = flags
        self.barriers = barriers
        self.max_hops = max_hops
        self._cache: dict[tuple, object] = {}

    def _cached(self, key: tuple, make):  # noqa: ANN001, ANN202
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def _cover(self, rel: isl.Map, s: InstrInfo, t: InstrInfo, dropped: frozenset,
               hint: frozenset[str]) -> tuple[isl.Map, frozenset]:
        """The pairs of ``rel`` (s -> t instances) no chain orders, and the syncs that ordered
        the others: the syncs placed for these dependences first (``hint``: their reasons,
        found in the sync comments), then barriers and single flags, then longer chains."""
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

    def _ranked(self, s: InstrInfo, t: InstrInfo, hint: frozenset[str]
                ) -> tuple[list[tuple[tuple, InstrInfo]], list[Flag], list[Flag]]:
        """``_menu`` for s and t, the likeliest first: placed for these dependences (their
        reason in the comment), then nearest in the loop tree (a sibling branch's copy of a
        pair rarely orders this one)."""
        bars, ones, relays = self._menu(s.pipe, t.pipe, t.core)

        def rank(sets: tuple[InstrInfo, ...], waits: tuple[InstrInfo, ...]) -> tuple:
            mine = bool(hint) and any(r in i.instr.comment for i in sets for r in hint)
            near = max(_shared(x.path, s.path) for x in sets) + max(
                _shared(y.path, t.path) for y in waits)
            return (not mine, -near)

        return (sorted(bars, key=lambda b: rank((b[1],), (b[1],))),
                sorted(ones, key=lambda f: rank(f.sets, f.waits)), relays)

    def _menu(self, p: Pipe, q: Pipe, core: CoreType
              ) -> tuple[list[tuple[tuple, InstrInfo]], list[Flag], list[Flag]]:
        """Barriers, flags p -> q and flags r -> q (r another pipe) that may order p before q."""
        key = ("menu", p, q, core)
        got = self._cache.get(key)
        if got is None:
            bars = [(k, x) for k, x in self.barriers if x.core == core
                    and (x.pipe == Pipe.ALL or p == q == x.pipe)]
            into = [f for f in self.flags.values()
                    if f.core == core and f.dst == q and f.sets and f.waits]
            got = self._cache[key] = (bars, [f for f in into if f.src == p],
                                      [f for f in into if f.src not in (p, q)])
        return got  # type: ignore[return-value]

    def _menu_from(self, p: Pipe, core: CoreType) -> list[Flag]:
        key = ("menu from", p, core)
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = [f for f in self.flags.values()
                                      if f.core == core and f.src == p and f.sets and f.waits]
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
        for x in f.sets:
            links = self._links(f, x, t)
            if links is None:
                continue
            if dropped is None:
                lead = self._po(s, x)
            else:
                lead = self._hb(s, x, dropped, hops - 1)
                if lead is None:
                    continue
            step = lead.apply_range(links)
            out = step if out is None else out.union(step)
        out = None if out is None or out.is_empty() else coalesced(out)
        self._cache[key] = out
        return out

    def _hb(self, s: InstrInfo, x: InstrInfo, dropped: frozenset, hops: int) -> isl.Map | None:
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
            bars, ones, relays = self._menu(s.pipe, x.pipe, x.core)
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

    def _links(self, f: Flag, x: InstrInfo, t: InstrInfo) -> isl.Map | None:
        """Pairs (c, b) of set-x and t instances where a wait of ``f`` between them has c's id
        (so the set that wait meets is c or later)."""
        key = ("links", f.key, x.id, t.id)
        if key not in self._cache:
            out = None
            for y in f.waits:
                rel = self._flag_rel(x, y)
                if rel.is_empty():
                    continue
                step = rel.apply_range(self._po(y, t))
                out = step if out is None else out.union(step)
            self._cache[key] = None if out is None or out.is_empty() else coalesced(out)
        return self._cache[key]  # type: ignore[return-value]

    def _sync_between(self, s: InstrInfo, t: InstrInfo, dropped: frozenset) -> bool:
        """Whether a set on s's pipe (or a barrier that may order s's pipe before t's) not in
        ``dropped`` lies in the program text between s and t inside their innermost common
        body: the first step of any chain for instances in one iteration."""
        if s.id >= t.id:
            return True  # the sink comes first in the text: no pair shares every iteration
        common = 0
        while common < min(len(s.path), len(t.path)) - 1 and s.path[common] == t.path[common]:
            common += 1
        prefix = s.path[:common]
        for key, x in self._menu(s.pipe, t.pipe, t.core)[0]:
            if key not in dropped and s.id < x.id < t.id and x.path[:common] == prefix:
                return True
        for f in self._menu_from(s.pipe, t.core):
            if f.key not in dropped and any(s.id < x.id < t.id and x.path[:common] == prefix
                                            for x in f.sets):
                return True
        return False

    def _straight_cover(self, s: InstrInfo, t: InstrInfo, dropped: frozenset
                        ) -> frozenset | None:
        """The syncs that order, without isl, every s -> t pair lying in one iteration of
        every common loop (so in one run of their innermost common body; with no common loop,
        every pair), or None: a barrier, a flag pair or a chain of two sitting in that body
        between them as plain children. Such syncs run once, after s's branch and before t's,
        in every run of that body."""
        for keys in self._cached(("straight", s.id, t.id), lambda: self._straight(s, t)):
            if not keys & dropped:
                return keys
        return None

    def _carried_cover(self, s: InstrInfo, t: InstrInfo, var: str, dropped: frozenset
                       ) -> tuple | None:
        """A barrier or flag (key) that orders, without isl, every s -> t pair carried by the
        common loop ``var`` (s in an earlier iteration of it, the loops outside it equal), or
        None: a barrier, or a set and its wait placed in one body (set first), inside that loop
        and no deeper loop (only Ifs between) in a body that also holds s, after s's branch, or
        holds t, before t's branch. It runs in every iteration in which s (or t) runs, after s
        in s's iteration or before t in t's; the wait meets the set of its own run (the
        pattern alternates), and pipe order does the rest."""
        for key in self._cached(("carried", s.id, t.id, var),
                                lambda: self._carried_barriers(s, t, var)):
            if key not in dropped:
                return key
        return None

    def _carried_flag_cover(self, s: InstrInfo, t: InstrInfo, var: str, distance: int,
                            dropped: frozenset) -> tuple | None:
        """A flag (key) that orders, without isl, every s -> t pair carried by the common loop
        ``var`` at a distance of at least ``distance`` iterations, or None: the carried pattern
        ``insert_sync`` places (``standard_pattern``), its wait and set plain children of that
        loop's body (so run in every iteration), the set after s's branch and the wait before t's, the id constant or
        ``base + var % m`` with ``m <= distance``. Then the wait before t in iteration k' meets
        the set of iteration k' - m (alternation; the prologue sets serve the first m), which
        follows s of every iteration k <= k' - m on s's pipe; so every pair with k' - k >= m."""
        if distance < 1:
            return None
        for key, period in self._cached(("carried flags", s.id, t.id, var),
                                        lambda: self._carried_flags(s, t, var)):
            if key not in dropped and period <= distance:
                return key
        return None

    def _carried_flags(self, s: InstrInfo, t: InstrInfo, var: str) -> list[tuple[tuple, int]]:
        j = next((j for j, v in enumerate(s.loop_vars) if v == var), None)
        if j is None or j >= len(t.loop_paths) or t.loop_paths[j] != s.loop_paths[j]:
            return []
        out = []
        for f in self._menu(s.pipe, t.pipe, t.core)[1]:
            main_set = [x for x in f.sets if x.instr.attr("role") == "set"]
            main_wait = [y for y in f.waits if y.instr.attr("role") == "wait"]
            if len(main_set) != 1 or len(main_wait) != 1:
                continue
            x, y = main_set[0], main_wait[0]
            if x.path[:-1] != s.loop_paths[j] or y.path[:-1] != s.loop_paths[j]:
                continue  # not plain children of the loop's body: not run in every iteration
            body, d = x.path[:-1], len(x.path) - 1
            if not (len(s.path) > d and s.path[:d] == body and x.path[-1] > s.path[d]
                    and len(t.path) > d and t.path[:d] == body and y.path[-1] < t.path[d]):
                continue
            eid = x.instr.attr("event_id")
            if eid != y.instr.attr("event_id") or not isinstance(eid, Affine):
                continue
            if eid.is_const:
                period = 1
            elif not eid.terms and not eid.divs and len(eid.mods) == 1 and \
                    eid.mods[0][0] == var and eid.mods[0][2] == 1:
                period = eid.mods[0][1]
            else:
                continue
            if self._cached(("standard", f.key), lambda f=f: standard_pattern(f)):
                out.append((f.key, period))
        return out

    def _carried_barriers(self, s: InstrInfo, t: InstrInfo, var: str) -> list[tuple]:
        j = next((j for j, v in enumerate(s.loop_vars) if v == var), None)
        if j is None or j >= len(t.loop_paths) or t.loop_paths[j] != s.loop_paths[j]:
            return []
        out = []

        def beside(x: InstrInfo, y: InstrInfo) -> bool:
            """x..y (x == y: a barrier) inside the loop, no deeper loop, after s's branch in a
            body holding s or before t's in a body holding t."""
            if x.loop_paths != s.loop_paths[:j + 1]:
                return False
            body, d = x.path[:-1], len(x.path) - 1
            return (len(s.path) > d and s.path[:d] == body and x.path[-1] > s.path[d]) or \
                (len(t.path) > d and t.path[:d] == body and y.path[-1] < t.path[d])

        bars, ones, _ = self._menu(s.pipe, t.pipe, t.core)
        out = [key for key, x in bars if beside(x, x)]
        for f in ones:  # a pair placed in one body, set before wait: the wait meets that set
            if self._in_body_pair(f) and beside(*f.sets, *f.waits):
                out.append(f.key)
        return out

    def _in_body_pair(self, f: Flag) -> bool:
        """Whether ``f`` is one set and one wait placed in one body, set first (a standard
        pattern, so it alternates): each run of the wait meets the set of the same run."""
        def make() -> bool:
            if len(f.sets) != 1 or len(f.waits) != 1:
                return False
            x, y = f.sets[0], f.waits[0]
            return x.path[:-1] == y.path[:-1] and x.id < y.id and standard_pattern(f)
        return self._cached(("in body pair", f.key), make)  # type: ignore[return-value]

    def _straight(self, s: InstrInfo, t: InstrInfo) -> list[frozenset]:
        """Every sync (set) of ``_straight_cover``, whatever is dropped."""
        c = _shared(s.path, t.path)
        if c >= min(len(s.path), len(t.path)) or s.path[c] >= t.path[c]:
            return []
        lo, hi, parent = s.path[c], t.path[c], s.path[:c]
        plain = self._cached(("plain", parent), lambda: {
            i.id: i.path[-1] for i in self.infos
            if i.path[:-1] == parent and i.instr.is_sync and i.core == s.core})
        out = [frozenset([key]) for key, x in self._menu(s.pipe, t.pipe, t.core)[0]
               if lo < plain.get(x.id, -1) < hi]

        def pairs(p: Pipe, q: Pipe, start: int) -> list[tuple[tuple, int]]:
            got = []
            for f in self._menu(p, q, t.core)[1]:
                for x in f.sets:
                    for y in f.waits:
                        i, j = plain.get(x.id, -1), plain.get(y.id, -1)
                        if start < i < j < hi and x.instr.attr("event_id") == y.instr.attr(
                                "event_id") and (Affine.of(x.instr.attr("event_id")).is_const
                                                 or self._in_body_pair(f)):
                            got.append((f.key, j))
            return got

        out += [frozenset([k]) for k, _ in pairs(s.pipe, t.pipe, lo)]
        for r in {f.src for f in self._menu(s.pipe, t.pipe, t.core)[2]}:  # via a third pipe
            out += [frozenset([k1, k2]) for k1, j1 in pairs(s.pipe, r, lo)
                    for k2, _ in pairs(r, t.pipe, j1)]
        return out

    def _alternation(self, f: Flag) -> list[str]:
        """Messages for each way the instances of ``f`` fail to alternate set, wait, set, ...
        per event id (empty: they alternate). Channels of the patterns insert_sync places, in
        disjoint stretches of the program text, alternate by construction (each runs
        set-first, wait-last within any enclosing iteration), so isl is asked only otherwise."""
        chans: dict[object, list[InstrInfo]] = {}
        for i in f.sets + f.waits:
            chans.setdefault(i.instr.attr("channel"), []).append(i)
        if None not in chans and _apart(list(chans.values())) and all(
                standard_pattern(Flag(f.key, f.core, f.src, f.dst,
                                        tuple(i for i in g if i.instr.op == "set_flag"),
                                        tuple(i for i in g if i.instr.op == "wait_flag"), c))
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
            ea, eb = a.instr.attr("event_id"), b.instr.attr("event_id")
            if ea is not None and eb is not None:
                got = got.intersect(self._id_eq(a, b, Affine.of(ea), Affine.of(eb)))
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


def standard_pattern(f: Flag) -> bool:
    """Whether ``f`` is one of the two patterns ``insert_sync`` places, which alternate by
    construction: a set before its wait in one body (same id), or the carried pattern (wait
    before set in one body, inside a loop with one prologue set before it and one epilogue wait
    after it per id the body's id can take)."""
    mains = [i for i in f.sets + f.waits if i.instr.attr("role") in ("set", "wait")]
    if len(mains) != 2:
        return False
    st = next((i for i in mains if i.instr.op == "set_flag"), None)
    wt = next((i for i in mains if i.instr.op == "wait_flag"), None)
    if st is None or wt is None or st.path[:-1] != wt.path[:-1]:
        return False
    eid = st.instr.attr("event_id")
    if eid != wt.instr.attr("event_id"):
        return False
    pro = sorted((i for i in f.sets if i.instr.attr("role") == "prologue"), key=lambda i: i.path)
    epi = sorted((i for i in f.waits if i.instr.attr("role") == "epilogue"), key=lambda i: i.path)
    if len(pro) + len(epi) + 2 != len(f.sets) + len(f.waits):
        return False
    if st.path[-1] < wt.path[-1]:
        return not pro and not epi
    if not pro or len(pro) != len(epi):
        return False
    pro_ids = [_const_id(i) for i in pro]
    values = _id_values([st])
    epi_ids = [_const_id(i) for i in epi]
    if None in pro_ids or None in epi_ids or len(set(pro_ids)) != len(pro) or \
            sorted(pro_ids) != sorted(epi_ids):  # type: ignore[type-var]
        return False  # one prologue set per id, waited by one epilogue wait
    if values is None or not values <= set(pro_ids):
        return False
    # the prologue sets in the body holding an enclosing loop of the pair, before it; the
    # epilogue waits after it (in any one run of that body: P_v, then the loop's W/S pairs, E_v)
    parent = pro[0].path[:-1]
    loops = [lp for lp in st.loop_paths if lp[:-1] == parent]
    if len(loops) != 1 or not all(i.path[:-1] == parent for i in pro + epi):
        return False
    at = loops[0][-1]
    return all(i.path[-1] < at for i in pro) and all(i.path[-1] > at for i in epi)


def _apart(groups: list[list[InstrInfo]]) -> bool:
    """Whether channels that may use a common event id lie in disjoint stretches of the program
    text (channels whose ids never meet cannot disturb each other's alternation)."""
    spans = [(min(i.id for i in g), max(i.id for i in g)) for g in groups]
    values = [_id_values(g) for g in groups]
    for x in range(len(groups)):
        for y in range(x + 1, len(groups)):
            vx, vy = values[x], values[y]
            if (vx is None or vy is None or vx & vy) and \
                    not (spans[x][1] < spans[y][0] or spans[y][1] < spans[x][0]):
                return False
    return True


def _id_values(group: list[InstrInfo]) -> frozenset[int] | None:
    """The event ids the syncs of ``group`` can take (None: not known without isl): constants,
    and ``base + var % m``."""
    out: set[int] = set()
    for i in group:
        eid = i.instr.attr("event_id")
        if not isinstance(eid, Affine):
            return None
        if eid.is_const:
            out.add(eid.const)
        elif not eid.terms and not eid.divs and len(eid.mods) == 1 and eid.mods[0][2] == 1:
            out.update(eid.const + v for v in range(eid.mods[0][1]))
        else:
            return None
    return frozenset(out)


def _const_id(i: InstrInfo) -> int | None:
    eid = i.instr.attr("event_id")
    return eid.const if isinstance(eid, Affine) and eid.is_const else None


def _shared(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """Length of the common prefix of two paths."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


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
