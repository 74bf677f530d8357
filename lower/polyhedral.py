"""Polyhedral model of a kernel: domains, schedules, byte accesses and dependences (islpy).

The only module of ascendsched that imports islpy. Every :class:`Instr` of every program gets

* an iteration domain over ``block_idx`` and its enclosing loop variables, cut by its ``If``
  conditions: ``{ S3[block_idx, k] : 0 <= block_idx < 1 and 0 <= k < 4 }``;
* a program-order schedule (2d+1 style: child index, loop variable, child index, ...);
* byte-level read and write relations per physical space.

Byte rules (shared with the simulator's trace format): the UB side of a DMA moves whole 32-byte
blocks per row; GM is exact; vector operands are exact element bytes, except block-broadcast
sources (column stride 0), which read the whole 32-byte block at each row start. Cube ops
touch the element boxes their AscendC params imply (``ir.cube_footprints``: Nd2Nz writes whole
32 B fractal rows, loads whole fractals, Mmad whole padded tiles, Fixpipe reads whole 16-element
row blocks and writes the exact mSize x nSize region); an ``mmad`` also reads its C tile on the
instances where ``cmatrixInitVal`` is false. Before memory
planning every on-chip buffer is its own space and copy ``c`` occupies bytes
``[c * round32(nbytes), ...)`` of it; after planning (``Buffer.offsets`` set) the space is the
scope and copy ``c`` starts at ``offsets[c]``. ``k mod 2`` terms become quasi-affine constraints.

Dependences are memory-based (every conflicting pair of instances, source first), between
instructions on different pipes or on one pipe that needs ``PipeBarrier`` (the target's
``needs_same_pipe_barrier``), in the same block. Before/after, for the vadd fixture::

    for k in 0..4: load x_ub; load y_ub; z_ub = x_ub + y_ub; store z_ub
    ->  RAW x_ub S0->S2 (MTE2->V, loop-independent)
        WAR x_ub S2->S0 (V->MTE2, carried by k, distance 1)   ...
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

import islpy as isl

from ascendsched.errors import InternalCompilerError, NotAffineError
from ascendsched.lower.cube_ops import CUBE_OPS, cube_footprints, cube_params, same_pipe_ordered
from ascendsched.lower.ir import (
    BLOCK_IDX,
    DMA_OPS,
    VECTOR_OPS,
    Affine,
    Cond,
    For,
    If,
    Instr,
    Kernel,
    Region,
    Stmt,
)
from ascendsched.target.model import CoreType, Pipe

BYTE = "__byte"


class DepKind(str, Enum):
    RAW = "RAW"
    WAR = "WAR"
    WAW = "WAW"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, eq=False)
class InstrInfo:
    """One instruction in its context. ``id`` numbers all Instrs of the kernel in program order
    (programs in kernel order); ``path`` is the child-index path from its program's root."""

    id: int
    core: CoreType
    instr: Instr
    path: tuple[int, ...]
    loops: tuple[For, ...]  # enclosing loops, outermost first
    loop_paths: tuple[tuple[int, ...], ...]  # path of each enclosing loop
    conds: tuple[Cond, ...]  # conjunction of enclosing If conditions
    domain: isl.Set
    schedule_text: str = ""  # isl text of the program-order schedule (built on demand)
    domain_key: str = ""  # the domain's text without its tuple name (equal text, equal set)

    @cached_property
    def schedule(self) -> isl.Map:
        """Instance -> its position (child index and loop variable per level, 2d+1 style)."""
        return isl.Map(self.schedule_text).intersect_domain(self.domain)

    @property
    def name(self) -> str:
        return f"S{self.id}"

    @property
    def pipe(self) -> Pipe:
        return self.instr.pipe

    @cached_property
    def loop_vars(self) -> tuple[str, ...]:
        return tuple(f.var for f in self.loops)


