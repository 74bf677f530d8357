"""Statement instances of a kernel for the polyhedral analyses (islpy): domains, program order.

Every :class:`Instr` of every program becomes an :class:`InstrInfo`: its place in the loop tree
and an iteration domain over ``block_idx`` and its enclosing loop variables, cut by its ``If``
conditions (``{ S3[block_idx, k] : 0 <= block_idx < 1 and 0 <= k < 4 }``), with a 2d+1 style
program-order schedule (child index, loop variable, child index, ...). ``program_order`` gives
the instance pairs one block runs in a given order, shared between statements of one shape.

The AIV program of a 1:2 mixed kernel (``Kernel.sub_blocks`` = 2) runs on both Vector cores of
each block, each with its own UB: there the instance dimension ``block_idx`` numbers the Vector
cores, ``2 * block + sub_block_idx`` (what GetBlockIdx() returns on an AIV of such a kernel:
asc-devkit impl/basic_api/dav_c220/kernel_operator_sys_var_impl.h, GetBlockIdxImpl, and docs
GetBlockIdx.md), and the program's own ``block_idx`` and ``sub_block_idx`` are read as
``floor(block_idx / 2)`` and ``block_idx mod 2`` (``InstrInfo.instr`` and ``conds`` are the
instruction and conditions so rewritten; the kernel keeps its own). So every analysis that asks
"the same block" of two instances asks "the same core", as it should: each Vector core orders
only its own instructions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache

import islpy as isl

from ascendsched.errors import InternalCompilerError, NotAffineError
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.ir import (
    BLOCK_IDX,
    SUB_BLOCK_IDX,
    For,
    If,
    Instr,
    Kernel,
    Stmt,
)
from ascendsched.lower.substitute import map_affines
from ascendsched.target.model import CoreType, Pipe


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


def kernel_instrs(kernel: Kernel) -> tuple[InstrInfo, ...]:
    """Every Instr of every program with its domain and schedule, numbered in program order."""
    out: list[InstrInfo] = []
    for prog in kernel.programs:
        raw: list[tuple[Instr, tuple[int, ...], tuple[Stmt, ...]]] = []
        _walk(prog.body, (), (), raw)
        depth = max((len(p) for _, p, _ in raw), default=1)
        subs = kernel.subs(prog.core)
        for instr, path, anc in raw:
            loops = tuple(a for a in anc if isinstance(a, For))
            loop_paths = tuple(path[: j + 1] for j, a in enumerate(anc) if isinstance(a, For))
            conds = tuple(c for a in anc if isinstance(a, If) for c in a.conds)
            if subs > 1:
                instr, conds = _per_core_instr(instr, subs), tuple(
                    Cond(_per_core(c.lhs, subs), c.op, c.rhs) for c in conds)
            ident = len(out)
            text = f"[{loop_dims(loops)}] : {domain_text(kernel, loops, conds, prog.core)} }}"
            dom = _domain(text)
            sched: list[str] = []
            for j, a in enumerate(anc):
                sched += [str(path[j]), a.var if isinstance(a, For) else "0"]
            sched.append(str(path[-1]))
            sched += ["0"] * (2 * depth - 1 - len(sched))
            out.append(InstrInfo(ident, prog.core, instr, path, loops, loop_paths, conds,
                                 dom.set_tuple_name(f"S{ident}"),
                                 f"{{ S{ident}[{loop_dims(loops)}] -> [{', '.join(sched)}] }}",
                                 text))
    return tuple(out)


@lru_cache(maxsize=4096)
def _domain(text: str) -> isl.Set:
    """The instance set of ``text`` (loop dimensions and constraints, without the statement's
    name): statements of one body share it, and so do the kernels one compile analyses (the
    sync template, the kernel itself, each sub-block's program: GEMM + bias + GELU
    1847x1757x3854 parses 111 distinct domains 186 times) and the points of a sweep. isl
    operations return new sets, so the one parsed is never changed."""
    return isl.Set("{ S" + text)


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
    m, strict = order_shape(a, b)
    if cache is None or (domains and (not a.domain_key or not b.domain_key)):
        return _program_order(a, b, m, strict, domains)
    key = ("po shape", a.domain_key, b.domain_key, m, strict) if domains else \
        ("po loops", len(a.loops), len(b.loops), m, strict)
    got = cache.get(key)
    if got is None:
        got = cache[key] = _program_order(a, b, m, strict, domains)
    return got.set_tuple_name(isl.dim_type.in_, a.name).set_tuple_name(isl.dim_type.out,
                                                                      b.name)


def order_shape(a: InstrInfo, b: InstrInfo) -> tuple[int, bool]:
    """How ``a`` and ``b`` are ordered: their number of common loops, and whether ``a``
    instances precede ``b`` ones only in a later iteration of a common loop (``a`` is ``b``
    or comes after it in the text)."""
    m = 0
    while m < min(len(a.loop_paths), len(b.loop_paths)) and a.loop_paths[m] == b.loop_paths[m]:
        m += 1
    if a.id == b.id:
        return m, True
    j = next(i for i, (x, y) in enumerate(zip(a.path, b.path)) if x != y)
    return m, a.path[j] > b.path[j]


def never_before(a: InstrInfo, b: InstrInfo) -> bool:
    """Whether no instance of ``a`` precedes one of ``b``, by their place in the text alone:
    no common loop, and ``a`` is ``b`` or comes after it (``program_order`` is empty)."""
    m, later = order_shape(a, b)
    return not m and later


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


class Where:
    """Where an expression sits, as an error message names it, formatted only when one is
    raised: the byte relations ask it of every region of every statement, and formatting the
    region each time cost GEMM + softmax 72x2839x3916 0.03 s of its 0.22 s of dependences."""

    def __init__(self, make: Callable[[], str]) -> None:
        self.make = make

    def __str__(self) -> str:
        return self.make()


def affine_text(expr: Affine, bound: frozenset[str], where: str | Where) -> str:
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


def _walk(body: tuple[Stmt, ...], path: tuple[int, ...], anc: tuple[Stmt, ...],
          out: list[tuple[Instr, tuple[int, ...], tuple[Stmt, ...]]]) -> None:
    for i, s in enumerate(body):
        if isinstance(s, Instr):
            out.append((s, path + (i,), anc))
        else:
            _walk(s.body, path + (i,), anc + (s,), out)


def loop_dims(loops: tuple[For, ...]) -> str:
    return ", ".join((BLOCK_IDX,) + tuple(f.var for f in loops))


def block_count(kernel: Kernel, core: CoreType | None) -> int:
    """The values of the instance dimension ``block_idx`` of ``core``'s instructions: the
    blocks, or for the AIV program of a 1:2 kernel its Vector cores (module docstring)."""
    return kernel.block_dim * (kernel.subs(core) if core is not None else 1)


def domain_text(kernel: Kernel, loops: tuple[For, ...], conds: tuple[Cond, ...],
                core: CoreType | None = None) -> str:
    bound = frozenset((BLOCK_IDX,) + tuple(f.var for f in loops))
    if len(bound) != len(loops) + 1:
        raise InternalCompilerError(f"loop variables are not unique along a nest: "
                                    f"{[f.var for f in loops]}")
    parts = [f"0 <= {BLOCK_IDX} < {block_count(kernel, core)}"]
    parts += [f"0 <= {f.var} < {f.extent}" for f in loops]
    for c in conds:
        op = "=" if c.op == "==" else c.op
        lhs = affine_text(c.lhs, bound, Where(lambda c=c: f"condition {c}"))
        parts.append(f"{lhs} {op} {c.rhs}")
    return " and ".join(parts)


@lru_cache(maxsize=4096)  # the same offsets and guards recur in every statement instance set
def _per_core(e: Affine, subs: int) -> Affine:
    """``e`` of the AIV program of a 1:``subs`` kernel over the Vector core number
    ``block_idx`` (module docstring)."""
    if SUB_BLOCK_IDX not in e.vars() and BLOCK_IDX not in e.vars():
        return e
    core = Affine.of(BLOCK_IDX)
    return e.substitute(BLOCK_IDX, core.floordiv(subs)).substitute(
        SUB_BLOCK_IDX, Affine.mod(BLOCK_IDX, subs))


def _per_core_instr(ins: Instr, subs: int) -> Instr:
    if not ins.writes and not ins.reads and not ins.attrs:
        return ins  # a sync: its ids name no core
    return map_affines(ins, lambda e: _per_core(e, subs))
