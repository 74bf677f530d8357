"""Cross-core flags of a mixed kernel, derived from the GM dependences between its programs.

The AIC and AIV programs of a mixed kernel (``build_mixed.py``) share a loop skeleton: the same
top-level ``For`` loops (one per tile class: variable, trips, guard). Their meaning is the
sequential program that runs, per iteration of the skeleton, the AIC's body and then the AIV's.
``plan_cross_sync`` computes with isl (``instances.py``, ``byte_access.py``) every pair of
instances on the two cores that touch the same GM bytes, at least one writing, ordered by that
meaning, and measures each pair's distance in *iterations* (counted densely over the skeleton's
loops, per block). Per (source core, source pipe, sink core) one *channel* of counting flags
orders all its dependences: in every iteration the source core sets after the part holding its
sources, the sink core waits before the part holding its sinks (a tile class's body under a
"tile exists" guard is split there into two guards, ``_split_guard``: the wait holds back
only the tile from its first sink on, the set follows its last source; sources and sinks:
every access of the channel's kind to its GM space on that core, so iterations whose
instances happen not to conflict, e.g. a slot's first use, keep the same shape), and a
channel whose least distance is ``d`` > 0 starts with ``d`` sets before the loops (the sink's
first ``d`` waits need no source) and ends with ``d`` waits after them. The k-th wait consumes
the k-th set (the flag id is a counter: asc-devkit docs/zh/api/SIMD-API/基础API/同步控制/核间同步/
CrossCoreSetFlag(ISASI).md, "每个ID对应一个用于控制同步的计数器"; a set fires when earlier
work of its pipe is done, a wait blocks the whole waiting core, CrossCoreWaitFlag(ISASI).md),
so iteration ``j``'s sinks run after iteration ``j - d``'s sources, and every dependence of
distance >= d is ordered. A GEMM with a Vector epilogue gets two channels::

    RAW ws: fixpipe (AIC FIX) -> copy_gm_ub (AIV MTE2), distance 0  ->  data ready, AIC -> AIV
    WAR ws: copy_gm_ub (AIV MTE2) -> fixpipe (AIC FIX), distance S  ->  slot free, AIV -> AIC,
                                                                        S sets before the loops

A dependence inside one core that a chain of channels orders (X -> Y at distance d1, then
Y -> X at d2, the Y wait before the Y set in each iteration, distance >= d1 + d2: the AIC's
WAW on a slot it writes again S tiles later) needs no intra-core sync: ``leave_to_cross``
removes it before ``place_syncs``. ``insert_cross_sync`` runs last, after event-id allocation.
The dependences come from the same isl building blocks as ``polyhedral.py`` (statement
instances, byte access relations); the placement is this pass's own, not ``insert_sync``'s
(whose program-order reasoning holds within one core only).
Sets pending on one flag stay at most the channel's ``d`` plus the iterations the source may
run ahead; ``d`` must be within ``target.cross_flag_max_pending`` ("同一flagId的计数器最多
设置15次", same doc).

AIC:AIV 1:2 (``Kernel.sub_blocks`` = 2): the AIV program runs on both Vector cores of a block,
and the channels stay the same two mode-2 flags, because mode 2 is a flag between the AIC and
*all* AIVs of its block (CrossCoreSetFlag(ISASI).md, 模式2: "在AIC核执行CrossCoreSetFlag之后，
两个AIV上CrossCoreWaitFlag后续的指令才会继续执行；两个AIV都执行CrossCoreSetFlag后，AIC上
CrossCoreWaitFlag后续的指令才能执行"; the hardware message carries the mode, asc-devkit
impl/basic_api/dav_c220/kernel_operator_sync_impl.h NotifyEventImpl/GetffstMsg, and the wait
does not, WaitEventImpl): one AIC set per tile makes the tile ready for both halves (each AIV
waits once), and the AIC's wait for a free slot returns only after both AIVs set, i.e. both
halves were read. CATLASS's mixed kernels pair them so (include/catlass/gemm/kernel/gemm.hpp:
``CrossCoreSetFlagWithReverse<0x2, PIPE_FIX>`` on the AIC per tile, ``CrossCoreWaitFlag...``
on every AIV). Every Vector core therefore waits and sets in every iteration, also one whose
half of a tile is empty. The dependences are computed per Vector core (instances.py numbers
them ``2 * block + sub_block_idx``), so a flag orders the sinks of both; the two Vector cores
must not touch the same GM bytes with a write (no flag orders them), which
``_check_sub_blocks_apart`` proves. Each counter moves by one per set either way, so the
limit per flag is the same as with 1:1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import islpy as isl

from ascendsched.errors import InternalCompilerError, SyncError
from ascendsched.lower.affine import Affine
from ascendsched.lower.byte_access import instr_accesses
from ascendsched.lower.instances import InstrInfo, kernel_instrs, loop_dims
from ascendsched.lower.ir import SUB_BLOCK_IDX, For, If, Kernel, Program, Stmt
from ascendsched.lower.polyhedral import Dependences, in_other_tile_class
from ascendsched.lower.substitute import substitute
from ascendsched.lower.sync_ir import CrossSet, CrossWait, Sync
from ascendsched.target.model import CoreType, Pipe, Target


@dataclass(frozen=True)
class CrossChannel:
    """Counting flag ``flag`` from ``src_core`` (set on ``set_pipe``) to ``dst_core`` (wait on
    ``wait_pipe``); iteration j's sinks wait for iteration j - ``distance``'s sources.
    ``sources``/``sinks``: instruction ids; ``reason``: the dependences, for the comments."""

    flag: int
    src_core: CoreType
    dst_core: CoreType
    set_pipe: Pipe
    wait_pipe: Pipe
    distance: int
    sources: frozenset[int]
    sinks: frozenset[int]
    reason: str

    def __str__(self) -> str:
        return (f"cross flag {self.flag}: {self.src_core} {self.set_pipe} -> {self.dst_core} "
                f"{self.wait_pipe}, distance {self.distance}: {self.reason}")


@dataclass(frozen=True)
class CrossPlan:
    """The channels of a kernel (none for a single-core kernel)."""

    kernel: str
    channels: tuple[CrossChannel, ...] = ()
    sub_blocks: int = 1  # Vector cores per block (2: each flag is mode 2 between 1 AIC : 2 AIVs)

    def without(self, flag: int) -> CrossPlan:
        return replace(self, channels=tuple(c for c in self.channels if c.flag != flag))

    def __str__(self) -> str:
        return "\n".join([f"cross-core channels of {self.kernel}: {len(self.channels)}"]
                         + [f"  {c}" for c in self.channels])


def plan_cross_sync(kernel: Kernel, target: Target) -> CrossPlan:
    """The cross-core channels ``kernel`` needs (module docstring)."""
    aic, aiv = kernel.program(CoreType.AIC), kernel.program(CoreType.AIV)
    if aic is None or aiv is None or not aic.body or not aiv.body:
        return CrossPlan(kernel.name)
    loops = _skeleton(kernel.name, aic, aiv)
    infos = kernel_instrs(kernel)
    time = _Time(loops, kernel.sub_blocks)
    found: dict[tuple, list] = {}
    gm = set(kernel.param_map)
    acc = [(i, a) for i in infos if any(r.tensor in gm for r in i.instr.writes + i.instr.reads)
           for a in instr_accesses(kernel, i) if a.space in gm]
    _check_sub_blocks_apart(kernel)
    for si, sa in acc:
        for di, da in acc:
            if si.core == di.core or sa.space != da.space or (sa.kind, da.kind) == ("R", "R"):
                continue
            d = time.distance(si, di, sa.relation.apply_range(da.relation.reverse()))
            if d is None:
                continue
            kind = {("W", "R"): "RAW", ("R", "W"): "WAR", ("W", "W"): "WAW"}[(sa.kind, da.kind)]
            key = (si.core, si.pipe, di.core)
            found.setdefault(key, []).append((d, si, di, f"{sa.space}: {si.core} {si.pipe} "
                                              f"{si.instr.op} -> {di.core} {di.pipe} "
                                              f"{di.instr.op} ({kind})", sa, da))
    chans = []
    ids = target.cross_flag_ids
    if len(found) > len(ids):
        raise SyncError(f"kernel {kernel.name}: {len(found)} cross-core channels but "
                        f"{target.name} has cross flag ids {list(ids)}")
    for n, ((src, pipe, dst), deps) in enumerate(sorted(found.items(), key=lambda kv: (
            kv[0][0] != CoreType.AIC, str(kv[0][1])))):
        d = min(x[0] for x in deps)
        if d > target.cross_flag_max_pending:
            raise SyncError(f"kernel {kernel.name}: cross-core channel {src} -> {dst} starts "
                            f"with {d} sets, over the {target.cross_flag_max_pending} a flag "
                            f"counts; use fewer workspace copies")
        first = min(deps, key=lambda x: x[2].id)[2]
        # placed by access, not by instance: every access of the channel's kind to its space
        # (a tile whose slot nobody used before still waits where the others do)
        kinds = {(x[4].space, x[4].kind, x[5].kind) for x in deps}
        sources = {i.instr.id for i, a in acc if i.core == src and i.pipe == pipe
                   and any(a.space == sp and a.kind == k for sp, k, _ in kinds)}
        sinks = {i.instr.id for i, a in acc if i.core == dst
                 and any(a.space == sp and a.kind == k for sp, _, k in kinds)}
        chans.append(CrossChannel(
            ids[n], src, dst, pipe, first.pipe, d, frozenset(sources), frozenset(sinks),
            "; ".join(dict.fromkeys(x[3] for x in deps))))
    return CrossPlan(kernel.name, tuple(chans), kernel.sub_blocks)


def leave_to_cross(deps: Dependences, plan: CrossPlan, kernel: Kernel) -> Dependences:
    """``deps`` without the intra-core dependences a chain of two channels orders (module
    docstring): source among the first channel's sources, sink among the second's sinks,
    least distance at least the sum of theirs."""
    if not plan.channels:
        return deps
    loops = _skeleton(kernel.name, kernel.program(CoreType.AIC),  # type: ignore[arg-type]
                      kernel.program(CoreType.AIV))  # type: ignore[arg-type]
    time = _Time(loops, kernel.sub_blocks)
    keep = []
    for dep in deps:
        s, t = deps.info(dep.src), deps.info(dep.dst)
        ordered = False
        for c1 in plan.channels:
            for c2 in plan.channels:
                if (c1.src_core == s.core == c2.dst_core and c1.dst_core == c2.src_core
                        and s.instr.id in c1.sources and t.instr.id in c2.sinks
                        and _wait_before_set(c1, c2, kernel)):
                    d = time.min_distance(s, t, dep.relation)
                    ordered = ordered or (d is not None and d >= c1.distance + c2.distance)
        if not ordered:
            keep.append(dep)
    return deps if len(keep) == len(deps.deps) else replace(deps, deps=tuple(keep))


def insert_cross_sync(kernel: Kernel, plan: CrossPlan) -> Kernel:
    """``kernel`` with the flags of ``plan``: per skeleton loop, each channel's set after the
    loop body's last child holding a source and its wait before the first child holding a
    sink; a channel of distance d starts with d sets and ends with d waits."""
    if not plan.channels:
        return kernel
    progs = []
    for p in kernel.programs:
        body = list(p.body)
        loops = [i for i, s in enumerate(body) if isinstance(s, For)]
        for i in loops:
            body[i] = _loop_with_flags(body[i], p.core, plan)  # type: ignore[arg-type]
        pro, epi = [], []
        for c in plan.channels:
            for k in range(c.distance):
                if p.core == c.src_core:
                    pro.append(CrossSet(c.set_pipe, flag_id=Affine(c.flag), comment=(
                        f"{_name(c, plan.sub_blocks)} {k + 1} of {c.distance} before the tiles: "
                        f"{_first_reason(c)}")))
                if p.core == c.dst_core:
                    epi.append(CrossWait(c.wait_pipe, flag_id=Affine(c.flag), comment=(
                        f"{_name(c, plan.sub_blocks)} {k + 1} of {c.distance} after the tiles: consume the "
                        f"sets no tile waited for")))
        first, last = loops[0], loops[-1] + 1
        body = body[:first] + pro + body[first:last] + epi + body[last:]
        progs.append(Program(p.core, tuple(body)))
    return kernel.with_programs(tuple(progs))


# --------------------------------------------------------------------------- private helpers
def _name(c: CrossChannel, subs: int = 1) -> str:
    """With 1:2 a mode-2 set of the AIC releases both AIVs' waits and the AIC's wait needs
    both AIVs' sets (asc-devkit docs CrossCoreSetFlag(ISASI).md, 模式2)."""
    if c.src_core == CoreType.AIC:
        return "data ready" + (", to both AIVs" if subs > 1 else "")
    return "slot free" + (", from both AIVs" if subs > 1 else "")


