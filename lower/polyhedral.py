"""Dependences of a kernel (islpy): every conflicting pair of statement instances, source first.

Built on the statement instances of ``instances.py`` and the byte relations of
``byte_access.py``; how one pair of accesses is decided (byte and block sets, loops, isl) is
``dependence_pairs.py``. Dependences are memory-based, between instructions on different pipes
or on one pipe that needs ``PipeBarrier`` (the target's ``needs_same_pipe_barrier``), in the
same block; each records the loops that carry it with their least distance. Before/after, for the
vadd fixture::

    for k in 0..4: load x_ub; load y_ub; z_ub = x_ub + y_ub; store z_ub
    ->  RAW x_ub S0->S2 (MTE2->V, loop-independent)
        WAR x_ub S2->S0 (V->MTE2, carried by k, distance 1)   ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

import islpy as isl

from ascendsched.lower.byte_access import (
    Access,
    conflicting_regions,
    instr_accesses,
    region_space,
)
from ascendsched.lower.cube_ops import same_pipe_ordered
from ascendsched.lower.dependence_pairs import (
    apart_pair,
    blocked_pair,
    common_depth,
    fixed_pair,
    inner_only,
    levels,
)
from ascendsched.lower.instances import (
    InstrInfo,
    coalesced,
    kernel_instrs,
    loop_dims,
    program_order,
)
from ascendsched.lower.ir import BLOCK_IDX, For, Kernel
from ascendsched.lower.sync_ir import Sync
from ascendsched.target.model import CoreType, Pipe


class DepKind(str, Enum):
    RAW = "RAW"
    WAR = "WAR"
    WAW = "WAW"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, eq=False)
class Dependence:
    """``dst`` instances that must wait for ``src`` instances (``relation``: src -> dst).

    ``carried`` lists, outermost first, each common loop that carries some instance pairs with
    the minimum distance at that level; ``loop_independent`` is True when some pairs share all
    common loop iterations.
    """

    kind: DepKind
    space: str
    src: int
    dst: int
    src_pipe: Pipe
    dst_pipe: Pipe
    core: CoreType
    src_tensors: tuple[str, ...]
    dst_tensors: tuple[str, ...]
    common_loops: tuple[str, ...]
    carried: tuple[tuple[str, int], ...]
    loop_independent: bool
    make_relation: Callable[[], isl.Map] = field(repr=False)

    @cached_property
    def relation(self) -> isl.Map:
        """src -> dst instance pairs (built on first use where the analysis did not need it)."""
        return self.make_relation()

    def distance(self, var: str) -> int | None:
        """Minimum distance of the pairs carried by loop ``var`` (None: not carried there)."""
        for v, d in self.carried:
            if v == var:
                return d
        return None

    @property
    def reason(self) -> str:
        """``x_ub[copy (k % 2)]: MTE2 write -> V read (RAW)``: the text sync comments carry."""
        src_acc, dst_acc = {DepKind.RAW: ("write", "read"), DepKind.WAR: ("read", "write"),
                            DepKind.WAW: ("write", "write")}[self.kind]
        names = list(dict.fromkeys(self.src_tensors + self.dst_tensors))
        return (f"{'/'.join(names)}: {self.src_pipe} {src_acc} -> {self.dst_pipe} {dst_acc}"
                f" ({self.kind})")

    def __str__(self) -> str:
        carried = ", ".join(f"{v} dist {d}" for v, d in self.carried)
        parts = (["loop-independent"] if self.loop_independent else []) + (
            [f"carried by {carried}"] if carried else [])
        return f"S{self.src} -> S{self.dst} [{self.space}] {self.reason}; {'; '.join(parts)}"


@dataclass(frozen=True, eq=False)
class Dependences:
    kernel: str
    instrs: tuple[InstrInfo, ...]
    accesses: tuple[Access, ...]
    deps: tuple[Dependence, ...]
    implied: int = 0  # left out: a tighter dependence implies them (``_without_implied``)

    def __iter__(self) -> Iterator[Dependence]:
        return iter(self.deps)

    def __len__(self) -> int:
        return len(self.deps)

    def info(self, instr_id: int) -> InstrInfo:
        return self.instrs[instr_id]

    def between(self, src: int, dst: int) -> tuple[Dependence, ...]:
        return tuple(d for d in self.deps if d.src == src and d.dst == dst)

    def __str__(self) -> str:
        lines = [f"dependences of {self.kernel}: {len(self.deps)}" + (
            f" ({self.implied} more left out, each implied by a tighter one between the same "
            "bodies)" if self.implied else "")]
        for i in self.instrs:
            if not isinstance(i.instr, Sync):
                lines.append(f"  S{i.id}: {i.instr}")
        lines += [f"  {d}" for d in self.deps]
        return "\n".join(lines)


_KINDS = {("W", "R"): DepKind.RAW, ("R", "W"): DepKind.WAR, ("W", "W"): DepKind.WAW}


def analyze_dependences(kernel: Kernel, spaces: frozenset[str] | None = None) -> Dependences:
    """Every RAW/WAR/WAW dependence of ``kernel`` that synchronisation must order (``spaces``:
    only those on these memory spaces, e.g. GM tensors' names)."""
    instrs = kernel_instrs(kernel)
    accesses = tuple(a for i in instrs if spaces is None or any(
        region_space(kernel, r.tensor) in spaces for r in i.instr.writes + i.instr.reads)
        for a in instr_accesses(kernel, i))
    by_space: dict[tuple[CoreType, str], list[Access]] = {}
    for a in accesses:
        if spaces is None or a.space in spaces:
            by_space.setdefault((instrs[a.instr].core, a.space), []).append(a)
    deps: list[Dependence] = []
    target = kernel.target
    classes = mixed_kernel(kernel)
    total: set[int] = set()  # no common loop, every instance pair conflicting (by identity)
    # byte hull of each access: pairs whose hulls are disjoint cannot conflict (after memory
    # planning every UB buffer shares the space "UB", so this skips most pairs cheaply)
    before: dict[tuple[int, int], isl.Map] = {}
    shapes: dict = {}  # program-order relations by shape (program_order's cache)
    for (core, space), accs in by_space.items():
        for sa in accs:
            for da in accs:
                if sa.kind == "R" and da.kind == "R":
                    continue
                s, d = instrs[sa.instr], instrs[da.instr]
                if s.pipe == d.pipe and same_pipe_ordered(target, s.instr, d.instr):
                    continue
                (slo, shi), (dlo, dhi) = sa.hull, da.hull
                if shi < dlo or dhi < slo:
                    continue
                kind = _KINDS[(sa.kind, da.kind)]
                shared = common_depth(s, d)
                if not shared and s.id > d.id:
                    continue  # no common loop and the sink first in the text: never before
                if sa.fixed and da.fixed:
                    got = fixed_pair(sa, da, s, d, shapes)
                    if got is None:
                        continue
                    relation, (common, carried, indep), (src_t, dst_t) = got
                    deps.append(Dependence(kind, space, s.id, d.id, s.pipe, d.pipe, core,
                                           src_t, dst_t, common, carried, indep, relation))
                    if not shared:
                        total.add(id(deps[-1]))
                    continue
                if inner_only(sa, s, shared) and inner_only(da, d, shared):
                    got = fixed_pair(sa, da, s, d, shapes)
                    if got is None:
                        continue
                    _, (common, carried, indep), (src_t, dst_t) = got
                    deps.append(Dependence(
                        kind, space, s.id, d.id, s.pipe, d.pipe, core, src_t, dst_t, common,
                        carried, indep, lambda sa=sa, da=da, s=s, d=d: coalesced(
                            sa.relation.apply_range(da.relation.reverse()).intersect(
                                program_order(s, d, shapes, domains=False)))))
                    continue
                if not shared and sa.block_free and da.block_free:
                    regions = apart_pair(sa, da, s, d, shapes)
                    if regions is None:
                        continue
                    deps.append(Dependence(
                        kind, space, s.id, d.id, s.pipe, d.pipe, core, *regions, (), (), True,
                        lambda sa=sa, da=da, s=s, d=d: coalesced(sa.relation.apply_range(
                            da.relation.reverse()).intersect(program_order(s, d, shapes)))))
                    continue
                ca, cb = sa.cover, da.cover
                if ca is not None and cb is not None and not ca & cb:
                    continue  # no 32-byte block in common: no instance pair conflicts
                if not shared and space in kernel.param_map:  # GM: the tile order's floors
                    if classes and core == CoreType.AIV and in_other_tile_class(s, d):
                        continue
                    regions = blocked_pair(sa, da, s, d, shapes) if s.id != d.id else None
                    if regions is None:
                        continue
                    deps.append(Dependence(
                        kind, space, s.id, d.id, s.pipe, d.pipe, core, *regions, (), (), True,
                        lambda sa=sa, da=da, s=s, d=d: coalesced(sa.relation.apply_range(
                            da.relation.reverse()).intersect(program_order(
                                s, d, shapes, domains=False)))))
                    continue
                order = before.get((s.id, d.id))
                if order is None:  # the access relations hold the domains already
                    order = before[(s.id, d.id)] = program_order(s, d, shapes, domains=False)
                rel = sa.relation.apply_range(da.relation.reverse())
                rel = rel.intersect(order)
                if rel.is_empty():
                    continue
                # no common loop: every pair is loop-independent (nothing to measure)
                common, carried, indep = levels(s, d, rel, shapes) if shared else \
                    ((), (), True)
                src_t, dst_t = conflicting_regions(sa, da, rel)
                # coalesced when first asked for: the text settles most dependences unseen
                deps.append(Dependence(kind, space, s.id, d.id, s.pipe, d.pipe, core, src_t,
                                       dst_t, common, carried, indep,
                                       lambda rel=rel: coalesced(rel)))
    deps.sort(key=lambda x: (x.src, x.dst, x.kind.value, x.space))
    kept = _without_implied(deps, instrs, total)
    return Dependences(kernel.name, instrs, accesses, kept, len(deps) - len(kept))


def _without_implied(deps: list[Dependence], instrs: tuple[InstrInfo, ...], total: set[int]
                     ) -> tuple[Dependence, ...]:
    """``deps`` without those a tighter one implies. Two statements with no common loop, the
    source first, order every instance pair when one conflicts in all of them: ``s1 -> t1``
    with every pair dependent (``total``). Any chain ordering ``s1``'s instance before
    ``t1``'s starts with a set (or barrier) on s1's pipe after it, which fires after every
    earlier instruction of that pipe, and ends with a wait (or barrier) on t1's pipe before
    it, which holds every later one. So ``s2 -> t2`` is ordered too where s2 is on s1's pipe
    in the same body no later than s1 and t2 on t1's pipe in the same body no earlier than t1
    (each s2 instance pairs with s1's in its iteration, each t2 instance with t1's). A mixed
    kernel's AIV program, whose tile classes' epilogues reuse the same UB bytes, has
    thousands of such pairs between class loops: GEMM + bias + GELU 1000^3, 1 591 of its 2 223
    dependences, 44 left."""
    groups: dict[tuple, list[int]] = {}
    for n, d in enumerate(deps):
        if d.common_loops:
            continue
        s, t = instrs[d.src], instrs[d.dst]
        groups.setdefault((d.core, d.src_pipe, d.dst_pipe, s.path[:-1], t.path[:-1]),
                          []).append(n)
    drop: set[int] = set()
    for ns in groups.values():
        tight = [m for m in ns if id(deps[m]) in total]
        for n in ns:
            s2, t2 = instrs[deps[n].src].path[-1], instrs[deps[n].dst].path[-1]
            for m in tight:
                if m != n and m not in drop and instrs[deps[m].src].path[-1] >= s2 \
                        and instrs[deps[m].dst].path[-1] <= t2:
                    drop.add(n)
                    break
    return tuple(d for n, d in enumerate(deps) if n not in drop)


def mixed_kernel(kernel: Kernel) -> bool:
    """Whether ``kernel`` is a mixed Cube + Vector kernel (``build_mixed`` makes the only
    ones): its AIV program has one top-level statement per GEMM tile class."""
    return kernel.program(CoreType.AIC) is not None and kernel.program(CoreType.AIV) is not None


def in_other_tile_class(s: InstrInfo, d: InstrInfo) -> bool:
    """Whether two statements of a mixed kernel's AIV program sit in different tile classes,
    so their GM accesses touch different output tiles: the tile classes partition the
    output's tiles (``schedule/gemm_records.tile_classes``) and ``build_mixed`` keeps every GM
    access of a tile inside its tile's rows and columns (``_split_offset`` checks each index
    against the tile's shape). Asking isl about such pairs instead cost GEMM + bias + GELU
    1000^3 35 of its 145 ms of dependences (the tile order's floors on both sides)."""
    return s.path[0] != d.path[0]


def flat_distance(d: Dependence, deps: Dependences, lo: int, hi: int) -> int:
    """Minimum distance of ``d``'s pairs in the flattened iterations of common loops
    ``lo..hi`` (loops outside ``lo`` equal), 1 if it cannot be bounded."""
    s, t = deps.info(d.src), deps.info(d.dst)
    loops = s.loops[lo:hi + 1]
    flat, stride = [], 1
    for f in reversed(loops):
        flat.append(f"{stride}*{f.var}")
        stride *= f.extent
    same = [f"{v} = {v}_d" for v in (BLOCK_IDX,) + tuple(f.var for f in s.loops[:lo])]
    pairs = isl.Map(f"{{ S{s.id}[{loop_dims(s.loops)}] -> S{t.id}[{_dims_primed(t.loops)}] : "
                    f"{' and '.join(same)} }}")
    rel = d.relation.intersect(pairs)
    src = isl.Map(f"{{ S{s.id}[{loop_dims(s.loops)}] -> F[{' + '.join(flat)}] }}")
    dst = isl.Map(f"{{ S{t.id}[{loop_dims(t.loops)}] -> F[{' + '.join(flat)}] }}")
    deltas = rel.apply_domain(src).apply_range(dst).deltas()
    if deltas.is_empty():
        return 1
    low = deltas.dim_min_val(0)
    return int(low.to_python()) if low.is_int() else 1

def _dims_primed(loops: tuple[For, ...]) -> str:
    return ", ".join([f"{BLOCK_IDX}_d"] + [f"{f.var}_d" for f in loops])
