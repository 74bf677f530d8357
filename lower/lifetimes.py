"""Buffer lifetimes: first and last use of every buffer copy in program order, loop-aware.

Positions are the program-order numbers of the kernel's Instrs (the ids of
``instances.kernel_instrs``). A lifetime is a closed interval of positions, widened for loops:

* a copy used both inside and outside a loop lives over the loop's whole extent on that side
  (defined before a loop and read in it -> to the loop's end; written in it and read after it
  -> from the loop's start);
* a copy whose first access inside a loop body is a read carries its value from one iteration
  to the next, so it lives over the whole loop;
* uses in mutually exclusive branches (sibling ``If``s whose conditions no iteration satisfies
  together, such as the full-tile and tail-tile versions of a loop body) are followed path by
  path: on each choice of one branch per exclusive group the interval is computed as above
  and the positions of the branches not chosen are cut out of it, so a copy's live set is a
  union of ``segments``. A copy a loop widens (its value crosses that loop's iterations) is
  live over the whole loop, every branch included: the next iteration may take another one.
  Buffers of different branches of one group then never interfere, and the tail version of a
  loop body reuses the space of the full version (see the second example below);
* every copy of a multi-copy (double-buffered) buffer lives over the whole loop its copies
  alternate over (the loops whose variables appear in its copy index) and over the uses of
  every other copy: while one copy is being filled the other is being consumed, so neither
  copy's bytes may go to another buffer anywhere in that loop. Those loops are the kernel's
  *pipelined* loops (``Lifetimes.pipelined``); ``Lifetime.own`` keeps a copy's interval from its
  own uses, for the planner's last-resort fallback.

Before/after, for ``acc = 0; for k: acc += x_ub[k]; store acc``::

    0 dup acc | for k: 1 load x_ub; 2 add acc | 3 store acc
    ->  acc [0, 3] (carried by k), x_ub [1, 2]

and with ``x_ub`` double buffered over ``k`` (``x_ub[k % 2]``), both copies live over ``[1, 2]``
(the whole loop body) and ``k`` is pipelined. With a full and a tail version of one tile::

    for t: if t < 4: 0 load x_ub; 1 t3 = f(x_ub); 2 store t3 | if t == 4: 3 load x_ub;
                     4 t5 = f(x_ub); 5 store t5
    ->  x_ub [0, 1] [3, 4], t3 [1, 2], t5 [4, 5]: t5 may take t3's bytes

*In-place pairs* ``(a, b)``: single-copy buffers of one element size where ``b`` may sit at
exactly ``a``'s offset although their lifetimes touch, because every instruction of the overlap
is an elementwise vector op that reads ``a`` and writes ``b`` over the same elements (AscendC
allows a vector dst to coincide with a source, not to overlap it partially), and those
elements are disjoint between instructions (no read of an ``a`` element already replaced).
``z = x + y`` then needs no third tile. Inside a loop only values made and used by the vector
pipe pair up (a loaded tile shared with a stored one would serialise the next load behind
this store).
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass, replace

from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import Cond, For, If, Instr, Kernel, Region, Stmt
from ascendsched.target.model import Pipe, Scope

Segments = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Lifetime:
    """One buffer copy. ``start``/``end`` are None for a copy that is never used."""

    buffer: str
    copy: int
    scope: Scope
    nbytes: int
    start: int | None
    end: int | None
    first_pipes: frozenset[Pipe]  # pipes of the instructions at the first use
    last_pipes: frozenset[Pipe]  # pipes of the instructions at the last use
    why: str = ""  # how loops widened the interval
    own: Segments | None = None  # multi-copy: this copy's own live segments (before the
    # copies' shared whole-loop span); None when the live set is already the copy's own
    segments: Segments = ()  # the live positions, as sorted disjoint closed intervals within
    # [start, end]; () means the whole of [start, end] (no exclusive branch cuts it)

    @property
    def used(self) -> bool:
        return self.start is not None

    @property
    def spans(self) -> Segments:
        """The live positions: ``segments``, or ``[start, end]`` whole (nothing when unused)."""
        if not self.used:
            return ()
        return self.segments or ((self.start, self.end),)

    def live(self, pos: int) -> bool:
        return any(lo <= pos <= hi for lo, hi in self.spans)

    def overlaps(self, other: Lifetime) -> bool:
        """Both live at one position (of one path through the exclusive branches)."""
        if not self.used or not other.used:
            return False
        if self.end < other.start or other.end < self.start:
            return False
        return any(not (hi < olo or ohi < lo)
                   for lo, hi in self.spans for olo, ohi in other.spans)


@dataclass(frozen=True)
class Lifetimes:
    kernel: str
    entries: tuple[Lifetime, ...]
    positions: tuple[str, ...]  # one line per position: the instruction it numbers
    in_place: frozenset[tuple[str, str]] = frozenset()  # (a, b): b may take a's exact bytes
    pipelined: tuple[tuple[str, int, int], ...] = ()  # (var, first, last) of each loop that a
    # multi-copy buffer alternates over
    loops: tuple[tuple[str, int, int], ...] = ()  # (var, first, last) of every loop

    def pipelined_loop(self, a: Lifetime, b: Lifetime) -> str | None:
        """The innermost pipelined loop holding both used lifetimes (one iteration's work),
        or None."""
        return innermost_loop(self.pipelined, a, b)

    def of(self, buffer: str, copy: int = 0) -> Lifetime:
        for e in self.entries:
            if e.buffer == buffer and e.copy == copy:
                return e
        raise KeyError((buffer, copy))

    def live_at(self, pos: int, scope: Scope | None = None) -> tuple[Lifetime, ...]:
        return tuple(e for e in self.entries if e.live(pos) and (scope is None or e.scope == scope))

    def __str__(self) -> str:
        lines = [f"lifetimes of {self.kernel}:", "  buffer      copy  scope  bytes    live"]
        for e in self.entries:
            live = " ".join(f"[{lo}, {hi}]" for lo, hi in e.spans) if e.used else "unused"
            lines.append(f"  {e.buffer:<11} {e.copy:<5} {e.scope!s:<6} {e.nbytes:<8} {live}"
                         + (f"  ({e.why})" if e.why else ""))
        return "\n".join(lines)


def buffer_lifetimes(kernel: Kernel) -> Lifetimes:
    """First/last use of every buffer copy, widened over loops (see the module docstring)."""
    walk = _Walk(kernel)
    for prog in kernel.programs:
        walk.body(prog.body, (), {v: hi + 1 for v, (_, hi) in
                                  kernel.var_ranges(prog.core).items()})
    entries = []
    pipelined: dict[int, tuple[str, int, int]] = {}
    for b in kernel.buffers:
        copies = []
        for c in range(b.copies):
            uses = walk.uses.get((b.name, c), [])
            if not uses:
                copies.append(Lifetime(b.name, c, b.scope, b.nbytes, None, None,
                                       frozenset(), frozenset()))
                continue
            start, end, segments, why = _live(uses, walk)
            first = min(p for p, _, _ in uses)
            last = max(p for p, _, _ in uses)
            copies.append(Lifetime(
                b.name, c, b.scope, b.nbytes, start, end,
                frozenset(pp for p, pp, _ in uses if p == first),
                frozenset(pp for p, pp, _ in uses if p == last), why,
                segments=segments if len(segments) > 1 else ()))
        alternate = {i: walk.spans[i] for i in walk.alternate.get(b.name, ())}
        if b.copies > 1 and alternate:
            pipelined.update(alternate)
            copies = _whole_loop(copies, walk.uses, list(alternate.values()))
        entries.extend(copies)
    return Lifetimes(kernel.name, tuple(entries), tuple(walk.lines),
                     _in_place_pairs(kernel, entries, walk.at, walk.ranges, walk.loops),
                     tuple(pipelined[i] for i in sorted(pipelined)),
                     tuple(walk.spans[i] for i in sorted(walk.spans)))


def innermost_loop(loops: tuple[tuple[str, int, int], ...], a: Lifetime, b: Lifetime
                   ) -> str | None:
    """The innermost of ``loops`` holding both used lifetimes, or None."""
    got = innermost_span(loops, a, b)
    return got[0] if got is not None else None


def innermost_span(loops: tuple[tuple[str, int, int], ...], a: Lifetime, b: Lifetime
                   ) -> tuple[str, int, int] | None:
    """``innermost_loop`` with its first and last position (a tile loop's variable may name
    the loops of both a full and a tail version: the positions tell them apart)."""
    if not a.used or not b.used:
        return None
    lo, hi = min(a.start, b.start), max(a.end, b.end)
    inside = [(last - first, v, first, last) for v, first, last in loops
              if first <= lo and hi <= last]
    if not inside:
        return None
    _, v, first, last = min(inside)
    return v, first, last


def _whole_loop(copies: list[Lifetime], uses: dict[tuple[str, int], list[tuple[int, Pipe, str]]],
                loops: list[tuple[str, int, int]]) -> list[Lifetime]:
    """Every copy of one multi-copy buffer over the hull of all its copies' lifetimes and the
    loops they alternate over."""
    used = [e for e in copies if e.used]
    if not used:
        return copies
    start = min([e.start for e in used] + [lo for _, lo, _ in loops])
    end = max([e.end for e in used] + [hi for _, _, hi in loops])
    every = [u for e in used for u in uses[(e.buffer, e.copy)]]
    first = min(p for p, _, _ in every)
    last = max(p for p, _, _ in every)
    names = ", ".join(dict.fromkeys(v for v, _, _ in loops))
    out = []
    for e in copies:
        why = ", ".join(w for w in (e.why, f"copies alternate over loop {names}") if w)
        out.append(replace(
            e, start=start, end=end, why=why,
            first_pipes=frozenset(p for q, p, _ in every if q == first),
            last_pipes=frozenset(p for q, p, _ in every if q == last),
            own=e.spans if e.used else None, segments=()))
    return out


_IN_PLACE_OPS = frozenset({"vec_binary", "vec_unary", "vec_scalar", "vec_cast"})


def _in_place_pairs(kernel: Kernel, entries: list[Lifetime], at: list[Instr],
                    ranges: list[dict[str, int]], loops: list[tuple[str, int, int]]
                    ) -> frozenset[tuple[str, str]]:
    """In a loop only between vector-made and vector-used values: sharing a DMA-loaded tile
    with a DMA-stored one would make the next tile's load wait for this tile's store."""
    one = {e.buffer: e for e in entries if e.used and kernel.buffer_map[e.buffer].copies == 1}
    out = set()
    for a in one.values():
        for b in one.values():
            if a.buffer == b.buffer or a.scope != b.scope or not a.overlaps(b):
                continue
            ba, bb = kernel.buffer_map[a.buffer], kernel.buffer_map[b.buffer]
            if ba.dtype.bytes != bb.dtype.bytes:
                continue
            # every stretch where both live (one per path through exclusive branches): b
            # starts while a lives and outlives it, and the window between is in place
            meets = [(sa, sb) for sa in a.spans for sb in b.spans
                     if not (sa[1] < sb[0] or sb[1] < sa[0])]
            if not all(sa[0] < sb[0] <= sa[1] < sb[1] for sa, sb in meets):
                continue
            in_loop = any(lo <= sb[0] <= hi for _, sb in meets for _, lo, hi in loops)
            if in_loop and not (a.first_pipes == b.last_pipes == frozenset({Pipe.V})):
                continue
            if all(_replaces(at[sb[0]:sa[1] + 1], ranges[sb[0]:sa[1] + 1], a.buffer, b.buffer)
                   for sa, sb in meets):
                out.add((a.buffer, b.buffer))
    return frozenset(out)


def _replaces(window: list[Instr], ranges: list[dict[str, int]], a: str, b: str) -> bool:
    """Every instruction touching a or b reads a and writes b over the same elements, and no
    instruction reads an element of a that an earlier one replaced (``ranges``: the extents
    of each instruction's enclosing loops)."""
    replaced: list[tuple[Region, dict[str, int]]] = []
    for s, env in zip(window, ranges, strict=True):
        ra = [r for r in s.reads if r.tensor == a]
        wb = [r for r in s.writes if r.tensor == b]
        if not ra and not wb and not any(r.tensor in (a, b) for r in s.writes + s.reads):
            continue
        if (s.op not in _IN_PLACE_OPS or len(ra) != 1 or len(wb) != 1
                or (ra[0].offset, ra[0].dims, ra[0].copy) != (wb[0].offset, wb[0].dims, wb[0].copy)
                or any(r.tensor == b for r in s.reads)
                or any(r.tensor == a for r in s.writes)):
            return False
        if any(_may_overlap(ra[0], env, w, wenv) for w, wenv in replaced):
            return False
        replaced.append((wb[0], env))
    return bool(replaced)


def _may_overlap(r: Region, r_ranges: dict[str, int], w: Region, w_ranges: dict[str, int]
                 ) -> bool:
    """Element hulls of two regions intersect, over all iterations of the loops (``ranges``:
    variable -> extent) their offsets use; any other symbolic offset: assume they may. Two
    regions of the same interleaved shape (repeats of ``lanes`` elements every ``step``, the
    two phases of lower/vector_instrs.py's phased rows) are told apart exactly first."""
    if _interleaved_apart(r, w):
        return False
    def hull(x: Region, ranges: dict[str, int]) -> tuple[int, int] | None:
        off = x.offset
        if off.mods or off.divs or any(v not in ranges for v, _ in off.terms):
            return None
        steps = [c * max(ranges[v] - 1, 0) for v, c in off.terms]
        lo = off.const + sum(min(0, s) for s in steps)
        hi = off.const + sum(max(0, s) for s in steps)
        return lo, hi + sum((d.extent - 1) * d.stride for d in (x.dims or ()))

    hr, hw = hull(r, r_ranges), hull(w, w_ranges)
    if hr is None or hw is None:
        return True
    (a0, a1), (b0, b1) = hr, hw
    return not (a1 < b0 or b1 < a0)


def _interleaved_apart(r: Region, w: Region) -> bool:
    """Both regions are repeats of ``lanes`` contiguous elements every ``step`` (the same
    shape; their repeat counts may differ), every loop term of their offsets moves by whole steps, and the constant
    offsets differ by a residue modulo ``step`` that keeps the lanes apart: element
    ``o1 + k1*step + j1 == o2 + k2*step + j2`` needs ``(o1 - o2) mod step`` within
    ``lanes - 1`` of 0, so no element is shared."""
    if len(r.dims) != 2 or len(w.dims) != 2 or r.copy != w.copy:
        return False
    step, lanes = r.dims[0].stride, r.dims[1].extent
    if (w.dims[0].stride, w.dims[1].extent) != (step, lanes) or step <= lanes or \
            r.dims[1].stride != 1 or w.dims[1].stride != 1:
        return False
    for off in (r.offset, w.offset):
        if off.mods or off.divs or any(c % step for _, c in off.terms):
            return False
    d = (r.offset.const - w.offset.const) % step
    return lanes <= d <= step - lanes


# --------------------------------------------------------------------------- private helpers
class _Walk:
    """Numbers Instrs, records loop extents in positions and every (position, pipe, R/W) use."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.pos = 0
        self.uses: dict[tuple[str, int], list[tuple[int, Pipe, str]]] = {}
        self.loops: list[tuple[str, int, int]] = []  # (var, first position, last position)
        self.lines: list[str] = []
        self.at: list[Instr] = []  # the Instr at each position
        self.spans: dict[int, tuple[str, int, int]] = {}  # loop number -> (var, first, last)
        self.alternate: dict[str, set[int]] = {}  # buffer -> loops its copy index walks
        self._open: list[tuple[int, str]] = []  # (loop number, var) of the enclosing loops
        self._loops_seen = 0
        self.ranges: list[dict[str, int]] = []  # its enclosing loops: variable -> extent
        self.ctx: list[tuple[tuple[int, int], ...]] = []  # per position: the (group, branch)
        # of every exclusive branch around it
        self.branches: dict[tuple[int, int], tuple[int, int]] = {}  # (group, branch) ->
        # its first and last position (branches without instructions are left out)
        self.group_size: dict[int, int] = {}  # exclusive group -> its number of branches
        self._ctx: list[tuple[int, int]] = []

    def body(self, body: tuple[Stmt, ...], loops: tuple[For, ...], ranges: dict[str, int]
             ) -> None:
        branch = self._exclusive_groups(body)
        for i, s in enumerate(body):
            if isinstance(s, Instr):
                self.instr(s, ranges)
            elif isinstance(s, For):
                first = self.pos
                number = self._loops_seen
                self._loops_seen += 1
                self._open.append((number, s.var))
                self.body(s.body, loops + (s,), {**ranges, s.var: s.extent})
                self._open.pop()
                if self.pos > first:
                    self.loops.append((s.var, first, self.pos - 1))
                    self.spans[number] = (s.var, first, self.pos - 1)
            elif isinstance(s, If):
                if i not in branch:
                    self.body(s.body, loops, ranges)
                    continue
                first = self.pos
                self._ctx.append(branch[i])
                self.body(s.body, loops, ranges)
                self._ctx.pop()
                if self.pos > first:
                    self.branches[branch[i]] = (first, self.pos - 1)

    def _exclusive_groups(self, body: tuple[Stmt, ...]) -> dict[int, tuple[int, int]]:
        """Statement index -> (group, branch) of the sibling Ifs of ``body`` that fall into
        groups of two or more pairwise exclusive ones (at most one runs per execution of
        ``body``: their conditions read only enclosing loop variables, fixed meanwhile)."""
        groups: list[list[int]] = []
        for i, s in enumerate(body):
            if not isinstance(s, If):
                continue
            for g in groups:
                if all(_exclusive(s, body[j]) for j in g):  # type: ignore[arg-type]
                    g.append(i)
                    break
            else:
                groups.append([i])
        out: dict[int, tuple[int, int]] = {}
        for g in groups:
            if len(g) < 2:
                continue
            number = len(self.group_size)
            self.group_size[number] = len(g)
            out.update({i: (number, b) for b, i in enumerate(g)})
        return out

    def instr(self, s: Instr, ranges: dict[str, int]) -> None:
        self.lines.append(f"S{self.pos} [{s.pipe}] {s.op}" + (f" ({s.comment})" if s.comment else ""))
        self.at.append(s)
        self.ranges.append(ranges)
        self.ctx.append(tuple(self._ctx))
        for kind, regions in (("R", s.reads), ("W", s.writes)):
            for r in regions:
                buf = self.kernel.buffer_map.get(r.tensor)
                if buf is None:
                    continue
                for c in _copies(r, buf.copies, ranges):
                    self.uses.setdefault((r.tensor, c), []).append((self.pos, s.pipe, kind))
                if buf.copies > 1 and not r.copy.is_const:
                    walked = r.copy.vars()
                    self.alternate.setdefault(r.tensor, set()).update(
                        n for n, v in self._open if v in walked)
        self.pos += 1


def _copies(r: Region, copies: int, ranges: dict[str, int]) -> list[int]:
    """The copies a region may touch: evaluated over its variables' ranges when few."""
    if r.copy.is_const:
        return [r.copy.const]
    names = sorted(r.copy.vars())
    sizes = [_period(r.copy, v, copies, ranges.get(v, 0)) for v in names]
    total = 1
    for n in sizes:
        total *= n
    if total == 0 or total > 4096 or any(v not in ranges for v in names):
        return list(range(copies))
    seen = set()
    for vals in itertools.product(*(range(n) for n in sizes)):
        seen.add(r.copy.evaluate(dict(zip(names, vals, strict=True))) % copies)
        if len(seen) == copies:  # every copy: the rest cannot add one (a mixed kernel's
            break  # workspace slot over its blocks and trips: most of its lifetimes' time)
    return sorted(seen)


def _period(e: Affine, var: str, copies: int, extent: int) -> int:
    """How many values of ``var`` (from 0, of ``extent``) give every value ``e % copies`` takes
    as ``var`` runs: a period of it in ``var`` when ``e`` has no floor division (its terms in
    ``var`` repeat mod ``copies`` and its ``var % m`` terms every ``m``), else the extent. So
    the copies a region touches cost the same to list whatever the loop's trip count."""
    if e.divs or any(not isinstance(m, int) for v, m, _ in e.mods if v == var):
        return extent
    return min(extent, math.lcm(copies, *[m for v, m, _ in e.mods if v == var]))


def _exclusive(a: If, b: If) -> bool:
    """No values of the variables satisfy both conditions: one comparison of each bounds the
    same affine expression to disjoint ranges (``i < 4`` and ``i == 4``)."""
    def values(c: Cond) -> tuple[float, float]:
        return {"<": (-math.inf, c.rhs - 1), "<=": (-math.inf, c.rhs), "==": (c.rhs, c.rhs),
                ">=": (c.rhs, math.inf)}[c.op]

    for ca in a.conds:
        for cb in b.conds:
            if ca.lhs == cb.lhs:
                (lo_a, hi_a), (lo_b, hi_b) = values(ca), values(cb)
                if hi_a < lo_b or hi_b < lo_a:
                    return True
    return False


_MAX_PATHS = 256  # choices of one branch per exclusive group followed per buffer; beyond it,
# the buffer lives over its whole interval (as if every branch ran)


def _live(uses: list[tuple[int, Pipe, str]], walk: _Walk) -> tuple[int, int, Segments, str]:
    """(start, end, segments, why) of one buffer copy: the loop-widened interval of its uses on
    every path through the exclusive groups they sit in, less the positions of the branches
    each path does not take, plus the whole of every loop whose iterations the value crosses
    (another iteration may take another branch)."""
    start, end, why, _ = _widen(uses, walk.loops)
    groups = sorted({g for p, _, _ in uses for g, _ in walk.ctx[p]})
    if not groups:
        return start, end, ((start, end),), why
    if math.prod(walk.group_size[g] for g in groups) > _MAX_PATHS:
        # too many paths to follow: the value may go from a branch of one iteration to
        # another branch of a later one, so it lives over every loop around such a use
        inside = [(lo, hi) for _, lo, hi in walk.loops
                  if any(walk.ctx[p] and lo <= p <= hi for p, _, _ in uses)]
        lo, hi = min([start] + [a for a, _ in inside]), max([end] + [b for _, b in inside])
        return lo, hi, ((lo, hi),), ", ".join(
            x for x in (why, f"in {len(groups)} groups of exclusive branches: whole loops") if x)
    whys = [why] if why else []
    spans: list[tuple[int, int]] = []
    for choice in itertools.product(*(range(walk.group_size[g]) for g in groups)):
        path = dict(zip(groups, choice, strict=True))
        mine = [u for u in uses if all(path[g] == b for g, b in walk.ctx[u[0]])]
        if not mine:
            continue
        lo, hi, w, whole = _widen(mine, walk.loops)
        if w:
            whys.append(w)
        cut = sorted(walk.branches[(g, b)] for g in groups for b in range(walk.group_size[g])
                     if b != path[g] and (g, b) in walk.branches)
        spans.extend(_subtract((lo, hi), cut))
        spans.extend(whole)
    segments = _merge(spans)
    parts = dict.fromkeys(p for w in whys for p in w.split(", "))
    return segments[0][0], segments[-1][1], segments, ", ".join(parts)


def _subtract(span: tuple[int, int], cuts: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``span`` less the closed intervals ``cuts`` (sorted by start)."""
    out = []
    lo, hi = span
    for c_lo, c_hi in cuts:
        if c_hi < lo or c_lo > hi:
            continue
        if c_lo > lo:
            out.append((lo, c_lo - 1))
        lo = max(lo, c_hi + 1)
    if lo <= hi:
        out.append((lo, hi))
    return out


def _merge(spans: list[tuple[int, int]]) -> Segments:
    """Sorted disjoint closed intervals covering ``spans`` (neighbours joined)."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _widen(uses: list[tuple[int, Pipe, str]], loops: list[tuple[str, int, int]]
           ) -> tuple[int, int, str, list[tuple[int, int]]]:
    """(start, end, why, spans of the loops whose iterations the value crosses)."""
    at = sorted((p, k) for p, _, k in uses)  # by position, a read before a write at one
    places = [p for p, _ in at]
    start, end = places[0], places[-1]
    why: list[str] = []
    crossed: dict[tuple[int, int], None] = {}
    changed = True
    while changed:
        changed = False
        for var, lo, hi in loops:  # inner loops come first (appended on exit)
            first = bisect.bisect_left(places, lo)
            if first == len(places) or places[first] > hi:
                continue
            # the body's first access is a read (reads of one instruction precede its
            # writes): the value crosses iterations
            carried = at[first][1] == "R"
            if carried or start < lo or end > hi:
                crossed[(lo, hi)] = None
            new_start, new_end = start, end
            if carried or start < lo:
                new_end = max(end, hi)
            if carried or end > hi:
                new_start = min(start, lo)
            if (new_start, new_end) != (start, end):
                start, end = new_start, new_end
                why.append(f"{'carried by' if carried else 'spans'} loop {var}")
                changed = True
    return start, end, ", ".join(dict.fromkeys(why)), list(crossed)
