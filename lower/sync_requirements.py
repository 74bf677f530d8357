"""Where each dependence needs a sync: placement requirements, and folding them into few syncs.

The first half of sync insertion (``insert_sync.py`` builds the kernel from these and checks it).
``requirements`` turns one dependence ``src -> dst`` into the :class:`Requirement` s that order
it, walking the common loops outermost first:

* if some instances are carried by loop L and, inside L's body, ``src``'s statement comes
  before ``dst``'s, one pair *inside* the body covers everything (set right after the source
  statement, wait right before the sink statement);
* if the source comes after the sink in the body, the standard loop-carried pattern: wait
  before the sink, set after the source, a prologue set before L and an epilogue wait after it,
  so every set meets exactly one wait on every path (zero-trip loops too). With distance >= 2
  (double buffering) the pair ping-pongs: event id ``base + L % 2``, two prologue sets and
  two epilogue waits, so the two copies overlap;
* instances sharing all common iterations get a pair in the innermost common body;
* same-pipe dependences get a barrier right before the sink statement.

``fewest_barriers`` and ``fewest_flags`` then fold the requirements of one body into the
fewest barriers and pairs that meet them all without delaying any sink; ``pingpong`` and
``spanning`` are the rewrites placement falls back to. Before/after (vadd, one copy: the
x_ub RAW pair folds into the y_ub one, whose set comes after both loads)::

    RAW x_ub S0 -> S2, RAW y_ub S1 -> S2   ->  one MTE2->V pair: set after child 1, wait
                                               before child 2 of the loop body
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ascendsched.errors import SyncError
from ascendsched.lower.affine import Cond
from ascendsched.lower.instances import InstrInfo
from ascendsched.lower.ir import For, If, Kernel, Stmt, iter_instrs
from ascendsched.lower.polyhedral import Dependence, Dependences, flat_distance
from ascendsched.target.model import Pipe, Target


@dataclass(frozen=True)
class Requirement:
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


Reasons = dict[Requirement, list[str]]  # each requirement with the reasons (dependences) it serves


def requirements(d: Dependence, deps: Dependences, kernel: Kernel, target: Target
                 ) -> list[Requirement]:
    """The placement that orders dependence ``d`` (module docstring), as a one-element list."""
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
        return [Requirement(d.core, d.src_pipe, d.dst_pipe, cp, s.path[len(cp)], t.path[len(cp)])]
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
            return [Requirement(d.core, d.src_pipe, d.dst_pipe, cp, a, b)]
        if a == b and j + 1 < m and s.loop_paths[j + 1] == cp + (a,):
            if d.src_pipe == d.dst_pipe and not d.loop_independent \
                    and not carried.keys() & set(d.common_loops[j + 1:]):
                # every pair is carried here or further out (e.g. a vector loop over rows
                # rewriting a tile buffer in the next tile): any barrier in this body between
                # the iterations orders them, not one per iteration of the inner loop
                return [Requirement(d.core, d.src_pipe, d.dst_pipe, cp, a, a)]
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
        if outer is not None and d.src_pipe != d.dst_pipe:  # (a barrier has no ids)
            dist = max(dist, flat_distance(d, deps, outer_j, j))
        return [Requirement(d.core, d.src_pipe, d.dst_pipe, cp, a, b, outer or loop, var,
                     2 if dist >= 2 else 1)]
    raise SyncError(f"internal: no placement for {d}")


def fewest_barriers(reqs: Reasons) -> tuple[Reasons, dict[Requirement, Requirement]]:
    """Same-pipe requirements as the fewest barriers (interval stabbing, per body), and for
    each requirement a ``keep`` barrier meets, that barrier.

    A barrier in a body orders every earlier instruction of its pipe before every later one, so
    a loop-independent requirement ``after < before`` is met by a barrier in any gap
    ``after + 1 .. before`` (greedy by right end is optimal: take the latest gap, reuse a
    chosen one); these barriers are marked ``keep``. A carried one (source after sink in the
    loop body) is met by any barrier after the source or up to the sink, else it gets a
    barrier right before the sink, which pruning may still find implied by flags.
    """
    out: Reasons = {}
    covered: dict[Requirement, Requirement] = {}  # requirement -> the keep barrier that meets it
    groups: dict[tuple, list[tuple[Requirement, list[str]]]] = {}
    for r, why in reqs.items():
        if r.src != r.dst:
            out[r] = why
        else:
            groups.setdefault((r.core, r.src, r.container), []).append((r, why))
    for (core, pipe, container), items in groups.items():
        reasons: dict[int, list[str]] = {}
        gap_of: dict[Requirement, int] = {}  # requirement -> gap of the keep barrier that meets it
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
        barrier = {g: Requirement(core, pipe, pipe, container, g - 1, g, keep=g in kept)
                   for g in sorted(reasons)}
        for g, r in barrier.items():
            out[r] = reasons[g]
        covered.update({r: barrier[g] for r, g in gap_of.items()})
    return out, covered


def fewest_flags(reqs: Reasons) -> Reasons:
    """Flag requirements of one kind (pipes, body, loop, ids) folded into the pairs that
    already imply them, without delaying any sink.

    A pair with its set after child ``a`` and its wait before child ``b`` of a body orders
    every dependence of that kind whose source is at or before ``a`` and whose sink is at or
    after ``b``. Taking requirements tightest first (earliest sink, latest source), each joins
    a pair it contains or becomes a pair of its own; merging any further would make a sink wait
    for a source it does not depend on (less overlap), which pruning never does either.
    """
    out: Reasons = {}
    kinds: dict[tuple, list[tuple[Requirement, list[str]]]] = {}
    for r, why in reqs.items():
        if r.src == r.dst:
            out.setdefault(r, []).extend(why)
        else:
            kinds.setdefault((r.core, r.src, r.dst, r.container, r.loop, r.var, r.ids),
                             []).append((r, why))
    for items in kinds.values():
        pairs: list[tuple[Requirement, list[str]]] = []
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


def merged(pairs: Reasons) -> Reasons:
    """``pairs`` with the reasons of equal requirements joined."""
    out: Reasons = {}
    for r, why in pairs.items():
        out.setdefault(r, []).extend(why)
    return out


def pingpong(r: Requirement, kernel: Kernel) -> Requirement:
    """A loop-independent pair in a loop body, with ids alternating on the innermost loop."""
    if r.loop is not None or r.src == r.dst:
        return r
    prog = kernel.program(r.core)  # type: ignore[arg-type]
    assert prog is not None
    loop = innermost_loop(prog.body, r.container)
    if loop is None:
        return r
    return replace(r, var=node_at(prog.body, loop).var, ids=2)  # type: ignore[union-attr]


def spanning(r: Requirement, d: Dependence, kernel: Kernel) -> Requirement:
    """The carried pattern for an in-body requirement ``after < before`` over the innermost
    loop around its body: wait before child ``after``, set after child ``before`` (a
    carried requirement is one already)."""
    if r.loop is not None:
        return r
    prog = kernel.program(r.core)  # type: ignore[arg-type]
    assert prog is not None
    loop = innermost_loop(prog.body, r.container)
    if loop is None:
        return r
    var = node_at(prog.body, loop).var  # type: ignore[union-attr]
    dist = d.distance(var) or 1
    return replace(r, after=r.before, before=r.after, loop=loop, var=var,
                   ids=2 if dist >= 2 else 1)


def mirrored(r: Requirement, d: Dependence, deps: Dependences, kernel: Kernel,
             held: frozenset[tuple]) -> list[Requirement]:
    """For a deferred dependence between sibling branches that the others leave unordered:
    the carried pair each of the two branches would have for its own uses if it ran in two
    trips, where it has none of that kind (a branch that never follows itself on a core):
    in the sink's branch, wait before the sink's child and set after the branch's last child
    on the source pipe; in the source's branch, set after the source's child and wait before
    the branch's first child on the sink pipe. Each joins the other branches' pairs of its
    kind in one channel (``channel_numbers``), so a trip waits and sets once whichever branch
    it runs, and the chain from the source reaches the sink through the trips between them
    (a set fires after every earlier instruction of its pipe, a wait holds every later one).
    ``held``: (core, source pipe, sink pipe, body, ids) of the carried pairs placed already.
    Empty when neither branch needs or can take such a pair."""
    prog = kernel.program(r.core)  # type: ignore[arg-type]
    assert prog is not None
    loop = innermost_loop(prog.body, r.container)
    if loop is None:
        return []
    var = node_at(prog.body, loop).var  # type: ignore[union-attr]
    ids = 2 if (d.distance(var) or 1) >= 2 else 1
    out = []
    for branch, x, sink_side in ((r.container + (r.before,), deps.info(d.dst), True),
                                 (r.container + (r.after,), deps.info(d.src), False)):
        if x.path[:len(branch)] != branch or (r.core, r.src, r.dst, branch, ids) in held:
            continue
        own = x.path[len(branch)]
        body = node_at(prog.body, branch).body  # type: ignore[union-attr]
        if sink_side:
            other = max((n for n, y in enumerate(body) if _on_pipe(y, r.src)), default=-1)
            after, before = other, own
        else:
            other = min((n for n, y in enumerate(body) if _on_pipe(y, r.dst)), default=own)
            after, before = own, other
        if after > before:
            out.append(Requirement(r.core, r.src, r.dst, branch, after, before, loop, var, ids))
    return out


def _on_pipe(s: Stmt, pipe: Pipe) -> bool:
    """Whether ``s`` is or holds an instruction on ``pipe``."""
    return any(i.pipe == pipe for i, _ in iter_instrs((s,)))


def deferrable(d: Dependence, rs: list[Requirement], kernel: Kernel) -> bool:
    """Whether ``d``'s one pair would join two sibling branches that no iteration runs
    together: an in-body pair from an earlier branch to a later one, or a carried pair from a
    later branch to an earlier one (``place_syncs`` places it only if the other pairs leave
    ``d`` unordered)."""
    if d.loop_independent or len(rs) != 1 or d.src_pipe == d.dst_pipe:
        return False
    r = rs[0]
    if (r.loop is None) != (r.after < r.before):
        return False  # an in-body pair forward, or a carried one backward (sink's branch first)
    prog = kernel.program(d.core)  # type: ignore[arg-type]
    assert prog is not None
    holder = node_at(prog.body, r.container) if r.container else None
    body = holder.body if holder is not None else prog.body  # type: ignore[union-attr]
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


def innermost_loop(body: tuple[Stmt, ...], path: tuple[int, ...]) -> tuple[int, ...] | None:
    """The path of the innermost loop among the statement at child-index ``path`` of ``body``
    and its ancestors (None: none is a loop)."""
    return next((path[:j] for j in range(len(path), 0, -1)
                 if isinstance(node_at(body, path[:j]), For)), None)


def node_at(body: tuple[Stmt, ...], path: tuple[int, ...]) -> Stmt:
    """The statement at child-index ``path`` of ``body``."""
    node: Stmt = body[path[0]]
    for i in path[1:]:
        node = node.body[i]  # type: ignore[union-attr]
    return node


def _descend(root: tuple[Stmt, ...], cp: tuple[int, ...], s: InstrInfo, t: InstrInfo
             ) -> tuple[int, ...]:
    """Go down through Ifs that contain both instructions."""
    while (len(s.path) > len(cp) + 1 and len(t.path) > len(cp) + 1
           and s.path[len(cp)] == t.path[len(cp)]
           and isinstance(node_at(root, cp + (s.path[len(cp)],)), If)):
        cp = cp + (s.path[len(cp)],)
    return cp