@dataclass(frozen=True, eq=False)
class Access:
    """The bytes one instruction reads or writes in one space. Its isl relations are built on
    first use (most accesses never meet a conflicting one)."""

    instr: int
    kind: str  # "R" or "W"
    space: str
    tensors: tuple[str, ...]  # region descriptions, e.g. "x_ub[copy (k % 2)]"
    hull: tuple[int, int]  # lowest and highest byte it may touch (an over-estimate)
    make_parts: Callable[[], tuple[tuple[str, isl.Map], ...]] = field(repr=False)

    @cached_property
    def parts(self) -> tuple[tuple[str, isl.Map], ...]:
        """Per region: (description, instance -> space[byte] relation)."""
        return self.make_parts()

    @cached_property
    def relation(self) -> isl.Map:
        """instance -> space[byte]."""
        m = self.parts[0][1]
        for _, p in self.parts[1:]:
            m = m.union(p)
        return coalesced(m)


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
    relation: isl.Map
    src_tensors: tuple[str, ...]
    dst_tensors: tuple[str, ...]
    common_loops: tuple[str, ...]
    carried: tuple[tuple[str, int], ...]
    loop_independent: bool

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

    def __iter__(self) -> Iterator[Dependence]:
        return iter(self.deps)

    def __len__(self) -> int:
        return len(self.deps)

    def info(self, instr_id: int) -> InstrInfo:
        return self.instrs[instr_id]

    def between(self, src: int, dst: int) -> tuple[Dependence, ...]:
        return tuple(d for d in self.deps if d.src == src and d.dst == dst)

    def __str__(self) -> str:
        lines = [f"dependences of {self.kernel}: {len(self.deps)}"]
        for i in self.instrs:
            if not i.instr.is_sync:
                lines.append(f"  S{i.id}: {i.instr}")
        lines += [f"  {d}" for d in self.deps]
        return "\n".join(lines)


def analyze_dependences(kernel: Kernel) -> Dependences:
    """Every RAW/WAR/WAW dependence of ``kernel`` that synchronisation must order."""
    instrs = kernel_instrs(kernel)
    accesses = tuple(a for i in instrs for a in _accesses(kernel, i))
    by_space: dict[tuple[CoreType, str], list[Access]] = {}
    for a in accesses:
        by_space.setdefault((instrs[a.instr].core, a.space), []).append(a)
    deps: list[Dependence] = []
    target = kernel.target
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
                kind = {("W", "R"): DepKind.RAW, ("R", "W"): DepKind.WAR,
                        ("W", "W"): DepKind.WAW}[(sa.kind, da.kind)]
                shared = _common_depth(s, d)
                if not shared and s.id > d.id:
                    continue  # no common loop and the sink first in the text: never before
                order = before.get((s.id, d.id))
                if order is None:  # the access relations hold the domains already
                    order = before[(s.id, d.id)] = program_order(s, d, shapes, domains=False)
                rel = sa.relation.apply_range(da.relation.reverse())
                rel = rel.intersect(order)
                if rel.is_empty():
                    continue
                # no common loop: every pair is loop-independent (nothing to measure)
                common, carried, indep = _levels(s, d, rel, shapes) if shared else \
                    ((), (), True)
                src_t, dst_t = _conflicting(sa, da, rel)
                deps.append(Dependence(kind, space, s.id, d.id, s.pipe, d.pipe, core,
                                       coalesced(rel), src_t, dst_t, common, carried, indep))
    deps.sort(key=lambda x: (x.src, x.dst, x.kind.value, x.space))
    return Dependences(kernel.name, instrs, accesses, tuple(deps))