def _first_reason(c: CrossChannel) -> str:
    return c.reason.split("; ")[0]


def _loop_with_flags(loop: For, core: CoreType, plan: CrossPlan) -> For:
    body = list(loop.body)
    for c in plan.channels:  # a flag's place inside a guarded tile body: the guard split there
        if core == c.dst_core:
            body = _split_guard(body, c.sinks, first=True)
        if core == c.src_core:
            body = _split_guard(body, c.sources, first=False)
    ids = [_ids(s) for s in body]
    sets: dict[int, list] = {}
    waits: dict[int, list] = {}
    for c in plan.channels:
        if core == c.src_core:
            at = max((n for n, x in enumerate(ids) if x & c.sources), default=len(body) - 1)
            sets.setdefault(at, []).append(CrossSet(c.set_pipe, flag_id=Affine(c.flag),
                                                    comment=f"{_name(c, plan.sub_blocks)}: "
                                                    f"{_first_reason(c)}"))
        if core == c.dst_core:
            at = min((n for n, x in enumerate(ids) if x & c.sinks), default=0)
            waits.setdefault(at, []).append(CrossWait(
                c.wait_pipe, flag_id=Affine(c.flag), comment=f"{_name(c, plan.sub_blocks)}"
                + (f" (of {c.distance} tiles back)" if c.distance else "") + ": "
                + _first_reason(c)))
    out: list[Stmt] = []
    for n, s in enumerate(body):
        out.extend(waits.get(n, []))
        out.append(s)
        out.extend(sets.get(n, []))
    return replace(loop, body=tuple(out))


