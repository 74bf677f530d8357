"""The resolved Cube facts of a schedule with a tensorized stage: which GEMM the Cube runs (and
the Vector epilogue, if any), the effective tiling, the tile classes in execution order and the
copies per staging level. ``lower/build_gemm.py`` and ``lower/build_mixed.py`` build from a
:class:`CubePlan` alone.

A plan is made from the few numbers a Cube schedule decides (``schedule/cube_resolve.py`` reads
them from a general ``Schedule``'s records; ``GemmSchedule`` is sugar for those records)::

    CubePlan(gemm(1024, 1024, 1024), tile=L1Tile(128, 256, 256), k0=64,
             copies=(("l1", 2), ("l0", 2)), cores=24, swizzle=Swizzle(4, "m"))

Tiles are clamped to the problem padded to the fractal (a 1 x 1 x 1 GEMM uses one 16 x 16 x C0
fractal tile); see ``schedule/gemm.py`` for the model and the swizzle.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

from ascendsched.algo.algorithm import Algorithm, upstream
from ascendsched.algo.gemm_epilogue import is_matmul_stage
from ascendsched.algo.gemm_spec import GemmSpec, match_gemm
from ascendsched.algo.gemm_vector_epilogue import (
    GemmSplit,
    VectorEpilogue,
    split_vector_epilogue,
)
from ascendsched.errors import UnsupportedError
from ascendsched.schedule.epilogue_steps import default_step_rows
from ascendsched.schedule.gemm_records import (
    CubeGeometry,
    EpilogueOn,
    GemmTiling,
    L1Tile,
    Swizzle,
    TileClass,
    cube_geometry,
)
from ascendsched.target import Target

T = TypeVar("T")

# every directive makes a new schedule of the same algorithm: match and split it once
_SPECS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SPLITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PREFIXES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_AFTER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _once(table: weakref.WeakKeyDictionary, make: Callable[[Algorithm], T], algo: Algorithm,
          key: object = None) -> T:
    """``make(algo)``, once per algorithm (and ``key``) in ``table``; an UnsupportedError is
    kept too and raised again (a copy) every time."""
    per = table.get(algo)
    if per is None:
        per = table[algo] = {}
    if key not in per:
        try:
            per[key] = make(algo)
        except UnsupportedError as e:
            per[key] = e
    got = per[key]
    if isinstance(got, UnsupportedError):
        raise copy.copy(got)
    return got


def matched(algo: Algorithm) -> GemmSpec:
    """``match_gemm(algo)``, once per algorithm (one with a Vector epilogue is not a plain
    GEMM: its UnsupportedError is kept)."""
    return _once(_SPECS, lambda a: match_gemm(a), algo)


def split_once(algo: Algorithm) -> GemmSplit:
    """``split_vector_epilogue(algo)``, once per algorithm: its Cube part is then one
    algorithm object, matched once too."""
    return _once(_SPLITS, lambda a: split_vector_epilogue(a), algo)


def cube_split(algo: Algorithm, unit: str | None, after: str | None = None
               ) -> GemmSplit | None:
    """The Cube and Vector parts when the epilogue runs on the Vector cores (a mixed kernel),
    else None. Steps the Fixpipe can apply stay there unless ``unit == "vector"``; otherwise
    the longest run of steps the Cube core can apply stays with it and the rest go to the
    Vector cores (``_cube_prefix``). ``unit == "vector"`` with ``after``: the steps up to stage
    ``after`` on the Cube core, the rest on the Vector cores. ``unit == "fixpipe"`` on an
    epilogue the Fixpipe cannot apply raises the matcher's UnsupportedError."""
    if unit == "vector":
        return split_once(algo) if after is None else _split_after(algo, after)
    try:
        matched(algo)
        return None
    except UnsupportedError as e:
        if unit == "fixpipe":
            raise
        try:
            split = split_once(algo)
            matched(split.cube)
        except UnsupportedError:
            raise e from None
        return _cube_prefix(algo, split) or split


def _split_after(algo: Algorithm, after: str) -> GemmSplit:
    """``split_vector_epilogue(algo, after)`` whose Cube part the Cube core can run, once per
    algorithm and stage."""
    def make(a: Algorithm) -> GemmSplit:
        split = split_vector_epilogue(a, after=after)
        try:
            matched(split.cube)
        except UnsupportedError as e:
            raise UnsupportedError(
                f"algorithm '{a.name}': the Cube core cannot apply the steps up to '{after}' "
                f"on its way out ({e}); keep fewer of them on it (an earlier stage), or run "
                f"every step after the sum on the Vector cores") from None
        return split
    return _once(_AFTER, make, algo, after)


