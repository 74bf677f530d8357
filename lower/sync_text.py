"""What the program text alone proves about syncs: the patterns ``insert_sync`` places.

The cheap half of the happens-before oracle (``happens_before.py`` states the argument; the isl
half is ``sync_chains.py``). Read off the loop tree without building a relation:

* ``flag_patterns.standard_pattern``: a flag placed as one of insert_sync's two patterns (a
  set and its wait in one body; the carried pattern with prologue sets and epilogue waits, its
  pair in one body or in each of several disjoint ones, ``body_pairs``) alternates;
* ``_straight_cover``: syncs between source and sink in their common body order every pair in
  one iteration of their common loops;
* ``_across``: chains out of one sibling branch (a tile class, a tail version) and into a later
  one;
* the pairs a loop carries: ``sync_text_carried.py``;
* ``flag_patterns.flag_pair_levels``: the loops that may carry a (wait, next set) pair of one
  flag.

Each answer is exact or "unknown" (None), never a wrong "ordered": where the text does not
decide, the isl relations do.
"""

from __future__ import annotations

from collections.abc import Callable

from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.flag_patterns import (
    Flag,
    _eid,
    _main_pair,
    _role,
    _shared,
    body_pairs,
    standard_pattern,
)
from ascendsched.lower.instances import InstrInfo
from ascendsched.lower.sync_ir import Sync, SyncRole
from ascendsched.target.model import CoreType, Pipe


