"""Sync insertion: set_flag/wait_flag pairs and barriers that order every dependence.

Runs on the *planned* kernel (dependences on physical bytes, so reuse of dead space brings its
WAR dependences). For each dependence ``src -> dst`` it walks the common loops outermost first:

* if some instances are carried by loop L and, inside L's body, ``src``'s statement comes
  before ``dst``'s, one pair *inside* the body covers everything (set right after the source
  statement, wait right before the sink statement);
* if the source comes after the sink in the body, the standard loop-carried pattern: wait
  before the sink, set after the source, a prologue set before L and an epilogue wait after it,
  so every set meets exactly one wait on every path (zero-trip loops too). With distance >= 2
  (double buffering) the pair ping-pongs: event id ``base + L % 2``, two prologue sets and
  two epilogue waits, so the two copies overlap;
* instances sharing all common iterations get a pair in the innermost common body.

Same-pipe dependences get ``barrier`` right before the sink statement. Then
``remove_redundant_sync`` drops every pair implied by the others and ``allocate_event_ids``
fits the ids into the target's budget. Before/after (vadd, one copy)::

    for k: load x; load y; add; store
    ->  set V->MTE2 0; set MTE3->V 0
        for k: wait V->MTE2 0; load x; load y; set MTE2->V 0; wait MTE2->V 0;
               wait MTE3->V 0; add; set V->MTE2 0; set V->MTE3 0; wait V->MTE3 0; store;
               set MTE3->V 0
        wait V->MTE2 0; wait MTE3->V 0
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ascendsched.errors import SyncError
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.allocate_event_ids import allocate_event_ids
from ascendsched.lower.happens_before import SyncOracle, SyncProblem
from ascendsched.lower.instances import InstrInfo
from ascendsched.lower.ir import For, If, Instr, Kernel, Program, Stmt
from ascendsched.lower.polyhedral import Dependence, Dependences, flat_distance
from ascendsched.lower.remove_redundant_sync import remove_redundant_sync
from ascendsched.lower.sync_ir import Barrier, SetFlag, SyncRole, WaitFlag
from ascendsched.target.model import Pipe, Target


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
    return allocate_event_ids(pruned.kernel, target, oracle=pruned.oracle,
                              dropped=pruned.dropped, deps=deps)


def place_syncs(kernel: Kernel, deps: Dependences, target: Target) -> Placed:
    """Every needed sync, one channel per placement (``channel``, ``role`` set), local ids.

    A flag dependence between two sibling branches that no iteration runs together (a full
    tile's version and a tail version, in different iterations) is *deferred*: a pair between
    the branches would make the sink pipe wait for this iteration's source in every
    iteration (no double-buffered overlap), and such a dependence is usually implied by the
    pairs inside the branches. It gets its pair only if the others leave it unordered.
    """
    reqs: dict[_Req, list[str]] = {}
    per_dep: list[list[_Req]] = []
    for d in deps:
        per_dep.append(_requirements(d, deps, kernel, target))
        for r in per_dep[-1]:
            reqs.setdefault(r, []).append(d.reason)
    reqs, covered = _fewest_barriers(reqs)
    settles: dict[_Req, set[int]] = {}
    for n, rs in enumerate(per_dep):
        if len(rs) == 1 and rs[0] in covered:
            settles.setdefault(covered[rs[0]], set()).add(n)
    skip = frozenset(n for ns in settles.values() for n in ns)
    deferred = frozenset(n for n, d in enumerate(deps) if _deferrable(d, per_dep[n], kernel))
    found = _place_deferring(kernel, reqs, per_dep, deferred, deps, target, skip) \
        if deferred else None
    if found is None:
        placed, reqs, problems, oracle = _settle(kernel, _fewest_flags(reqs), deps, target,
                                                 skip)
    else:
        (placed, reqs, oracle), problems = found, ()
    if problems:
        raise SyncError("sync placement cannot order this kernel (a pair that needs a reverse "
                        "'slot free' sync is not supported yet):\n  "
                        + "\n  ".join(map(str, problems)))
    channel = {r: n for n, r in enumerate(reqs)}  # _build numbers channels in this order
    return Placed(placed, oracle, {channel[r]: frozenset(ns) for r, ns in settles.items()})


def _place_deferring(kernel: Kernel, reqs: dict[_Req, list[str]], per_dep: list[list[_Req]],
                     deferred: frozenset[int], deps: Dependences, target: Target,
                     skip: frozenset[int]
                     ) -> tuple[Kernel, dict[_Req, list[str]], SyncOracle] | None:
    """Placement without the deferred dependences' pairs, then with a spanning carried pair
    for those left unordered; None if either step leaves a problem."""
    needed = {r for n, rs in enumerate(per_dep) if n not in deferred for r in rs}
    lean = {r: w for r, w in reqs.items() if r.src == r.dst or r in needed}
    placed, settled, problems, oracle = _settle(kernel, _fewest_flags(lean), deps, target,
                                                skip | deferred)
    if problems:
        return None
    index = {d: n for n, d in enumerate(deps)}  # Dependence hashes by identity (eq=False)
    late = {index[p.dep] for p in oracle.problems(
        skip=frozenset(range(len(deps))) - deferred) if p.dep is not None}
    if not late:
        return placed, settled, oracle
    # wait before the first branch, set after the last: no wait on this iteration's source
    extra: dict[_Req, list[str]] = {}
    for n in late:
        for r in per_dep[n]:
            extra.setdefault(_spanning(r, deps.deps[n], kernel), []).append(deps.deps[n].reason)
    trial = _fewest_flags(_merged({**{r: list(w) for r, w in lean.items()}, **extra}))
    placed, trial, problems, oracle = _settle(kernel, trial, deps, target, skip)
    return None if problems else (placed, trial, oracle)


def _settle(kernel: Kernel, reqs: dict[_Req, list[str]], deps: Dependences, target: Target,
            skip: frozenset[int]
            ) -> tuple[Kernel, dict[_Req, list[str]], tuple[SyncProblem, ...], SyncOracle]:
    """Build ``reqs`` and fix their event ids until the happens-before check passes (or
    cannot be helped): the placed kernel, the final requirements, the problems left and the
    oracle built on the placed kernel."""
    placed = _build(kernel, reqs)
    oracle = SyncOracle(placed, deps, target)
    # A pair inside a loop whose source pipe may run an iteration ahead (double buffering)
    # would set its flag again before the previous wait consumed it: give it ids k % 2.
    problems = oracle.problems(skip=skip)
    again = {int(c) for p in problems if p.double_set for c in p.channels[:1]}
    if again:
        reqs = _fewest_flags(_merged({(_pingpong(r, kernel) if n in again else r): why
                                      for n, (r, why) in enumerate(reqs.items())}))
        placed = _build(kernel, reqs)
        oracle = SyncOracle(placed, deps, target, reuse=oracle)
        problems = oracle.problems(skip=skip)
    # ping-pong ids over nested loops may skip a pair of distance 1 at a loop boundary
    weak = {p.dep.reason for p in problems if p.dep is not None}
    if weak:
        reqs = _merged({(replace(r, ids=1) if r.ids == 2 and set(why) & weak else r): why
                        for r, why in reqs.items()})
        placed = _build(kernel, reqs)
        oracle = SyncOracle(placed, deps, target)
        problems = oracle.problems(skip=skip)
    return placed, reqs, problems, oracle


def _spanning(r: _Req, d: Dependence, kernel: Kernel) -> _Req:
    """The carried pattern for an in-body requirement ``after < before`` over the innermost
    loop around its body: wait before child ``after``, set after child ``before``."""
    prog = kernel.program(r.core)  # type: ignore[arg-type]
    assert prog is not None
    loop = next((r.container[:j] for j in range(len(r.container), 0, -1)
                 if isinstance(_node(prog.body, r.container[:j]), For)), None)
    if loop is None:
        return r
    var = _node(prog.body, loop).var  # type: ignore[union-attr]
    dist = d.distance(var) or 1
    return replace(r, after=r.before, before=r.after, loop=loop, var=var,
                   ids=2 if dist >= 2 else 1)


def _deferrable(d: Dependence, rs: list[_Req], kernel: Kernel) -> bool:
    if d.loop_independent or len(rs) != 1 or d.src_pipe == d.dst_pipe:
        return False
    r = rs[0]
    if r.loop is not None or not r.after < r.before:
        return False
    prog = kernel.program(d.core)  # type: ignore[arg-type]
    assert prog is not None
    body = _node(prog.body, r.container).body if r.container else prog.body  # type: ignore[union-attr]
    x, y = body[r.after], body[r.before]
    return (isinstance(x, If) and isinstance(y, If)
            and any(c.lhs == e.lhs and _disjoint(c, e) for c in x.conds for e in y.conds))


def _disjoint(c: Cond, e: Cond) -> bool:
    """Two conditions ``lhs op rhs`` on one expression that no value satisfies together."""
    inf = float("inf")

    def interval(op: str, v: int) -> tuple[float, float]:
        return {"<": (-inf, v - 1), "<=": (-inf, v), ">=": (v, inf), "==": (v, v)}[op]

    (lo1, hi1), (lo2, hi2) = interval(c.op, c.rhs), interval(e.op, e.rhs)
    return hi1 < lo2 or hi2 < lo1


def _merged(pairs: dict[_Req, list[str]]) -> dict[_Req, list[str]]:
    out: dict[_Req, list[str]] = {}
    for r, why in pairs.items():
        out.setdefault(r, []).extend(why)
    return out


def _fewest_barriers(reqs: dict[_Req, list[str]]
                     ) -> tuple[dict[_Req, list[str]], dict[_Req, _Req]]:
    """Same-pipe requirements as the fewest barriers (interval stabbing, per body), and for
    each requirement a ``keep`` barrier meets, that barrier.

    A barrier in a body orders every earlier instruction of its pipe before every later one, so
    a loop-independent requirement ``after < before`` is met by a barrier in any gap
    ``after + 1 .. before`` (greedy by right end is optimal: take the latest gap, reuse a
    chosen one); these barriers are marked ``keep``. A carried one (source after sink in the
    loop body) is met by any barrier after the source or up to the sink, else it gets a
    barrier right before the sink, which pruning may still find implied by flags.
    """
    out: dict[_Req, list[str]] = {}
    covered: dict[_Req, _Req] = {}  # requirement -> the keep barrier that meets it
    groups: dict[tuple, list[tuple[_Req, list[str]]]] = {}
    for r, why in reqs.items():
        if r.src != r.dst:
            out[r] = why
        else:
            groups.setdefault((r.core, r.src, r.container), []).append((r, why))
    for (core, pipe, container), items in groups.items():
        reasons: dict[int, list[str]] = {}
        gap_of: dict[_Req, int] = {}  # requirement -> gap of the keep barrier that meets it
        for r, why in sorted((x for x in items if x[0].after < x[0].before),
                             key=lambda x: x[0].before):
            hit = [g for g in reasons if r.after < g <= r.before]
            gap_of[r] = max(hit) if hit else r.before
            reasons.setdefault(gap_of[r], []).extend(why)
        kept = set(reasons)
        for r, why in items:
            if r.after >= r.before:
                hit = [g for g in kept if g > r.after or g <= r.before]
                if hit:
                    gap_of[r] = hit[0]
                reasons.setdefault(hit[0] if hit else r.before, []).extend(why)
        barrier = {g: _Req(core, pipe, pipe, container, g - 1, g, keep=g in kept)
                   for g in sorted(reasons)}
        for g, r in barrier.items():
            out[r] = reasons[g]
        covered.update({r: barrier[g] for r, g in gap_of.items()})
    return out, covered


def _fewest_flags(reqs: dict[_Req, list[str]]) -> dict[_Req, list[str]]:
    """Flag requirements of one kind (pipes, body, loop, ids) folded into the pairs that
    already imply them, without delaying any sink.

    A pair with its set after child ``a`` and its wait before child ``b`` of a body orders
    every dependence of that kind whose source is at or before ``a`` and whose sink is at or
    after ``b``. Taking requirements tightest first (earliest sink, latest source), each joins
    a pair it contains or becomes a pair of its own; merging any further would make a sink wait
    for a source it does not depend on (less overlap), which pruning never does either.
    """
    out: dict[_Req, list[str]] = {}
    kinds: dict[tuple, list[tuple[_Req, list[str]]]] = {}
    for r, why in reqs.items():
        if r.src == r.dst:
            out.setdefault(r, []).extend(why)
        else:
            kinds.setdefault((r.core, r.src, r.dst, r.container, r.loop, r.var, r.ids),
                             []).append((r, why))
    for items in kinds.values():
        pairs: list[tuple[_Req, list[str]]] = []
        for r, why in sorted(items, key=lambda x: (x[0].before, -x[0].after)):
            home = next((p for p in pairs if p[0].after >= r.after and p[0].before <= r.before),
                        None)
            if home is None:
                pairs.append((r, list(why)))
            else:
                home[1].extend(why)
        for r, why in pairs:
            out.setdefault(r, []).extend(why)
    return out


def _build(kernel: Kernel, reqs: dict[_Req, list[str]]) -> Kernel:
    by_core: dict[object, dict] = {}
    for n, (req, reasons) in enumerate(reqs.items()):
        comment = "; ".join(dict.fromkeys(reasons))
        core_inserts = by_core.setdefault(req.core, {})
        for path, gap, group, ins in _materialize(req, n, comment, kernel):
            core_inserts.setdefault(path, {}).setdefault(gap, []).append((group, n, ins))
    programs = []
    for p in kernel.programs:
        ins = by_core.get(p.core)
        programs.append(p if not ins else Program(p.core, _rebuild(p.body, (), ins)))
    if all(a is b for a, b in zip(programs, kernel.programs, strict=True)):
        return kernel
    return kernel.with_programs(tuple(programs))  # fresh ids for the syncs


def sync_stats(kernel: Kernel) -> dict[str, object]:
    """Sync counts for benchmark reports.

    ``sets``/``waits``/``barriers``/``pipe_all``: executed by one block (block 0) in total;
    ``static``: instructions in the program text; ``per_iteration``: for each loop variable,
    the syncs directly in its body (executed once per iteration).
    """
    static = {"sets": 0, "waits": 0, "barriers": 0, "pipe_all": 0}
    dynamic = dict(static)
    per_iter: dict[str, dict[str, int]] = {}

    def kind(s: Instr) -> str | None:
        if isinstance(s, SetFlag):
            return "sets"
        if isinstance(s, WaitFlag):
            return "waits"
        if isinstance(s, Barrier):
            return "pipe_all" if s.pipe == Pipe.ALL else "barriers"
        return None

    def walk(body: tuple[Stmt, ...], env: dict[str, int], loop: str | None, times: int) -> None:
        for s in body:
            if isinstance(s, Instr):
                k = kind(s)
                if k:
                    dynamic[k] += times
            elif isinstance(s, For):
                if _has_if(s.body):
                    for i in range(s.extent):
                        walk(s.body, {**env, s.var: i}, s.var, times)
                elif s.extent:
                    walk(s.body, {**env, s.var: 0}, s.var, times * s.extent)
            elif s.evaluate(env):
                walk(s.body, env, loop, times)

    def walk_static(body: tuple[Stmt, ...], loop: str | None) -> None:
        for s in body:
            if isinstance(s, Instr):
                k = kind(s)
                if k:
                    static[k] += 1
                    if loop is not None:
                        d = per_iter.setdefault(loop, {"sets": 0, "waits": 0, "barriers": 0,
                                                       "pipe_all": 0})
                        d[k] += 1
            else:
                walk_static(s.body, s.var if isinstance(s, For) else loop)

    for p in kernel.programs:
        walk(p.body, {"block_idx": 0}, None, 1)
        walk_static(p.body, None)
    return {**dynamic, "static": static, "per_iteration": per_iter}


# --------------------------------------------------------------------------- private helpers
@dataclass(frozen=True)
class _Req:
    """One sync placement. ``container``: path of the body (For/If, () = root) holding the set
    after child ``after`` and the wait before child ``before``. ``loop`` (carried pattern): path
    of the loop with prologue/epilogue, ``ids`` 2 for ping-pong on ``var``."""

    core: object
    src: Pipe
    dst: Pipe
    container: tuple[int, ...]
    after: int
    before: int
    loop: tuple[int, ...] | None = None
    var: str = ""
    ids: int = 1
    keep: bool = False  # a barrier no other sync can replace (not a pruning candidate)


def _requirements(d: Dependence, deps: Dependences, kernel: Kernel, target: Target
                  ) -> list[_Req]:
    s, t = deps.info(d.src), deps.info(d.dst)
    if d.src_pipe != d.dst_pipe and not target.is_legal_event(d.core, d.src_pipe, d.dst_pipe):
        raise SyncError(f"dependence {d} needs a {d.src_pipe}->{d.dst_pipe} flag, which "
                        f"{target.name} {d.core} does not have (legal: "
                        f"{sorted(f'{a}_{b}' for a, b in target.hard_events[d.core])})")
    carried = dict(d.carried)
    prog = kernel.program(d.core)
    assert prog is not None
    m = len(d.common_loops)
    first = next((j for j in range(m) if d.common_loops[j] in carried), None)
    if first is None:  # loop-independent only: a pair in the innermost common body
        cp = _descend(prog.body, s.loop_paths[m - 1] if m else (), s, t)
        return [_Req(d.core, d.src_pipe, d.dst_pipe, cp, s.path[len(cp)], t.path[len(cp)])]
    # From the outermost carrying loop inwards: a source statement before the sink statement
    # in a body -> one pair there covers this level, all deeper ones and the outer ones
    # (the set fires after every earlier source instruction). Source and sink inside one
    # deeper loop -> go down, keeping the outer loop for the prologue/epilogue, so the
    # carried pair runs over the flattened iterations (one pair for all levels).
    outer: tuple[int, ...] | None = None
    outer_j = first
    for j in range(first, m):
        loop = s.loop_paths[j]
        cp = _descend(prog.body, loop, s, t)
        a, b = s.path[len(cp)], t.path[len(cp)]
        if a < b:
            return [_Req(d.core, d.src_pipe, d.dst_pipe, cp, a, b)]
        if a == b and j + 1 < m and s.loop_paths[j + 1] == cp + (a,):
            if d.src_pipe == d.dst_pipe and not d.loop_independent \
                    and not carried.keys() & set(d.common_loops[j + 1:]):
                # every pair is carried here or further out (e.g. a vector loop over rows
                # rewriting a tile buffer in the next tile): any barrier in this body between
                # the iterations orders them, not one per iteration of the inner loop
                return [_Req(d.core, d.src_pipe, d.dst_pipe, cp, a, a)]
            if outer is None:
                outer, outer_j = loop, j
            continue
        var = d.common_loops[j]
        # the pair runs over the flattened iterations of loops outer_j..j: a dependence not
        # carried by ``var`` itself may still be 2 flattened steps apart (carried by the L1 K
        # loop with distance 1, two L0 K steps per L1 step), which ping-pong ids serve. (An
        # odd inner extent can make the flattened distance 1 at the boundary; the happens-
        # before check in place_syncs catches that and falls back to one id.)
        dist = carried.get(var, 1)
        if outer is not None:
            dist = max(dist, flat_distance(d, deps, outer_j, j))
        return [_Req(d.core, d.src_pipe, d.dst_pipe, cp, a, b, outer or loop, var,
                     2 if dist >= 2 else 1)]
    raise SyncError(f"internal: no placement for {d}")


def _pingpong(r: _Req, kernel: Kernel) -> _Req:
    """A loop-independent pair in a loop body, with ids alternating on the innermost loop."""
    if r.loop is not None or r.src == r.dst:
        return r
    prog = kernel.program(r.core)  # type: ignore[arg-type]
    assert prog is not None
    var = ""
    for j in range(1, len(r.container) + 1):
        node = _node(prog.body, r.container[:j])
        if isinstance(node, For):
            var = node.var
    return replace(r, var=var, ids=2) if var else r


def _node(body: tuple[Stmt, ...], path: tuple[int, ...]) -> Stmt:
    node: Stmt = body[path[0]]
    for i in path[1:]:
        node = node.body[i]  # type: ignore[union-attr]
    return node


def _descend(root: tuple[Stmt, ...], cp: tuple[int, ...], s: InstrInfo, t: InstrInfo
             ) -> tuple[int, ...]:
    """Go down through Ifs that contain both instructions."""
    while (len(s.path) > len(cp) + 1 and len(t.path) > len(cp) + 1
           and s.path[len(cp)] == t.path[len(cp)]
           and isinstance(_node(root, cp + (s.path[len(cp)],)), If)):
        cp = cp + (s.path[len(cp)],)
    return cp


# insertion groups inside one gap, in order
_SET, _EPILOGUE, _PROLOGUE, _WAIT, _BARRIER = range(5)


def _materialize(r: _Req, n: int, comment: str, kernel: Kernel
                 ) -> list[tuple[tuple[int, ...], int, int, Instr]]:
    """(container path, gap, group, instr) for requirement ``r`` as channel ``n``."""
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
    if r.loop is not None:
        parent, idx = r.loop[:-1], r.loop[-1]
        for c in range(r.ids):
            out.append((parent, idx, _PROLOGUE, set_(Affine(c), SyncRole.PROLOGUE)))
            out.append((parent, idx + 1, _EPILOGUE, wait(Affine(c), SyncRole.EPILOGUE)))
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


def _has_if(body: tuple[Stmt, ...]) -> bool:
    return any(isinstance(s, If) or (isinstance(s, For) and _has_if(s.body)) for s in body)
