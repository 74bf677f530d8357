"""Memory planning: a byte offset for every buffer copy, per scope, reusing dead space.

Two packings run per scope and the better one is kept (smaller peak, then fewer new cross-pipe
dependences):

* ``first-fit-decreasing``: largest copies first, each at the lowest aligned offset free of
  every copy whose lifetime overlaps it;
* ``best-fit-by-start``: copies in order of first use, each in the tightest free gap.

Both prefer, among offsets that do not raise the scope's peak, reuse that adds no new
cross-pipe dependence: the dead copy's last user and the new copy's first user are on the same
pipe (bishengir reuses within one pipe first). Offsets are multiples of the scope's alignment;
the peak must fit the scope's *usable* bytes, else :class:`CapacityError` names the copies live
at the peak. Before/after, for row_max_sub::

    UB x_ub 4096 [0,3], m_ub 64 [1,2], mb_ub 512 [2,3], y_ub 4096 [3,4]
    ->  x_ub@0, y_ub@4096, m_ub@4096 (dead before y_ub, both V), mb_ub@8192: peak 8704 B
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ascendsched.errors import CapacityError
from ascendsched.lower.ir import Kernel
from ascendsched.lower.lifetimes import Lifetime, Lifetimes
from ascendsched.target.model import Scope, Target


@dataclass(frozen=True)
class Placement:
    buffer: str
    copy: int
    scope: Scope
    offset: int
    size: int  # bytes reserved: one copy rounded up to the scope alignment
    start: int | None
    end: int | None


@dataclass(frozen=True)
class ScopeUsage:
    scope: Scope
    peak: int  # bytes from the scope base to the end of the highest placed copy
    total: int  # sum of all copies: what no reuse would need
    usable: int
    strategy: str
    cross_pipe_reuses: int  # address reuses that add a dependence between two pipes


@dataclass(frozen=True)
class MemoryPlan:
    kernel: str
    placements: tuple[Placement, ...]
    usage: tuple[ScopeUsage, ...]

    def offsets(self, buffer: str) -> tuple[int, ...]:
        ps = sorted((p for p in self.placements if p.buffer == buffer), key=lambda p: p.copy)
        if not ps:
            raise KeyError(buffer)
        return tuple(p.offset for p in ps)

    def peak(self, scope: Scope) -> int:
        return next((u.peak for u in self.usage if u.scope == scope), 0)

    def total(self, scope: Scope) -> int:
        return next((u.total for u in self.usage if u.scope == scope), 0)

    def __str__(self) -> str:
        lines = [f"memory plan of {self.kernel}:",
                 "  buffer      copy  scope  offset   size     live"]
        for p in self.placements:
            live = f"[{p.start}, {p.end}]" if p.start is not None else "unused"
            lines.append(f"  {p.buffer:<11} {p.copy:<5} {p.scope!s:<6} {p.offset:<8} "
                         f"{p.size:<8} {live}")
        for u in self.usage:
            lines.append(f"  {u.scope}: peak {u.peak} B of {u.usable} B usable; all buffers "
                         f"without reuse {u.total} B ({u.strategy}, {u.cross_pipe_reuses} "
                         "cross-pipe reuses)")
        return "\n".join(lines)


def plan_memory(kernel: Kernel, lifetimes: Lifetimes, target: Target) -> MemoryPlan:
    """Offsets for every buffer copy of ``kernel``; CapacityError if a scope overflows."""
    placements: list[Placement] = []
    usage: list[ScopeUsage] = []
    scopes = list(dict.fromkeys(e.scope for e in lifetimes.entries))
    for scope in scopes:
        spec = target.scope(scope)
        items = [e for e in lifetimes.entries if e.scope == scope]
        sizes = {(e.buffer, e.copy): _round_up(max(e.nbytes, 1), spec.alignment) for e in items}
        best: tuple[tuple[int, int], str, dict[tuple[str, int], int]] | None = None
        for name, order, pick in _STRATEGIES:
            offs = _pack(sorted(items, key=lambda e, o=order: o(e, sizes)), sizes,
                         spec.alignment, pick, lifetimes.in_place)
            peak = max((offs[k] + sizes[k] for k in offs), default=0)
            score = (peak, _cross_pipe_reuses(items, offs, sizes))
            if best is None or score < best[0]:
                best = (score, name, offs)
        assert best is not None
        (peak, reuses), name, offs = best
        if peak > spec.usable:
            raise CapacityError(_overflow_message(kernel, lifetimes, scope, items, sizes, peak,
                                                  spec.usable, spec.capacity))
        for e in items:
            placements.append(Placement(e.buffer, e.copy, scope, offs[(e.buffer, e.copy)],
                                        sizes[(e.buffer, e.copy)], e.start, e.end))
        usage.append(ScopeUsage(scope, peak, sum(sizes.values()), spec.usable, name, reuses))
    return MemoryPlan(kernel.name, tuple(placements), tuple(usage))


# --------------------------------------------------------------------------- private helpers
_Key = tuple[str, int]


def _round_up(n: int, a: int) -> int:
    return -(-n // a) * a


def _first_fit_order(e: Lifetime, sizes: dict[_Key, int]) -> tuple:
    return (-sizes[(e.buffer, e.copy)], e.start if e.used else -1, e.buffer, e.copy)


def _start_order(e: Lifetime, sizes: dict[_Key, int]) -> tuple:
    return (e.start if e.used else -1, -sizes[(e.buffer, e.copy)], e.buffer, e.copy)


def _lowest(cands: list[tuple[int, int, int]]) -> tuple[int, int, int]:
    return min(cands, key=lambda c: c[0])


def _tightest(cands: list[tuple[int, int, int]]) -> tuple[int, int, int]:
    return min(cands, key=lambda c: (c[2], c[0]))


# (name, order of placement, choice among feasible (offset, cross-pipe cost, gap) candidates)
_STRATEGIES: tuple[tuple[str, Callable, Callable], ...] = (
    ("first-fit-decreasing", _first_fit_order, _lowest),
    ("best-fit-by-start", _start_order, _tightest),
)


def _pack(items: list[Lifetime], sizes: dict[_Key, int], align: int,
          pick: Callable[[list[tuple[int, int, int]]], tuple[int, int, int]],
          in_place: frozenset[tuple[str, str]] = frozenset()) -> dict[_Key, int]:
    placed: list[tuple[Lifetime, int, int]] = []  # (lifetime, offset, size)
    offs: dict[_Key, int] = {}
    for e in items:
        size = sizes[(e.buffer, e.copy)]
        if not e.used:
            offs[(e.buffer, e.copy)] = 0  # never touched: any address will do
            continue
        peak = max((o + s for _, o, s in placed), default=0)
        # a live in-place partner does not conflict at exactly its own offset
        partner = {(p.buffer, o) for p, o, _ in placed if (p.buffer, e.buffer) in in_place
                   or (e.buffer, p.buffer) in in_place}
        live = [(p.buffer, o, s) for p, o, s in placed if p.overlaps(e)]
        cands: list[tuple[int, int, int]] = []
        for off in sorted({0} | {_round_up(o + s, align) for _, o, s in placed}
                          | {o for _, o in partner}):
            if any(off < o + s and o < off + size and (b, off) not in partner
                   for b, o, s in live):
                continue
            nxt = min((o for _, o, _ in live if o >= off + size), default=max(peak, off + size))
            cost = sum(_reuse_cost(p, e) for p, o, s in placed
                       if p.used and not p.overlaps(e) and off < o + s and o < off + size)
            cands.append((off, cost, nxt - off - size))
        within = [c for c in cands if c[0] + size <= peak]
        free = [c for c in within if c[1] == 0]
        off = pick(free or within or cands)[0]
        placed.append((e, off, size))
        offs[(e.buffer, e.copy)] = off
    return offs


def _reuse_cost(a: Lifetime, b: Lifetime) -> int:
    """1 when sharing bytes between a and b adds a dependence between two different pipes."""
    first, second = (a, b) if a.end < b.start else (b, a)
    pipes = first.last_pipes | second.first_pipes
    return 0 if len(pipes) == 1 else 1


def _cross_pipe_reuses(items: list[Lifetime], offs: dict[_Key, int],
                       sizes: dict[_Key, int]) -> int:
    n = 0
    used = [e for e in items if e.used]
    for i, a in enumerate(used):
        for b in used[i + 1:]:
            oa, ob = offs[(a.buffer, a.copy)], offs[(b.buffer, b.copy)]
            if a.overlaps(b):
                continue  # in-place partners: one instruction reads one and writes the other
            if oa < ob + sizes[(b.buffer, b.copy)] and ob < oa + sizes[(a.buffer, a.copy)]:
                n += _reuse_cost(a, b)
    return n


def _overflow_message(kernel: Kernel, lifetimes: Lifetimes, scope: Scope, items: list[Lifetime],
                      sizes: dict[_Key, int], peak: int, usable: int, capacity: int) -> str:
    used = [e for e in items if e.used]
    points = sorted({e.start for e in used})
    at = max(points, key=lambda p: sum(sizes[(e.buffer, e.copy)] for e in used
                                       if e.start <= p <= e.end))
    live = [e for e in used if e.start <= at <= e.end]
    by_buf: dict[str, list[Lifetime]] = {}
    for e in live:
        by_buf.setdefault(e.buffer, []).append(e)
    need = sum(sizes[(e.buffer, e.copy)] for e in live)
    listing = ", ".join(
        f"{b}: {len(es)} cop{'y' if len(es) == 1 else 'ies'} x {sizes[(b, es[0].copy)]} B"
        for b, es in sorted(by_buf.items(), key=lambda kv: -sum(sizes[(kv[0], e.copy)]
                                                               for e in kv[1])))
    fixes = [f"copies=1 on {b}" for b, es in by_buf.items()
             if kernel.buffer_map[b].copies > 1]
    fixes.append("a smaller tile (split the tiled axis by a smaller factor)")
    where = lifetimes.positions[at] if at < len(lifetimes.positions) else f"position {at}"
    return (f"In kernel '{kernel.name}': {scope} buffers need {peak} B but {kernel.target.name} "
            f"{scope} has {usable} B usable (of {capacity} B). Live at the peak ({need} B, at "
            f"{where}): {listing}. Try {' or '.join(fixes)}.")
