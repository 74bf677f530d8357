"""Happens-before over a synchronised program, decided symbolically with isl.

The sync passes' own oracle (independent of ``sim/checker.py``, which replays a trace). It never
runs the program: the block index, persistent-loop trips and tile counts stay inside isl sets
(``S<n>[block_idx, loop vars]`` instances of statement n), so its cost depends on the statements
and sync channels, not on the problem size or the core count.

The argument. A *flag* is a HardEvent (src pipe, dst pipe), told apart by its sync ``channel``
while ids are still channel-local (``by_channel``). Within one block, ``<`` is program order:

1. *Alternation* (checked here): the instances of each (flag, event id value) run set, wait, set,
   wait, ... in program order, starting with a set and ending with a wait. The two patterns
   ``insert_sync`` places (a pair in one body; the carried pattern with prologue sets before
   its loop and epilogue waits after it), in disjoint stretches of the text, alternate by
   construction; anything else is checked with isl.
2. *No double set* (checked here): each wait happens before the next set of its (flag, id).

Given 1 and 2 the k-th set of a (flag, id) meets its k-th wait, a set fires after every earlier
instruction of its pipe and a wait holds every later instruction of its pipe, so program order
is a valid execution (no deadlock), and instance ``a`` (pipe p) happens before ``b`` (pipe q)
when a chain exists::

    a < s1 < w1 < s2 < w2 < ... < wk < b

with ``si``/``wi`` a set and a wait of one (flag, id), ``s1`` on p, ``wi`` and ``s(i+1)`` on
one pipe, ``wk`` on q: alternation makes the wait that ``si`` meets the first one of its id
after it, so no later than ``wi``. Also: a barrier ``a < x < b`` on p (p == q) or PIPE_ALL, or
p == q runs in order (``target.needs_same_pipe_barrier``).

A dependence (its relation: the instance pairs to order) is checked per (source, sink)
statement pair by *covering*: each candidate sync contributes the isl relation of pairs it
orders (``program order to a set`` composed with ``set -> waits of its id before the sink``),
which is subtracted until nothing is left. The syncs placed for the dependence and those nearest
in the loop tree are tried first; chains through other pipes (up to ``max_hops`` flags) last,
by the same covering at the relaying set. Missing a longer chain can only call a dependence
unordered (a sync kept), never the reverse. Each covered group remembers the syncs it used, so
dropping a sync (``remove_redundant_sync``) re-checks only the groups that leaned on it.
Before/after::

    load x; set MTE2->V 0; wait MTE2->V 0; add     ->  unordered_dependences(...) == ()
    load x; add                                     ->  (unordered: RAW x_ub S0 -> S1 ...,)
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from ascendsched.lower.ir import BLOCK_IDX, Affine, Instr, Kernel
from ascendsched.lower.polyhedral import (
    Dependence,
    Dependences,
    InstrInfo,
    affine_text,
    kernel_instrs,
    program_order,
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
        if reuse is not None:
            self._adopt(reuse)

    def _adopt(self, other: SyncOracle) -> None:
        """Take over ``other``'s program-order relations, the relations of flags whose ids did
        not change, and its verdicts on groups whose ordering used only such syncs, when the
        kernel has the same statements at the same places (a placement that only changed
        event ids)."""
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

        def ident(o: SyncOracle, f: _Flag) -> tuple:
            return tuple(sorted((i.id, str(i.instr.attr("event_id"))) for i in f.sets + f.waits))

        new = {ident(self, f): k for k, f in self.flags.items()}
        keys = {k: new.get(ident(other, f)) for k, f in other.flags.items()}
        bars = {x.id: k for k, x in self.barriers}
        keys.update({k: bars.get(x.id) for k, x in other.barriers})
        for (sid, tid, items), used in other._ok.items():
            moved = []
            for it in items:
                if it[0] == "double set":
                    it = (it[0], keys.get(it[1])) + it[2:]
                moved.append(it)
            got = frozenset(keys.get(k) for k in used)
            if None not in got and all(it[1] is not None for it in moved):
                self._ok[(sid, tid, frozenset(moved))] = got

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
        todo = []
        for (sid, tid), items in groups.items():
            gkey = (sid, tid, frozenset(i.key for i in items))
            used = self._ok.get(gkey)
            if used is None or used & dropped:
                # a group whose ordering leaned on the newly dropped syncs alone is the likeliest
                # to fail: look at those first (a trial stops at the first problem)
                todo.append((0 if used else 1, len(used or ()), gkey, items))
        todo.sort(key=lambda x: (x[0], x[1]))
        for _, _, gkey, items in todo:
            s, t = self.infos[gkey[0]], self.infos[gkey[1]]
            same = next((it for it in items if it.dep is not None and it.dep.loop_independent),
                        None)
            if same is not None and not self._sync_between(s, t, dropped):
                # pairs in one iteration of every common loop, and no sync left between the
                # two statements in that iteration: nothing can order them
                self._ok.pop(gkey, None)
                out.append(SyncProblem(f"unordered: {same.dep} (no sync left between source "
                                       f"and sink within one iteration)", same.dep))
                if first_only:
                    return tuple(out)
                continue
            union = self._cached(("union", gkey), lambda items=items: _union(
                [it.relation for it in items]))
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

    def _menu_from(self, p: Pipe, core: CoreType) -> list[_Flag]:
        key = ("menu from", p, core)
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = [f for f in self.flags.values()
                                      if f.core == core and f.src == p and f.sets and f.waits]
        return got  # type: ignore[return-value]

    def shared_id_problem(self, waits: tuple[tuple[Instr, Affine], ...],
                          sets: tuple[tuple[Instr, Affine], ...], dropped: frozenset
                          ) -> SyncProblem | None:
        """Whether a flag of one channel may be set again, by a set of another channel given
        the same id, before its wait consumed it: every (wait, later set) instance pair with
        equal ids (``waits``/``sets``: instructions of this kernel with their allocated ids)
        must be ordered by the syncs not in ``dropped``. None: it may not."""
        where = {id(i.instr): i for i in self.infos}
        for w_ins, w_id in waits:
            for s_ins, s_id in sets:
                w, s = where[id(w_ins)], where[id(s_ins)]
                key = ("shared id", w.id, s.id, w_id, s_id, dropped)
                if key not in self._cache:
                    rel = self._po(w, s).intersect(self._id_eq(w, s, w_id, s_id))
                    bad = None
                    if not rel.is_empty():
                        rem, _ = self._cover(rel, w, s, dropped, frozenset())
                        bad = None if rem.is_empty() else rem
                    self._cache[key] = bad
                bad = self._cache[key]
                if bad is not None:
                    return SyncProblem(
                        f"set {s.instr} may fire before wait {w.instr} (same id) consumed "
                        f"its flag: S{w.id} -> S{s.id} at {_point_text(bad)}",
                        channels=(s.instr.attr("channel"), w.instr.attr("channel")),
                        double_set=True)
        return None

    def knows(self, instr: Instr) -> bool:
        """Whether ``instr`` (the object) is a statement of this oracle's kernel."""
        if "_objects" not in self.__dict__:
            self._objects = {id(i.instr) for i in self.infos}
        return id(instr) in self._objects

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
        bars, ones, relays = self._menu(s.pipe, t.pipe, t.core)

        def rank(sets: tuple[InstrInfo, ...], waits: tuple[InstrInfo, ...]) -> tuple:
            # placed for this dependence (its reason in the comment), then nearest in the
            # loop tree (a sibling branch's copy of a pair rarely orders this one)
            mine = bool(hint) and any(r in i.instr.comment for i in sets for r in hint)
            near = max(_shared(x.path, s.path) for x in sets) + max(
                _shared(y.path, t.path) for y in waits)
            return (not mine, -near)

        bars = sorted(bars, key=lambda b: rank((b[1],), (b[1],)))
        ones = sorted(ones, key=lambda f: rank(f.sets, f.waits))
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
            support = self._support(f.src, s.pipe, t.core, hops - 1)
            inner = dropped & support
            yield (f.key,) + tuple(support - dropped), lambda f=f, inner=inner: self._via_flag(
                s, f, t, inner, hops)

    def _menu(self, p: Pipe, q: Pipe, core: CoreType
              ) -> tuple[list[tuple[tuple, InstrInfo]], list[_Flag], list[_Flag]]:
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
        return self.alternation_by_isl(f)

    def alternation_by_isl(self, f: _Flag) -> list[str]:
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
        """Instances of ``a`` before instances of ``b`` in program order, in one block."""
        key = ("po", a.id, b.id)
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = program_order(a, b)
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
        na, nb = _names(a, "a"), _names(b, "b")
        ta = affine_text(ea.rename(na), frozenset(na.values()), f"S{a.id}")
        tb = affine_text(eb.rename(nb), frozenset(nb.values()), f"S{b.id}")
        da = ", ".join(na[v] for v in (BLOCK_IDX,) + a.loop_vars)
        db = ", ".join(nb[v] for v in (BLOCK_IDX,) + b.loop_vars)
        return isl.Map(f"{{ {a.name}[{da}] -> {b.name}[{db}] : {ta} = {tb} }}")

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
    # the prologue sets in the body holding an enclosing loop of the pair, before it; the
    # epilogue waits after it (in any one run of that body: P_v, then the loop's W/S pairs, E_v)
    parent = pro[0].path[:-1]
    loops = [lp for lp in st.loop_paths if lp[:-1] == parent]
    if len(loops) != 1 or not all(i.path[:-1] == parent for i in pro + epi):
        return False
    at = loops[0][-1]
    return all(i.path[-1] < at for i in pro) and all(i.path[-1] > at for i in epi)


def _shared(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """Length of the common prefix of two paths."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _union(maps: list[isl.Map]) -> isl.Map:
    out = maps[0]
    for m in maps[1:]:
        out = out.union(m)
    return out


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