_REST = " (continued after the cross-core flag)"


def _split_guard(body: list[Stmt], ids: frozenset[int], *, first: bool) -> list[Stmt]:
    """``body`` with the guard (``If``) that holds its first (``first``) or last instruction
    of ``ids`` split in two right before it (or after it), recursively through nested
    guards, so that a flag can sit between the halves: a wait for a free workspace slot
    before the Fixpipe only, not before the guarded tile's Mmads too, and a slot-free set
    right after the Vector cores' read, not after their whole epilogue. The flag itself
    stays outside every guard (each iteration sets and waits: the counters must move
    in every tile, module docstring); a guard's condition reads only loop variables and the
    block and sub-block indices, so testing it twice is the same."""
    at = [n for n, x in enumerate(body) if _ids(x) & ids]
    if not at:
        return body
    n = at[0] if first else at[-1]
    g = body[n]
    if not isinstance(g, If):
        return body
    inner = _split_guard(list(g.body), ids, first=first)
    k = min(m for m, x in enumerate(inner) if _ids(x) & ids) if first else \
        max(m for m, x in enumerate(inner) if _ids(x) & ids) + 1
    while first and k > 0 and isinstance(inner[k - 1], Sync):
        k -= 1  # the flag before the syncs that lead up to the instruction, not between
    while not first and k < len(inner) and isinstance(inner[k], Sync):
        k += 1
    if k in (0, len(inner)):
        return body[:n] + [replace(g, body=tuple(inner))] + body[n + 1:]
    halves = [replace(g, body=tuple(inner[:k])),
              replace(g, body=tuple(inner[k:]), comment=g.comment if g.comment.endswith(
                  _REST) or not g.comment else g.comment + _REST)]
    return body[:n] + halves + body[n + 1:]


