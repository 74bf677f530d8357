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
from ascendsched.lower.ir import For, Instr, Kernel, Stmt, StmtMutator
from ascendsched.lower.polyhedral import Dependences
from ascendsched.lower.sync_ir import Barrier, SetFlag, Sync, SyncRole
from ascendsched.target.model import Target


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
    bracketed = _bracketed(kernel, deps, target)
    for ch in _candidates(kernel):
        if any(ch in chans and chans <= gone | {ch} for chans in bracketed):
            continue  # the last sync issued between the instances of a dependent pair
        keys = oracle.sync_keys(ch)
        trial_skip = skip - settled_by.get(ch, frozenset())
        if not oracle.problems(dropped=dropped | keys, skip=trial_skip, first_only=True):
            dropped, skip = dropped | keys, trial_skip
            gone.add(ch)
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
    """For dependences with an instance pair the program text brackets (source and sink
    children of one body: the pair in one iteration of it, source first, or, where the loop
    of that body carries the dependence at distance 1, the source in one trip and the sink in
    the next): the channels of every sync issued between the two instances (recursively in
    the statements between). Dropping the last of them leaves that pair unordered: every
    wait comes after the set it consumes (the oracle's alternation check), so a chain from
    the source's instance to the sink's starts with a set or barrier issued after the source
    and ends with a wait or barrier issued before the sink, both between the two, where no
    other sync is left. Such a channel is needed, and pruning does not try it (most of
    pruning's trials fail on one: GEMM + bias + GELU 1000^3, 64 of 94). ``None`` stands for
    a sync of no channel, which is never dropped."""
    where: dict[int, tuple[tuple[Stmt, ...], int, For | None]] = {}

    def walk(body: tuple[Stmt, ...], loop: For | None) -> None:
        for n, s in enumerate(body):
            if isinstance(s, Instr):
                where[s.id] = (body, n, loop)
            else:
                walk(s.body, s if isinstance(s, For) else None)  # type: ignore[attr-defined]

    for p in kernel.programs:
        walk(p.body, None)
    out: set[frozenset[int | None]] = set()
    for d in deps:
        src, dst = deps.info(d.src).instr, deps.info(d.dst).instr
        if src.pipe == dst.pipe and same_pipe_ordered(target, src, dst):
            continue  # the hardware orders them: no sync needed
        a, b = where.get(src.id), where.get(dst.id)
        if a is None or b is None or a[0] is not b[0]:
            continue
        body, i, j, loop = a[0], a[1], b[1], a[2]
        if d.loop_independent and i < j:
            out.add(_channels(body[i + 1:j]))
        if loop is not None and d.carried and d.carried[-1] == (loop.var, 1) \
                and d.common_loops and d.common_loops[-1] == loop.var:
            out.add(_channels(body[i + 1:] + body[:j]))
    return list(out)


def _channels(body: tuple[Stmt, ...]) -> frozenset[int | None]:
    """The channels of the syncs in ``body``, nested ones included."""
    got: set[int | None] = set()
    for s in body:
        if isinstance(s, Sync):
            got.add(s.channel)
        elif not isinstance(s, Instr):
            got |= _channels(s.body)  # type: ignore[attr-defined]
    return frozenset(got)


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
