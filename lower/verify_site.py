"""Where an instruction stands, for the IR verifier: ``Site`` (its core, variable ranges and
``If`` conditions, the static and the exact isl questions about its affine expressions) and
the region checks every op shares (tensor, copy, bounds, 2-D views, alignment)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property

import islpy as isl
import numpy as np

from ascendsched.dtypes import DType
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.ir import Affine, Cond, Instr, Kernel, Region
from ascendsched.lower.polyhedral import affine_text
from ascendsched.target.model import CoreType, Pipe, Scope


@dataclass(frozen=True)
class Site:
    """One instruction where it stands: its program's core, the ranges of the variables in
    scope (``block_idx`` and the enclosing loops) and the enclosing ``If`` conditions."""

    kernel: Kernel
    core: CoreType
    ins: Instr
    ranges: Mapping[str, tuple[int, int]]
    conds: tuple[Cond, ...]

    def fail(self, rule: str, msg: str) -> InternalCompilerError:
        return InternalCompilerError(
            f"kernel {self.kernel.name}: `{self.ins}` in the {self.core} program breaks the IR "
            f"contract ({rule}): {msg}")

    def interval(self, e: Affine) -> tuple[int, int]:
        """Bounds of ``e`` over the variable ranges (the conditions ignored: a superset)."""
        return _interval(e, self.ranges)

    def leaves(self, e: Affine, lo: int, hi: int) -> bool:
        """Whether some instance that runs gives ``e`` a value outside ``[lo, hi]``."""
        a, b = self.interval(e)
        if lo <= a and b <= hi:
            return False
        if self._points is not None:
            v = np.asarray(e.evaluate(self._points))
            return bool(((v < lo) | (v > hi)).any())
        t = self._text(e)
        return self._some(f"{t} < {lo} or {t} > {hi}")

    def misaligned(self, e: Affine, scale: int, align: int) -> bool:
        """Whether some instance that runs gives ``scale * e`` a value off ``align``."""
        step = math.gcd(*(c for _, c in e.terms), *(c for _, _, c in e.mods),
                        *(c for _, _, c in e.divs))
        if (step * scale) % align == 0 and (e.const * scale) % align == 0:
            return False
        if self._points is not None:
            return bool((np.asarray(e.evaluate(self._points)) * scale % align).any())
        return self._some(f"({scale} * {self._text(e)}) mod {align} > 0")

    @cached_property
    def _points(self) -> dict[str, np.ndarray] | None:
        """Every instance that runs (one array per variable), when there are at most
        ``_ENUMERATE`` candidates; None: ask isl."""
        n = math.prod(max(hi - lo + 1, 0) for lo, hi in self.ranges.values())
        if n > _ENUMERATE:
            return None
        axes = np.meshgrid(*(np.arange(lo, hi + 1) for lo, hi in self.ranges.values()),
                           indexing="ij")
        env = {v: a.ravel() for v, a in zip(self.ranges, axes, strict=True)}
        keep = np.ones(n, dtype=bool)
        for c in self.conds:
            keep &= np.broadcast_to(np.asarray(c.evaluate(env)), keep.shape)
        return {v: a[keep] for v, a in env.items()}

    def _some(self, constraint: str) -> bool:
        """Whether an instance runs and satisfies ``constraint`` (isl text)."""
        names = ", ".join(self.ranges)
        parts = [f"{lo} <= {v} <= {hi}" for v, (lo, hi) in self.ranges.items()]
        for c in self.conds:
            op = "=" if c.op == "==" else c.op
            parts.append(f"{self._text(c.lhs)} {op} {c.rhs}")
        parts.append(f"({constraint})")
        return not isl.Set(f"{{ [{names}] : {' and '.join(parts)} }}").is_empty()

    def _text(self, e: Affine) -> str:
        return affine_text(e, frozenset(self.ranges), f"`{self.ins}`")


_ENUMERATE = 1 << 16  # instances checked one by one (numpy) before isl is asked


# --------------------------------------------------------------------------- regions
@dataclass(frozen=True)
class OpRule:
    """What the verifier knows of one op: its pipe, its numbers of write and read regions and
    the check of its own rules (run after the shared region checks)."""

    pipe: Pipe
    writes: int
    reads: int
    check: Callable[[Site], None]


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


def _interval(e: Affine, ranges: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
    """Bounds of a quasi-affine expression over variable ranges."""
    lo = hi = e.const
    for v, c in e.terms:
        a, b = ranges[v]
        lo, hi = lo + min(c * a, c * b), hi + max(c * a, c * b)
    for v, m, c in e.mods:
        a, b = ranges[v]
        ma, mb = (a, b) if 0 <= a and b < m else (0, m - 1)
        lo, hi = lo + min(c * ma, c * mb), hi + max(c * ma, c * mb)
    for num, d, c in e.divs:
        a, b = _interval(num, ranges)
        qa, qb = a // d, b // d
        lo, hi = lo + min(c * qa, c * qb), hi + max(c * qa, c * qb)
    return lo, hi
