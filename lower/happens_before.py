"""Happens-before over a synchronised program, decided symbolically with isl (vector clocks).

The sync passes' own oracle (independent of ``sim/checker.py``, which replays a trace). It never
runs the program: block index, persistent-loop trips and tile counts stay inside isl sets, so its
cost depends on the statements and sync channels, not on the problem size or the core count.

Instances live in one *position* space per core, ``P[block, c0, i0, c1, i1, ...]`` (child index
and loop variable per level, as ``polyhedral.kernel_instrs`` orders them), where program order is
the lexicographic order within one block.

The argument. A *flag* is a HardEvent (src pipe, dst pipe), told apart by its sync ``channel``
while ids are still channel-local (``by_channel``). Within one block:

1. *Alternation* (checked here): the instances of each (flag, event id value) run set, wait, set,
   wait, ... in program order, starting with a set and ending with a wait.
2. *No double set* (checked here): each wait happens before the next set of its (flag, id).

Given 1 and 2 the k-th set of a (flag, id) meets its k-th wait, a set fires after every earlier
instruction of its pipe and a wait holds every later instruction of its pipe, so program order
is a valid execution (no deadlock). Knowledge is then prefix-closed per pipe, as in a vector
clock: ``known[q <- p](v)``, a function of the position ``v`` of an instruction on pipe q, is the
latest position such that every pipe-p instruction before it is done when ``v`` starts:

* through one flag f: p -> q, ``K_f(v)`` = the latest set of f that some wait of f before ``v``
  (same id) may meet; alternation makes the wait's own set no earlier, so this is sound;
* through a chain, ``known[r <- p]`` at that set for flags f: r -> q (up to ``max_hops`` flags);
* a barrier on p before ``v`` (p == q), and any PIPE_ALL barrier before ``v``.

Each is an isl ``lexmax``. A dependence from ``a`` (pipe p) to ``b`` (pipe q) is ordered iff
``a < known[q <- p](b)`` for every pair of its relation (p == q on an in-order pipe:
program order suffices). Missing a longer chain can only call a dependence unordered (a sync
kept), never the reverse. Before/after::

    load x; set MTE2->V 0; wait MTE2->V 0; add     ->  unordered_dependences(...) == ()
    load x; add                                     ->  (unordered: RAW x_ub S0 -> S1 ...,)
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from ascendsched.lower.ir import BLOCK_IDX, Affine, Kernel
from ascendsched.lower.polyhedral import (
    Dependence,
    Dependences,
    InstrInfo,
    affine_text,
    kernel_instrs,
)
from ascendsched.target.model import CoreType, Pipe, Target

MAX_HOPS = 3


@dataclass(frozen=True)
class SyncProblem:
    """A dependence left unordered, or a flag misuse (``dep`` None)."""

    message: str
    dep: Dependence | None = None
    channels: tuple[object, ...] = ()  # sync channels involved (flag misuse)
    double_set: bool = False

    def __str__(self) -> str:
        return self.message


def unordered_dependences(kernel: Kernel, deps: Dependences | None, target: Target, *,
                          by_channel: bool = True, skip: frozenset[int] = frozenset(),
                          first_only: bool = False) -> tuple[SyncProblem, ...]:
    """Dependences of ``deps`` that the syncs of ``kernel`` leave unordered, plus flag misuse:
    a (flag, id) whose sets and waits do not alternate, or a set that may fire before the
    previous wait of its id consumed the flag (double set). ``by_channel``: flags are told apart
    by their ``channel`` attr as well as their HardEvent (before event-id allocation).
    ``skip``: indices of dependences not to check; ``first_only``: stop at the first problem."""
    oracle = SyncOracle(kernel, deps, target, by_channel=by_channel)
    return oracle.problems(skip=skip, first_only=first_only)


# --------------------------------------------------------------------------- the oracle
@dataclass(frozen=True, eq=False)
class _Flag:
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


@dataclass(frozen=True, eq=False)
class _Item:
    """One thing to check: every pair of ``relation`` (src -> dst instances) is ordered."""

    key: tuple  # ("dep", n) or ("double set", flag key, wait stmt, set stmt)
    core: CoreType
    src: InstrInfo
    dst: InstrInfo
    relation: isl.Map
    dep: Dependence | None = None


class SyncOracle:
    """The flags and barriers of a placed kernel as isl vector clocks.

    ``problems(dropped=...)`` answers for the kernel without the syncs whose keys are in
    ``dropped`` (``sync_keys(channel)``). Dropping only removes statements, so the program
    order of the others is unchanged and everything built once serves every trial.
    """

    def __init__(self, kernel: Kernel, deps: Dependences | None, target: Target, *,
                 by_channel: bool = True, max_hops: int = MAX_HOPS,
                 reuse: SyncOracle | None = None) -> None:
        self.kernel = kernel
        self.target = target
        self.max_hops = max_hops
        self.infos = kernel_instrs(kernel)
        self._cache: dict[tuple, object] = {}
        self._ok: dict[tuple, frozenset] = {}  # (src, sink, items) -> syncs that ordered them
        if reuse is not None:
            self._adopt(reuse)
        flags: dict[tuple, list[InstrInfo]] = {}
        self.barriers: list[tuple[tuple, InstrInfo]] = []
        for info in self.infos:
            ins = info.instr
            ch = ins.attr("channel")
            if ins.op == "barrier":
                self.barriers.append((("barrier", ch if ch is not None else f"S{info.id}"),
                                      info))
            elif ins.op in ("set_flag", "wait_flag"):
                src = ins.pipe if ins.op == "set_flag" else ins.attr("src")
                dst = ins.attr("dst") if ins.op == "set_flag" else ins.pipe
                key = ("flag", str(info.core), str(src), str(dst), ch if by_channel else None)
                flags.setdefault(key, []).append(info)
        self.flags: dict[tuple, _Flag] = {}
        for key, infos in flags.items():
            first = infos[0].instr
            src = first.pipe if first.op == "set_flag" else first.attr("src")
            dst = first.attr("dst") if first.op == "set_flag" else first.pipe
            chans = {i.instr.attr("channel") for i in infos}
            self.flags[key] = _Flag(
                key, infos[0].core, src, dst,
                tuple(i for i in infos if i.instr.op == "set_flag"),
                tuple(i for i in infos if i.instr.op == "wait_flag"),
                next(iter(chans)) if len(chans) == 1 else None)
        # the analysed kernel's statements, found again in the placed one (Instr objects
        # survive sync insertion)
        placed = {id(i.instr): i for i in self.infos}
        self.items: list[_Item] = []
        for n, d in enumerate(deps or ()):
            s, t = deps.info(d.src).instr, deps.info(d.dst).instr  # type: ignore[union-attr]
            if id(s) not in placed or id(t) not in placed:
                continue  # not an instruction of this kernel
            src, dst = placed[id(s)], placed[id(t)]
            if src.pipe == dst.pipe and not target.needs_same_pipe_barrier.get(src.pipe, True):
                continue  # an in-order pipe: program order suffices
            rel = d.relation.set_tuple_name(isl.dim_type.in_, src.name).set_tuple_name(
                isl.dim_type.out, dst.name)
            self.items.append(_Item(("dep", n), src.core, src, dst, rel, d))
        for f in self.flags.values():
            for w in f.waits:
                for s in f.sets:
                    rel = self._flag_rel(w, s)
                    if not rel.is_empty():
                        self.items.append(_Item(("double set", f.key, w.id, s.id), f.core, w,
                                                s, rel))

    def _adopt(self, other: SyncOracle) -> None:
        """Take over ``other``'s program-order relations (and flag relations of flags whose
        ids did not change) when the kernel has the same statements at the same places (a
        placement that only changed event ids)."""
        mine, theirs = self.infos, other.infos
        if len(mine) != len(theirs) or any(
                a.path != b.path or a.instr.op != b.instr.op or a.loop_vars != b.loop_vars
                or a.conds != b.conds for a, b in zip(mine, theirs, strict=True)):
            return
        same = {a.id for a, b in zip(mine, theirs, strict=True)
                if a.instr.attr("event_id") == b.instr.attr("event_id")}
        for key, val in other._cache.items():
            if key[0] == "po" or (key[0] == "flag rel" and key[1] in same and key[2] in same):
                self._cache[key] = val

    # ----------------------------------------------------------------- public
    def sync_keys(self, channel: object) -> frozenset[tuple]:
        """The flag/barrier keys of one sync channel."""
        return frozenset([k for k, f in self.flags.items() if f.channel == channel]
                         + [k for k, _ in self.barriers if k[1] == channel])

    def problems(self, *, dropped: frozenset = frozenset(), skip: frozenset[int] = frozenset(),
                 first_only: bool = False) -> tuple[SyncProblem, ...]:
        """What the kernel without the syncs of ``dropped`` (flag/barrier keys) leaves unordered.

        Items are checked per (source, sink) statement pair with chains of one flag first, then
        longer ones only where needed; a group already found ordered is not checked again while
        none of the syncs its clock used is dropped.
        """
        out: list[SyncProblem] = []
        for f in self.flags.values():
            if f.key in dropped:
                continue
            for msg in self._cached(("alternation", f.key), lambda f=f: self._alternation(f)):
                out.append(SyncProblem(msg, channels=(f.channel,)))
                if first_only:
                    return tuple(out)
        groups: dict[tuple[int, int], list[_Item]] = {}
        for item in self.items:
            if item.key[0] == "dep" and item.key[1] in skip:
                continue
            if item.key[0] == "double set" and item.key[1] in dropped:
                continue
            groups.setdefault((item.src.id, item.dst.id), []).append(item)
        for (sid, tid), items in groups.items():
            s, t = self.infos[sid], self.infos[tid]
            gkey = (sid, tid, frozenset(i.key for i in items))
            used = self._ok.get(gkey)
            if used is not None and not (used & dropped):
                continue
            union = items[0].relation
            for it in items[1:]:
                union = union.union(it.relation)
            hint = frozenset(r for it in items if it.dep is not None for r in [it.dep.reason])
            rem, used = self._cover(union, s, t, dropped, hint)
            if rem.is_empty():
                self._ok[gkey] = used
                continue
            self._ok.pop(gkey, None)
            for it in items:
                bad = it.relation.intersect(rem)
                if not bad.is_empty():
                    out.append(self._problem(it, bad))
                    if first_only:
                        return tuple(out)
        return tuple(out)

    # ----------------------------------------------------------------- checks
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
        p, q = s.pipe, t.pipe
        bars = [(k, x) for k, x in self.barriers if k not in dropped and x.core == t.core
                and (x.pipe == Pipe.ALL or p == q == x.pipe)]
        ones, relays = [], []
        for f in self.flags.values():
            if f.key in dropped or f.core != t.core or f.dst != q or not f.sets or not f.waits:
                continue
            if f.src == p:
                ones.append(f)
            elif hops > 1 and f.src != q:
                relays.append(f)

        def mine(ins: tuple[InstrInfo, ...]) -> bool:
            return any(r in i.instr.comment for i in ins for r in hint)

        for k, x in sorted(bars, key=lambda b: not mine((b[1],))):
            yield (k,), lambda x=x: self._via_barrier(s, x, t)
        for f in sorted(ones, key=lambda f: not mine(f.sets)):
            yield (f.key,), lambda f=f: self._via_flag(s, f, t, None, hops)
        for f in relays:
            support = self._support(f.src, p, t.core, hops - 1)
            yield (f.key,) + tuple(support - dropped), lambda f=f, sup=support: self._via_flag(
                s, f, t, dropped & sup, hops)

    def _via_barrier(self, s: InstrInfo, x: InstrInfo, t: InstrInfo) -> isl.Map | None:
        key = ("via barrier", s.id, x.id, t.id)
        if key not in self._cache:
            rel = self._po(s, x).apply_range(self._po(x, t))
            self._cache[key] = None if rel.is_empty() else rel
        return self._cache[key]  # type: ignore[return-value]

    def _via_flag(self, s: InstrInfo, f: _Flag, t: InstrInfo, dropped: frozenset | None,
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
        out = None if out is None or out.is_empty() else out.coalesce()
        self._cache[key] = out
        return out

    def _hb(self, s: InstrInfo, x: InstrInfo, dropped: frozenset, hops: int) -> isl.Map | None:
        """Pairs (a, c) of s and x instances with a known done when c starts (chains of at most
        ``hops`` flags, none of ``dropped``)."""
        key = ("hb", s.id, x.id, dropped, hops)
        if key in self._cache:
            return self._cache[key]  # type: ignore[return-value]
        out = None
        for _, make in self._candidates(s, x, dropped, frozenset(), hops):
            cov = make()
            if cov is not None:
                out = cov if out is None else out.union(cov)
        out = None if out is None else out.coalesce()
        self._cache[key] = out
        return out

    def _links(self, f: _Flag, x: InstrInfo, t: InstrInfo) -> isl.Map | None:
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
            self._cache[key] = None if out is None or out.is_empty() else out.coalesce()
        return self._cache[key]  # type: ignore[return-value]

    def _problem(self, it: _Item, bad: isl.Map) -> SyncProblem:
        where = _point_text(bad)
        if it.dep is not None:
            return SyncProblem(f"unordered: {it.dep} at {where}", it.dep)
        f = self.flags[it.key[1]]
        w, s = it.src, it.dst
        return SyncProblem(
            f"set {f.name} ({s.instr.comment}) may fire before the previous wait consumed it: "
            f"S{w.id} -> S{s.id} at {where}",
            channels=(s.instr.attr("channel"), w.instr.attr("channel")), double_set=True)

    def _alternation(self, f: _Flag) -> list[str]:
        """Messages for each way the instances of ``f`` fail to alternate set, wait, set, ...
        per event id (empty: they alternate). Channels of the patterns insert_sync places, in
        disjoint stretches of the program text, alternate by construction (each runs
        set-first, wait-last within any enclosing iteration), so isl is asked only otherwise."""
        chans: dict[object, list[InstrInfo]] = {}
        for i in f.sets + f.waits:
            chans.setdefault(i.instr.attr("channel"), []).append(i)
        spans = sorted((min(i.id for i in g), max(i.id for i in g)) for g in chans.values())
        if None not in chans and all(a[1] < b[0] for a, b in zip(spans, spans[1:])) and all(
                _standard_pattern(_Flag(f.key, f.core, f.src, f.dst,
                                        tuple(i for i in g if i.instr.op == "set_flag"),
                                        tuple(i for i in g if i.instr.op == "wait_flag"), c))
                for c, g in chans.items()):
            return []
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
                                   f"(S{a.id}, S{b.id} at {_point_text(left)})")
        for group, others, after in ((f.sets, f.waits, True), (f.waits, f.sets, False)):
            for a in group:
                left = a.domain
                for m in others:
                    rel = self._flag_rel(a, m) if after else self._flag_rel(m, a).reverse()
                    left = left.subtract(rel.domain())
                if not left.is_empty():
                    what = "is never waited for" if after else "has no set before it (deadlock)"
                    out.append(f"{f.name}: S{a.id} ({a.instr}) {what} at {_point_text(left)}")
        return out

    # ----------------------------------------------------------------- vector clocks
    def _support(self, q: Pipe, p: Pipe, core: CoreType, hops: int) -> frozenset:
        """Keys of every sync that knowledge on pipe q about pipe p may use within ``hops``."""
        key = ("support", q, p, core, hops)
        got = self._cache.get(key)
        if got is not None:
            return got  # type: ignore[return-value]
        out = {bkey for bkey, x in self.barriers
               if x.core == core and (x.pipe == Pipe.ALL or p == q == x.pipe)}
        for f in self.flags.values():
            if f.core == core and f.dst == q and (f.src == p or (hops > 1 and f.src != q)):
                out.add(f.key)
                if f.src != p:
                    out |= self._support(f.src, p, core, hops - 1)
        res = frozenset(out)
        self._cache[key] = res
        return res

    def _po(self, a: InstrInfo, b: InstrInfo) -> isl.Map:
        """Instances of ``a`` before instances of ``b`` in program order, in one block: their
        common loops lexicographically before, or equal when ``a`` comes first in the text."""
        key = ("po", a.id, b.id)
        got = self._cache.get(key)
        if got is None:
            na, nb = _names(a, "a"), _names(b, "b")
            m = 0
            while m < min(len(a.loop_paths), len(b.loop_paths)) and \
                    a.loop_paths[m] == b.loop_paths[m]:
                m += 1
            if a.id == b.id:
                strict = True
            else:
                j = next(i for i, (x, y) in enumerate(zip(a.path, b.path)) if x != y)
                strict = a.path[j] > b.path[j]  # a after b in the text: a later iteration
            xs = [na[v] for v in a.loop_vars[:m]]
            ys = [nb[v] for v in b.loop_vars[:m]]
            ors = [" and ".join([f"{x} = {y}" for x, y in zip(xs[:j], ys[:j])]
                                + [f"{xs[j]} < {ys[j]}"]) for j in range(m)]
            if not strict:
                ors.append(" and ".join(f"{x} = {y}" for x, y in zip(xs, ys)) or "true")
            lex = " or ".join(f"({o})" for o in ors) if ors else "false"
            dom = ", ".join(na[v] for v in (BLOCK_IDX,) + a.loop_vars)
            rng = ", ".join(nb[v] for v in (BLOCK_IDX,) + b.loop_vars)
            got = self._cache[key] = isl.Map(
                f"{{ {a.name}[{dom}] -> {b.name}[{rng}] : {na[BLOCK_IDX]} = {nb[BLOCK_IDX]} "
                f"and ({lex}) }}").intersect_domain(a.domain).intersect_range(b.domain)
        return got  # type: ignore[return-value]

    def _flag_rel(self, a: InstrInfo, b: InstrInfo) -> isl.Map:
        """Instances of ``a`` before instances of ``b`` with the same event id."""
        key = ("flag rel", a.id, b.id)
        got = self._cache.get(key)
        if got is None:
            got = self._po(a, b)
            ea, eb = a.instr.attr("event_id"), b.instr.attr("event_id")
            if ea is not None and eb is not None:
                na, nb = _names(a, "a"), _names(b, "b")
                ta = affine_text(Affine.of(ea).rename(na), frozenset(na.values()), f"S{a.id}")
                tb = affine_text(Affine.of(eb).rename(nb), frozenset(nb.values()), f"S{b.id}")
                da = ", ".join(na[v] for v in (BLOCK_IDX,) + a.loop_vars)
                db = ", ".join(nb[v] for v in (BLOCK_IDX,) + b.loop_vars)
                got = got.intersect(isl.Map(f"{{ {a.name}[{da}] -> {b.name}[{db}] : {ta} = {tb} }}"))
            self._cache[key] = got
        return got  # type: ignore[return-value]

    def _cached(self, key: tuple, make):  # noqa: ANN001, ANN202
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]


def _standard_pattern(f: _Flag) -> bool:
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
    ids = [i.instr.attr("event_id") for i in pro]
    if ids != [Affine(n) for n in range(len(pro))] or ids != [i.instr.attr("event_id")
                                                              for i in epi]:
        return False
    if isinstance(eid, Affine) and eid.is_const:
        values = {eid.const}
    elif isinstance(eid, Affine) and eid.const == 0 and not eid.terms and not eid.divs and \
            len(eid.mods) == 1 and eid.mods[0][1:] == (2, 1):
        values = {0, 1}  # var % 2
    else:
        return False
    if not values <= set(range(len(pro))):
        return False
    # every prologue set in the body holding the loop, right before an enclosing loop of the
    # pair's body; the epilogue waits right after that loop
    parent, at = pro[0].path[:-1], pro[-1].path[-1] + 1
    loop = parent + (at,)
    return (all(i.path[:-1] == parent for i in pro + epi)
            and loop in st.loop_paths
            and [i.path[-1] for i in pro] == list(range(at - len(pro), at))
            and [i.path[-1] for i in epi] == list(range(at + 1, at + 1 + len(epi))))


def _names(info: InstrInfo, side: str) -> dict[str, str]:
    """Positional isl names for an instance's variables (``a0`` is block_idx)."""
    return {v: f"{side}{j}" for j, v in enumerate((BLOCK_IDX,) + info.loop_vars)}


def _point_text(rel: isl.Map | isl.Set) -> str:
    """One instance (pair) of a non-empty relation, for messages."""
    pt = rel.sample_point() if isinstance(rel, isl.Set) else rel.wrap().sample_point()
    n = pt.get_space().dim(isl.dim_type.set)
    vals = [pt.get_coordinate_val(isl.dim_type.set, i).to_python() for i in range(n)]
    if isinstance(rel, isl.Set):
        return str(tuple(vals))
    k = rel.dim(isl.dim_type.in_)
    return f"{tuple(vals[:k])} -> {tuple(vals[k:])}"