class SyncText:
    """The statements, flags and barriers of one placed kernel, and what their text proves
    (see the module doc). Answers are cached in ``_cache`` (shared with the isl half)."""

    def __init__(self, infos: tuple[InstrInfo, ...], flags: dict[tuple, Flag],
                 barriers: list[tuple[tuple, InstrInfo]]) -> None:
        self.infos = infos
        self.flags = flags
        self.barriers = barriers
        self._cache: dict[tuple, object] = {}

    def _cached(self, key: tuple, make):  # noqa: ANN001, ANN202
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

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

    def _standard(self, f: Flag) -> bool:
        return self._cached(("standard", f.key), lambda: standard_pattern(f))  # type: ignore

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

    def _chained_cover(self, s: InstrInfo, t: InstrInfo,
                       copies: Callable[[], tuple[Affine, ...] | None], dropped: frozenset
                       ) -> frozenset | None:
        """A flag that orders, without isl, every s -> t pair with s and t in different
        children of their innermost common body (s's first; a tile class's loop and a later
        one's), or None: a carried channel (``standard_pattern``, ``body_pairs``) shared by
        the bodies of both, with a set ``x`` after s in s's body (directly from s's pipe, or
        relayed, ``_reaching``) and a wait ``y`` before t in t's, x's child before t's, and
        in every pair the same id on both: equal constants, or
        ids equal to the buffer copy each side touches (``copies``: the dependence's copy
        expressions, one buffer with disjoint copies, so a pair touches one copy on both
        sides). x runs after s in s's run with s's copy as id; y waits for the last set of
        its id before it (the channel alternates), x or a later one, so after s on s's
        pipe."""
        for keys, need in self._cached(("chained", s.id, t.id), lambda: self._chained(s, t)):
            if not keys & dropped and (need is None or need == copies()):
                return keys
        return None

    def _chained(self, s: InstrInfo, t: InstrInfo
                 ) -> list[tuple[frozenset, tuple[Affine, ...] | None]]:
        """Every flag of ``_chained_cover`` with the (x, y) ids it needs equal to the copies
        (None: constant ids, always equal)."""
        c = _shared(s.path, t.path)
        if c >= min(len(s.path), len(t.path)) or s.path[c] >= t.path[c]:
            return []
        out: list[tuple[frozenset, tuple[Affine, ...] | None]] = []
        _, direct, relays = self._menu(s.pipe, t.pipe, t.core)
        for f in direct + relays:
            pairs = self._body_pairs(f)
            if not pairs or not self._standard(f):
                continue
            xs = [x for x, _ in pairs if len(x.path) > c and x.path[:c] == s.path[:c]
                  and s.path[c] <= x.path[c] < t.path[c]]
            ys = [y for _, y in pairs if _before(t.path, y.path, after=True) and len(y.path) > c
                  and y.path[c] == t.path[c]]
            for x in xs:
                for keys in self._reaching(s, f, x, t.core):
                    for y in ys:
                        ex, ey = _eid(x), _eid(y)
                        assert ex is not None and ey is not None
                        if not (ex.is_const and ey.is_const):
                            out.append((keys, (ex, ey)))
                        elif ex == ey:
                            out.append((keys, None))
        return out

    def _reaching(self, s: InstrInfo, f: Flag, x: InstrInfo, core: CoreType
                  ) -> list[frozenset]:
        """The syncs by which ``f``'s set ``x`` is issued after s's work in the same run of
        x's body: ``f`` itself from s's pipe with s before x, or relayed by an in-body pair
        from s's pipe to f's, its set after s and its wait before x."""
        if f.src == s.pipe:
            return [frozenset([f.key])] if _before(s.path, x.path) else []
        return [frozenset([f.key, g.key]) for g in self._menu(s.pipe, f.src, core)[1]
                if self._in_body_pair(g) and _before(s.path, g.sets[0].path)
                and _before(g.waits[0].path, x.path)]

    def _in_body_pair(self, f: Flag) -> bool:
        """Whether ``f`` is one set and one wait placed in one body, set first (a standard
        pattern, so it alternates): each run of the wait meets the set of the same run."""
        def make() -> bool:
            if len(f.sets) != 1 or len(f.waits) != 1:
                return False
            x, y = f.sets[0], f.waits[0]
            return x.path[:-1] == y.path[:-1] and x.id < y.id and self._standard(f)
        return self._cached(("in body pair", f.key), make)  # type: ignore[return-value]

    def _straight(self, s: InstrInfo, t: InstrInfo) -> list[frozenset]:
        """Every sync (set) of ``_straight_cover``, whatever is dropped."""
        c = _shared(s.path, t.path)
        if c >= min(len(s.path), len(t.path)) or s.path[c] >= t.path[c]:
            return []
        lo, hi, parent = s.path[c], t.path[c], s.path[:c]
        plain = self._plain(parent, s.core)
        out = [frozenset([key]) for key, x in self._menu(s.pipe, t.pipe, t.core)[0]
               if lo < plain.get(x.id, -1) < hi]

        def pairs(p: Pipe, q: Pipe, start: int) -> list[tuple[tuple, int]]:
            return [(k, j) for k, i, j in self._plain_pairs(parent, t.core, p, q)
                    if start < i and j < hi]

        out += [frozenset([k]) for k, _ in pairs(s.pipe, t.pipe, lo)]
        for r in {f.src for f in self._menu(s.pipe, t.pipe, t.core)[2]}:  # via a third pipe
            out += [frozenset([k1, k2]) for k1, j1 in pairs(s.pipe, r, lo)
                    for k2, _ in pairs(r, t.pipe, j1)]
        return minimal(out + self._across(s, t, c))

    def _plain(self, parent: tuple, core: CoreType) -> dict[int, int]:
        """The syncs of ``core`` that are plain children of the body at ``parent``: statement
        id -> position in the body."""
        return self._cached(("plain", parent, core), lambda: {  # type: ignore[return-value]
            i.id: i.path[-1] for i in self.infos
            if i.path[:-1] == parent and isinstance(i.instr, Sync) and i.core == core})

    def _plain_pairs(self, parent: tuple, core: CoreType, p: Pipe, q: Pipe
                     ) -> list[tuple[tuple, int, int]]:
        """The (flag p -> q, set position, wait position) of each set and later wait of one
        flag with one id, both plain children of the body at ``parent`` (an in-body pair when
        the id varies): ``_straight``'s pairs before they are cut to a stretch of the body."""
        def make() -> list[tuple[tuple, int, int]]:
            plain = self._plain(parent, core)
            got = []
            for f in self._menu(p, q, core)[1]:
                for x in f.sets:
                    i = plain.get(x.id, -1)
                    ex = _eid(x)
                    if i < 0 or ex is None:
                        continue
                    for y in f.waits:
                        j = plain.get(y.id, -1)
                        if i < j and ex == _eid(y) and (ex.is_const or self._in_body_pair(f)):
                            got.append((f.key, i, j))
            return got
        return self._cached(("plain pairs", parent, core, p, q), make)  # type: ignore

    def _across(self, s: InstrInfo, t: InstrInfo, c: int) -> list[frozenset]:
        """Chains out of s's branch and into t's, for sibling branches of one body ``B`` (s's
        first, ``c`` the depth of B): each full tile class's loop nest and its tails. Only
        standard flags (``standard_pattern``) whose statements all lie inside B are used, so
        their alternation is balanced in every run of B.

        *Drain*: a flag p -> q orders pipe-p work at a point before its set (in the set's body)
        on q: an in-body pair at its wait; the carried pattern at its last epilogue wait, since
        every set instance follows the point's instances of its iteration on p, the last one
        (of some id) fires after all of them, and the epilogue wait of that id meets it. A
        barrier of p (or PIPE_ALL) after the point in its body orders p (or every pipe) after
        it. Chained up to ``MAX_DRAIN`` flags, each from the pipe and after the point the
        previous one reached; every point must lie before t's branch.
        *Fill*: a flag r -> t's pipe with a wait before t in t's body chain: that wait meets a
        set of the same run of B, so after all r work before the first set.
        s's pairs are ordered when t's pipe is drained, or a fill flag starts on s's pipe with
        every set after s's branch, or on a drained pipe with every set after the child of B
        where the chain reached it."""
        hi = t.path[c]
        by_pipe = self._cached(("drained by pipe", s.id, c), lambda: self._drained_by_pipe(s, c))
        out = [keys for pipe in (t.pipe, Pipe.ALL) for at, keys in by_pipe.get(pipe, ())
               if at < hi]
        for f, first in self._cached(("fills", t.id, c), lambda: self._fills(t, c)):
            bound = min(first, hi)
            if f.src == s.pipe and first > s.path[c]:
                out.append(frozenset([f.key]))
            out += [keys | {f.key} for at, keys in by_pipe.get(f.src, ()) if at < bound]
        return out

    def _drained_by_pipe(self, s: InstrInfo, c: int) -> dict[Pipe, list[tuple[int, frozenset]]]:
        """``_drained`` per pipe reached (PIPE_ALL apart), earliest first, without the chains
        another one reaching that pipe as early or earlier with fewer syncs makes redundant
        (``_across`` asks only whether a pipe is reached before a point, by which syncs)."""
        per: dict[Pipe, list[tuple[int, frozenset]]] = {}
        for pipe, at, keys in self._cached(("drained", s.id, c), lambda: self._drained(s, c)):
            per.setdefault(pipe, []).append((at, keys))
        out: dict[Pipe, list[tuple[int, frozenset]]] = {}
        for pipe, got in per.items():
            kept: list[tuple[int, frozenset]] = []
            for at, keys in sorted(got, key=lambda x: (x[0], len(x[1]))):
                if not any(k <= keys for _, k in kept):
                    kept.append((at, keys))
            out[pipe] = kept
        return out

    def _body_flags(self, body: tuple, core: CoreType) -> list[Flag]:
        """The standard flags of ``core`` whose statements all lie inside ``body``."""
        def make() -> list[Flag]:
            n = len(body)
            return [f for f in self.flags.values() if f.core == core and f.sets and f.waits
                    and all(len(x.path) > n and x.path[:n] == body for x in f.sets + f.waits)
                    and self._standard(f)]
        return self._cached(("body flags", body, core), make)  # type: ignore[return-value]

    def _drained(self, s: InstrInfo, c: int) -> list[tuple[Pipe, int, frozenset]]:
        """The pipes ``_across`` finds waiting for s's work inside the body at depth ``c``,
        each with the position in that body where it has (the child holding its point) and
        the syncs of its chain: a first step from s, then up to ``MAX_DRAIN - 1`` more, none
        using a sync twice. The steps after the first depend only on where the first one
        reached, so they are shared by every statement whose chains pass there."""
        body = s.path[:c]
        reached: list[tuple[Pipe, int, frozenset]] = []
        for pipe, at, keys in self._steps(s.pipe, s.path, body, s.core, True):
            reached.append((pipe, at[c], keys))
            reached += [(p, a[c], keys | k) for p, a, k in
                        self._onward(pipe, at, body, s.core, MAX_DRAIN - 1) if not k & keys]
        return reached

    def _onward(self, pipe: Pipe, point: tuple, body: tuple, core: CoreType, depth: int
                ) -> list[tuple[Pipe, tuple, frozenset]]:
        """The chains of 1 to ``depth`` steps from ``pipe`` waiting at ``point`` (``_drained``
        after its first step), each as (pipe, point, syncs), none using a sync twice."""
        if depth == 0:
            return []

        def make() -> list[tuple[Pipe, tuple, frozenset]]:
            out = []
            for p, at, keys in self._steps(pipe, point, body, core, False):
                out.append((p, at, keys))
                out += [(p2, a2, keys | k2) for p2, a2, k2 in
                        self._onward(p, at, body, core, depth - 1) if not k2 & keys]
            return out
        return self._cached(("onward", pipe, point, body, core, depth), make)  # type: ignore

    def _steps(self, pipe: Pipe, point: tuple, body: tuple, core: CoreType, first: bool
               ) -> list[tuple[Pipe, tuple, frozenset]]:
        """One step of a chain out of pipe-``pipe`` work at ``point`` inside ``body``: a flag
        from the pipe whose wait has its destination wait for that work (``_drain_point``), or
        a barrier after it. A barrier of the pipe itself completes its work only on the first
        step (``first``, from the statement); after a flag's wait or a barrier only PIPE_ALL
        adds anything."""
        c = len(body)
        out = []
        for f in self._body_flags(body, core):
            if f.src == pipe:
                at = self._drain_point(f, point)
                if at is not None:
                    out.append((f.dst, at, frozenset([f.key])))
        inside = self._cached(("body barriers", body, core), lambda: [
            (k, x) for k, x in self.barriers
            if x.core == core and x.path[:c] == body and len(x.path) > c])
        out += [(x.pipe, x.path, frozenset([k])) for k, x in inside  # type: ignore[attr-defined]
                if (x.pipe == Pipe.ALL or (x.pipe == pipe and first)) and _before(point, x.path)]
        return out

    def _fills(self, t: InstrInfo, c: int) -> list[tuple[Flag, int]]:
        """The flags into t's pipe inside the body at depth ``c`` with a wait before t in t's
        body chain, each with the position in that body of its first set (``_across``)."""
        return [(f, min(x.path[c] for x in f.sets))
                for f in self._body_flags(t.path[:c], t.core) if f.dst == t.pipe
                and any(_before(t.path, w.path, after=True) for w in f.waits)]

    def _drain_point(self, f: Flag, point: tuple) -> tuple | None:
        """Where flag ``f`` (standard) has its destination pipe wait for the work of its
        source pipe at ``point`` (``_across``), or None if it does not."""
        if self._in_body_pair(f):
            return f.waits[0].path if _before(point, f.sets[0].path) else None
        got = self._cached(("drain ends", f.key), lambda: _set_and_last_end(f))
        if got is None or not _before(point, got[0]):
            return None
        return got[1]  # type: ignore[index]

    def _main(self, f: Flag) -> tuple[InstrInfo, InstrInfo] | None:
        """``_main_pair(f)``, cached."""
        return self._cached(("main pair", f.key), lambda: _main_pair(f))  # type: ignore

    def _body_pairs(self, f: Flag) -> list[tuple[InstrInfo, InstrInfo]] | None:
        """``body_pairs(f)``, cached."""
        return self._cached(("body pairs", f.key), lambda: body_pairs(f))  # type: ignore