def _ids(s: Stmt) -> set[int]:
    if isinstance(s, For) or hasattr(s, "conds"):
        return set().union(*(_ids(x) for x in s.body)) if s.body else set()  # type: ignore[union-attr]
    return {s.id}  # type: ignore[union-attr]


def _skeleton(name: str, aic: Program, aiv: Program) -> tuple[tuple[str, int], ...]:
    """The shared top-level loops (variable, trips), or InternalCompilerError."""
    def loops(p: Program) -> tuple:  # (the sub-block choice of a 1:2 kernel is not a guard)
        return tuple((s.var, s.extent, tuple(c for c in s.body[0].conds
                                             if SUB_BLOCK_IDX not in c.lhs.vars())
                      if len(s.body) == 1 and hasattr(s.body[0], "conds") else ())
                     for s in p.body if isinstance(s, For))

    a, v = loops(aic), loops(aiv)
    if a != v or not a:
        raise InternalCompilerError(f"kernel {name}: the AIC and AIV programs do not share "
                                    f"their tile loops ({a} vs {v}); cross-core flags are "
                                    "derived only over a shared skeleton")
    return tuple((var, n) for var, n, _ in a)


class _Time:
    """Instances -> their dense iteration ``[block, n]`` over the skeleton's loops (an AIV
    instance of a 1:2 kernel has its Vector core number as ``block_idx``: its block is
    ``floor(block_idx / 2)``, instances.py)."""

    def __init__(self, loops: tuple[tuple[str, int], ...], subs: int = 1) -> None:
        self.subs = subs
        self.base: dict[str, int] = {}
        n = 0
        for var, trips in loops:
            self.base[var] = n
            n += trips

    def _map(self, i: InstrInfo) -> isl.Map:
        if not i.loops or i.loops[0].var not in self.base or len(i.path) < 2:
            raise InternalCompilerError(f"`{i.instr}` touches GM outside the tile loops of a "
                                        "mixed kernel")
        v = i.loops[0].var
        blk = f"floor(block_idx/{self.subs})" if i.core == CoreType.AIV and self.subs > 1 \
            else "block_idx"
        return isl.Map(f"{{ {i.name}[{loop_dims(i.loops)}] -> T[{blk}, {self.base[v]} + "
                       f"{v}] }}")

    def distance(self, s: InstrInfo, d: InstrInfo, rel: isl.Map) -> int | None:
        """Least iteration distance of the pairs of ``rel`` that the sequential meaning
        orders (same block; AIC before AIV within an iteration), None if none."""
        strict = ">" if s.core == CoreType.AIV else ">="
        rel = rel.intersect_domain(s.domain).intersect_range(d.domain)
        t = rel.apply_domain(self._map(s)).apply_range(self._map(d))
        t = t.intersect(isl.Map(f"{{ T[b, n] -> T[b2, n2] : b2 = b and n2 {strict} n }}"))
        return _min_delta(t)

    def min_distance(self, s: InstrInfo, d: InstrInfo, rel: isl.Map) -> int | None:
        return _min_delta(rel.apply_domain(self._map(s)).apply_range(self._map(d)))


