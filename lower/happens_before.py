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
   its loop and epilogue waits after it, its wait and set in one body or in each of several
   disjoint ones), in disjoint stretches of the text, alternate by construction; anything else
   is checked with isl.
2. *No double set* (checked here): each wait happens before the next set of its (flag, id).

Given 1 and 2 the k-th set of a (flag, id) meets its k-th wait, a set fires after every earlier
instruction of its pipe and a wait holds every later instruction of its pipe, so program order
is a valid execution (no deadlock), and instance ``a`` (pipe p) happens before ``b`` (pipe q)
when a chain exists::

    a < s1 < w1 < s2 < w2 < ... < wk < b

with ``si``/``wi`` a set and a wait of one (flag, id), ``s1`` on p, ``wi`` and ``s(i+1)`` on
one pipe, ``wk`` on q: alternation makes the wait that ``si`` meets the first one of its id
after it, so no later than ``wi``. Also: a barrier ``a < x < b`` on p (p == q) or PIPE_ALL, or
p == q runs them in order (``cube_ops.same_pipe_ordered``: an in-order pipe, or big Mmads).

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

import functools
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import islpy as isl

from ascendsched.lower.affine import Affine
from ascendsched.lower.byte_access import shared_copy, side_copies
from ascendsched.lower.cube_ops import same_pipe_ordered
from ascendsched.lower.flag_patterns import Flag, _mod_id, flag_pair_levels
from ascendsched.lower.instances import InstrInfo, kernel_instrs, never_before
from ascendsched.lower.ir import Instr, Kernel
from ascendsched.lower.polyhedral import Dependence, Dependences
from ascendsched.lower.sync_chains import ChainRelations, point_text, union_of
from ascendsched.lower.sync_ir import Barrier, EventSync, SetFlag, Sync, WaitFlag
from ascendsched.lower.sync_verdicts import GroupVerdicts
from ascendsched.target.model import CoreType, Target