MAX_DRAIN = 3  # flags chained out of a branch by ``_across``


def _set_and_last_end(f: Flag) -> tuple[tuple, tuple] | None:
    """The path of the one main set of a carried flag and of its last epilogue wait (None:
    not one main set, or no epilogue)."""
    main = [x for x in f.sets if _role(x) == SyncRole.SET]
    ends = [y.path for y in f.waits if _role(y) == SyncRole.EPILOGUE]
    if len(main) != 1 or not ends:
        return None
    return main[0].path, max(ends)


def minimal(alternatives: list[frozenset]) -> list[frozenset]:
    """The alternatives (sets of syncs, any one of which orders some pairs) that contain no
    other one, in their order: a set with more syncs than another orders the same pairs and
    survives fewer drops, so it never decides whether the pairs are ordered."""
    if len(alternatives) < 2:
        return alternatives
    singles: set = set()  # the syncs that alone are an alternative
    kept: list[frozenset] = []
    for a in sorted(set(alternatives), key=len):
        if not singles.isdisjoint(a):
            continue
        if len(a) == 1:
            singles |= a
        elif any(k <= a for k in kept):
            continue
        kept.append(a)
    if len(kept) == len(alternatives):
        return alternatives
    keep = set(kept)
    seen: set = set()
    out = []
    for a in alternatives:
        if a in keep and a not in seen:
            seen.add(a)
            out.append(a)
    return out


