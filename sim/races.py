"""Races: conflicting accesses of a replayed trace that happens-before leaves unordered.

Two accesses race when they touch overlapping bytes of one space (on-chip spaces per block and
core, GM across blocks), at least one writes, and neither happens before the other
(``replay.py``). Accesses are checked in simulation order (a linear extension of
happens-before) against, per byte segment, the latest write and read of each (stream, pipe) not
yet covered by an ordered later write (FastTrack style): every racy location is reported, but
an access hidden behind a later access of the same pipe is reported through that later access.
Each race is one record per (earlier access, later access, kind) with the byte range and the
number of racy bytes (``check_report.Race``)::

    WAR race on UB:z_ub:0 bytes [0, 256) (256 B overlap): copy_ub_gm #5 [MTE3] (block 0 AIV)
    and vec_binary #9 [V] (block 0 AIV) are not ordered
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from ascendsched.sim.check_report import EventRef, Race
from ascendsched.sim.replay import Replay

__all__ = ["find_races"]


def find_races(r: Replay, max_races: int) -> tuple[list[Race], bool]:
    """The races of the simulated replay ``r``, and whether the search stopped at
    ``max_races``."""
    maps: dict[tuple, _SpaceMap] = {}
    found: dict[tuple[int, int, str], list] = {}
    for x in r.order:
        e = r.ev[x]
        if not e.reads and not e.writes:
            continue
        skey = (e.block, e.core, e.pipe)
        for is_write, ivs in ((False, e.reads), (True, e.writes)):
            for space, lo, hi in ivs:
                mkey = (space,) if space.startswith("GM") else (e.block, e.core, space)
                smap = maps.get(mkey)
                if smap is None:
                    smap = maps[mkey] = _SpaceMap()
                for seg in smap.segments(lo, hi):
                    _access(r, x, is_write, skey, space, smap, seg, found)
                if len(found) >= max_races:
                    return _race_records(r, found), True
    return _race_records(r, found), False


def _access(r: Replay, x: int, is_write: bool, skey: tuple, space: str, smap: _SpaceMap,
            seg: int, found: dict) -> None:
    """Access ``x`` to segment ``seg``: note its races with the segment's unordered accesses,
    then record it (a write drops the accesses it is ordered after)."""
    writes, reads = smap.states[seg]
    lo, hi = smap.starts[seg], smap.ends[seg]

    def note(a: int, kind: str) -> None:
        rec = found.get((a, x, kind))
        if rec is None:
            found[(a, x, kind)] = [space, lo, hi, hi - lo]
        else:
            rec[1], rec[2], rec[3] = min(rec[1], lo), max(rec[2], hi), rec[3] + hi - lo

    for w in writes.values():
        if w != x and not r.hb(w, x):
            note(w, "WAW" if is_write else "RAW")
    if is_write:
        for rd in reads.values():
            if rd != x and not r.hb(rd, x):
                note(rd, "WAR")
        smap.states[seg] = (
            {k: w for k, w in writes.items() if not r.hb(w, x)} | {skey: x},
            {k: rd for k, rd in reads.items() if not r.hb(rd, x)},
        )
    else:
        reads[skey] = x


def _race_records(r: Replay, found: dict) -> list[Race]:
    out = []
    for (a, b, kind), (space, lo, hi, n) in found.items():
        out.append(Race(kind, space, lo, hi, n, EventRef.of(r.ev[a]), EventRef.of(r.ev[b])))
    return out


class _SpaceMap:
    """Disjoint byte segments of one space, each with its access state (writes, reads)."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.states: list[tuple[dict, dict]] = []

    def _split(self, x: int) -> None:
        j = bisect_right(self.starts, x) - 1
        if j >= 0 and self.starts[j] < x < self.ends[j]:
            w, r = self.states[j]
            self.starts.insert(j + 1, x)
            self.ends.insert(j + 1, self.ends[j])
            self.ends[j] = x
            self.states.insert(j + 1, (dict(w), dict(r)))

    def segments(self, lo: int, hi: int) -> list[int]:
        """Indices of the segments exactly covering [lo, hi), created where missing."""
        self._split(lo)
        self._split(hi)
        i = bisect_left(self.starts, lo)
        pos, out = lo, []
        while pos < hi:
            if i < len(self.starts) and self.starts[i] == pos:
                out.append(i)
                pos = self.ends[i]
            else:
                nxt = self.starts[i] if i < len(self.starts) and self.starts[i] < hi else hi
                self.starts.insert(i, pos)
                self.ends.insert(i, nxt)
                self.states.insert(i, ({}, {}))
                out.append(i)
                pos = nxt
            i += 1
        return out
