"""Event-id allocation: fit every flag channel into the target's ids per HardEvent.

Input: a kernel whose syncs carry their ``channel`` and ``role`` and channel-local event ids (0, or
``k % 2`` for ping-pong). Per core and HardEvent (src, dst), each channel occupies the span of
program text from its first to its last sync; channels whose spans overlap need different ids,
a ping-pong channel two consecutive ones (``base + k % 2``). Spans are coloured greedily in
order of start. When the ids (``target.event_ids``) run out for a HardEvent:

1. two ping-pong channels of that event whose set/wait pairs overlap in one body merge into
   one: the later set and the earlier wait, still ``base + k % 2`` (the copies keep
   overlapping; ``EventIdPressureWarning``); RoPE's x, cos and sin tiles, double buffered,
   need 6 MTE2 -> V ids and a tail version more;
2. else ping-pong channels of that event fall back to one id (``EventIdPressureWarning``); if
   the next set of one may then fire before its previous wait (the source pipe runs an
   iteration ahead and nothing else orders the two; a tight pair would not help either) the
   kernel is refused (``SyncError``);
3. then two overlapping plain pairs in one body merge the same way, and then the longest
   channel is made *tight*: its wait moves right after its set (and its
   prologue set, if any, gets a wait right after it), which frees the id at once (a set/wait
   pair acting as a barrier from the source pipe to the destination pipe;
   ``BarrierFallbackWarning``). PipeBarrier cannot order two pipes and PIPE_ALL is never used,
   so this is the last resort; adjacent tight pairs of one event share an id.

Finally ``channel`` and ``role`` are cleared. Before/after::

    set_flag MTE2->V id=0 [ch 3, set]; ... wait_flag MTE2->V id=0 [ch 3, wait]
    ->  set_flag MTE2->V id=2; ... wait_flag MTE2->V id=2
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

from ascendsched.errors import (
    AscendSchedWarning,
    BarrierFallbackWarning,
    InternalCompilerError,
    SyncError,
)
from ascendsched.lower.affine import Affine
from ascendsched.lower.happens_before import SyncOracle, SyncProblem, unordered_dependences
from ascendsched.lower.ir import Instr, Kernel, Stmt, StmtMutator, iter_instrs
from ascendsched.lower.polyhedral import Dependences
from ascendsched.lower.sync_ir import EventSync, SetFlag, Sync, SyncRole, WaitFlag
from ascendsched.target.model import CoreType, Pipe, Target


class EventIdPressureWarning(AscendSchedWarning):
    """Event ids ran short: a double-buffered (ping-pong) sync now uses a single id."""

    warning_id = "event-id-pressure"


def allocate_event_ids(kernel: Kernel, target: Target, *, verify: bool = True,
                       oracle: SyncOracle | None = None, dropped: frozenset = frozenset(),
                       deps: Dependences | None = None) -> Kernel:
    """``kernel`` with every flag's event id within ``target.event_ids``; channels cleared.

    ``verify=False`` skips the check that shared ids cannot be set twice before a wait (for
    tests that break a synced kernel on purpose). ``oracle``/``dropped``: the happens-before
    oracle of the kernel before pruning and the syncs pruning dropped (``insert_sync`` passes
    them): id sharing is then checked channel pair by channel pair on its relations. ``deps``:
    the dependences the syncs order; when a fallback rewrote syncs (one id for a ping-pong pair,
    a merge, a tight pair), every one is checked again on the result (pruning may have leaned on
    what the fallback changed), and a dependence left unordered is a compiler bug."""
    done, rebuilt = _allocate(kernel, target, verify, oracle, dropped, deps)
    if deps is not None and done is not kernel and _rewritten(kernel, done):
        # the rewritten kernel's channels order every dependence, and the colouring was
        # checked not to let channels that share an id interfere: together, the allocated
        # kernel orders them
        problems = rebuilt.problems() if rebuilt is not None else \
            unordered_dependences(done, deps, target, by_channel=False)
        if problems:
            raise InternalCompilerError("event-id fallbacks left dependences unordered:\n  "
                                        + "\n  ".join(map(str, problems[:5])))
    return done


def _allocate(kernel: Kernel, target: Target, verify: bool, oracle: SyncOracle | None,
              dropped: frozenset, deps: Dependences | None
              ) -> tuple[Kernel, SyncOracle | None]:
    """The allocated kernel, and the oracle of the last rewritten kernel (None: none built)."""
    rebuilt: SyncOracle | None = None
    ids = tuple(target.event_ids)
    conflicts: set[frozenset[int]] = set()  # channel pairs found unsafe to share an id
    downgraded: set[int] = set()  # ping-pong channels now on one id: may set twice
    while True:
        chans = _channels(kernel)
        groups: dict[tuple[CoreType, Pipe, Pipe], list[_Chan]] = {}
        for c in chans.values():
            groups.setdefault((c.core, c.src, c.dst), []).append(c)
        bases: dict[int, int] = {}
        failed = None
        for key, cs in groups.items():
            got = _color(cs, ids, conflicts)
            if got is None:
                failed = (key, cs)
                break
            bases.update(got)
        if failed is None and not verify:
            return _finish(kernel, bases), None
        if failed is None:
            # one id shared by two channels is safe only if each set is known to come after
            # the previous wait of that id (checked, since the source pipe may run ahead)
            if oracle is None or not all(oracle.knows(i) for c in chans.values()
                                         for i in c.instrs):
                # a fallback rewrote syncs (or no oracle was given): one oracle of this kernel,
                # kept while only the colouring changes
                oracle, dropped = SyncOracle(kernel, deps, target, reuse=oracle), frozenset()
                rebuilt = oracle
            problems = _sharing_problems(groups, bases, oracle, dropped, downgraded)
            if not problems:
                return _finish(kernel, bases), rebuilt
            self_set = [p for p in problems if len(p.channels) == 2
                        and p.channels[0] == p.channels[1]]
            if self_set:
                raise SyncError(
                    f"event ids {ids} ran out, and {len(self_set)} double-buffered sync(s) on "
                    "one id could set it again before its previous wait (the source pipe runs "
                    "an iteration ahead and nothing else orders the two):\n  "
                    + "\n  ".join(map(str, self_set[:5]))
                    + "\n  double-buffer fewer tensors, or pick tile sizes without a tail "
                    "(each tail version needs its own syncs)")
            clash = {frozenset(int(c) for c in p.channels) for p in problems
                     if len(p.channels) == 2 and p.channels[0] != p.channels[1]} - conflicts
            if not clash:
                raise SyncError("event ids cannot be shared safely within the budget "
                                f"{ids}:\n  " + "\n  ".join(map(str, problems)))
            conflicts |= clash
            continue
        (core, src, dst), cs = failed
        if not ids:
            raise SyncError(f"{target.name} has no event ids for {src}_{dst} flags; "
                            f"{len(cs)} dependence(s) need one: {cs[0].comment}")
        pingpong = [c for c in cs if c.n_ids == 2]
        ran_out = f"{core} {src}_{dst}: event ids {ids} ran out; merged "
        # two ping-pong pairs on one pair of ids: both keep overlapping
        merged = _merged(kernel, pingpong, ran_out + "double-buffered ", ", still one id per copy") \
            or _merged_carried(kernel, pingpong, ran_out + "double-buffered ")
        if merged is not None:
            kernel = merged
            continue
        if pingpong:
            warnings.warn(EventIdPressureWarning(
                f"{core} {src}_{dst}: {len(cs)} syncs need more than the {len(ids)} event ids; "
                f"{len(pingpong)} double-buffered sync(s) now use one id, so their copies no "
                f"longer overlap: {pingpong[0].comment}"), stacklevel=2)
            kernel = _rewrite(kernel, {c.channel for c in pingpong}, _downgrade)
            downgraded |= {c.channel for c in pingpong}
            continue
        merged = _merged(kernel, cs, ran_out, "")
        if merged is not None:
            kernel = merged
            continue
        loose = [c for c in cs if not c.tight]
        if not loose:
            raise SyncError(
                f"{core} {src}_{dst}: cannot fit {len(cs)} syncs into event ids {ids}: even "
                f"as set-then-wait pairs they cannot share ids ({src} may run ahead and set an "
                f"id again before {dst}'s wait of the previous one), e.g. {cs[0].comment}. "
                f"Tail versions synchronised on their own (tile classes, peeled tails) repeat "
                f"their syncs: pick tile sizes that "
                f"divide the problem (fewer tail versions), double-buffer fewer tensors, or "
                f"spread the tiles over more cores")
        worst = max(loose, key=lambda c: (c.end - c.start, -c.start))
        warnings.warn(BarrierFallbackWarning(
            f"{core} {src}_{dst}: event ids {ids} ran out; '{worst.comment}' is now a set "
            f"immediately followed by its wait (a {src}->{dst} barrier: {dst} stalls until "
            f"{src} drains)"), stacklevel=2)
        kernel = _rewrite(kernel, {worst.channel}, _tightener(max(chans) + 1))


# --------------------------------------------------------------------------- private helpers
@dataclass
class _Chan:
    channel: int
    core: CoreType
    src: Pipe
    dst: Pipe
    start: int
    end: int
    n_ids: int
    tight: bool
    comment: str
    flags: list[tuple[SyncRole | None, int, tuple[int, ...]]] = field(
        default_factory=list)  # role, pos, path
    instrs: list[EventSync] = field(default_factory=list)

    def pair(self) -> tuple[tuple[int, tuple[int, ...]], tuple[int, tuple[int, ...]]] | None:
        """(set pos, path), (wait pos, path) of a plain pair (no prologue/epilogue)."""
        roles = sorted(str(r) for r, _, _ in self.flags)
        if roles != ["set", "wait"]:
            return None
        st = next((p, q) for r, p, q in self.flags if r == SyncRole.SET)
        wt = next((p, q) for r, p, q in self.flags if r == SyncRole.WAIT)
        return st, wt


def _channels(kernel: Kernel) -> dict[int, _Chan]:
    out: dict[int, _Chan] = {}
    pos = 0

    def walk(body: tuple[Stmt, ...], core: CoreType, path: tuple[int, ...]) -> None:
        nonlocal pos
        for i, s in enumerate(body):
            if not isinstance(s, Instr):
                walk(s.body, core, path + (i,))
                continue
            pos += 1
            if not isinstance(s, EventSync):
                continue
            ch = s.channel
            if ch is None:
                raise SyncError(f"flag without a channel: {s} (allocate_event_ids runs on "
                                "insert_sync's output)")
            eid = s.event_id
            n = 2 if not eid.is_const or eid.const == 1 else 1
            c = out.get(ch)
            if c is None:
                out[ch] = _Chan(ch, core, s.src, s.dst, pos, pos, n, True, s.comment)
            else:
                c.end = pos
                c.n_ids = max(c.n_ids, n)
            if s.role in (SyncRole.PROLOGUE, SyncRole.EPILOGUE):
                out[ch].tight = False
            out[ch].flags.append((s.role, pos, path))
            out[ch].instrs.append(s)

    for p in kernel.programs:
        walk(p.body, p.core, ())
    for c in out.values():
        c.tight = c.tight and _tight_pairs(c)
    return out


def _tight_pairs(c: _Chan) -> bool:
    """Whether ``c`` is one or more sets each immediately followed by its wait (the tight-pair
    fallback's result; a channel shared by several bodies keeps one pair in each)."""
    flags = sorted(c.flags, key=lambda f: f[1])
    if len(flags) % 2:
        return False
    return all(a[0] == SyncRole.SET and b[0] == SyncRole.WAIT and b[1] == a[1] + 1
               for a, b in zip(flags[::2], flags[1::2], strict=True))


def _rewritten(before: Kernel, after: Kernel) -> bool:
    """Whether allocation changed more than event ids (a fallback moved or dropped syncs)."""
    def shape(k: Kernel) -> list[tuple]:
        return [(i.op, i.pipe, i.comment) for p in k.programs for i, _ in iter_instrs(p.body)]
    return shape(before) != shape(after)


def _sharing_problems(groups: dict[tuple[CoreType, Pipe, Pipe], list[_Chan]],
                      bases: dict[int, int], oracle: SyncOracle, dropped: frozenset,
                      downgraded: set[int]) -> list[SyncProblem]:
    """Double sets between channels of one HardEvent that the colouring gives a common id,
    and within each ``downgraded`` channel (insert_sync checked the others on their own)."""
    out: list[SyncProblem] = []
    for cs in groups.values():
        for a in cs:
            for b in cs:
                if a.channel == b.channel and a.channel not in downgraded:
                    continue
                ids_a = {bases[a.channel] + i for i in range(a.n_ids)}
                ids_b = {bases[b.channel] + i for i in range(b.n_ids)}
                if not ids_a & ids_b:
                    continue
                waits = tuple((i, i.event_id + bases[a.channel])
                              for i in a.instrs if isinstance(i, WaitFlag))
                sets = tuple((i, i.event_id + bases[b.channel])
                             for i in b.instrs if isinstance(i, SetFlag))
                bad = oracle.shared_id_problem(waits, sets, dropped)
                if bad is not None:
                    out.append(bad)
    return out


def _color(cs: list[_Chan], ids: tuple[int, ...], conflicts: set[frozenset[int]]
           ) -> dict[int, int] | None:
    active: list[tuple[_Chan, int]] = []
    bases: dict[int, int] = {}
    for c in sorted(cs, key=lambda c: (c.start, c.end)):
        active = [(a, b) for a, b in active if a.end >= c.start]
        used = {b + i for a, b in active for i in range(a.n_ids)}
        used |= {bases[a.channel] + i for a in cs if a.channel in bases
                 and frozenset((a.channel, c.channel)) in conflicts for i in range(a.n_ids)}
        for base in ids:
            need = [base + i for i in range(c.n_ids)]
            if all(x in ids and x not in used for x in need):
                bases[c.channel] = base
                active.append((c, base))
                break
        else:
            return None
    return bases


def _merge_pair(cs: list[_Chan]) -> tuple[_Chan, _Chan] | None:
    """Two overlapping plain pairs in one body whose later set precedes their earlier wait."""
    best = None
    for i, a in enumerate(cs):
        pa = a.pair()
        for b in cs[i + 1:]:
            pb = b.pair()
            if pa is None or pb is None or a.n_ids != b.n_ids:
                continue
            if not (pa[0][1] == pa[1][1] == pb[0][1] == pb[1][1]):
                continue  # not all four in one body
            if max(pa[0][0], pb[0][0]) < min(pa[1][0], pb[1][0]):
                span = min(pa[1][0], pb[1][0]) - max(pa[0][0], pb[0][0])
                if best is None or span > best[0]:
                    best = (span, a, b)
    return None if best is None else (best[1], best[2])


def _merged(kernel: Kernel, cs: list[_Chan], head: str, note: str) -> Kernel | None:
    """``kernel`` with two of ``cs`` merged (``_merge_pair``), said in a warning; None if
    no two merge."""
    pair = _merge_pair(cs)
    if pair is None:
        return None
    a, b = pair
    warnings.warn(EventIdPressureWarning(
        f"{head}'{b.comment}' into '{a.comment}' (one set after both sources, one wait before "
        f"both sinks{note})"), stacklevel=3)  # where the others point: _allocate's call
    return _merge(kernel, a, b)


def _merged_carried(kernel: Kernel, cs: list[_Chan], head: str) -> Kernel | None:
    """``kernel`` with one carried ping-pong channel's pair joined to another's in the loop
    body they share (the earlier wait before the sinks, the later set after the sources; one
    prologue and epilogue), said in a warning; None if no two join. A carried pair waits at
    the top of the body for the sources of two iterations back, so the joined pair delays a
    sink only until the other's source of that iteration is done, and both keep their copies
    overlapping (LayerNorm over 32 000-column rows: x, gamma and beta pieces in one body, x
    chunks of the two statistics' loops in the others, 4 such channels for 6 ids)."""
    pair = _carried_pair(cs)
    if pair is None:
        return None
    a, b, body = pair
    warnings.warn(EventIdPressureWarning(
        f"{head}'{b.comment}' into '{a.comment}' (one wait before both sinks, one set after "
        f"both sources, still one id per copy)"), stacklevel=3)  # _allocate's call
    where = {id(i): (r, pos, path) for i, (r, pos, path) in zip(a.instrs + b.instrs,
                                                                  a.flags + b.flags, strict=True)}
    here = [i for i in a.instrs + b.instrs if where[id(i)][2] == body
            and where[id(i)][0] in (SyncRole.SET, SyncRole.WAIT)]
    keep = {id(max((i for i in here if isinstance(i, SetFlag)), key=lambda i: where[id(i)][1])),
            id(min((i for i in here if isinstance(i, WaitFlag)), key=lambda i: where[id(i)][1]))}
    in_body = {id(i) for i in here}
    comment = _joined(a, b)

    def fn(s: EventSync) -> tuple[Stmt, ...]:
        if s.channel == a.channel and id(s) not in in_body:
            return (s,)  # a's pairs in its other bodies, its prologue and epilogue
        if id(s) not in keep:
            return ()  # the other pair's flag in the body, b's prologue and epilogue
        return (replace(s, channel=a.channel, comment=comment),)

    return _rewrite(kernel, {a.channel, b.channel}, fn)


def _carried_pair(cs: list[_Chan]) -> tuple[_Chan, _Chan, tuple[int, ...]] | None:
    """Two carried channels ``a``, ``b`` of one id count, their prologue sets and epilogue
    waits in the same bodies, ``b``'s one pair in a body where ``a`` has one pair too; and
    that body."""
    def ends(c: _Chan) -> list[tuple[str, tuple[int, ...]]]:
        return sorted((str(r), q) for r, _, q in c.flags
                      if r in (SyncRole.PROLOGUE, SyncRole.EPILOGUE))

    def pairs_in(c: _Chan, body: tuple[int, ...]) -> int:
        roles = [r for r, _, q in c.flags if q == body]
        return 1 if sorted(map(str, roles)) == ["set", "wait"] else 0

    for b in cs:
        mains = {q for r, _, q in b.flags if r in (SyncRole.SET, SyncRole.WAIT)}
        if not ends(b) or len(mains) != 1 or not pairs_in(b, body := next(iter(mains))):
            continue
        for a in cs:
            if a is not b and a.n_ids == b.n_ids and ends(a) == ends(b) \
                    and pairs_in(a, body):
                return a, b, body
    return None


def _joined(a: _Chan, b: _Chan) -> str:
    """The comment of two channels made one: both reasons, each once."""
    return "; ".join(dict.fromkeys(a.comment.split("; ") + b.comment.split("; ")))


def _merge(kernel: Kernel, a: _Chan, b: _Chan) -> Kernel:
    """One channel: the later of the two sets and the earlier of the two waits."""
    pa, pb = a.pair(), b.pair()
    assert pa is not None and pb is not None
    keep_set = a.channel if pa[0][0] > pb[0][0] else b.channel
    keep_wait = a.channel if pa[1][0] < pb[1][0] else b.channel
    comment = _joined(a, b)

    def fn(s: EventSync) -> tuple[Stmt, ...]:
        keep = keep_set if isinstance(s, SetFlag) else keep_wait
        if s.channel != keep:
            return ()
        return (replace(s, channel=a.channel, comment=comment),)

    return _rewrite(kernel, {a.channel, b.channel}, fn)


def _rewrite(kernel: Kernel, channels: set[int], fn) -> Kernel:  # noqa: ANN001
    class _M(StmtMutator):
        def visit_EventSync(self, s: EventSync) -> tuple[Stmt, ...]:
            return fn(s) if s.channel in channels else (s,)

    progs = tuple(replace(p, body=_M().visit_body(p.body)) for p in kernel.programs)
    return kernel.with_programs(progs)  # fresh ids for a tight pair's new waits


def _downgrade(s: EventSync) -> tuple[Stmt, ...]:
    if s.role in (SyncRole.PROLOGUE, SyncRole.EPILOGUE) and s.event_id == Affine(1):
        return ()
    return (replace(s, event_id=Affine()),)


def _tightener(fresh: int):  # noqa: ANN202 -- Instr -> tuple[Stmt, ...]
    """Each set of a channel (the loop bodies' and the prologue's) becomes a set with its wait
    right after it; the other waits go. A prologue set stays a tight pair, as its own channel
    (``fresh`` numbers on), because other syncs may lean on it: pruning may have dropped a pair
    between the loop and work before it that this prologue set and the first iteration's wait
    ordered."""
    extra = iter(range(fresh, fresh + 1000))
    kept: set[int | None] = set()  # channels whose first main set kept its number

    def tighten(s: EventSync) -> tuple[Stmt, ...]:
        if not isinstance(s, SetFlag) or s.role not in (SyncRole.SET, SyncRole.PROLOGUE):
            return ()
        # each tight pair its own channel: a channel shared by several bodies
        # (insert_sync.channel_numbers) has a main set in each
        ch = s.channel if s.role == SyncRole.SET and s.channel not in kept else next(extra)
        kept.add(s.channel)
        st = replace(s, event_id=Affine(), role=SyncRole.SET, channel=ch)
        wait = WaitFlag(s.dst, src=s.pipe, event_id=Affine(), channel=ch, role=SyncRole.WAIT,
                        comment=s.comment)
        return (st, wait)

    return tighten


def _finish(kernel: Kernel, bases: dict[int, int], keep_channels: bool = False) -> Kernel:
    class _M(StmtMutator):
        def visit_Sync(self, s: Sync) -> tuple[Stmt, ...]:
            if s.channel is None:
                return (s,)
            out = s if keep_channels else replace(s, channel=None, role=None)
            if isinstance(s, EventSync):
                out = replace(out, event_id=s.event_id + bases[s.channel])
            return (out,)

    progs = tuple(replace(p, body=_M().visit_body(p.body)) for p in kernel.programs)
    return replace(kernel, programs=progs)