def kernel_instrs(kernel: Kernel) -> tuple[InstrInfo, ...]:
    """Every Instr of every program with its domain and schedule, numbered in program order."""
    out: list[InstrInfo] = []
    domains: dict[str, isl.Set] = {}  # statements of one body share their domain
    for prog in kernel.programs:
        raw: list[tuple[Instr, tuple[int, ...], tuple[Stmt, ...]]] = []
        _walk(prog.body, (), (), raw)
        depth = max((len(p) for _, p, _ in raw), default=1)
        for instr, path, anc in raw:
            loops = tuple(a for a in anc if isinstance(a, For))
            loop_paths = tuple(path[: j + 1] for j, a in enumerate(anc) if isinstance(a, For))
            conds = tuple(c for a in anc if isinstance(a, If) for c in a.conds)
            ident = len(out)
            text = f"[{_dims(loops)}] : {_domain_text(kernel, loops, conds)} }}"
            dom = domains.get(text)
            if dom is None:
                dom = domains[text] = isl.Set("{ S" + text)
            sched: list[str] = []
            for j, a in enumerate(anc):
                sched += [str(path[j]), a.var if isinstance(a, For) else "0"]
            sched.append(str(path[-1]))
            sched += ["0"] * (2 * depth - 1 - len(sched))
            out.append(InstrInfo(ident, prog.core, instr, path, loops, loop_paths, conds,
                                 dom.set_tuple_name(f"S{ident}"),
                                 f"{{ S{ident}[{_dims(loops)}] -> [{', '.join(sched)}] }}",
                                 text))
    return tuple(out)


def coalesced(m: isl.Map) -> isl.Map:
    """``m`` with its pieces merged where isl can (the same relation either way): isl's
    coalesce has failed an internal consistency assertion on some quasi-affine maps ("original
    tableau does not correspond"), so on an isl error the map is kept as it is."""
    try:
        return m.coalesce()
    except isl.Error:
        return m


def program_order(a: InstrInfo, b: InstrInfo, cache: dict | None = None, *,
                  domains: bool = True) -> isl.Map:
    """Instances of ``a`` before instances of ``b`` in program order, in one block: their
    common loops lexicographically before, or equal when ``a`` comes first in the text.
    ``cache``: a dict in which relations of statement pairs with the same domains, common
    loops and text order are shared (they differ only in their tuple names).
    ``domains=False``: the order alone, not restricted to the statements' instances (for
    intersecting with relations that are; shared by every pair with the same loop counts)."""
    m = 0
    while m < min(len(a.loop_paths), len(b.loop_paths)) and a.loop_paths[m] == b.loop_paths[m]:
        m += 1
    if a.id == b.id:
        strict = True
    else:
        j = next(i for i, (x, y) in enumerate(zip(a.path, b.path)) if x != y)
        strict = a.path[j] > b.path[j]  # a after b in the text: a later iteration only
    if cache is None or (domains and (not a.domain_key or not b.domain_key)):
        return _program_order(a, b, m, strict, domains)
    key = ("po shape", a.domain_key, b.domain_key, m, strict) if domains else \
        ("po loops", len(a.loops), len(b.loops), m, strict)
    got = cache.get(key)
    if got is None:
        got = cache[key] = _program_order(a, b, m, strict, domains)
    return got.set_tuple_name(isl.dim_type.in_, a.name).set_tuple_name(isl.dim_type.out,
                                                                      b.name)


def _program_order(a: InstrInfo, b: InstrInfo, m: int, strict: bool, domains: bool = True
                   ) -> isl.Map:
    na = {v: f"a{j}" for j, v in enumerate((BLOCK_IDX,) + a.loop_vars)}
    nb = {v: f"b{j}" for j, v in enumerate((BLOCK_IDX,) + b.loop_vars)}
    xs = [na[v] for v in a.loop_vars[:m]]
    ys = [nb[v] for v in b.loop_vars[:m]]
    ors = [" and ".join([f"{x} = {y}" for x, y in zip(xs[:j], ys[:j])] + [f"{xs[j]} < {ys[j]}"])
           for j in range(m)]
    if not strict:
        ors.append(" and ".join(f"{x} = {y}" for x, y in zip(xs, ys)) or "true")
    lex = " or ".join(f"({o})" for o in ors) if ors else "false"
    dom = ", ".join(na[v] for v in (BLOCK_IDX,) + a.loop_vars)
    rng = ", ".join(nb[v] for v in (BLOCK_IDX,) + b.loop_vars)
    order = isl.Map(f"{{ {a.name}[{dom}] -> {b.name}[{rng}] : {na[BLOCK_IDX]} = "
                    f"{nb[BLOCK_IDX]} and ({lex}) }}")
    return order.intersect_domain(a.domain).intersect_range(b.domain) if domains else order


