"""Happens-before over a synchronised program: which dependences its syncs order.

The sync passes' own oracle (independent of ``sim/checker.py``). It executes each program's
control flow with per-pipe vector clocks under the 910B pipe semantics:

* a ``set_flag`` on pipe p fires when every earlier p instruction is done, so it carries p's
  clock up to itself plus everything p already waited for; ``wait_flag`` on q joins that into q;
* a ``barrier`` on p orders every earlier p instruction before every later one;
* plain instructions on a pipe with ``needs_same_pipe_barrier`` are unordered among
  themselves; other pipes (S) run in order.

Knowledge is prefix-closed per pipe ("all p instructions up to #n are done"), so a dependence is
ordered iff for each sink instance the *latest* source instance it depends on is known done.

To stay cheap, loops whose variable no ``If`` tests are run for at most ``clamp`` iterations
(sync patterns are periodic in such loops: at most period 2 from ``k % 2`` event ids, and
dependence distances are bounded by the copies of a buffer), and only block 0 runs unless an
``If`` tests ``block_idx``. Before/after::

    load x; set MTE2->V 0; wait MTE2->V 0; add     ->  unordered_dependences(...) == []
    load x; add                                     ->  [RAW x_ub S0 -> S1]
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from ascendsched.lower.ir import BLOCK_IDX, Affine, For, If, Instr, Kernel, Stmt
from ascendsched.lower.polyhedral import Dependence, Dependences
from ascendsched.target.model import CoreType, Pipe, Target

_PIPES = tuple(p for p in Pipe if p != Pipe.ALL)


@dataclass(frozen=True)
class SyncProblem:
    """A dependence left unordered, or a flag misuse (``dep`` None)."""

    message: str
    dep: Dependence | None = None
    channels: tuple[object, ...] = ()  # sync channels involved (flag misuse)
    double_set: bool = False

    def __str__(self) -> str:
        return self.message


def unordered_dependences(kernel: Kernel, deps: Dependences | None, target: Target, *,
                          clamp: int = 6, by_channel: bool = True,
                          skip: frozenset[int] = frozenset(), first_only: bool = False
                          ) -> tuple[SyncProblem, ...]:
    """Dependences of ``deps`` that the syncs of ``kernel`` leave unordered, plus flag errors:
    a set that may fire before the previous wait of its event consumed the flag (double set),
    a wait with no set, a set never waited for. ``by_channel``: flags are told apart by their
    ``channel`` attr as well as their id (before event-id allocation). ``skip``: indices of
    dependences not to check; ``first_only``: stop at the first problem (a yes/no question)."""
    problems: list[SyncProblem] = []
    events: dict[tuple[int, tuple[int, ...]], tuple[Pipe, int, tuple[int, ...]]] = {}
    # the Instr objects survive insertion, so identity maps them to dependence ids
    ids = {id(i.instr): i.id for i in deps.instrs} if deps is not None else {}
    bounds: dict[CoreType, tuple[dict[str, int], tuple[int, ...]]] = {}
    for prog in kernel.programs:
        tested = _tested_vars(prog.body)
        blocks = tuple(range(kernel.block_dim)) if BLOCK_IDX in tested else (0,)
        limits: dict[tuple[str, int], int] = {}  # (loop var, extent) -> iterations run
        run = _Run(target, prog.core, ids, events, problems, tested, clamp, limits,
                   by_channel)
        for b in blocks:
            run.block(prog.body, b)
        bounds[prog.core] = (limits, blocks)
    if problems and first_only:
        return tuple(problems)
    # The instance pairs each dependence must order depend only on the loop structure, not on
    # the syncs, so they are computed once per Dependences and reused by every re-check
    # (remove_redundant_sync calls this once per candidate sync).
    cache: dict = deps.__dict__.setdefault("_pair_cache", {}) if deps is not None else {}
    for n, d in enumerate(deps or ()):
        if d.core not in bounds or n in skip:
            continue
        limits, blocks = bounds[d.core]
        key = (n, tuple(sorted(limits.items())), blocks)
        pairs = cache.get(key)
        if pairs is None:
            pairs = cache[key] = _instance_pairs(d, deps, limits, blocks)
        bad: list[str] = []
        for src_key, dst_key in pairs:
            if dst_key not in events or src_key not in events:
                bad.append(f"instance {src_key} or {dst_key} never ran")
                break
            spipe, sidx, _ = events[src_key]
            _, _, known = events[dst_key]
            if known[_PIPES.index(spipe)] < sidx:
                bad.append(f"{src_key} -> {dst_key}")
                if len(bad) >= 3:
                    break
        if bad:
            problems.append(SyncProblem(f"unordered: {d} at {', '.join(bad)}", d))
            if first_only:
                break
    return tuple(problems)


# --------------------------------------------------------------------------- private helpers
def _instance_pairs(d: Dependence, deps: Dependences, limits: dict[tuple[str, int], int],
                    blocks: tuple[int, ...]) -> tuple[tuple[tuple, tuple], ...]:
    """(source instance, sink instance) keys: the latest source of each sink instance."""
    src, dst = deps.info(d.src), deps.info(d.dst)
    rel = d.relation.intersect_domain(_box(src, limits, blocks)).intersect_range(
        _box(dst, limits, blocks))
    if rel.is_empty():
        return ()
    n_src = len(src.loops) + 1
    n_all = n_src + len(dst.loops) + 1
    latest: dict[tuple, tuple] = {}

    # Every pair of the (clamped) relation, keeping the latest source per sink in Python:
    # isl's lexmax of such quasi-affine relations (k mod 2 copies, floor-divided tile
    # indices) returned a wrong, earlier source here, hiding a real race.
    def point(p: isl.Point) -> None:
        coords = [p.get_coordinate_val(isl.dim_type.set, i).to_python() for i in range(n_all)]
        s_it, d_it = tuple(coords[:n_src]), tuple(coords[n_src:])
        if d_it not in latest or s_it > latest[d_it]:
            latest[d_it] = s_it

    rel.wrap().foreach_point(point)
    return tuple(((d.src, s_it), (d.dst, d_it)) for d_it, s_it in latest.items())


def _tested_vars(body: tuple[Stmt, ...]) -> frozenset[str]:
    out: set[str] = set()
    for s in body:
        if isinstance(s, If):
            for c in s.conds:
                out |= c.lhs.vars()
        if not isinstance(s, Instr):
            out |= _tested_vars(s.body)
    return frozenset(out)


def _box(info, limits: dict[tuple[str, int], int], blocks: tuple[int, ...]  # noqa: ANN001
         ) -> isl.Set:
    """The instances the clamped run executed. Limits are keyed by (var, extent): sibling
    loops may reuse a variable name with another extent, and so another clamped count."""
    vars_ = (BLOCK_IDX,) + info.loop_vars
    cons = [f"{BLOCK_IDX} <= {max(blocks)}"]
    cons += [f"{f.var} < {limits[(f.var, f.extent)]}" for f in info.loops
             if (f.var, f.extent) in limits]
    return isl.Set(f"{{ S{info.id}[{', '.join(vars_)}] : {' and '.join(cons)} }}")


class _Run:
    def __init__(self, target: Target, core: CoreType, ids: dict[int, int],
                 events: dict, problems: list[SyncProblem], tested: frozenset[str],
                 clamp: int, limits: dict[tuple[str, int], int], by_channel: bool) -> None:
        self.by_channel = by_channel
        self.target = target
        self.core = core
        self.ids = ids
        self.events = events
        self.problems = problems
        self.tested = tested
        self.clamp = clamp
        self.limits = limits

    def block(self, body: tuple[Stmt, ...], b: int) -> None:
        n = len(_PIPES)
        self.count = [0] * n
        self.known = [[0] * n for _ in range(n)]  # known[q][p]: p instrs done, as seen by q
        self.flags: dict[tuple, tuple[list[int], str, object]] = {}
        self.last_wait: dict[tuple, tuple[int, int, object]] = {}  # key -> (pipe, idx, chan)
        self.env: dict[str, int] = {BLOCK_IDX: b}
        self.iters: list[int] = [b]
        self.body(body)
        for key, (_, where, ch) in self.flags.items():
            self.problems.append(SyncProblem(f"block {b}: set {key} ({where}) is never waited",
                                             channels=(ch,)))

    def body(self, body: tuple[Stmt, ...]) -> None:
        for s in body:
            if isinstance(s, Instr):
                self.instr(s)
            elif isinstance(s, For):
                n = s.extent
                if s.var not in self.tested and n > self.clamp:  # keep the parity of k % 2
                    n = self.clamp + (n - self.clamp) % 2
                key = (s.var, s.extent)
                self.limits[key] = max(self.limits.get(key, 0), n)
                for i in range(n):
                    self.env[s.var] = i
                    self.iters.append(i)
                    self.body(s.body)
                    self.iters.pop()
                self.env.pop(s.var, None)
            elif s.evaluate(self.env):
                self.body(s.body)

    def instr(self, s: Instr) -> None:
        p = _PIPES.index(s.pipe) if s.pipe != Pipe.ALL else None
        ch = s.attr("channel")
        if s.op == "set_flag":
            self.count[p] += 1
            key = self._key(s, s.pipe, s.attr("dst"))
            if key in self.flags:
                self.problems.append(SyncProblem(f"second set of {key} before its wait",
                                                 channels=(ch, self.flags[key][2])))
            prev = self.last_wait.get(key)
            if prev is not None and self.known[p][prev[0]] < prev[1]:
                self.problems.append(SyncProblem(
                    f"set {key} ({s.comment}) may fire before the previous wait consumed it",
                    channels=(ch, prev[2]), double_set=True))
            clock = list(self.known[p])
            clock[p] = self.count[p]
            self.flags[key] = (clock, s.comment, ch)
        elif s.op == "wait_flag":
            self.count[p] += 1
            key = self._key(s, s.attr("src"), s.pipe)
            if key not in self.flags:
                self.problems.append(SyncProblem(f"wait {key} has no pending set (deadlock)",
                                                 channels=(ch,)))
                return
            clock, _, _ = self.flags.pop(key)
            self.known[p] = [max(a, c) for a, c in zip(self.known[p], clock, strict=True)]
            self.last_wait[key] = (p, self.count[p], ch)
        elif s.op == "barrier":
            if p is None:
                for q in range(len(_PIPES)):
                    self.known[q] = [max(self.count[r], self.known[q][r])
                                     for r in range(len(_PIPES))]
            else:
                self.known[p][p] = self.count[p]
        elif s.is_sync:
            return  # cross-core flags: outside this oracle
        else:
            self.count[p] += 1
            if id(s) not in self.ids:
                return  # not an instruction of the analysed kernel
            self.events[(self.ids[id(s)], tuple(self.iters))] = (
                s.pipe, self.count[p], tuple(self.known[p]))
            if not self.target.needs_same_pipe_barrier.get(s.pipe, True):
                self.known[p][p] = self.count[p]

    def _key(self, s: Instr, src: object, dst: object) -> tuple:
        eid = s.attr("event_id")
        value = eid.evaluate(self.env) if isinstance(eid, Affine) else eid
        return (str(src), str(dst), s.attr("channel") if self.by_channel else None, value)