def _before(point: tuple, x: tuple, *, after: bool = False) -> bool:
    """Whether statement ``x``, a plain child of its body, runs after (``after``: before)
    every instance of ``point`` in each run of that body: ``point`` lies in the body's
    subtree, in an earlier (later) child."""
    d = len(x) - 1
    if len(point) <= d or point[:d] != x[:d]:
        return False
    return point[d] > x[d] if after else point[d] < x[d]


def _carrying(s: InstrInfo, t: InstrInfo, var: str) -> int | None:
    """The depth of loop ``var`` when it encloses both s and t (the same loop), else None."""
    j = next((j for j, v in enumerate(s.loop_vars) if v == var), None)
    if j is None or j >= len(t.loop_paths) or t.loop_paths[j] != s.loop_paths[j]:
        return None
    return j


def _prefix(c: Cond, var: str) -> bool:
    """Whether condition ``c``, the other variables fixed, holds for a prefix of ``var``'s
    values (``... + k*var ... < n`` with k > 0) or does not depend on ``var``."""
    if var in {v for v, _, _ in c.lhs.mods} or any(var in d.vars() for d, _, _ in c.lhs.divs):
        return False
    coeff = dict(c.lhs.terms).get(var, 0)
    return coeff == 0 or (coeff > 0 and c.op in ("<", "<="))