def instr_accesses(kernel: Kernel, info: InstrInfo) -> list[Access]:
    """The byte accesses of one instruction (one per kind and space), as the analysis uses."""
    return _accesses(kernel, info)


def region_space(kernel: Kernel, tensor: str) -> str:
    """The physical space a tensor lives in: GM tensor name, buffer name, or planned scope."""
    if tensor in kernel.buffer_map:
        b = kernel.buffer_map[tensor]
        return str(b.scope) if b.offsets is not None else b.name
    if tensor in kernel.param_map:
        return tensor
    raise InternalCompilerError(f"region names unknown tensor {tensor!r}")


def affine_text(expr: Affine, bound: frozenset[str], where: str) -> str:
    """``expr`` as isl text; NotAffineError if it uses a variable not in ``bound``."""
    for v in expr.vars():
        if v not in bound:
            raise NotAffineError(
                f"expression '{expr}' in {where} uses '{v}', which is neither an enclosing loop "
                f"variable nor {BLOCK_IDX}; bound here: {', '.join(sorted(bound)) or 'none'}")
    parts = [str(expr.const)]
    for v, c in expr.terms:
        parts.append(f"{c}*{v}")
    for v, m, c in expr.mods:
        if not isinstance(m, int) or m <= 0:
            raise NotAffineError(f"expression '{expr}' in {where}: modulus {m!r} of '{v}' is "
                                 "not a positive integer")
        parts.append(f"{c}*({v} mod {m})")
    for a, dv, c in getattr(expr, "divs", ()):
        if not isinstance(dv, int) or dv <= 0:
            raise NotAffineError(f"expression '{expr}' in {where}: divisor {dv!r} is not a "
                                 "positive integer")
        parts.append(f"{c}*floor({affine_text(a, bound, where)}/{dv})")
    return "(" + " + ".join(parts) + ")"


# --------------------------------------------------------------------------- private helpers
def _walk(body: tuple[Stmt, ...], path: tuple[int, ...], anc: tuple[Stmt, ...],
          out: list[tuple[Instr, tuple[int, ...], tuple[Stmt, ...]]]) -> None:
    for i, s in enumerate(body):
        if isinstance(s, Instr):
            out.append((s, path + (i,), anc))
        else:
            _walk(s.body, path + (i,), anc + (s,), out)


def _dims(loops: tuple[For, ...]) -> str:
    return ", ".join((BLOCK_IDX,) + tuple(f.var for f in loops))


def _domain_text(kernel: Kernel, loops: tuple[For, ...], conds: tuple[Cond, ...]) -> str:
    bound = frozenset((BLOCK_IDX,) + tuple(f.var for f in loops))
    if len(bound) != len(loops) + 1:
        raise InternalCompilerError(f"loop variables are not unique along a nest: "
                                    f"{[f.var for f in loops]}")
    parts = [f"0 <= {BLOCK_IDX} < {kernel.block_dim}"]
    parts += [f"0 <= {f.var} < {f.extent}" for f in loops]
    for c in conds:
        op = "=" if c.op == "==" else c.op
        parts.append(f"{affine_text(c.lhs, bound, f'condition {c}')} {op} {c.rhs}")
    return " and ".join(parts)


