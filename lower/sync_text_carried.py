"""What the program text alone proves about the pairs a loop carries (``sync_text.py``'s
other half; the same contract: exact or "unknown", never a wrong "ordered").

For a dependence s -> t carried by a common loop (s in an earlier iteration, the loops outside
it equal), any one of these orders every pair that loop carries:

* ``_carried_cover``: a barrier or an in-body flag pair beside the source or the sink inside
  the loop;
* ``_carried_flag_cover``: a carried pattern in the loop's body whose id period fits the
  distance, directly from s's pipe or relayed by an in-body pair;
* ``_carried_drain_cover``: a chain draining s's pipe onto t's inside the loop's body;
* ``_hoisted_cover``: a carried pattern hoisted out of the loop, for pairs on one buffer copy
  (its id is that copy).
"""

from __future__ import annotations

from ascendsched.lower.flag_patterns import _eid, _mod_id, _role
from ascendsched.lower.instances import InstrInfo
from ascendsched.lower.sync_ir import SyncRole
from ascendsched.lower.sync_text import SyncText, _before, _carrying, _prefix
from ascendsched.target.model import Pipe


class CarriedText(SyncText):
    """``SyncText`` with the carried-pair rules (see the module doc)."""

    def _carried_cover(self, s: InstrInfo, t: InstrInfo, var: str, dropped: frozenset
                       ) -> tuple | None:
        """A barrier or flag (key) that orders, without isl, every s -> t pair carried by the
        common loop ``var`` (s in an earlier iteration of it, the loops outside it equal), or
        None: a barrier, or a set and its wait placed in one body (set first), in a body
        inside that loop that also holds s, after s's branch, or holds t, before t's branch.
        It runs in every iteration in which s (or t) runs, after s in s's iteration or before
        t in t's; the wait meets the set of its own run (the pattern alternates), and pipe
        order does the rest."""
        for key in self._cached(("carried", s.id, t.id, var),
                                lambda: self._beside(s, t, var)):
            if key not in dropped:
                return key
        return None

    def _carried_flag_cover(self, s: InstrInfo, t: InstrInfo, var: str, distance: int,
                            dropped: frozenset) -> frozenset | None:
        """The flags (keys) that order, without isl, every s -> t pair carried by the common
        loop ``var`` at a distance of at least ``distance`` iterations, or None: the carried
        pattern ``insert_sync`` places (``standard_pattern``), its wait and set in one body
        inside that loop and no deeper one, under Ifs that hold for a prefix of its iterations
        (so they run in consecutive iterations), the set after s's branch and the wait before
        t's, the id constant or ``base + var % m`` with ``m <= distance``. Then the wait before
        t in iteration k' meets the set of iteration k' - m (alternation; the prologue sets
        serve the first m), which follows s of every iteration k <= k' - m on s's pipe; so
        every pair with k' - k >= m.

        *Relayed*: the carried flag may start on another pipe q if an in-body pair s's pipe ->
        q has its set after s's branch and its wait in the carried set's body before that set:
        in each iteration, q waits for that iteration's s work before it reaches the set
        (the pair's body holds s, so every run of s is followed by a run of its wait). This is
        how a double-buffered slot is reused: load -> use (in-body), use -> next load (carried)."""
        if distance < 1:
            return None
        for keys, period in self._cached(("carried flags", s.id, t.id, var),
                                         lambda: self._carried_flags(s, t, var)):
            if not keys & dropped and period <= distance:
                return keys
        return None

    def _carried_flags(self, s: InstrInfo, t: InstrInfo, var: str
                       ) -> list[tuple[frozenset, int]]:
        j = _carrying(s, t, var)
        if j is None:
            return []
        bars, direct, relays = self._menu(s.pipe, t.pipe, t.core)
        out = []
        for f in direct + relays:
            main = self._main(f)
            if main is None:
                continue
            x, y = main
            if x.loop_paths != s.loop_paths[:j + 1] or \
                    not all(_prefix(c, var) for c in x.conds):
                continue  # a deeper loop, or Ifs that may skip an iteration between two runs
            if not _before(t.path, y.path, after=True):
                continue
            eid = _eid(x)
            mod = _mod_id(eid)
            period = 1 if eid.is_const else mod[1] if mod and mod[0] == var else None
            if period is None or not self._standard(f):
                continue
            out += [(keys, period) for keys in self._reaching(s, f, x, t.core)]
        return out

    def _carried_drain_cover(self, s: InstrInfo, t: InstrInfo, var: str, dropped: frozenset
                             ) -> frozenset | None:
        """The syncs (keys) that order, without isl, every s -> t pair carried by the common
        loop ``var``, or None: a chain that drains s's pipe onto t's inside the loop's body
        (``_drained``: an in-body pair, a carried pattern nested deeper at its last epilogue
        wait, a barrier). It completes in the iteration of s, so before every later one."""
        def make() -> list[frozenset]:
            j = _carrying(s, t, var)
            if j is None:
                return []
            c = len(s.loop_paths[j])  # the loop's body is s.path[:c]
            drained = self._cached(("drained", s.id, c), lambda: self._drained(s, c))
            return [keys for pipe, _, keys in drained if pipe in (t.pipe, Pipe.ALL)]

        for keys in self._cached(("carried drains", s.id, t.id, var), make):
            if not keys & dropped:
                return keys
        return None

    def _hoisted_cover(self, s: InstrInfo, t: InstrInfo, var: str,
                       same: tuple[str, int] | None, dropped: frozenset) -> frozenset | None:
        """The flags (keys) that order, without isl, every s -> t pair carried by the common
        loop ``var`` when every pair has equal ``u % m`` on both sides (``same`` = (u, m): the
        same buffer copy, or for a double-set item the same id; None: not known), or None: the
        carried pattern (``standard_pattern``) with its set after s and its wait before t in
        one body ``X`` inside that loop, its prologue and epilogue hoisted out of the loop, id
        ``base + u % m`` (or a constant), directly from s's pipe or relayed by an in-body pair
        (``_carried_flag_cover``). Per id, the pattern alternates over every run of ``X`` in one
        run of the prologue's body: the wait in t's run B meets the set of the last run before
        B with that id. s's run A comes before B (the loop carries the pair) and has the same
        id, so that set is A's or a later one, issued after s on s's pipe (or on the relay
        pipe after its wait for s). A channel shared by disjoint bodies (``body_pairs``):
        the set in s's body and a wait of the same id expression in t's; per id the runs of
        all its bodies alternate, so the same holds with "the last run of any body"."""
        for keys, mod in self._cached(("hoisted", s.id, t.id, var),
                                      lambda: self._hoisted(s, t, var)):
            if (mod is None or mod == same) and not keys & dropped:
                return keys
        return None

    def _hoisted(self, s: InstrInfo, t: InstrInfo, var: str
                 ) -> list[tuple[frozenset, tuple[str, int] | None]]:
        j = _carrying(s, t, var)
        if j is None:
            return []
        loop = s.loop_paths[j]
        _, direct, relays = self._menu(s.pipe, t.pipe, t.core)
        out: list[tuple[frozenset, tuple[str, int] | None]] = []
        for f in direct + relays:
            pro = [x for x in f.sets if _role(x) == SyncRole.PROLOGUE]
            if not pro or not self._standard(f):
                continue
            pairs = self._body_pairs(f) or []
            outer = pro[0].path[:-1]
            if len(outer) >= len(loop) or loop[:len(outer)] != outer:
                continue  # the prologue not hoisted out of the loop
            waits = [y for _, y in pairs if _before(t.path, y.path, after=True)]
            for x, _ in pairs:
                if x.path[:len(loop)] != loop:
                    continue  # not inside the loop's body
                eid = _eid(x)
                assert eid is not None
                mod = None if eid.is_const else _mod_id(eid)
                if not eid.is_const and (mod is None or mod[0] not in x.loop_vars):
                    continue
                if not any(_eid(y) == eid and (mod is None or mod[0] in y.loop_vars)
                           for y in waits):
                    continue
                out += [(keys, mod) for keys in self._reaching(s, f, x, t.core)]
        return out

    def _beside(self, s: InstrInfo, t: InstrInfo, var: str) -> list[tuple]:
        """Every barrier or in-body flag pair of ``_carried_cover``, whatever is dropped."""
        j = _carrying(s, t, var)
        if j is None:
            return []
        loop = s.loop_paths[j]

        def beside(x: InstrInfo, y: InstrInfo) -> bool:
            """x..y (x == y: a barrier) in a body inside the loop that holds s, after s's
            branch, or holds t, before t's branch: they run in the same iteration of the loop
            (and of every loop inside it around that body) as s, after it, or as t, before it."""
            body = x.path[:-1]
            if len(body) <= len(loop) or body[:len(loop)] != loop:
                return False  # not inside the loop's body
            return _before(s.path, x.path) or _before(t.path, y.path, after=True)

        bars, ones, _ = self._menu(s.pipe, t.pipe, t.core)
        out = [key for key, x in bars if beside(x, x)]
        for f in ones:  # a pair placed in one body, set before wait: the wait meets that set
            if self._in_body_pair(f) and beside(*f.sets, *f.waits):
                out.append(f.key)
        return out
