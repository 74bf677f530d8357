"""Remove syncs implied by others (transitivity through program order and other flags).

Works on the kernel of ``insert_sync.place_syncs``: every sync carries its ``channel``;
a channel (a set/wait pair with its prologue/epilogue, or a barrier) is removed when every
dependence stays ordered without it (``happens_before.unordered_dependences``). Barriers are
tried first, then flag pairs by their set's position (an earlier set covers less). Before/after
(vadd): the x_ub RAW pair is implied by the y_ub one, whose set comes after both loads::

    load x; set MTE2->V #0; load y; set MTE2->V #1; wait #0; wait #1; add
    ->  load x; load y; set MTE2->V #1; wait #1; add
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ascendsched.errors import InternalCompilerError
from ascendsched.lower.cube_ops import same_pipe_ordered
from ascendsched.lower.happens_before import SyncOracle
from ascendsched.lower.ir import Instr, Kernel, Stmt, StmtMutator
from ascendsched.lower.polyhedral import Dependences
from ascendsched.lower.sync_ir import Barrier, SetFlag, Sync, SyncRole, WaitFlag
from ascendsched.lower.sync_requirements import innermost_loop, node_at
from ascendsched.target.model import Pipe, Target


@dataclass(frozen=True)
class Pruned:
    """``remove_redundant_sync``'s result: the pruned kernel, the oracle built on the kernel
    before pruning, and the sync keys pruning dropped (the oracle answers for the pruned kernel
    with ``dropped=dropped``; event-id allocation checks id sharing on it)."""

    kernel: Kernel
    oracle: SyncOracle
    dropped: frozenset

    def __str__(self) -> str:
        return str(self.kernel)


def remove_redundant_sync(kernel: Kernel, deps: Dependences, target: Target, *,
                          settled_by: Mapping[int, frozenset[int]] | None = None,
                          oracle: SyncOracle | None = None) -> Pruned:
    """Drop every sync channel of ``kernel`` whose dependences other syncs already order.

    ``settled_by``: per barrier channel, the dependences it orders by sitting between source
    and sink in one body. While it stays they need no re-check; trying to drop it re-checks
    them (and every dependence a dropped barrier settled, which may now lean on others).
    ``oracle``: the happens-before oracle already built on ``kernel`` (one is built if not).
    Each trial re-checks only the dependences whose chains used the dropped channel.
    """
    settled_by = settled_by or {}
    skip = frozenset(n for ns in settled_by.values() for n in ns)
    oracle = oracle or SyncOracle(kernel, deps, target)
    problems = oracle.problems(skip=skip)
    if problems:
        raise InternalCompilerError("sync placement leaves problems before pruning:\n  "
                                    + "\n  ".join(map(str, problems)))
    dropped: frozenset = frozenset()
    gone: set[int] = set()
    bracketed = _bracketed_masks(kernel, deps, target)
    gone_mask = 0
    for ch in _candidates(kernel):
        bit = _bit(ch)
        if any(m & bit and not m & ~(gone_mask | bit) for m in bracketed):
            continue  # the last sync issued between the instances of a dependent pair
        keys = oracle.sync_keys(ch)
        trial_skip = skip - settled_by.get(ch, frozenset())
        if not oracle.problems(dropped=dropped | keys, skip=trial_skip, first_only=True):
            dropped, skip = dropped | keys, trial_skip
            gone.add(ch)
            gone_mask |= bit
    return Pruned(drop_channels(kernel, frozenset(gone)) if gone else kernel, oracle, dropped)


def drop_channels(kernel: Kernel, channels: frozenset[int]) -> Kernel:
    """``kernel`` without the sync instructions of ``channels``."""

    class _Drop(StmtMutator):
        def visit_Sync(self, s: Sync) -> tuple[Stmt, ...]:
            return () if s.channel in channels else (s,)

    from dataclasses import replace

    progs = tuple(replace(p, body=_Drop().visit_body(p.body)) for p in kernel.programs)
    return replace(kernel, programs=progs)


def channels_of(kernel: Kernel) -> tuple[int, ...]:
    """Channel numbers in order of first appearance."""
    seen: dict[int, None] = {}

    def walk(body: tuple[Stmt, ...]) -> None:
        for s in body:
            if isinstance(s, Sync):
                if s.channel is not None:
                    seen.setdefault(s.channel, None)
            elif not isinstance(s, Instr):
                walk(s.body)

    for p in kernel.programs:
        walk(p.body)
    return tuple(seen)


# --------------------------------------------------------------------------- private helpers
def _bracketed(kernel: Kernel, deps: Dependences, target: Target
               ) -> list[frozenset[int | None]]:
    """``_bracketed_masks`` as sets of channels (``None``: a sync of no channel)."""
    return [frozenset(c for c in _channels_in(m)) for m in _bracketed_masks(kernel, deps, target)]


def _bit(channel: int | None) -> int:
    """A channel's bit in the masks of ``_bracketed_masks`` (bit 0: no channel)."""
    return 1 if channel is None else 2 << channel