def _accesses(kernel: Kernel, info: InstrInfo) -> list[Access]:
    """One Access per (kind, space) of the instruction, regions of one kind united."""
    ins = info.instr
    if ins.is_sync:
        return []
    acc: dict[tuple[str, str], list[tuple[str, Region, str, str]]] = {}
    hulls: dict[tuple[str, str], tuple[int, int]] = {}
    writes, reads = ins.writes, ins.reads
    extra: list[tuple[Region, str]] = []
    if ins.op in CUBE_OPS:
        writes, reads, extra = _cube_regions(kernel, info)
    regions = [(k, r, "") for k, rs in (("W", writes), ("R", reads)) for r in rs]
    regions += [("R", r, when) for r, when in extra]  # reads that happen on some instances only
    for kind, r, when in regions:
        key = (kind, region_space(kernel, r.tensor))
        acc.setdefault(key, []).append((_describe(kernel, r), r, kind, when))
        lo, hi = _region_hull(kernel, info, r, kind)
        old = hulls.get(key)
        hulls[key] = (lo, hi) if old is None else (min(lo, old[0]), max(hi, old[1]))
    out = []
    for (k, s), parts in acc.items():
        names = tuple(dict.fromkeys(n for n, _, _, _ in parts))

        def make(parts=parts) -> tuple[tuple[str, isl.Map], ...]:  # noqa: ANN001
            return tuple((n, _region_map(kernel, info, r, kind, when))
                         for n, r, kind, when in parts)

        out.append(Access(info.id, k, s, names, hulls[(k, s)], make))
    return out


def _region_hull(kernel: Kernel, info: InstrInfo, r: Region, kind: str) -> tuple[int, int]:
    """Lowest and highest byte of ``r``'s space the instruction may touch, by interval
    arithmetic over the loop ranges (an over-estimate of ``_region_map``'s byte set)."""
    ranges = {BLOCK_IDX: (0, kernel.block_dim - 1)}
    ranges.update({f.var: (0, f.extent - 1) for f in info.loops})
    affine_text(r.offset, frozenset(ranges), f"region {r} of S{info.id} ({info.instr.op})")
    lo, hi = _interval(r.offset, ranges)
    for d in r.dims:
        span = (d.extent - 1) * d.stride
        lo, hi = lo + min(span, 0), hi + max(span, 0)
    eb = kernel.dtype_of(r.tensor).bytes
    blk = kernel.target.block_bytes
    blo, bhi = lo * eb, (hi + 1) * eb - 1
    if r.tensor in kernel.buffer_map:  # whole 32 B blocks (DMA rows, block broadcasts)
        blo, bhi = blo // blk * blk, (bhi // blk + 1) * blk - 1
        bases = [b for b, _ in _copy_bases(kernel, r, frozenset(ranges), f"region {r}")]
        return blo + min(bases), bhi + max(bases)
    return blo, bhi


