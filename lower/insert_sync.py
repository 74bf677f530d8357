"""Sync insertion: set_flag/wait_flag pairs and barriers that order every dependence.

Runs on the *planned* kernel (dependences on physical bytes, so reuse of dead space brings its
WAR dependences). ``sync_requirements.py`` decides where each dependence needs its sync and
folds those places into few syncs; this module builds them into the kernel (one *channel* per
placement: the set and wait with their prologue sets and epilogue waits, or a barrier; fresh
instruction ids from the kernel; carried pairs of one kind over one loop in disjoint bodies
share a channel, ``channel_numbers``) and checks the result with the happens-before oracle,
giving pairs that a double-buffered source pipe could set twice ping-pong ids. Then
``remove_redundant_sync`` drops every pair implied by the others and ``allocate_event_ids``
fits the ids into the target's budget (``allocate_ids``: when they run out, placement runs
again with the channels of the tile classes joined across them). Before/after
(vadd, one copy)::

    for k: load x; load y; add; store
    ->  set V->MTE2 0; set MTE3->V 0
        for k: wait V->MTE2 0; load x; load y; set MTE2->V 0; wait MTE2->V 0;
               wait MTE3->V 0; add; set V->MTE2 0; set V->MTE3 0; wait V->MTE3 0; store;
               set MTE3->V 0
        wait V->MTE2 0; wait MTE3->V 0
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace

from ascendsched.errors import BarrierFallbackWarning, SyncError
from ascendsched.lower.affine import Affine
from ascendsched.lower.allocate_event_ids import EventIdPressureWarning, allocate_event_ids
from ascendsched.lower.flag_patterns import disjoint_bodies
from ascendsched.lower.happens_before import SyncOracle, SyncProblem
from ascendsched.lower.ir import For, If, Instr, Kernel, Program, Stmt, iter_instrs
from ascendsched.lower.polyhedral import Dependences
from ascendsched.lower.remove_redundant_sync import Pruned, remove_redundant_sync
from ascendsched.lower.sync_ir import Barrier, SetFlag, SyncRole, WaitFlag
from ascendsched.lower.sync_requirements import (
    Reasons,
    Requirement,
    deferrable,
    fewest_barriers,
    fewest_flags,
    innermost_loop,
    merged,
    mirrored,
    node_at,
    pingpong,
    requirements,
    spanning,
)
from ascendsched.target.model import Target


@dataclass(frozen=True)
class Placed:
    """``place_syncs``'s result: the kernel with every needed sync (``channel`` and ``role``
    set; channel-local event ids), the happens-before oracle built on it, which the two later
    sync steps reuse (building it is most of their cost), and per ``keep`` barrier channel the
    dependences it *settles* (same-pipe ones with the barrier between source and sink in one
    body: while the barrier stays, no re-check needs to look at them)."""

    kernel: Kernel
    oracle: SyncOracle
    settled_by: Mapping[int, frozenset[int]]

    def __str__(self) -> str:
        return str(self.kernel)


def insert_sync(kernel: Kernel, deps: Dependences, target: Target) -> Kernel:
    """``kernel`` with the flags and barriers that order ``deps`` (computed on ``kernel``): the
    three sync steps in order, for a kernel built by hand (``lower`` lists them one by one)."""
    placed = place_syncs(kernel, deps, target)
    pruned = remove_redundant_sync(placed.kernel, deps, target, settled_by=placed.settled_by,
                                   oracle=placed.oracle)
    return allocate_ids(kernel, deps, target, pruned)


def allocate_ids(kernel: Kernel, deps: Dependences, target: Target, pruned: Pruned) -> Kernel:
    """``allocate_event_ids`` on ``pruned`` (placed and pruned on ``kernel``). When the ids run
    out (a fallback: a ping-pong pair on one id, a tight pair), placement and pruning run again
    with the carried channels of nested loops joined at the top of the program (``place_syncs(
    join_classes=True)``, ``_anchor``: the K loops of the tile classes, each under its guard or
    persistent loop, whose own prologue sets could not share ids with the class before), and
    the allocation with fewer fallbacks is kept. Not by default: the joined channels cost
    pruning more isl checks (hand 1000^3 tails tiling on 2 cores: 1.17 -> 1.67 s), and when
    the ids suffice they buy nothing."""
    if not _nested_loops(kernel):  # nothing to join: placing again would give the same
        return allocate_event_ids(pruned.kernel, target, oracle=pruned.oracle,
                                  dropped=pruned.dropped, deps=deps)
    first, warned, error = _allocated(pruned, deps, target)
    if (_fallbacks(warned) or error is not None) and _joinable(pruned.oracle.kernel):
        again = place_syncs(kernel, deps, target, join_classes=True)
        again_pruned = remove_redundant_sync(again.kernel, deps, target,
                                             settled_by=again.settled_by, oracle=again.oracle)
        second, warned2, error2 = _allocated(again_pruned, deps, target)
        if error2 is None and (error is not None or _fallbacks(warned2) < _fallbacks(warned)):
            first, warned, error = second, warned2, None
    if error is not None:
        raise error
    for w in warned:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno,
                               registry=globals().setdefault("__warningregistry__", {}))
    assert first is not None
    return first


def _nested_loops(kernel: Kernel) -> bool:
    """Whether a loop of ``kernel`` sits inside another statement (only then may
    ``join_classes`` move a carried channel's prologue and epilogue)."""
    return any(isinstance(b, For) for p in kernel.programs
               for _, around in iter_instrs(p.body) for b in around[1:])


def _joinable(kernel: Kernel) -> bool:
    """Whether some carried channel's prologue sits inside a statement of the placed
    ``kernel`` (before pruning). Else every carried pair runs over a loop of the program
    body, at every step of placement too (ping-pong ids add carried pairs, nothing moves
    one), and joining the tile classes' channels would place the same syncs again (LayerNorm
    over 32 000-column rows: 0.25 s)."""
    return any(isinstance(i, SetFlag) and i.role == SyncRole.PROLOGUE and len(around) > 0
               for p in kernel.programs for i, around in iter_instrs(p.body))


def _fallbacks(warned: list[warnings.WarningMessage]) -> int:
    """How many of ``warned`` are event-id fallbacks."""
    return sum(issubclass(w.category, (EventIdPressureWarning, BarrierFallbackWarning))
               for w in warned)


def _allocated(pruned: Pruned, deps: Dependences, target: Target
               ) -> tuple[Kernel | None, list[warnings.WarningMessage], SyncError | None]:
    """``allocate_event_ids`` on a pruned kernel: its result, the warnings it gave and the
    error it raised."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        try:
            done = allocate_event_ids(pruned.kernel, target, oracle=pruned.oracle,
                                      dropped=pruned.dropped, deps=deps)
        except SyncError as e:
            return None, list(got), e
    return done, list(got), None


def place_syncs(kernel: Kernel, deps: Dependences, target: Target, *,
                join_classes: bool = False) -> Placed:
    """Every needed sync, one channel per placement (``channel``, ``role`` set), local ids.

    A flag dependence between two sibling branches that no iteration runs together (a full
    tile's version and a tail version, in different iterations, in either text order) is
    *deferred*: a pair between the branches would make the sink pipe wait for this
    iteration's source in every iteration (no double-buffered overlap), and such a dependence
    is usually implied by the pairs inside the branches. It gets pairs only if the others
    leave it unordered: those its source's and sink's branches would have for their own uses
    where they hold none of that kind (a branch that never follows itself on a core, the
    corner tile, has none; ``mirrored``), else one spanning the branches.
    """
    reqs: Reasons = {}
    per_dep: list[list[Requirement]] = []
    for d in deps:
        per_dep.append(requirements(d, deps, kernel, target))
        for r in per_dep[-1]:
            reqs.setdefault(r, []).append(d.reason)
    reqs, covered = fewest_barriers(reqs)
    settles: dict[Requirement, set[int]] = {}
    for n, rs in enumerate(per_dep):
        if len(rs) == 1 and rs[0] in covered:
            settles.setdefault(covered[rs[0]], set()).add(n)
    skip = frozenset(n for ns in settles.values() for n in ns)
    deferred = frozenset(n for n, d in enumerate(deps) if deferrable(d, per_dep[n], kernel))
    found = _place_deferring(kernel, reqs, per_dep, deferred, deps, target, skip, join_classes) \
        if deferred else None
    if found is None:
        placed, reqs, problems, oracle = _settle(kernel, fewest_flags(reqs), deps, target,
                                                 skip, join_classes)
    else:
        (placed, reqs, oracle), problems = found, ()
    if problems:
        raise SyncError("sync placement cannot order this kernel (a pair that needs a reverse "
                        "'slot free' sync is not supported yet):\n  "
                        + "\n  ".join(map(str, problems)))
    # as _build numbers them
    channel = dict(zip(reqs, channel_numbers(reqs, kernel, join_classes), strict=True))
    return Placed(placed, oracle, {channel[r]: frozenset(ns) for r, ns in settles.items()})


def _place_deferring(kernel: Kernel, reqs: Reasons, per_dep: list[list[Requirement]],
                     deferred: frozenset[int], deps: Dependences, target: Target,
                     skip: frozenset[int], join_classes: bool
                     ) -> tuple[Kernel, Reasons, SyncOracle] | None:
    """Placement without the deferred dependences' pairs, then with the branches' own pairs
    (or a spanning carried one) for those left unordered; None if either step leaves a
    problem."""
    needed = {r for n, rs in enumerate(per_dep) if n not in deferred for r in rs}
    lean = {r: w for r, w in reqs.items() if r.src == r.dst or r in needed}
    placed, settled, problems, oracle = _settle(kernel, fewest_flags(lean), deps, target,
                                                skip | deferred, join_classes)
    if problems:
        return None
    index = {d: n for n, d in enumerate(deps)}  # Dependence hashes by identity (eq=False)
    late = {index[p.dep] for p in oracle.problems(
        skip=frozenset(range(len(deps))) - deferred) if p.dep is not None}
    if not late:
        return placed, settled, oracle
    # the branches' own pairs, joining the other branches' channel; else wait before the
    # first branch, set after the last: no wait on this iteration's source
    extra: Reasons = {}
    held = frozenset((q.core, q.src, q.dst, q.container, q.ids) for q in settled
                     if q.loop is not None)
    for n in late:
        d = deps.deps[n]
        for r in per_dep[n]:
            for q in mirrored(r, d, deps, kernel, held) or [spanning(r, d, kernel)]:
                extra.setdefault(q, []).append(d.reason)
    # the lean placement's settled requirements (ping-pong ids already given where a source
    # pipe runs ahead) plus the spanning pairs: the re-check rarely has to rebuild again
    trial = fewest_flags(merged({**{r: list(w) for r, w in settled.items()}, **extra}))
    placed, trial, problems, oracle = _settle(kernel, trial, deps, target, skip, join_classes)
    return None if problems else (placed, trial, oracle)


def _settle(kernel: Kernel, reqs: Reasons, deps: Dependences, target: Target,
            skip: frozenset[int], join_classes: bool
            ) -> tuple[Kernel, Reasons, tuple[SyncProblem, ...], SyncOracle]:
    """Build ``reqs`` and fix their event ids until the happens-before check passes (or
    cannot be helped): the placed kernel, the final requirements, the problems left and the
    oracle built on the placed kernel."""
    reqs = _ahead_up_front(reqs, kernel, join_classes)
    placed = _build(kernel, reqs, join_classes)
    oracle = SyncOracle(placed, deps, target)
    # A pair inside a loop whose source pipe may run an iteration ahead (double buffering)
    # would set its flag again before the previous wait consumed it: give it ids k % 2.
    problems = oracle.problems(skip=skip)
    again = {int(c) for p in problems if p.double_set for c in p.channels[:1]}
    if again:
        reqs = _pingponged(reqs, kernel, again, channel_numbers(reqs, kernel, join_classes))
        placed = _build(kernel, reqs, join_classes)
        oracle = SyncOracle(placed, deps, target, reuse=oracle)
        problems = oracle.problems(skip=skip)
    # ping-pong ids over nested loops may skip a pair of distance 1 at a loop boundary
    weak = {p.dep.reason for p in problems if p.dep is not None}
    if weak:
        reqs = merged({(replace(r, ids=1) if r.ids == 2 and set(why) & weak else r): why
                        for r, why in reqs.items()})
        placed = _build(kernel, reqs, join_classes)
        oracle = SyncOracle(placed, deps, target)
        problems = oracle.problems(skip=skip)
    return placed, reqs, problems, oracle


def _ahead_up_front(reqs: Reasons, kernel: Kernel, join_classes: bool) -> Reasons:
    """Pairs in a loop of two or more trips whose source pipe nothing holds back by one trip
    (no carried pair back from the sink's pipe on one id in that loop, on that core; trips a
    guard on the loop variable rules out do not count, ``_trips_run``) with
    ping-pong ids from the start: the happens-before check would find their double sets and
    ask for them (the same kernel text on the 466 reference, 146 Vector default, 126 mixed
    and 400 random hand kernels; a pair it misses still gets them from the check, and a hand
    bias_add of fused 2-D tiles keeps on two pairs the ping-pong the check's second round had
    dropped). Saves a placement and an oracle, the costliest one (it checks every
    dependence): vadd 4194304 lower() 23 -> 18 ms, LayerNorm 16384x256 106 -> 98 ms; on the
    Cube core too (a double-buffered L1/L0 K loop's MTE2->MTE1 and MTE1->M pairs): the 466
    reference kernels 36.8 -> 29.8 s of CPU, GEMM + softmax 4096x32000x4096 0.71 -> 0.49 s."""
    held = {(q.core, q.src, q.dst, at) for q in reqs if q.loop is not None and q.ids == 1
            for at in (q.loop, q.container)}
    ahead = set()
    for n, r in enumerate(reqs):
        if r.loop is None and r.src != r.dst:
            body = kernel.program(r.core).body  # type: ignore[arg-type, union-attr]
            loop = innermost_loop(body, r.container)
            if loop is not None and _trips_run(body, loop, r.container) > 1 \
                    and (r.core, r.dst, r.src, loop) not in held:
                ahead.add(n)
    if not ahead:
        return reqs
    numbers = channel_numbers(reqs, kernel, join_classes)
    return _pingponged(reqs, kernel, {numbers[n] for n in ahead}, numbers)


def _trips_run(body: tuple[Stmt, ...], loop: tuple[int, ...], container: tuple[int, ...]
               ) -> int:
    """How many trips of the loop at path ``loop`` may run the body at path ``container``
    (inside it): its extent, less the trips a guard between them that tests the loop variable
    alone rules out (a GEMM's peeled K tail, ``if kl >= 1``, runs in one trip)."""
    node = node_at(body, loop)
    assert isinstance(node, For)
    trips = range(node.extent)
    for j in range(len(loop) + 1, len(container) + 1):
        guard = node_at(body, container[:j])
        if isinstance(guard, If):
            for c in guard.conds:
                if c.lhs.vars() == {node.var}:
                    trips = [v for v in trips if c.evaluate({node.var: v})]
    return len(trips)


def _pingponged(reqs: Reasons, kernel: Kernel, channels: set[int], numbers: list[int]
                ) -> Reasons:
    """``reqs`` with the pairs of ``channels`` on ping-pong ids."""
    return fewest_flags(merged({(pingpong(r, kernel) if n in channels else r): why
                                for n, (r, why) in zip(numbers, reqs.items(), strict=True)}))


def channel_numbers(reqs: Reasons, kernel: Kernel, join_classes: bool = False) -> list[int]:
    """The sync channel of each requirement of ``reqs``, in order: its own index, except that
    carried pairs of one kind (core, pipes, ids) in disjoint bodies of loops that are one loop
    or sit in sibling children of one body (directly; with ``join_classes`` anywhere inside
    children of the program body: the K loops of tile classes, under their guards and
    persistent loops, ``_anchor``) share a channel, the first of
    that kind none of whose pairs shares a body with them (two pairs in one body, a_l1's and
    b_l1's, make two channels, and the next body's two pairs join them): one prologue set
    per id before the first of those children, in each body a wait and a later set of one id,
    one epilogue wait per id after the last child (``channel_span``).
    Runs of disjoint bodies never interleave (nor do sibling children), so every id's sets and
    waits still alternate, on every core, whichever guards it passes; and the wait before a
    sink meets the last set of its id before it, which fires after every earlier source-pipe
    instruction, so the shared channel orders whatever separate ones would
    (``flag_patterns.standard_pattern``). Separate channels would each hold their ids across
    their loop, and between two loops drain one (epilogue waits) before the next starts: a
    tile class's L0 K loops of the full L1 steps and of the K tail, and the persistent loops
    of consecutive tile classes, ran the ids out and lost double buffering."""
    out: list[int] = []
    # per kind, its channels so far: (number, the bodies of its pairs)
    groups: dict[tuple, list[tuple[int, list[tuple[int, ...]]]]] = {}
    for n, r in enumerate(reqs):
        if r.loop is None or r.src == r.dst:
            out.append(n)
            continue
        at = _anchor(r, join_classes)
        chans = groups.setdefault((r.core, r.src, r.dst, at[:-1], r.ids), [])
        home = next((c for c in chans
                     if all(disjoint_bodies(r.container, b) for b in c[1])), None)
        if home is None:  # a body one of each channel's pairs shares: a channel of its own
            home = (n, [])
            chans.append(home)
        home[1].append(r.container)
        out.append(home[0])
    return out


def channel_span(reqs: Reasons, kernel: Kernel, numbers: list[int], join_classes: bool = False
                 ) -> dict[int, tuple[tuple[int, ...], int, int]]:
    """Per carried channel (``numbers``: ``channel_numbers`` of ``reqs``): the body holding its
    loops and the first and last child of it they sit in: its prologue goes before the first,
    its epilogue after the last. A channel of one loop keeps them next to the loop (inside its
    guards)."""
    loops: dict[int, set[tuple[int, ...]]] = {}
    anchors: dict[int, set[tuple[int, ...]]] = {}
    for n, r in zip(numbers, reqs, strict=True):
        if r.loop is not None and r.src != r.dst:
            loops.setdefault(n, set()).add(r.loop)
            anchors.setdefault(n, set()).add(_anchor(r, join_classes))
    out: dict[int, tuple[tuple[int, ...], int, int]] = {}
    for n, ls in loops.items():
        at = ls if len(ls) == 1 else anchors[n]
        parent = next(iter(at))[:-1]
        out[n] = (parent, min(a[-1] for a in at), max(a[-1] for a in at))
    return out


def _anchor(r: Requirement, join_classes: bool) -> tuple[int, ...]:
    """The path of carried requirement ``r``'s loop, or with ``join_classes`` of the child of
    the program body around it: the child of the body where a channel shared with other
    children may put its prologue and epilogue. Joined over the guards and the persistent
    loops of tile classes, the K loops of consecutive classes share one prologue and one
    epilogue, their ids alternating on across tiles as the GEMM template's do (mixed
    kernels, which have no template: GEMM + row softmax 1000x1000x128 kept its L1 double
    buffering, 25.25 -> 23.35 us modelled); the happens-before check vouches for each."""
    assert r.loop is not None
    return r.loop[:1] if join_classes else r.loop


def _build(kernel: Kernel, reqs: Reasons, join_classes: bool) -> Kernel:
    by_core: dict[object, dict] = {}
    numbers = channel_numbers(reqs, kernel, join_classes)
    spans = channel_span(reqs, kernel, numbers, join_classes)
    seen: set[int] = set()  # channels whose prologue and epilogue are placed
    for n, (req, reasons) in zip(numbers, reqs.items(), strict=True):
        comment = "; ".join(dict.fromkeys(reasons))
        core_inserts = by_core.setdefault(req.core, {})
        ends = spans.get(n) if n not in seen else None
        for path, gap, group, ins in _materialize(req, n, comment, kernel, ends):
            core_inserts.setdefault(path, {}).setdefault(gap, []).append((group, n, ins))
        seen.add(n)
    programs = []
    for p in kernel.programs:
        ins = by_core.get(p.core)
        programs.append(p if not ins else Program(p.core, _rebuild(p.body, (), ins)))
    if all(a is b for a, b in zip(programs, kernel.programs, strict=True)):
        return kernel
    return kernel.with_programs(tuple(programs))  # fresh ids for the syncs


# --------------------------------------------------------------------------- private helpers


# insertion groups inside one gap, in order
_SET, _EPILOGUE, _PROLOGUE, _WAIT, _BARRIER = range(5)


def _materialize(r: Requirement, n: int, comment: str, kernel: Kernel,
                 ends: tuple[tuple[int, ...], int, int] | None
                 ) -> list[tuple[tuple[int, ...], int, int, Instr]]:
    """(container path, gap, group, instr) for requirement ``r`` as channel ``n``; ``ends``:
    where a carried pair's prologue sets and epilogue waits go (``channel_span``; None: placed
    with the channel's first pair)."""
    if r.src == r.dst:
        return [(r.container, r.before, _BARRIER,
                 Barrier(r.dst, channel=n, role=SyncRole.KEEP if r.keep else None,
                         comment=comment))]

    def set_(eid: Affine, role: SyncRole) -> Instr:
        return SetFlag(r.src, dst=r.dst, event_id=eid, channel=n, role=role, comment=comment)

    def wait(eid: Affine, role: SyncRole) -> Instr:
        return WaitFlag(r.dst, src=r.src, event_id=eid, channel=n, role=role, comment=comment)

    eid = Affine.mod(r.var, 2) if r.ids == 2 else Affine()
    out = [(r.container, r.after + 1, _SET, set_(eid, SyncRole.SET)),
           (r.container, r.before, _WAIT, wait(eid, SyncRole.WAIT))]
    if r.loop is not None and ends is not None:
        parent, first, last = ends
        for c in range(r.ids):
            out.append((parent, first, _PROLOGUE, set_(Affine(c), SyncRole.PROLOGUE)))
            out.append((parent, last + 1, _EPILOGUE, wait(Affine(c), SyncRole.EPILOGUE)))
    return out


def _rebuild(body: tuple[Stmt, ...], path: tuple[int, ...],
             inserts: dict[tuple[int, ...], dict[int, list[tuple[int, int, Instr]]]]
             ) -> tuple[Stmt, ...]:
    here = inserts.get(path, {})
    out: list[Stmt] = []
    for g in range(len(body) + 1):
        out.extend(ins for _, _, ins in sorted(here.get(g, []), key=lambda x: (x[0], x[1])))
        if g == len(body):
            break
        s = body[g]
        if not isinstance(s, Instr) and any(p[: len(path) + 1] == path + (g,) for p in inserts):
            sub = _rebuild(s.body, path + (g,), inserts)
            s = For(s.var, s.extent, sub, s.comment) if isinstance(s, For) else If(
                s.conds, sub, s.comment)
        out.append(s)
    return tuple(out)
