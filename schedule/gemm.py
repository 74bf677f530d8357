"""GEMM schedules for the Cube (AIC) path: a chain of frozen directive records, like ``Schedule``
(the records, the Cube geometry and the resolved tiling are in ``gemm_records.py``).

Each method checks its input and returns a new schedule (calls chain)::

    s = (GemmSchedule(gemm(1024, 1024, 1024))
         .tile(128, 256, 256)        # L1 tile (m, n, k): one output tile, K in L1 steps of 256
         .split_k(64)                # L0 step of K: L0A m x 64, L0B 64 x n
         .buffer("l1", 2).buffer("l0", 2)      # double buffering of L1 and of L0A/L0B
         .bind(24).swizzle(4, "m"))  # 24 Cube cores, persistent loop, strips of 4 M-tiles

Model (``lower/build_gemm.py`` turns it into loops): the output (batch x M x N) is cut into
tiles of ``m x n``; tile number ``T`` (in swizzled order) runs on core ``T % cores`` in its
``T // cores``-th iteration of the persistent loop. Per tile, K goes through L1 in steps of
``k`` (GM -> L1, ND -> NZ) and through L0A/L0B in steps of ``k0`` (LoadData), each step one
Mmad into the L0C tile; Fixpipe writes the tile back. Tile sizes are clamped to the problem
padded to the fractal (so a 1 x 1 x 1 GEMM uses one 16 x 16 x C0 fractal tile).

Swizzle (CATLASS ``GemmIdentityBlockSwizzle``, include/catlass/gemm/block/block_swizzle.hpp):
``swizzle(w, "m")`` orders tiles in strips of ``w`` M-tiles, walking down the strip before
moving to the next N column, so cores working at the same time share A and B tiles in L2;
``"n"`` is the transpose. ``swizzle(1, "m")`` (the default) is row-major tile order.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TypeVar

from ascendsched.algo.algorithm import Algorithm
from ascendsched.algo.gemm_spec import GemmSpec, match_gemm
from ascendsched.algo.gemm_vector_epilogue import GemmSplit, VectorEpilogue, split_vector_epilogue
from ascendsched.errors import ScheduleError, UnsupportedError
from ascendsched.schedule.gemm_records import (  # noqa: F401 -- re-exported
    EPILOGUE_UNITS,
    LEVELS,
    CubeBind,
    CubeBuffering,
    CubeGeometry,
    EpilogueOn,
    GemmDirective,
    GemmTiling,
    L1Tile,
    SplitK,
    Swizzle,
    TileClass,
    cube_geometry,
)
from ascendsched.target import DEFAULT_TARGET, Target

T = TypeVar("T")

# every directive makes a new schedule of the same algorithm: match and split it once
_SPECS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SPLITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _once(table: weakref.WeakKeyDictionary, make: Callable[[Algorithm], T], algo: Algorithm
          ) -> T:
    """``make(algo)``, once per algorithm in ``table``; an UnsupportedError is kept too and
    raised again (a copy) every time."""
    got = table.get(algo)
    if got is None:
        try:
            got = make(algo)
        except UnsupportedError as e:
            got = e
        table[algo] = got
    if isinstance(got, UnsupportedError):
        raise copy.copy(got)
    return got


def _matched(algo: Algorithm) -> GemmSpec:
    """``match_gemm(algo)``, once per algorithm (one with a Vector epilogue is not a plain
    GEMM: its UnsupportedError is kept)."""
    return _once(_SPECS, lambda a: match_gemm(a), algo)


def _split(algo: Algorithm) -> GemmSplit:
    """``split_vector_epilogue(algo)``, once per algorithm: its Cube part is then one
    algorithm object, matched once too."""
    return _once(_SPLITS, lambda a: split_vector_epilogue(a), algo)


@dataclass(frozen=True, eq=False)
class GemmSchedule:
    """A GEMM algorithm plus an ordered tuple of Cube scheduling directives."""

    algo: Algorithm
    directives: tuple[GemmDirective, ...] = ()
    target: Target = DEFAULT_TARGET

    def __post_init__(self) -> None:
        _ = self.spec  # UnsupportedError now, not at lowering

    @cached_property
    def split(self) -> GemmSplit | None:
        """The Cube and Vector parts when the epilogue runs on the Vector cores (a mixed
        kernel), else None. Steps the Fixpipe can apply stay there unless
        ``epilogue_on("vector")`` asks otherwise; any other step puts the whole epilogue on
        the Vector cores."""
        unit = self.epilogue_unit
        if unit == "vector":
            return _split(self.algo)
        try:
            _matched(self.algo)
            return None
        except UnsupportedError as e:
            if unit == "fixpipe":
                raise
            try:
                split = _split(self.algo)
                _matched(split.cube)
            except UnsupportedError:
                raise e from None
            return split

    @cached_property
    def spec(self) -> GemmSpec:
        """The GEMM the Cube core runs (with a Vector epilogue: the sum alone, stored as the
        accumulator into the workspace)."""
        split = self.split
        return _matched(split.cube if split is not None else self.algo)

    @property
    def vector_epilogue(self) -> VectorEpilogue | None:
        return self.split.epilogue if self.split is not None else None

    @property
    def epilogue_unit(self) -> str | None:
        """``epilogue_on``'s unit, or None when not given."""
        d = self._epilogue()
        return d.unit if d is not None else None

    @property
    def epilogue_rows(self) -> int | None:
        d = self._epilogue()
        return d.rows if d is not None else None

    @property
    def epilogue_vector_cores(self) -> int:
        """Vector cores per block that split each tile of a Vector epilogue: 2 unless
        ``epilogue_on('vector', vector_cores=1)``."""
        d = self._epilogue()
        return d.vector_cores if d is not None else 2

    @property
    def geometry(self) -> CubeGeometry:
        return cube_geometry(self.target)

    # ----------------------------------------------------------------- primitives
    def tile(self, m: int, n: int, k: int) -> GemmSchedule:
        """L1 tile: an ``m x n`` output tile, K through L1 in steps of ``k``."""
        g, sp = self.geometry, self.spec
        c0 = g.c0(sp.in_dtype.bytes)
        for name, v, gran in (("m", m, self._m_granule()), ("n", n, self._n_granule()),
                              ("k", k, c0)):
            if not isinstance(v, int) or isinstance(v, bool) or v < gran or v % gran:
                raise ScheduleError(
                    f"tile(m={m}, n={n}, k={k}): {name}={v!r} must be a positive multiple of "
                    f"{gran} (the {sp.in_dtype} fractal is {g.rows} x {c0}); try "
                    f"{name}={max(gran, _round_up(v, gran) if isinstance(v, int) else gran)}")
        if any(isinstance(d, L1Tile) for d in self.directives):
            raise ScheduleError("tile(): the L1 tile is already set; give tile() once")
        epi = self.vector_epilogue
        whole = _round_up(sp.n, self._n_granule())
        if epi is not None and epi.rowwise and n < whole:
            raise ScheduleError(
                f"tile(m={m}, n={n}, k={k}): the Vector epilogue reduces along rows (stage "
                f"'{epi.rowwise[0]}'), so a tile must hold whole rows of {sp.n} columns; try "
                f"tile({m}, {whole}, {k})")
        return self._add(L1Tile(m, n, k))

    def split_k(self, k0: int) -> GemmSchedule:
        """L0 step of K: each L1 K tile goes through L0A/L0B in ``k0`` slices."""
        c0 = self.geometry.c0(self.spec.in_dtype.bytes)
        tk = self._tile().k
        if not isinstance(k0, int) or k0 < c0 or k0 % c0:
            raise ScheduleError(f"split_k({k0!r}): k0 must be a positive multiple of {c0} (the "
                                f"{self.spec.in_dtype} fractal's K extent)")
        if tk % k0:
            legal = [d for d in range(c0, tk + 1, c0) if tk % d == 0]
            raise ScheduleError(f"split_k({k0}): k0 must divide the L1 tile's k={tk}; legal: "
                                f"{', '.join(map(str, legal))}")
        if any(isinstance(d, SplitK) for d in self.directives):
            raise ScheduleError("split_k(): already set; give split_k() once")
        return self._add(SplitK(k0))

    def buffer(self, level: str, copies: int = 2) -> GemmSchedule:
        """Copies of the L1 tiles (``"l1"``), of the L0A/L0B slices (``"l0"``) or of the L0C
        tile (``"l0c"``); 2 = double buffering (MTE2/MTE1/M/FIX overlap). ``"workspace"``:
        the GM slots between the Cube and the Vector epilogue (default 2: the Cube computes
        tile i+1 while the Vector core finishes tile i), at most the cross-core flag's
        pending sets (the slot-free flag starts with one set per slot)."""
        if level not in LEVELS:
            raise ScheduleError(f"buffer({level!r}): the level is one of {', '.join(LEVELS)}")
        if level == "workspace":
            cap = self.target.cross_flag_max_pending
            if not isinstance(copies, int) or isinstance(copies, bool) or not 1 <= copies <= cap:
                raise ScheduleError(
                    f"buffer('workspace', copies={copies!r}): the slot-free cross-core flag "
                    f"starts with one set per slot and {self.target.name} counts at most {cap} "
                    f"pending sets per flag; use 1 <= copies <= {cap}")
            if self.vector_epilogue is None:
                raise ScheduleError(
                    f"buffer('workspace', {copies}): GEMM '{self.algo.name}' has no Vector "
                    f"epilogue, so no workspace; add .epilogue_on('vector') first")
        elif copies not in (1, 2):
            raise ScheduleError(f"buffer({level!r}, copies={copies}): 1 or 2 copies")
        return self._add(CubeBuffering(level, copies))

    def epilogue_on(self, unit: str, rows: int | None = None, *,
                    vector_cores: int = 2) -> GemmSchedule:
        """Run the steps after the sum on ``"vector"`` (each block's AIVs read the Cube's tile
        from a GM workspace slot; ``rows`` output rows per Vector step) or on ``"fixpipe"``
        (only a cast, ReLU and a bias; the default when the Fixpipe can apply them).

        ``vector_cores``: 2 (default, ``KERNEL_TYPE_MIX_AIC_1_2`` as the 910B pairs them): the
        block's two Vector cores split every tile by rows, the first ``ceil(m / 2)`` rows on
        GetSubBlockIdx() 0 and the rest on 1, and ``rows`` counts rows of one half; 1
        (``KERNEL_TYPE_MIX_AIC_1_1``): one Vector core per block takes whole tiles."""
        if unit not in EPILOGUE_UNITS:
            raise ScheduleError(f"epilogue_on({unit!r}): the unit is one of "
                                f"{', '.join(map(repr, EPILOGUE_UNITS))}")
        if self._epilogue() is not None:
            raise ScheduleError("epilogue_on(): already set; give epilogue_on() once")
        if rows is not None and (unit != "vector" or not isinstance(rows, int)
                                 or isinstance(rows, bool) or rows < 1):
            raise ScheduleError(f"epilogue_on({unit!r}, rows={rows!r}): rows is a positive int "
                                f"and only for the 'vector' unit")
        if vector_cores not in (1, 2) or isinstance(vector_cores, bool) or (
                vector_cores != 2 and unit != "vector"):
            raise ScheduleError(f"epilogue_on({unit!r}, vector_cores={vector_cores!r}): a "
                                f"block of {self.target.name} has 2 Vector cores per Cube core; "
                                "use vector_cores=2 (each half of a tile's rows) or 1, and only "
                                "for the 'vector' unit")
        return self._add(EpilogueOn(unit, rows, vector_cores))

    def bind(self, cores: int) -> GemmSchedule:
        """Spread the output tiles over ``cores`` Cube cores; each core loops over its tiles
        (persistent: tile ``T`` on core ``T % cores``)."""
        limit = self.target.num_aic
        if not isinstance(cores, int) or isinstance(cores, bool) or not 1 <= cores <= limit:
            raise ScheduleError(f"bind(cores={cores!r}): {self.target.name} has {limit} Cube "
                                f"cores; use 1 <= cores <= {limit}")
        if any(isinstance(d, CubeBind) for d in self.directives):
            raise ScheduleError("bind(): already bound; give bind() once")
        return self._add(CubeBind(cores))

    def swizzle(self, width: int, direction: str = "m") -> GemmSchedule:
        """Tile order: strips of ``width`` M-tiles (``"m"``) or N-tiles (``"n"``)."""
        if direction not in ("m", "n"):
            raise ScheduleError(f"swizzle({width}, {direction!r}): direction is 'm' or 'n'")
        if not isinstance(width, int) or isinstance(width, bool) or width < 1:
            raise ScheduleError(f"swizzle({width!r}): the strip width must be an int >= 1")
        return self._add(Swizzle(width, direction))

    # ----------------------------------------------------------------- queries
    def copies(self, level: str) -> int:
        n = 2 if level == "workspace" else 1
        for d in self.directives:
            if isinstance(d, CubeBuffering) and d.level == level:
                n = d.copies
        return n

    @cached_property
    def tiling(self) -> GemmTiling:
        """Effective tiling: tiles clamped to the fractal-padded problem."""
        sp, g = self.spec, self.geometry
        t = self._tile()
        c0 = g.c0(sp.in_dtype.bytes)
        ng, mg = self._n_granule(), self._m_granule()
        tm = min(t.m, _round_up(sp.m, mg))
        tn = min(t.n, _round_up(sp.n, ng))
        tk = min(t.k, _round_up(sp.k, c0))
        k0 = next((d.k0 for d in self.directives if isinstance(d, SplitK)), t.k)
        k0 = min(k0, tk)
        if tk % k0:  # the clamp broke divisibility: largest divisor of tk not above k0
            k0 = max(d for d in range(c0, k0 + 1, c0) if tk % d == 0)
        mt, nt, kt = -(-sp.m // tm), -(-sp.n // tn), -(-sp.k // tk)
        tiles = sp.batch * mt * nt
        cores = min(next((d.cores for d in self.directives if isinstance(d, CubeBind)), 1),
                    tiles)
        sw = Swizzle(1, "m")
        for d in self.directives:
            if isinstance(d, Swizzle):
                sw = d
        width = min(sw.width, mt if sw.direction == "m" else nt)
        return GemmTiling(sp, tm, tn, tk, k0, mt, nt, kt, tk // k0, tiles, cores,
                          -(-tiles // cores), self.copies("l1"), self.copies("l0"),
                          self.copies("l0c"), Swizzle(width, sw.direction))

    @cached_property
    def tile_classes(self) -> tuple[TileClass, ...]:
        """The output tiles as rectangles of equal-size tiles, in execution order: interior
        tiles in whole swizzle strips, the last (narrower) strip, the M-edge row, the N-edge
        column, the corner. Each is one persistent loop in the kernel, with static sizes."""
        t, sp = self.tiling, self.spec
        mtail, ntail = sp.m - (t.mt - 1) * t.tm, sp.n - (t.nt - 1) * t.tn
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

    def tile_coords(self, tile: int) -> tuple[int, int, int]:
        """(batch, m tile, n tile) of tile number ``tile`` in execution order."""
        return self.tile_order()[tile]

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
        if epi is not None:
            lines[-1] += f", into workspace slot (iteration % {self.copies('workspace')})"
            n = self.epilogue_vector_cores
            lines.append(("  on the block's 2 Vector cores (AIC:AIV 1:2), each half of the "
                          "tile's rows: " if n == 2 else "  on the block's Vector core (1:1): ")
                         + f"{epi}, "
                         + (f"{self.epilogue_rows} rows per step" if self.epilogue_rows
                            else "as many rows per step as UB holds"))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<{str(self).replace(chr(10) + '  ', '')} of {self.spec}>"

    def _repr_pretty_(self, p, cycle: bool) -> None:  # noqa: ANN001 (IPython/hypothesis)
        p.text(repr(self))

    def __str__(self) -> str:
        lines = [f"GemmSchedule({self.algo.name})"]
        for d in self.directives:
            if isinstance(d, L1Tile):
                lines.append(f"  .tile({d.m}, {d.n}, {d.k})")
            elif isinstance(d, SplitK):
                lines.append(f"  .split_k({d.k0})")
            elif isinstance(d, CubeBuffering):
                lines.append(f"  .buffer({d.level!r}, copies={d.copies})")
            elif isinstance(d, CubeBind):
                lines.append(f"  .bind({d.cores})")
            elif isinstance(d, Swizzle):
                lines.append(f"  .swizzle({d.width}, {d.direction!r})")
            elif isinstance(d, EpilogueOn):
                rows = f", rows={d.rows}" if d.rows is not None else ""
                if d.vector_cores != 2:
                    rows += f", vector_cores={d.vector_cores}"
                lines.append(f"  .epilogue_on({d.unit!r}{rows})")
        return "\n".join(lines)

    # ----------------------------------------------------------------- helpers
    def _add(self, d: GemmDirective) -> GemmSchedule:
        return replace(self, directives=self.directives + (d,))

    def _epilogue(self) -> EpilogueOn | None:
        return next((d for d in self.directives if isinstance(d, EpilogueOn)), None)

    def _tile(self) -> L1Tile:
        for d in self.directives:
            if isinstance(d, L1Tile):
                return d
        raise ScheduleError(f"GemmSchedule({self.algo.name}): no L1 tile; call .tile(m, n, k) "
                            f"first (or use default_gemm_schedules)")

    def _m_granule(self) -> int:
        """M granule: 16 (fractal rows), but int8 A^T sits in L1 with M along C0 (32)."""
        sp, g = self.spec, self.geometry
        return g.c0(1) if sp.in_dtype.bytes == 1 and sp.trans_a else g.rows

    def _n_granule(self) -> int:
        """N granule: 16 (L0B/L0C fractal), but int8 B (K, N) sits in L1 with N along C0 (32)
        and its LoadDataWithTranspose fills 32 columns at a time (lower/cube_ops.py load_l0b)."""
        sp, g = self.spec, self.geometry
        return g.c0(1) if sp.in_dtype.bytes == 1 and not sp.trans_b else g.rows


def _round_up(x: int, a: int) -> int:
    return -(-x // a) * a
