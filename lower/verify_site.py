"""Where an instruction stands, for the IR verifier: its body's ``Domain`` (variable ranges and
``If`` conditions, and the questions about an affine expression over them: interval bounds,
then the instances themselves or isl) and the region checks every op shares (tensor, copy,
bounds, 2-D views, alignment)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache

import islpy as isl
import numpy as np

from ascendsched.dtypes import DType
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.instances import affine_text
from ascendsched.lower.ir import Instr, Kernel, Region
from ascendsched.target.model import CoreType, Pipe, Scope


@dataclass(frozen=True, eq=False)  # one object per body (``domain``): identity is equality
class Domain:
    """The instances of one body: ``(variable, lo, hi)`` per variable in scope (``block_idx``
    and the enclosing loops) and the enclosing ``If`` conditions. Its answers are cached: the
    instructions of a body share one ``Domain`` (``domain``), and so do both verifier runs."""

    ranges: tuple[tuple[str, int, int], ...]
    conds: tuple[Cond, ...]

    @cached_property
    def bounds(self) -> dict[str, tuple[int, int]]:
        return {v: (lo, hi) for v, lo, hi in self.ranges}

    @cached_property
    def forms(self) -> tuple[tuple[Affine, int, int], ...]:
        """``(form, lo, hi)``: the linear forms of the variables the conditions bound (a
        persistent loop's ``block_idx + 48*i_o_k < 1261``), with their ranges."""
        out: dict[Affine, tuple[int, int]] = {}
        for c in self.conds:
            if c.lhs.mods or c.lhs.divs or not c.lhs.terms:
                continue
            form = Affine(0, c.lhs.terms)
            lo, hi = out.get(form) or form.bounds(self.bounds)
            rhs = c.rhs - c.lhs.const
            if c.op in ("<", "<=", "=="):
                hi = min(hi, rhs - (c.op == "<"))
            if c.op in (">=", "=="):
                lo = max(lo, rhs)
            out[form] = (lo, hi)
        return tuple((f, lo, hi) for f, (lo, hi) in out.items())

    def interval(self, e: Affine) -> tuple[int, int]:
        """Bounds of ``e``: over the variable ranges, narrowed where ``e`` is a multiple of a
        bounded form plus terms of other variables (a superset of the values it takes)."""
        lo, hi = e.bounds(self.bounds)
        for form, flo, fhi in self.forms:
            v0, c0 = form.terms[0]
            k, r = divmod(dict(e.terms).get(v0, 0), c0)
            if r or k == 0:
                continue
            rest = e - form * k
            if not rest.vars().isdisjoint(form.vars()):
                continue
            rlo, rhi = rest.bounds(self.bounds)
            lo, hi = max(lo, rlo + min(k * flo, k * fhi)), min(hi, rhi + max(k * flo, k * fhi))
        return lo, hi

    @cached_property
    def empty(self) -> bool:
        return any(lo > hi for _, lo, hi in self.ranges) or any(
            lo > hi for _, lo, hi in self.forms)

    def some(self, constraint: str) -> bool:
        """Whether an instance satisfies ``constraint`` (isl text over the variables)."""
        parts = [f"{lo} <= {v} <= {hi}" for v, lo, hi in self.ranges]
        for c in self.conds:
            op = "=" if c.op == "==" else c.op
            parts.append(f"{self.text(c.lhs)} {op} {c.rhs}")
        parts.append(f"({constraint})")
        names = ", ".join(v for v, _, _ in self.ranges)
        return not isl.Set(f"{{ [{names}] : {' and '.join(parts)} }}").is_empty()

    def text(self, e: Affine) -> str:
        return affine_text(e, frozenset(self.bounds), "a region")


@lru_cache(maxsize=4096)
def domain(ranges: tuple[tuple[str, int, int], ...], conds: tuple[Cond, ...]) -> Domain:
    return Domain(ranges, conds)


@lru_cache(maxsize=8)  # up to _ENUMERATE instances each: few are kept
def _points(d: Domain) -> dict[str, np.ndarray] | None:
    """Every instance of ``d`` (one array per variable), when there are at most
    ``_ENUMERATE`` candidates; None: ask isl."""
    n = math.prod(max(hi - lo + 1, 0) for _, lo, hi in d.ranges)
    if n > _ENUMERATE:
        return None
    axes = np.meshgrid(*(np.arange(lo, hi + 1) for _, lo, hi in d.ranges), indexing="ij")
    env = {v: a.ravel() for (v, _, _), a in zip(d.ranges, axes, strict=True)}
    keep = np.ones(n, dtype=bool)
    for c in d.conds:
        keep &= np.broadcast_to(np.asarray(c.evaluate(env)), keep.shape)
    return {v: a[keep] for v, a in env.items()}


@lru_cache(maxsize=4096)
def _leaves(d: Domain, e: Affine, lo: int, hi: int) -> bool:
    a, b = d.interval(e)
    if (lo <= a and b <= hi) or d.empty:
        return False
    points = _points(d)
    if points is not None:
        v = np.asarray(e.evaluate(points))
        return bool(((v < lo) | (v > hi)).any())
    t = d.text(e)
    return d.some(f"{t} < {lo} or {t} > {hi}")


@lru_cache(maxsize=4096)
def _misaligned(d: Domain, e: Affine, scale: int, align: int) -> bool:
    if d.empty:
        return False
    points = _points(d)
    if points is not None:
        return bool((np.asarray(e.evaluate(points)) * scale % align).any())
    return d.some(f"({scale} * {d.text(e)}) mod {align} > 0")


_ENUMERATE = 1 << 16  # instances checked one by one (numpy) before isl is asked


@dataclass(frozen=True)
class Site:
    """One instruction where it stands: its program's core and its body's ``Domain``."""

    kernel: Kernel
    core: CoreType
    ins: Instr
    domain: Domain

    @property
    def ranges(self) -> dict[str, tuple[int, int]]:
        return self.domain.bounds

    def fail(self, rule: str, msg: str) -> InternalCompilerError:
        return InternalCompilerError(
            f"kernel {self.kernel.name}: `{self.ins}` in the {self.core} program breaks the IR "
            f"contract ({rule}): {msg}")

    def interval(self, e: Affine) -> tuple[int, int]:
        """Bounds of ``e`` over the instances (a superset of its values)."""
        return self.domain.interval(e)

    def leaves(self, e: Affine, lo: int, hi: int) -> bool:
        """Whether some instance gives ``e`` a value outside ``[lo, hi]``: the interval over
        the loop ranges, then (cached) the narrowed one and the instances themselves (a small
        domain) or isl."""
        a, b = e.bounds(self.domain.bounds)
        return not (lo <= a and b <= hi) and _leaves(self.domain, e, lo, hi)

    def misaligned(self, e: Affine, scale: int, align: int) -> bool:
        """Whether some instance gives ``scale * e`` a value off ``align``: the common
        divisor of the coefficients, then (cached) the instances or isl."""
        step = math.gcd(*(c for _, c in e.terms), *(c for _, _, c in e.mods),
                        *(c for _, _, c in e.divs))
        if (step * scale) % align == 0 and (e.const * scale) % align == 0:
            return False
        return _misaligned(self.domain, e, scale, align)


# --------------------------------------------------------------------------- regions
@dataclass(frozen=True)
class OpRule:
    """What the verifier knows of one op: its pipe, its numbers of write and read regions and
    the check of its own rules (run after the shared region checks)."""

    pipe: Pipe
    writes: int
    reads: int
    check: Callable[[Site], None]
    first: Callable[[Site], object] | None = None  # checked before the regions (cube params,
    # which the regions' footprints derive from)


def check_region(site: Site, r: Region) -> None:
    """Tensor, copy index and bounds of one region (all ops)."""
    k = site.kernel
    if r.tensor in k.param_map:
        elems = k.param_map[r.tensor].elems
        if r.copy != Affine():
            raise site.fail("copy", f"GM tensor {r.tensor} has no copies (copy {r.copy})")
    elif r.tensor in k.buffer_map:
        b = k.buffer_map[r.tensor]
        elems = b.elems
        if b.copies == 1 and r.copy != Affine():
            raise site.fail("copy", f"copy index {r.copy} on single-copy buffer {b.name}")
        if site.leaves(r.copy, 0, b.copies - 1):
            raise site.fail("copy", f"copy {r.copy} of {b.name} leaves 0..{b.copies - 1}")
    else:
        raise site.fail("tensor", f"unknown tensor {r.tensor!r}")
    below = sum(min(0, (d.extent - 1) * d.stride) for d in r.dims)
    above = sum(max(0, (d.extent - 1) * d.stride) for d in r.dims)
    if site.leaves(r.offset, -below, elems - 1 - above):
        lo, hi = site.interval(r.offset)
        raise site.fail("bounds", f"{r} reaches elements up to [{lo + below}, {hi + above}], "
                                  f"outside {r.tensor} (0..{elems - 1})")


@dataclass(frozen=True)
class View:
    """A DMA or vector region as the 2-D view its op uses: ``rows`` rows of ``cols``
    elements, strides in elements (a 1-D region is one row)."""

    region: Region
    role: str
    dtype: DType
    scope: Scope
    rows: int
    rs: int
    cols: int
    cs: int

    @property
    def eb(self) -> int:
        return self.dtype.bytes

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    @property
    def tensor(self) -> str:
        return self.region.tensor


def view(site: Site, r: Region, role: str) -> View:
    k = site.kernel
    if len(r.dims) == 2:
        (rows, rs), (cols, cs) = r.dims
    elif len(r.dims) == 1:
        rows, rs, (cols, cs) = 1, 0, r.dims[0]
    else:
        raise site.fail("dims", f"{role} {r} has {len(r.dims)} dims; {site.ins.op} takes 1-D "
                                "or 2-D views")
    return View(r, role, k.dtype_of(r.tensor), k.scope_of(r.tensor), rows, rs, cols, cs)


def aligned(site: Site, r: Region, align: int) -> bool:
    """Whether every instance of ``r`` starts on ``align`` bytes (planned: in its scope)."""
    k = site.kernel
    eb = k.dtype_of(r.tensor).bytes
    b = k.buffer_map.get(r.tensor)
    bases = {0}
    if b is not None and b.offsets is not None:
        lo, hi = site.interval(r.copy)
        bases = {b.offsets[c] for c in range(max(lo, 0), min(hi, b.copies - 1) + 1)}
    return not any(base % align for base in bases) and not site.misaligned(r.offset, eb, align)


def fail_unaligned(site: Site, o: View, align: int, what: str) -> InternalCompilerError:
    return site.fail("alignment", f"{what} {o.tensor} starts at element offset "
                                  f"{o.region.offset} ({o.eb} B each), not {align}-byte aligned")