def _cube_prefix(algo: Algorithm, whole: GemmSplit) -> GemmSplit | None:
    """The split that keeps the longest run of steps after the sum the Cube core can apply
    (a bias through the Mmad bias table, ReLU on the Fixpipe) with it, the rest on the Vector
    cores (``split_after``), or None when no step can stay: ``C + bias[j]`` then GELU puts the
    bias in the bias table, so the Vector cores read neither the bias nor add it."""
    def make(a: Algorithm) -> GemmSplit | None:
        acc = whole.cube.outputs[0]
        sum_stage = next(t for t in a.stages if is_matmul_stage(t))
        chain = [t for t in a.stages if t is not a.outputs[0] and t is not sum_stage
                 and sum_stage in upstream(t) and tuple(t.shape) == tuple(acc.shape)
                 and t.dtype == acc.dtype]
        for t in reversed(chain):  # the longest prefix first
            try:
                return _split_after(a, t.name)
            except UnsupportedError:
                continue
        return None
    return _once(_PREFIXES, make, algo)


@dataclass(frozen=True)
class Written:
    """How a general ``Schedule`` wrote a plan's decisions, for the messages that name one and
    its fix (``lower/cube_hints.py``): the tensorized ``stage``; per tile decision (``m``,
    ``n``, ``k``: the L1 K step, ``k0``: the L0 K step) the axis or loop split for it and the
    factor (None: not split); the K loops L1 and L0A/L0B are loaded at (``cache_read``'s
    ``at``; None: not split); the operands; the stages placed on the Vector cores."""

    stage: str
    splits: tuple[tuple[str, str, int | None], ...]  # (decision, axis or loop, factor)
    l1_at: str | None
    l0_at: str | None
    a: str
    b: str
    placed: tuple[str, ...]

    def split(self, decision: str) -> tuple[str, int | None]:
        """The axis or loop split for ``decision`` and its factor (None: not split)."""
        return next((axis, f) for d, axis, f in self.splits if d == decision)


