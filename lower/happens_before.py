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

from collections.abc import Iterator
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
                 by_channel: bool = True, max_hops: int = MAX_HOPS) -> None:
        self.kernel = kernel
        self.target = target
        self.max_hops = max_hops
        self.infos = kernel_instrs(kernel)
        self._cache: dict[tuple, object] = {}
        self._ok: dict[tuple, frozenset] = {}  # (src, sink, items) -> syncs that ordered them
        self.depth = {c: 0 for c in CoreType}
        for i in self.infos:
            self.depth[i.core] = max(self.depth[i.core], len(i.path))
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
        for path, clock in self._clocks(s, t, dropped, hint):
            if clock is None:
                continue
            cov = self._covered(s, t, path, clock)
            if rel.intersect(cov).is_empty():
                continue
            rel = rel.subtract(cov)
            used.update(path)
            if rel.is_empty():
                break
        return rel, frozenset(used)

    def _clocks(self, s: InstrInfo, t: InstrInfo, dropped: frozenset, hint: frozenset[str]
                ) -> Iterator[tuple[tuple, isl.Map | None]]:
        """(sync keys, clock) candidates for ordering pipe-s work before t: a clock maps an
        instance of t to a position before which all of s's pipe is known done."""
        p, q = s.pipe, t.pipe
        bars = [(k, x) for k, x in self.barriers if k not in dropped and x.core == t.core
                and (x.pipe == Pipe.ALL or p == q == x.pipe)]
        ones = [f for f in self.flags.values() if f.key not in dropped and f.core == t.core
                and f.src == p and f.dst == q and f.sets and f.waits]

        def mine(ins: tuple[InstrInfo, ...]) -> bool:
            return any(r in i.instr.comment for i in ins for r in hint)

        for k, x in sorted(bars, key=lambda b: not mine((b[1],))):
            yield (k,), self._latest_before(x, t)
        for f in sorted(ones, key=lambda f: not mine(f.sets)):
            yield (f.key,), self._flag_clock(f, t)
        if self.max_hops < 2:
            return
        # chains: a flag f: r -> q whose set knows (through chains of flags into r) that the
        # pipe-p work is done; one clock per f, whatever the chain behind it
        for f in self.flags.values():
            if f.key in dropped or f.core != t.core or f.dst != q or f.src in (p, q) or \
                    not f.sets or not f.waits:
                continue
            support = self._support(f.src, p, t.core, self.max_hops - 1)
            yield (f.key,) + tuple(sorted(support - dropped, key=str)), self._relay_clock(
                f, t, p, dropped & support, self.max_hops - 1)


    def _covered(self, s: InstrInfo, t: InstrInfo, path: tuple, clock: isl.Map) -> isl.Map:
        """Pairs (a, b) of s and t instances with a before clock(b)."""
        key = ("covered", s.id, t.id, path)
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = self._sched(s).apply_range(
                self._lex_space(s.core)).apply_range(clock.reverse())
        return got  # type: ignore[return-value]

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
        per event id (empty: they alternate)."""
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
    def _relay_clock(self, f: _Flag, t: InstrInfo, p: Pipe, dropped: frozenset, hops: int
                     ) -> isl.Map | None:
        """Instance of ``t`` -> the latest pipe-p position known done at the set of ``f`` that a
        wait of ``f`` before it meets (knowledge relayed through f.src)."""
        key = ("relay", f.key, t.id, p, hops, dropped)
        if key in self._cache:
            return self._cache[key]  # type: ignore[return-value]
        last = self._flag_clock(f, t)
        out = None
        if last is not None:
            for x in f.sets:
                at = last.intersect_range(self._sched(x).range()).apply_range(
                    self._sched(x).reverse())
                if at.is_empty():
                    continue
                inner = self._known(x, p, dropped, hops)
                if inner is not None:
                    step = at.apply_range(inner)
                    out = step if out is None else out.union(step)
        self._cache[key] = out
        return out

    def _known(self, x: InstrInfo, p: Pipe, dropped: frozenset, hops: int) -> isl.Map | None:
        """Instance of ``x`` -> the latest position before which all pipe-p work is known done
        when it starts, through chains of at most ``hops`` flags (lexmax of every clock)."""
        key = ("known", x.id, p, hops, dropped)
        if key in self._cache:
            return self._cache[key]  # type: ignore[return-value]
        cands = []
        for bkey, b in self.barriers:
            if bkey not in dropped and b.core == x.core and (
                    b.pipe == Pipe.ALL or p == x.pipe == b.pipe):
                got = self._latest_before(b, x)
                if got is not None:
                    cands.append(got)
        for f in self.flags.values():
            if f.key in dropped or f.core != x.core or f.dst != x.pipe:
                continue
            if f.src == p:
                got = self._flag_clock(f, x)
            elif hops > 1 and f.src != x.pipe:
                sub = self._support(f.src, p, x.core, hops - 1)
                got = self._relay_clock(f, x, p, dropped & sub, hops - 1)
            else:
                got = None
            if got is not None:
                cands.append(got)
        out = None
        if cands:
            out = cands[0]
            for c in cands[1:]:
                out = out.union(c)
            if len(cands) > 1:
                out = out.lexmax().coalesce()
        self._cache[key] = out
        return out

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

    def _flag_clock(self, f: _Flag, t: InstrInfo) -> isl.Map | None:
        """Instance of ``t`` -> the latest set of ``f`` that a wait of ``f`` before it (same id)
        meets no earlier than (None: no wait of f precedes any instance of t)."""
        key = ("flag clock", f.key, t.id)
        if key in self._cache:
            return self._cache[key]  # type: ignore[return-value]
        links = None
        for x in f.sets:
            for y in f.waits:
                rel = self._flag_rel(x, y)
                if rel.is_empty():
                    continue
                step = rel.apply_range(self._po(y, t)).reverse().apply_range(self._sched(x))
                links = step if links is None else links.union(step)
        out = None if links is None or links.is_empty() else links.lexmax().coalesce()
        self._cache[key] = out
        return out

    def _latest_before(self, x: InstrInfo, t: InstrInfo) -> isl.Map | None:
        """Instance of ``t`` -> the position of the latest instance of ``x`` before it."""
        key = ("latest", x.id, t.id)
        if key not in self._cache:
            rel = self._po(x, t).reverse().apply_range(self._sched(x))
            self._cache[key] = None if rel.is_empty() else rel.lexmax().coalesce()
        return self._cache[key]  # type: ignore[return-value]

    # ----------------------------------------------------------------- relations
    def _sched(self, info: InstrInfo) -> isl.Map:
        """Instance -> position."""
        key = ("sched", info.id)
        got = self._cache.get(key)
        if got is None:
            n = _names(info, "a")
            coords = [n[BLOCK_IDX]]
            loop_at = dict(zip(info.loop_paths, info.loop_vars, strict=True))
            for j, c in enumerate(info.path):
                coords.append(str(c))
                if j + 1 < len(info.path):
                    var = loop_at.get(info.path[:j + 1])
                    coords.append(n[var] if var else "0")
            coords += ["0"] * (self._width(info.core) - len(coords))
            dom = ", ".join(n[v] for v in (BLOCK_IDX,) + info.loop_vars)
            got = self._cache[key] = isl.Map(
                f"{{ {info.name}[{dom}] -> {_pos(info.core)}[{', '.join(coords)}] }}"
            ).intersect_domain(info.domain)
        return got  # type: ignore[return-value]

    def _width(self, core: CoreType) -> int:
        return 2 * self.depth[core]

    def _lex_space(self, core: CoreType) -> isl.Map:
        """Positions u -> v of one block with u before v."""
        key = ("lex", core)
        got = self._cache.get(key)
        if got is None:
            w = self._width(core)
            us, vs = [f"u{j}" for j in range(w)], [f"v{j}" for j in range(w)]
            ors = [" and ".join([f"{a} = {b}" for a, b in zip(us[1:j], vs[1:j])]
                                + [f"{us[j]} < {vs[j]}"]) for j in range(1, w)]
            lex = " or ".join(f"({o})" for o in ors) or "false"
            got = self._cache[key] = isl.Map(
                f"{{ {_pos(core)}[{', '.join(us)}] -> {_pos(core)}[{', '.join(vs)}] : "
                f"u0 = v0 and ({lex}) }}")
        return got  # type: ignore[return-value]

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


def _pos(core: CoreType) -> str:
    return f"P_{core}"


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