MAX_HOPS = 3
# cache entries keyed by the shape of statements (domains, loop counts, ids), not their place
_SHAPES = ("po shape", "po loops", "id eq")


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
    by their ``channel`` as well as their HardEvent (before event-id allocation).
    ``skip``: indices of dependences not to check; ``first_only``: stop at the first problem."""
    oracle = SyncOracle(kernel, deps, target, by_channel=by_channel)
    return oracle.problems(skip=skip, first_only=first_only)


# --------------------------------------------------------------------------- the oracle
@dataclass(frozen=True, eq=False)
class _Item:
    """One thing to check: every pair of ``relation`` (src -> dst instances) is ordered."""

    key: tuple  # ("dep", n) or ("double set", flag key, wait stmt, set stmt)
    core: CoreType
    src: InstrInfo
    dst: InstrInfo
    given: isl.Map | None  # the relation (None: the dependence's, renamed on first use)
    dep: Dependence | None = None

    @cached_property
    def relation(self) -> isl.Map:
        """The src -> dst instance pairs, in this kernel's statement names (most items are
        settled by the program text and never need it)."""
        if self.given is not None:
            return self.given
        assert self.dep is not None
        return self.dep.relation.set_tuple_name(isl.dim_type.in_, self.src.name).set_tuple_name(
            isl.dim_type.out, self.dst.name)


class SyncOracle(ChainRelations, GroupVerdicts):
    """The checks of the module doc on a placed kernel: alternation, dependences, double sets.

    ``problems(dropped=...)`` answers for the kernel without the syncs whose keys are in
    ``dropped`` (``sync_keys(channel)``). Dropping only removes statements, so the program
    order of the others is unchanged and everything built once serves every trial.
    """

    def __init__(self, kernel: Kernel, deps: Dependences | None, target: Target, *,
                 by_channel: bool = True, max_hops: int = MAX_HOPS,
                 reuse: SyncOracle | None = None) -> None:
        self.kernel = kernel
        infos = kernel_instrs(kernel)
        self._ok: dict[tuple, frozenset] = {}  # (src, sink, items) -> syncs that ordered them
        self._leaning: dict[object, set[tuple]] = {}  # sync key -> groups whose _ok names it
        flags: dict[tuple, list[InstrInfo]] = {}
        barriers: list[tuple[tuple, InstrInfo]] = []
        for info in infos:
            ins = info.instr
            if isinstance(ins, Barrier):
                ch = ins.channel
                barriers.append((("barrier", ch if ch is not None else f"S{info.id}"), info))
            elif isinstance(ins, EventSync):
                ch = ins.channel
                key = ("flag", str(info.core), str(ins.src), str(ins.dst),
                       ch if by_channel else None)
                flags.setdefault(key, []).append(info)
        made: dict[tuple, Flag] = {}
        for key, group in flags.items():
            first = group[0].instr
            assert isinstance(first, EventSync)
            chans = {_channel(i.instr) for i in group}
            made[key] = Flag(key, group[0].core, first.src, first.dst,
                             tuple(i for i in group if isinstance(i.instr, SetFlag)),
                             tuple(i for i in group if isinstance(i.instr, WaitFlag)),
                             next(iter(chans)) if len(chans) == 1 else None)
        super().__init__(infos, target, made, barriers, max_hops)
        if reuse is not None:  # relations that depend on no statement's place: any kernel's
            self._cache.update((k, v) for k, v in reuse._cache.items() if k[0] in _SHAPES)
        # the analysed kernel's statements, found again in the placed one by their ids (sync
        # insertion keeps every instruction's id)
        placed = self._by_id
        self.items: list[_Item] = []
        for n, d in enumerate(deps or ()):
            s, t = deps.info(d.src).instr, deps.info(d.dst).instr  # type: ignore[union-attr]
            if s.id not in placed or t.id not in placed:
                continue  # not an instruction of this kernel
            src, dst = placed[s.id], placed[t.id]
            if src.pipe == dst.pipe and same_pipe_ordered(target, src.instr, dst.instr):
                continue  # the hardware orders them: program order suffices
            self.items.append(_Item(("dep", n), src.core, src, dst, None, d))
        for f in self.flags.values():
            for w in f.waits:
                for s in f.sets:
                    if never_before(w, s):
                        continue  # no common loop, the set first in the text: never after
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
                if _event_id(a.instr) == _event_id(b.instr)}
        for key, val in other._cache.items():
            if key[0] == "po" or (
                    key[0] == "flag rel" and key[1] in same and key[2] in same):
                self._cache[key] = val

        def ident(o: SyncOracle, f: Flag) -> tuple:
            return tuple(sorted((i.id, str(_event_id(i.instr))) for i in f.sets + f.waits))

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
                self._verdict((sid, tid, frozenset(moved)), got)

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
        # a group whose ordering leaned on the newly dropped syncs alone is the likeliest to
        # fail: look at those first (a trial stops at the first problem)
        todo = [(0 if used else 1, len(used or ()), gkey, items)
                for gkey, items, used in self._to_check(skip, dropped)]
        todo.sort(key=lambda x: (x[0], x[1]))
        if first_only:
            # a trial wants any one problem: the text's cheap certain ones first
            for _, _, gkey, items in todo:
                bare = self._bare(gkey, items, dropped)
                if bare is not None:
                    return (bare,)
        # A probe (one source instance first) finds an unordered group cheaply but is spent
        # on an ordered one, whose full cover follows. A trial probes only the first group
        # isl must decide: a trial that fails mostly fails there, and the groups after it are
        # mostly ordered (a hand RMSNorm 300x5000 of fused row x column tiles: 369 of the 377
        # covers of its pruning trials ordered, their probes 4.1 of its 8.8 s of covers)
        probe_next = True
        for _, _, gkey, items in todo:
            s, t = self.infos[gkey[0]], self.infos[gkey[1]]
            bare = self._bare(gkey, items, dropped)
            if bare is not None:
                out.append(bare)
                continue
            between = self._without_isl(s, t, items, dropped)
            if between is not None:
                self._verdict(gkey, between)
                continue
            union = self._cached(("union", gkey), lambda items=items: union_of(
                [it.relation for it in items]))
            hint = frozenset(r for it in items if it.dep is not None for r in [it.dep.reason])
            # with one item, which pairs are left does not matter: probe one instance first
            rem, used = self._cover(union, s, t, dropped, hint,
                                    probe=probe_next if first_only else len(items) == 1)
            probe_next = False
            if rem.is_empty():
                self._verdict(gkey, used)
                continue
            self._forget(gkey)
            for it in items:
                bad = it.relation.intersect(rem)
                if not bad.is_empty():
                    out.append(self._problem(it, bad))
                    if first_only:
                        return tuple(out)
        return tuple(out)

    def _bare(self, gkey: tuple, items: list[_Item], dropped: frozenset
              ) -> SyncProblem | None:
        """The problem of a group with pairs in one iteration of every common loop and no
        sync left between source and sink in that iteration (nothing can order them), else
        None."""
        same = next((it for it in items if it.dep is not None and it.dep.loop_independent),
                    None)
        if same is None or self._sync_between(self.infos[gkey[0]], self.infos[gkey[1]],
                                              dropped):
            return None
        self._forget(gkey)
        return SyncProblem(f"unordered: {same.dep} (no sync left between source and sink "
                           "within one iteration)", same.dep)

    def shared_id_problem(self, waits: tuple[tuple[Instr, Affine], ...],
                          sets: tuple[tuple[Instr, Affine], ...], dropped: frozenset
                          ) -> SyncProblem | None:
        """Whether a flag of one channel may be set again, by a set of another channel given
        the same id, before its wait consumed it: every (wait, later set) instance pair with
        equal ids (``waits``/``sets``: instructions of this kernel with their allocated ids)
        must be ordered by the syncs not in ``dropped``. None: it may not."""
        where = self._by_id
        for w_ins, w_id in waits:
            for s_ins, s_id in sets:
                w, s = where[w_ins.id], where[s_ins.id]
                if never_before(w, s):
                    continue  # no common loop, the set first in the text: never after
                key = ("shared id", w.id, s.id, w_id, s_id, dropped)
                if key not in self._cache:
                    # the text first (flag_pair_levels with these ids), then isl
                    levels, independent = flag_pair_levels(w, s, ids=(w_id, s_id))
                    same = _mod_id(w_id) if w_id == s_id else None
                    bad = None
                    if self._text_cover(w, s, dict(levels), independent, lambda same=same: same,
                                        dropped) is None:
                        rel = self._po(w, s).intersect(self._id_eq(w, s, w_id, s_id))
                        if not rel.is_empty():
                            rem, _ = self._cover(rel, w, s, dropped, frozenset(),
                                                 probe=True)
                            bad = None if rem.is_empty() else rem
                    self._cache[key] = bad
                bad = self._cache[key]
                if bad is not None:
                    return SyncProblem(
                        f"set {s.instr} may fire before wait {w.instr} (same id) consumed "
                        f"its flag: S{w.id} -> S{s.id} at {point_text(bad)}",
                        channels=(_channel(s.instr), _channel(w.instr)), double_set=True)
        return None

    def _without_isl(self, s: InstrInfo, t: InstrInfo, items: list[_Item], dropped: frozenset
                     ) -> frozenset | None:
        """The syncs that order every pair of ``items`` by the structure of the program text
        alone (``_straight_cover`` for the pairs in one iteration of every common loop,
        ``_carried_cover``, ``_carried_flag_cover``, ``_carried_drain_cover`` or
        ``_hoisted_cover`` per carrying loop), or None where isl must decide."""
        carried: dict[str, int] = {}  # carrying loop -> least distance of its pairs
        independent = False
        for it in items:
            levels, same = (it.dep.carried, it.dep.loop_independent) if it.dep is not None \
                else flag_pair_levels(s, t)
            independent |= same
            for v, d in levels:
                carried[v] = min(d, carried.get(v, d))
        return self._text_cover(s, t, carried, independent,
                                functools.cache(lambda: self._same_copy(s, t, items)), dropped,
                                functools.cache(lambda: self._side_copies(s, t, items)))

    def _text_cover(self, s: InstrInfo, t: InstrInfo, carried: dict[str, int],
                    independent: bool, same: Callable[[], tuple[str, int] | None],
                    dropped: frozenset,
                    copies: Callable[[], tuple[Affine, ...] | None] = lambda: None
                    ) -> frozenset | None:
        """``_without_isl`` for s -> t pairs carried by the loops of ``carried`` (each with
        its least distance) and, if ``independent`` (or no loop carries any), in one iteration
        of every common loop; ``same``: the ``_hoisted_cover`` argument, asked for if needed."""
        used: set = set()
        if not carried or independent:
            keys = self._straight_cover(s, t, dropped)
            if keys is None:
                keys = self._chained_cover(s, t, copies, dropped)
            if keys is None:
                return None
            used |= keys
        for var, distance in carried.items():
            key = self._carried_cover(s, t, var, dropped)
            keys = frozenset([key]) if key is not None else \
                self._carried_flag_cover(s, t, var, distance, dropped)
            if keys is None:
                keys = self._carried_drain_cover(s, t, var, dropped)
            if keys is None:
                keys = self._hoisted_cover(s, t, var, same(), dropped)
            if keys is None:
                return None
            used |= keys
        return frozenset(used)

    def _same_copy(self, s: InstrInfo, t: InstrInfo, items: list[_Item]
                   ) -> tuple[str, int] | None:
        """``(u, m)`` when every pair of ``items`` has equal ``u % m`` on both sides: the
        dependences touch one copy ``u % m`` of a buffer whose copies are disjoint, or the
        double-set items' flag has the id ``base + u % m`` on both sides. None: not known."""
        def one(it: _Item) -> tuple[str, int] | None:
            if it.dep is None:
                ew, es = _event_id(s.instr), _event_id(t.instr)
                return _mod_id(ew) if isinstance(ew, Affine) and ew == es else None
            return shared_copy(self.kernel, it.dep.space, _sides(s, t, it.dep))
        got = {one(it) for it in items}
        return got.pop() if len(got) == 1 else None

    def _side_copies(self, s: InstrInfo, t: InstrInfo, items: list[_Item]
                     ) -> tuple[Affine, ...] | None:
        """The buffer copy expression on each side when every dependence of ``items`` touches
        one buffer with disjoint copies, one copy expression per side (``side_copies``; the
        ``_chained_cover`` argument). None: not known, or a double-set item."""
        got = set()
        for it in items:
            if it.dep is None:
                return None
            got.add(side_copies(self.kernel, it.dep.space, _sides(s, t, it.dep)))
        return got.pop() if len(got) == 1 else None

    @cached_property
    def _by_id(self) -> dict[int, InstrInfo]:
        """The statements by their instruction's id."""
        return {i.instr.id: i for i in self.infos}

    def knows(self, instr: Instr) -> bool:
        """Whether ``instr`` is a statement of this oracle's kernel: the same object (a copy
        with the same id and, say, another event id is not)."""
        got = self._by_id.get(instr.id)
        return got is not None and got.instr is instr

    # ----------------------------------------------------------------- checks


    def _problem(self, it: _Item, bad: isl.Map) -> SyncProblem:
        where = point_text(bad)
        if it.dep is not None:
            return SyncProblem(f"unordered: {it.dep} at {where}", it.dep)
        f = self.flags[it.key[1]]
        w, s = it.src, it.dst
        return SyncProblem(
            f"set {f.name} ({s.instr.comment}) may fire before the previous wait consumed it: "
            f"S{w.id} -> S{s.id} at {where}",
            channels=(_channel(s.instr), _channel(w.instr)), double_set=True)


def _channel(ins: Instr) -> int | None:
    """The sync channel of ``ins`` (None: not a sync, or none)."""
    return ins.channel if isinstance(ins, Sync) else None


def _event_id(ins: Instr) -> object:
    """The event id of a set or wait (None: another instruction)."""
    return ins.event_id if isinstance(ins, EventSync) else None


def _sides(s: InstrInfo, t: InstrInfo, d: Dependence) -> tuple[tuple[Instr, tuple[str, ...]], ...]:
    """Dependence ``d`` of pair s -> t as ``byte_access`` sides: each instruction with the
    region descriptions of ``d`` on its side."""
    return (s.instr, d.src_tensors), (t.instr, d.dst_tensors)