def _interval(e: Affine, ranges: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """Bounds of a quasi-affine expression over variable ranges."""
    lo = hi = e.const
    for v, c in e.terms:
        a, b = ranges[v]
        lo, hi = lo + min(c * a, c * b), hi + max(c * a, c * b)
    for v, m, c in e.mods:
        a, b = ranges[v]
        ma, mb = (a, b) if 0 <= a and b < m else (0, m - 1)
        lo, hi = lo + min(c * ma, c * mb), hi + max(c * ma, c * mb)
    for a_, d, c in e.divs:
        a, b = _interval(a_, ranges)
        qa, qb = a // d, b // d
        lo, hi = lo + min(c * qa, c * qb), hi + max(c * qa, c * qb)
    return lo, hi


def _conflicting(sa: Access, da: Access, rel: isl.Map
                 ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The region descriptions of each side that take part in the dependence ``rel``."""
    if len(sa.parts) == 1 and len(da.parts) == 1:
        return sa.tensors, da.tensors
    src: list[str] = []
    dst: list[str] = []
    for sn, sm in sa.parts:
        for dn, dm in da.parts:
            if not sm.apply_range(dm.reverse()).intersect(rel).is_empty():
                src.append(sn)
                dst.append(dn)
    return tuple(dict.fromkeys(src)), tuple(dict.fromkeys(dst))


def _describe(kernel: Kernel, r: Region) -> str:
    b = kernel.buffer_map.get(r.tensor)
    if b is None or b.copies == 1:
        return r.tensor
    return f"{r.tensor}[copy {r.copy}]"


def _cube_regions(kernel: Kernel, info: InstrInfo
                  ) -> tuple[tuple[Region, ...], tuple[Region, ...], list[tuple[Region, str]]]:
    """A cube op's regions with the element boxes its params imply (ir.cube_footprints), and
    mmad's read of C on the instances that accumulate (``cmatrixInitVal`` false)."""
    ins = info.instr
    params = cube_params(ins)
    regions = ins.writes + ins.reads
    boxes = cube_footprints(ins.op, params, tuple(kernel.dtype_of(r.tensor) for r in regions))
    exact = tuple(Region(r.tensor, r.offset, box, r.copy)
                  for r, box in zip(regions, boxes, strict=True))
    nw = len(ins.writes)
    extra: list[tuple[Region, str]] = []
    if ins.op == "mmad":
        init = params["cmatrixInitVal"]
        bound = frozenset((BLOCK_IDX,) + info.loop_vars)
        if isinstance(init, Cond):
            lhs = affine_text(init.lhs, bound, f"cmatrixInitVal of S{info.id}")
            neg = {"<": f"{lhs} >= {init.rhs}", "<=": f"{lhs} > {init.rhs}",
                   ">=": f"{lhs} < {init.rhs}",
                   "==": f"({lhs} < {init.rhs} or {lhs} > {init.rhs})"}[init.op]
            extra.append((exact[0], neg))
        elif init is False:
            extra.append((exact[0], ""))
        elif init is not True:
            raise InternalCompilerError(f"S{info.id}: cmatrixInitVal must be a bool or a Cond, "
                                        f"not {init!r}")
    return exact[:nw], exact[nw:], extra


def _region_map(kernel: Kernel, info: InstrInfo, r: Region, kind: str, when: str = ""
                ) -> isl.Map:
    """instance -> M_<space>[byte] for one region, by the byte rules in the module docstring.

    ``when``: an isl condition on the instance restricting the access (empty: always)."""
    ins = info.instr
    bound = frozenset((BLOCK_IDX,) + info.loop_vars)
    where = f"region {r} of S{info.id} ({ins.op})"
    eb = kernel.dtype_of(r.tensor).bytes
    blk = kernel.target.block_bytes
    buf = kernel.buffer_map.get(r.tensor)
    off = affine_text(r.offset, bound, where)
    dims = r.dims or ()
    if buf is not None and ins.op in DMA_OPS and dims and dims[-1].stride == 1:
        mode = "dma"  # whole 32-byte blocks per row
    elif (buf is not None and kind == "R" and ins.op in VECTOR_OPS and len(dims) >= 2
          and dims[-1].stride == 0):
        mode = "brcb"  # the whole block at each row start
    else:
        mode = "exact"
    row_dims = dims[:-1] if mode in ("dma", "brcb") else dims
    exists: list[str] = []
    cons: list[str] = []
    elem = off
    for j, d in enumerate(row_dims):
        if d.extent == 1:
            continue
        e = f"_r{j}"
        exists.append(e)
        cons.append(f"0 <= {e} < {d.extent}")
        elem += f" + {d.stride}*{e}"
    pieces: list[str] = []
    for base, copy_cond in _copy_bases(kernel, r, bound, where):
        b = f"({BYTE} - {base})"
        if mode == "dma":
            cols = dims[-1].extent
            byte_c = (f"{blk}*floor(({eb}*({elem}))/{blk}) <= {b} and "
                      f"{b} < {blk}*floor(({eb}*({elem} + {cols}) + {blk - 1})/{blk})")
        elif mode == "brcb":
            byte_c = (f"{blk}*floor(({eb}*({elem}))/{blk}) <= {b} and "
                      f"{b} < {blk}*floor(({eb}*({elem}))/{blk}) + {blk}")
        else:
            byte_c = f"{eb}*({elem}) <= {b} and {b} < {eb}*({elem}) + {eb}"
        body = " and ".join(cons + [byte_c])
        ex = f"exists ({', '.join(exists)} : {body})" if exists else body
        pieces.append(f"{copy_cond} and {ex}" if copy_cond else ex)
    dom = _domain_text(kernel, info.loops, info.conds)
    if when:
        dom = f"{dom} and ({when})"
    space = region_space(kernel, r.tensor)
    text = "; ".join(f"S{info.id}[{_dims(info.loops)}] -> M_{space}[{BYTE}] : {dom} and {p}"
                     for p in pieces)
    return isl.Map(f"{{ {text} }}")


def _copy_bases(kernel: Kernel, r: Region, bound: frozenset[str], where: str
                ) -> list[tuple[int, str]]:
    """(byte base, isl condition selecting that copy) for each copy the region may touch."""
    buf = kernel.buffer_map.get(r.tensor)
    if buf is None:
        return [(0, "")]
    stride = -(-buf.nbytes // kernel.target.block_bytes) * kernel.target.block_bytes
    bases = buf.offsets if buf.offsets is not None else tuple(c * stride
                                                              for c in range(buf.copies))
    if r.copy.is_const:
        c = r.copy.const
        if not 0 <= c < buf.copies:
            raise InternalCompilerError(f"{where}: copy {c} of a {buf.copies}-copy buffer")
        return [(bases[c], "")]
    text = affine_text(r.copy, bound, where)
    return [(bases[c], f"{text} = {c}") for c in range(buf.copies)]


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
    pairs = isl.Map(f"{{ S{s.id}[{_dims(s.loops)}] -> S{t.id}[{_dims_primed(t.loops)}] : "
                    f"{' and '.join(same)} }}")
    rel = d.relation.intersect(pairs)
    src = isl.Map(f"{{ S{s.id}[{_dims(s.loops)}] -> F[{' + '.join(flat)}] }}")
    dst = isl.Map(f"{{ S{t.id}[{_dims(t.loops)}] -> F[{' + '.join(flat)}] }}")
    deltas = rel.apply_domain(src).apply_range(dst).deltas()
    if deltas.is_empty():
        return 1
    low = deltas.dim_min_val(0)
    return int(low.to_python()) if low.is_int() else 1


def _dims_primed(loops: tuple[For, ...]) -> str:
    return ", ".join([f"{BLOCK_IDX}_d"] + [f"{f.var}_d" for f in loops])


def _common_depth(s: InstrInfo, d: InstrInfo) -> int:
    n = 0
    for a, b in zip(s.loop_paths, d.loop_paths, strict=False):
        if a != b:
            break
        n += 1
    return n


def _levels(s: InstrInfo, d: InstrInfo, rel: isl.Map, cache: dict
            ) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...], bool]:
    """Common loops, (loop, min distance) per carrying level, and loop independence
    (``cache``: projections of a statement onto its first loops, kept across calls)."""
    m = _common_depth(s, d)
    common = tuple(f.var for f in s.loops[:m])
    deltas = rel.apply_domain(_projection(s, m, cache)).apply_range(
        _projection(d, m, cache)).deltas()
    carried: list[tuple[str, int]] = []
    for j in range(1, m + 1):
        part = deltas.intersect(_level_set(m, j))
        if not part.is_empty():
            carried.append((common[j - 1], int(part.dim_min_val(j).to_python())))
    indep = not deltas.intersect(_level_set(m, m + 1)).is_empty()
    return common, tuple(carried), indep


def _projection(info: InstrInfo, m: int, cache: dict) -> isl.Map:
    """``S[block, loops...] -> L[block, first m loops]``."""
    key = ("projection", info.id, m)
    got = cache.get(key)
    if got is None:
        names = [f"v{j}" for j in range(len(info.loops) + 1)]
        got = cache[key] = isl.Map(f"{{ {info.name}[{', '.join(names)}] -> "
                                   f"L[{', '.join(names[:m + 1])}] }}")
    return got


@functools.lru_cache(maxsize=256)
def _level_set(m: int, j: int) -> isl.Set:
    """Distance vectors ``(block, loop 1..m)`` zero before position ``j`` and positive at it
    (``j = m + 1``: all zero, loop independent)."""
    dims = ", ".join(f"d{i}" for i in range(m + 1))
    cons = " and ".join([f"d{i} = 0" for i in range(min(j, m + 1))]
                        + ([f"d{j} > 0"] if j <= m else []))
    return isl.Set(f"{{ L[{dims}] : {cons} }}")