@dataclass(frozen=True, eq=False)
class CubePlan:
    """The decisions of a Cube schedule. ``tile``: the L1 tile as written (None: the whole
    problem); ``k0``: the L0 K step (None: the L1 tile's k); ``copies``: (level, copies) of
    the levels given (``gemm_records.LEVELS``); ``epilogue``: where the steps after the sum
    run (None: the Fixpipe when it can apply them, else the Vector cores); ``source``: the
    schedule as written (its printout, kept on the kernel as notes); ``written``: how a
    general ``Schedule`` spelled the decisions (None: ``GemmSchedule`` calls)."""

    algo: Algorithm
    target: Target
    tile: L1Tile | None = None
    k0: int | None = None
    copies_given: tuple[tuple[str, int], ...] = ()
    cores: int = 1
    swizzle: Swizzle = Swizzle(1, "m")
    epilogue: EpilogueOn | None = None
    source: str = field(default="", repr=False)
    written: Written | None = field(default=None, repr=False)

    def __str__(self) -> str:
        return self.source

    @cached_property
    def split(self) -> GemmSplit | None:
        return cube_split(self.algo, self.epilogue_unit,
                          self.epilogue.after if self.epilogue is not None else None)

    @cached_property
    def spec(self) -> GemmSpec:
        """The GEMM the Cube core runs (with a Vector epilogue: the sum alone, stored as the
        accumulator into the workspace)."""
        split = self.split
        return matched(split.cube if split is not None else self.algo)

    @property
    def vector_epilogue(self) -> VectorEpilogue | None:
        return self.split.epilogue if self.split is not None else None

    @property
    def epilogue_unit(self) -> str | None:
        return self.epilogue.unit if self.epilogue is not None else None

    @property
    def epilogue_rows(self) -> int | None:
        return self.epilogue.rows if self.epilogue is not None else None

    @property
    def epilogue_vector_cores(self) -> int:
        """Vector cores per block that split each tile of a Vector epilogue (2 by default)."""
        return self.epilogue.vector_cores if self.epilogue is not None else 2

    @cached_property
    def geometry(self) -> CubeGeometry:
        return cube_geometry(self.target)

    def copies(self, level: str) -> int:
        n = 2 if level == "workspace" else 1
        for lv, c in self.copies_given:
            if lv == level:
                n = c
        return n

    def m_granule(self) -> int:
        """M granule: 16 (fractal rows), but int8 A^T sits in L1 with M along C0 (32)."""
        sp, g = self.spec, self.geometry
        return g.c0(1) if sp.in_dtype.bytes == 1 and sp.trans_a else g.rows

    def n_granule(self) -> int:
        """N granule: 16 (L0B/L0C fractal), but int8 B (K, N) sits in L1 with N along C0 (32)
        and its LoadDataWithTranspose fills 32 columns at a time (lower/cube_ops.py load_l0b)."""
        sp, g = self.spec, self.geometry
        return g.c0(1) if sp.in_dtype.bytes == 1 and not sp.trans_b else g.rows

    def k_granule(self) -> int:
        """K granule: the input dtype's C0 (16 for 16-bit, 32 for int8)."""
        return self.geometry.c0(self.spec.in_dtype.bytes)

    @cached_property
    def tiling(self) -> GemmTiling:
        """Effective tiling: tiles clamped to the fractal-padded problem."""
        sp = self.spec
        tm, tn, tk, k0 = self.clamped(self.tile, self.k0)
        mt, nt, kt = -(-sp.m // tm), -(-sp.n // tn), -(-sp.k // tk)
        tiles = sp.batch * mt * nt
        # row blocks (``row_blocks``): a core takes a block of rows with all its tiles
        units = sp.batch * mt if self._rows_wider(tn) else tiles
        cores = min(self.cores, units)
        sw = self.swizzle
        width = min(sw.width, mt if sw.direction == "m" else nt)
        return GemmTiling(sp, tm, tn, tk, k0, mt, nt, kt, tk // k0, tiles, cores,
                          -(-units // cores), self.copies("l1"), self.copies("l0"),
                          self.copies("l0c"), Swizzle(width, sw.direction))

    def clamped(self, tile: L1Tile | None, k0: int | None) -> tuple[int, int, int, int]:
        """``tile`` and ``k0`` as this plan's problem runs them (``tiling``'s tm, tn, tk,
        k0): each side clamped to the fractal-padded problem (no tile: the whole of it), the
        K step to the clamped K tile and a divisor of it."""
        sp = self.spec
        c0, ng, mg = self.k_granule(), self.n_granule(), self.m_granule()
        mp, np_, kp = _round_up(sp.m, mg), _round_up(sp.n, ng), _round_up(sp.k, c0)
        t = tile or L1Tile(mp, np_, kp)
        tm, tn, tk = min(t.m, mp), min(t.n, np_), min(t.k, kp)
        k0 = min(k0 if k0 is not None else t.k, tk)
        if tk % k0:  # the clamp broke divisibility: largest divisor of tk not above k0
            k0 = max(d for d in range(c0, k0 + 1, c0) if tk % d == 0)
        return tm, tn, tk, k0

    def _rows_wider(self, tn: int) -> bool:
        epi = self.vector_epilogue
        return epi is not None and bool(epi.rowwise) and \
            tn < _round_up(self.spec.n, self.n_granule())

    def _chunked_epilogue(self) -> bool:
        """Whether the Vector epilogue reads its rows in chunks, one at a time: under a row
        reduction, when not one row of a Vector core's share of the first tile class fits UB
        by the rule ``lower/build_mixed.epilogue_schedule`` steps its rows by."""
        epi = self.vector_epilogue
        assert epi is not None
        c = self.tile_classes[0]
        rows = -(-c.mv // self.epilogue_vector_cores)
        return bool(epi.rowwise) and default_step_rows(
            epi.tile_algorithm(rows, c.nv), rows, c.nv, self.target) == 0

    @property
    def row_blocks(self) -> bool:
        """Whether the Vector epilogue reduces rows wider than a Cube tile: then each core
        takes a *row block* (``tm`` rows of the whole output: its Cube tiles one after the
        other, all into one workspace slot) and its Vector cores run the epilogue over the
        whole block, reading rows UB cannot hold in chunks (``lower/build_mixed.py``)."""
        return self._rows_wider(self.tiling.tn)

    @cached_property
    def tile_classes(self) -> tuple[TileClass, ...]:
        """The output tiles as rectangles of equal-size tiles, in execution order: interior
        tiles in whole swizzle strips, the last (narrower) strip, the M-edge row, the N-edge
        column, the corner. Each is one persistent loop in the kernel, with static sizes."""
        t, sp = self.tiling, self.spec
        mtail, ntail = sp.m - (t.mt - 1) * t.tm, sp.n - (t.nt - 1) * t.tn
        if self.row_blocks:  # a class of full row blocks, then the M edge's; no swizzle
            mi = t.mt - 1 if mtail != t.tm else t.mt
            blocks = [TileClass("row blocks", mi, 1, 0, 0, 1, "m", t.tm, sp.n)] if mi else []
            if mi < t.mt:
                blocks.append(TileClass("M edge row block", 1, 1, mi, 0, 1, "m", mtail, sp.n))
            return tuple(blocks)
        mi = t.mt - 1 if mtail != t.tm else t.mt  # interior tile rows / columns
        ni = t.nt - 1 if ntail != t.tn else t.nt
        w, d = t.swizzle.width, t.swizzle.direction
        out: list[TileClass] = []
        if mi and ni:
            major = mi if d == "m" else ni
            full = major // w * w if w > 1 else major
            if d == "m":
                parts = [(full, ni, 0, 0, w), (mi - full, ni, full, 0, mi - full)]
            else:
                parts = [(mi, full, 0, 0, w), (mi, ni - full, 0, full, ni - full)]
            out += [TileClass("interior", r, c, m0, n0, width, d, t.tm, t.tn)
                    for r, c, m0, n0, width in parts if r and c]
        if mi < t.mt and ni:
            out.append(TileClass("M edge", 1, ni, mi, 0, 1, "m", mtail, t.tn))
        if ni < t.nt and mi:
            out.append(TileClass("N edge", mi, 1, 0, ni, 1, "m", t.tm, ntail))
        if mi < t.mt and ni < t.nt:
            out.append(TileClass("corner", 1, 1, mi, ni, 1, "m", mtail, ntail))
        return tuple(out)

    def tile_order(self) -> list[tuple[int, int, int]]:
        """(batch, m tile, n tile) of every tile in execution order (tile T runs on core
        T % cores)."""
        order = []
        for c in self.tile_classes:
            for i in range(self.spec.batch * c.rows * c.cols):
                b, r = divmod(i, c.rows * c.cols)
                mi, ni = c.coords(r)
                order.append((b, c.m0 + mi, c.n0 + ni))
        return order

    def loop_nest_text(self) -> str:
        """Pseudocode of the loops before lowering: one persistent loop per tile class."""
        t = self.tiling
        lines = [f"# {t.tiles} tiles of {t.tm} x {t.tn} on {t.cores} Cube cores (tile T on core "
                 f"T % {t.cores}), swizzle({t.swizzle.width}, {t.swizzle.direction!r})"]
        for c in self.tile_classes:
            n = self.spec.batch * c.rows * c.cols
            lines.append(f"for each of this core's {c.label} tiles ({n}: {c.rows} x {c.cols} at "
                         f"tile ({c.m0}, {c.n0}), valid {c.mv} x {c.nv}):")
            lines.append("  <tile body>")
        lines += [
            "<tile body>:",
            f"  for kt in 0..{t.kt}:   # L1 K step {t.tk}, {t.l1_copies} L1 copies",
            f"    GM -> L1 (ND -> NZ): A {t.tm} x {t.tk}, B {t.tk} x {t.tn}",
            f"    for kk in 0..{t.kk}:   # L0 K step {t.k0}, {t.l0_copies} L0A/L0B copies",
            f"      L1 -> L0A {t.tm} x {t.k0} (Zz), L1 -> L0B {t.k0} x {t.tn} (Zn)",
            "      Mmad L0C += L0A x L0B   # C = A x B on the first K step",
            f"  L0C -> GM (Fixpipe NZ -> ND, {self.spec.acc_dtype} -> {self.spec.out_dtype}), "
            f"{t.l0c_copies} L0C copies"]
        epi = self.vector_epilogue
        if self.row_blocks:
            lines[0] = (f"# {t.tiles} tiles of {t.tm} x {t.tn} in row blocks of {t.nt} tiles "
                        f"on {t.cores} Cube cores (block T on core T % {t.cores})")
            lines[1:1 + 2 * len(self.tile_classes)] = [
                x for c in self.tile_classes for x in (
                    f"for each of this core's {c.label} ({self.spec.batch * c.rows} of "
                    f"{c.mv} rows):", f"  for each of the block's {t.nt} tiles "
                    f"(the last {self.spec.n - (t.nt - 1) * t.tn} columns wide):",
                    "    <tile body>")]
        if epi is not None:
            lines[-1] += f", into workspace slot (iteration % {self.copies('workspace')})"
            n = self.epilogue_vector_cores
            unit = "row block" if self.row_blocks else "tile"
            lines.append((f"  on the block's 2 Vector cores (AIC:AIV 1:2), each half of the "
                          f"{unit}'s rows: " if n == 2 else "  on the block's Vector core (1:1): ")
                         + f"{epi}, "
                         + (f"{self.epilogue_rows} rows per step" if self.epilogue_rows
                            else "one row at a time, read in chunks (no row fits UB)"
                            if self._chunked_epilogue()
                            else "as many rows per step as UB holds"))
        return "\n".join(lines)


def _round_up(x: int, a: int) -> int:
    return -(-x // a) * a