def _channels_in(mask: int) -> list[int | None]:
    """The channels of a mask of ``_bit``s."""
    return [None if n == 0 else n - 1 for n in range(mask.bit_length()) if mask >> n & 1]


def _bracketed_masks(kernel: Kernel, deps: Dependences, target: Target) -> list[int]:
    """For dependences with an instance pair the program text brackets: the channels of the
    syncs that may be issued between the two instances and can start a chain from the
    source's pipe, and those that can end one at the sink's pipe. Source and sink sit in
    children ``i`` and ``j`` of one body (nested in them or the children themselves); the pair
    is in one run of that body with ``i < j``, or, where the innermost loop around the body
    (through guards) carries the dependence at distance 1 and is their innermost common loop,
    the source in one trip and the sink in the next. Syncs that may be issued between: those
    in children ``i`` and ``j`` and in the children between them (after ``i`` and up to ``j``
    in the next trip, with every statement beside the guards between the loop and the body).
    Every wait comes after the set it consumes (the oracle's alternation check), so a chain
    from the source's instance to the sink's starts with a set on the source's pipe (or a
    barrier there) issued after the source and ends with a wait on the sink's pipe (or a
    barrier there) issued before the sink: dropping the last of either kind leaves that pair
    unordered. Such a channel is needed, and pruning does not try it (GEMM + bias + GELU
    1000^3: 64 of its 94 candidate channels are needed; counting every channel between two
    children of one body skipped 44 of them, the pipes and nested children 55). Each set of
    channels is a mask of ``_bit``s (bit 0 stands for a sync of no channel, never dropped)."""
    where: dict[int, tuple[int, ...]] = {}

    def walk(body: tuple[Stmt, ...], path: tuple[int, ...]) -> None:
        for n, s in enumerate(body):
            if isinstance(s, Instr):
                where[s.id] = path + (n,)
            else:
                walk(s.body, path + (n,))  # type: ignore[attr-defined]

    roots: dict[int, tuple[Stmt, ...]] = {}
    for p in kernel.programs:
        walk(p.body, (len(roots),))
        roots[len(roots)] = p.body
    syncs = _SyncSummary()
    out: set[int] = set()
    seen: set[tuple] = set()
    for d in deps:
        src, dst = deps.info(d.src).instr, deps.info(d.dst).instr
        if src.pipe == dst.pipe and same_pipe_ordered(target, src, dst):
            continue  # the hardware orders them: no sync needed
        a, b = where.get(src.id), where.get(dst.id)
        if a is None or b is None or a[0] != b[0]:
            continue
        k = next((n for n, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                 len(a) - 1)  # one statement: its own body
        root, i, j = roots[a[0]], a[k], b[k]
        carried = bool(d.carried and d.common_loops
                       and d.carried[-1] == (d.common_loops[-1], 1))
        key = (a[:k], i, j, d.loop_independent and i < j, carried, src.pipe, dst.pipe)
        if key in seen:
            continue
        seen.add(key)
        body = _body(root, a[1:k])
        between: list[list[tuple[tuple[Stmt, ...], int, int]]] = []  # (body, from, to) runs
        if d.loop_independent and i < j:
            between.append([(body, i, j + 1)])
        loop = innermost_loop(root, a[1:k])
        if carried and loop is not None \
                and node_at(root, loop).var == d.common_loops[-1]:  # type: ignore[union-attr]
            # the rest of the trip after the source and the next one up to the sink
            runs = [run for depth in range(len(loop), k - 1)
                    for outer in [_body(root, a[1:depth + 1])]
                    for run in ((outer, 0, a[depth + 1]),
                                (outer, a[depth + 1] + 1, len(outer)))]
            runs += [(body, i, len(body)), (body, 0, j + 1)] if i >= j else \
                [(body, 0, len(body))]
            between.append(runs)
        for runs in between:
            out.add(syncs.channels(runs, src.pipe, starts=True))
            out.add(syncs.channels(runs, dst.pipe, starts=False))
    return list(out)


class _SyncSummary:
    """Per statement (by identity), the channels (a mask of ``_bit``s) of the syncs in it that
    can start a chain from each pipe (a set issued there, a barrier there) and that can end
    one at each pipe (a wait there, a barrier there); ``Pipe.ALL`` barriers and syncs of other
    kinds count for every pipe (key None)."""

    def __init__(self) -> None:
        self._memo: dict[int, tuple[dict, dict]] = {}
        self._children: dict[tuple[int, Pipe, bool], list[int]] = {}

    def channels(self, runs: list[tuple[tuple[Stmt, ...], int, int]], pipe: Pipe, *,
                 starts: bool) -> int:
        """The channels of the statements ``body[lo:hi]`` of every ``(body, lo, hi)`` run."""
        got = 0
        for body, lo, hi in runs:
            for m in self._per_child(body, pipe, starts)[lo:hi]:
                got |= m
        return got

    def _per_child(self, body: tuple[Stmt, ...], pipe: Pipe, starts: bool) -> list[int]:
        key = (id(body), pipe, starts)
        hit = self._children.get(key)
        if hit is None:
            side = 0 if starts else 1
            hit = []
            for s in body:
                by_pipe = self._of(s)[side]
                hit.append(by_pipe.get(pipe, 0) | by_pipe.get(None, 0) if by_pipe else 0)
            self._children[key] = hit
        return hit

    def _of(self, s: Stmt) -> tuple[dict, dict]:
        hit = self._memo.get(id(s))
        if hit is not None:
            return hit
        st: dict[Pipe | None, int] = {}
        en: dict[Pipe | None, int] = {}
        if isinstance(s, Sync):
            pipe = None if s.pipe == Pipe.ALL else s.pipe
            bit = _bit(s.channel)
            if isinstance(s, SetFlag):
                st[pipe] = bit
            elif isinstance(s, WaitFlag):
                en[pipe] = bit
            else:  # a barrier orders its pipe both ways; another kind: any pipe
                pipe = pipe if isinstance(s, Barrier) else None
                st[pipe] = en[pipe] = bit
        elif not isinstance(s, Instr):
            for x in s.body:  # type: ignore[attr-defined]
                xs, xe = self._of(x)
                for mine, theirs in ((st, xs), (en, xe)):
                    for p, chans in theirs.items():
                        mine[p] = mine.get(p, 0) | chans
        self._memo[id(s)] = (st, en)
        return st, en


def _body(root: tuple[Stmt, ...], path: tuple[int, ...]) -> tuple[Stmt, ...]:
    """The body of the statement at child-index ``path`` of ``root`` (``root`` itself: ())."""
    return node_at(root, path).body if path else root  # type: ignore[union-attr]


def _candidates(kernel: Kernel) -> list[int]:
    pos: dict[int, tuple[int, int]] = {}
    counter = 0

    def walk(body: tuple[Stmt, ...]) -> None:
        nonlocal counter
        for s in body:
            if isinstance(s, Instr):
                counter += 1
                if not isinstance(s, Sync) or s.channel is None:
                    continue
                if isinstance(s, Barrier):
                    pos.setdefault(s.channel, (0, counter))
                elif isinstance(s, SetFlag) and s.role == SyncRole.SET:
                    pos[s.channel] = (1, counter)
            else:
                walk(s.body)

    for p in kernel.programs:
        walk(p.body)
    return sorted(pos, key=lambda c: pos[c])