def _check_sub_blocks_apart(kernel: Kernel) -> None:
    """The two Vector cores of a 1:2 kernel's block must touch disjoint GM bytes wherever one
    writes (no flag orders them: a mode-1 flag would); InternalCompilerError otherwise.

    Checked with isl for the GM accesses of each tile-class loop of the AIV program, on the
    program with ``sub_block_idx`` fixed to each value (a one-core program per sub-block,
    ``block_idx`` its block): a conflict is an instance pair of the two at the same
    ``block_idx``. Accesses in different class loops are in different tiles
    (``polyhedral.in_other_tile_class``), so those pairs cannot meet. Asking isl about them
    too cost most of the check (GEMM + GELU 1000^3: 0.065 of 0.08 s)."""
    if kernel.sub_blocks == 1:
        return
    aiv = kernel.program(CoreType.AIV)
    assert aiv is not None
    gm = set(kernel.param_map)
    subs = []
    for s in range(kernel.sub_blocks):
        one = replace(kernel, programs=(Program(CoreType.AIV, substitute(
            aiv.body, {SUB_BLOCK_IDX: Affine(s)})),), sub_blocks=1)
        subs.append([(i, a) for i in kernel_instrs(one)
                     if any(r.tensor in gm for r in i.instr.writes + i.instr.reads)
                     for a in instr_accesses(one, i) if a.space in gm])
    for s, mine in enumerate(subs):
        for theirs in subs[s + 1:]:
            for si, sa in mine:
                for di, da in theirs:
                    if (sa.space != da.space or (sa.kind, da.kind) == ("R", "R")
                            or in_other_tile_class(si, di)):
                        continue
                    rel = sa.relation.apply_range(da.relation.reverse())
                    a, b = (", ".join(f"{x}{j}" for j in range(1 + len(i.loops)))
                            for x, i in (("a", si), ("b", di)))
                    if not rel.intersect(isl.Map(f"{{ {si.name}[{a}] -> {di.name}[{b}] : "
                                                 "a0 = b0 }")).is_empty():
                        raise InternalCompilerError(
                            f"kernel {kernel.name}: the block's two Vector cores both touch "
                            f"{sa.space} bytes ({si.instr.op} and {di.instr.op}, one "
                            "writing): their rows of a tile must be disjoint")


def _min_delta(t: isl.Map) -> int | None:
    if t.is_empty():
        return None
    low = t.deltas().dim_min_val(1)
    return int(low.to_python()) if low.is_int() else None


def _wait_before_set(c1: CrossChannel, c2: CrossChannel, kernel: Kernel) -> bool:
    """In each iteration of the relaying core, c1's wait comes before c2's set: both sit in
    the loop body, the wait before the first child with a c1 sink, the set after the last
    child with a c2 source; so c1's sinks must not come after c2's sources."""
    p = kernel.program(c1.dst_core)
    assert p is not None
    for s in p.body:
        if isinstance(s, For):
            ids = [_ids(x) for x in s.body]
            w = min((n for n, x in enumerate(ids) if x & c1.sinks), default=None)
            t = max((n for n, x in enumerate(ids) if x & c2.sources), default=None)
            if w is None or t is None or w > t:
                return False
    return True
