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

import weakref
from dataclasses import dataclass, replace
from functools import cached_property

from ascendsched.algo.algorithm import Algorithm
from ascendsched.algo.expr import Reduce
from ascendsched.algo.gemm_epilogue import is_matmul_stage, walk
from ascendsched.algo.gemm_spec import GemmSpec
from ascendsched.algo.gemm_vector_epilogue import GemmSplit, VectorEpilogue
from ascendsched.errors import ScheduleError
from ascendsched.schedule.cube_directives import (
    CacheRead,
    CacheWrite,
    Place,
    Tensorize,
    TileSwizzle,
    check_vector_step,
    check_workspace_copies,
)
from ascendsched.schedule.cube_plan import CubePlan, cube_split, matched
from ascendsched.schedule.cube_resolve import resolve_cube
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
from ascendsched.schedule.schedule import (
    Bind,
    Fuse,
    Schedule,
    Scheduled,
    Split,
    check_same_tensors,
)
from ascendsched.target import DEFAULT_TARGET, Target

_NAMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _names(algo: Algorithm) -> tuple[str, str, str, str]:
    """The contraction stage of ``algo`` and the names of its row, column and reduce axes,
    found once per algorithm (every directive makes a new schedule of the same one)."""
    got = _NAMES.get(algo)
    if got is None:
        c = next(t for t in algo.stages if is_matmul_stage(t))
        assert c.op is not None
        i, j = (a.name for a in c.op.axes[-2:])
        k = next(e for e in walk(c.op.body) if isinstance(e, Reduce)).axes[0].name
        got = _NAMES[algo] = (c.name, i, j, k)
    return got


@dataclass(frozen=True, eq=False)
class GemmSchedule(Scheduled):
    """A GEMM algorithm plus an ordered tuple of Cube scheduling directives."""

    algo: Algorithm
    directives: tuple[GemmDirective, ...] = ()
    target: Target = DEFAULT_TARGET

    def __post_init__(self) -> None:
        _ = self.spec  # UnsupportedError now, not at lowering

    @cached_property
    def schedule(self) -> Schedule:
        """The general records these directives stand for (``GemmSchedule`` is sugar for them):
        ``tile(m, n, k)`` splits i by m, j by n, k by k and fuses the tile loops, ``split_k``
        splits k_i, the innermost K loop is tensorized, ``buffer`` is cache_read/cache_write
        at the level's loop, ``bind``/``swizzle`` act on the fused tile loop and
        ``epilogue_on`` places the output stage. Made directly (``GemmSchedule`` checked its
        own calls; ``tile`` may exceed the problem, which the plan clamps)."""
        epi = self._epilogue()
        split = cube_split(self.algo, epi.unit if epi is not None else None,
                           epi.after if epi is not None else None)  # the matcher's error
        sp = matched(split.cube if split is not None else self.algo)
        st, i, j, k = _names(self.algo)
        ko, ki, tl = f"{k}_o", f"{k}_i", f"{i}_o_{j}_o"
        recs: list = []
        tile = next((d for d in self.directives if isinstance(d, L1Tile)), None)
        k0 = next((d.k0 for d in self.directives if isinstance(d, SplitK)), None)
        if tile is not None:
            recs += [Split(st, i, f"{i}_o", f"{i}_i", tile.m),
                     Split(st, j, f"{j}_o", f"{j}_i", tile.n),
                     Split(st, k, ko, ki, tile.k), Fuse(st, f"{i}_o", f"{j}_o", tl)]
            if k0 is not None:
                recs.append(Split(st, ki, f"{ki}_o", f"{ki}_i", k0))
        k_loops = [] if tile is None else [ko] if k0 is None else [ko, f"{ki}_o"]
        recs.append(Tensorize(st, f"{ki}_i" if k0 is not None else ki if tile else k, "mmad"))
        at = {"l1": k_loops[0] if k_loops else None, "l0": k_loops[-1] if k_loops else None}
        copies = {d.level: d.copies for d in self.directives if isinstance(d, CubeBuffering)}
        for level, n in copies.items():
            if level in at:
                loop = at[level]
                scopes = ("L1", "L1") if level == "l1" else ("L0A", "L0B")
                recs += [CacheRead(x, sc, st if loop else None, loop, n)
                         for x, sc in zip((sp.a, sp.b), scopes)]
            else:
                recs.append(CacheWrite(st, "L0C" if level == "l0c" else level, n))
        for d in self.directives:
            if isinstance(d, CubeBind) and tile is not None:
                recs.append(Bind(st, tl, d.cores))
            elif isinstance(d, Swizzle) and tile is not None:
                recs.append(TileSwizzle(st, tl, d.width, i if d.direction == "m" else j))
            elif isinstance(d, EpilogueOn):
                if d.after is not None:  # the steps up to it stay on the Cube core's way out
                    recs.append(Place(d.after, "fixpipe"))
                recs.append(Place(self.algo.outputs[0].name, d.unit, d.rows, d.vector_cores))
        return Schedule(self.algo, tuple(recs), self.target)

    @cached_property
    def plan(self) -> CubePlan:
        """The resolved Cube facts (``cube_resolve.resolve_cube`` of :attr:`schedule`); no
        L1 tile: the whole problem (``tiling`` asks for one). Its messages spell the
        ``GemmSchedule`` calls (no ``written`` records)."""
        plan = resolve_cube(self.schedule)
        assert plan is not None
        return replace(plan, tile=plan.tile if self._has_tile() else None, source=str(self),
                       written=None)

    @property
    def cube(self) -> CubePlan:
        """The Cube plan ``lower()`` builds from (needs the L1 tile)."""
        self._tile()
        return self.plan

    @cached_property
    def _head(self) -> CubePlan:
        """The plan's GEMM and epilogue facts without its tiling: every directive call's
        checks ask for them, so they come from a plan of the epilogue_on record alone (the
        matcher is cached per algorithm), not from resolving the whole schedule per call."""
        return CubePlan(self.algo, self.target, epilogue=self._epilogue())

    @property
    def split(self) -> GemmSplit | None:
        """The Cube and Vector parts when the epilogue runs on the Vector cores (a mixed
        kernel), else None (``cube_plan.cube_split``)."""
        return self._head.split

    @property
    def spec(self) -> GemmSpec:
        """The GEMM the Cube core runs (with a Vector epilogue: the sum alone, stored as the
        accumulator into the workspace)."""
        return self._head.spec

    @property
    def vector_epilogue(self) -> VectorEpilogue | None:
        return self._head.vector_epilogue

    @property
    def epilogue_unit(self) -> str | None:
        """``epilogue_on``'s unit, or None when not given."""
        return self._head.epilogue_unit

    @property
    def epilogue_rows(self) -> int | None:
        return self._head.epilogue_rows

    @property
    def epilogue_vector_cores(self) -> int:
        """Vector cores per block that split each tile of a Vector epilogue: 2 unless
        ``epilogue_on('vector', vector_cores=1)``."""
        return self._head.epilogue_vector_cores

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
        # a Vector epilogue reducing along rows wider than n: each core takes row blocks
        # (CubePlan.row_blocks)
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
            check_workspace_copies(f"buffer('workspace', copies={copies!r})", copies,
                                   self.target)
            if self.vector_epilogue is None:
                raise ScheduleError(
                    f"buffer('workspace', {copies}): GEMM '{self.algo.name}' has no Vector "
                    f"epilogue, so no workspace; add .epilogue_on('vector') first")
        elif copies not in (1, 2):
            raise ScheduleError(f"buffer({level!r}, copies={copies}): 1 or 2 copies")
        return self._add(CubeBuffering(level, copies))

    def epilogue_on(self, unit: str, rows: int | None = None, *,
                    vector_cores: int = 2, after: str | None = None) -> GemmSchedule:
        """Run the steps after the sum on ``"vector"`` (each block's AIVs read the Cube's tile
        from a GM workspace slot; ``rows`` output rows per Vector step) or on ``"fixpipe"``
        (only a cast, ReLU and a bias; the default when the Fixpipe can apply them).

        ``vector_cores``: 2 (default, ``KERNEL_TYPE_MIX_AIC_1_2`` as the 910B pairs them): the
        block's two Vector cores split every tile by rows, the first ``ceil(m / 2)`` rows on
        GetSubBlockIdx() 0 and the rest on 1, and ``rows`` counts rows of one half; 1
        (``KERNEL_TYPE_MIX_AIC_1_1``): one Vector core per block takes whole tiles.

        ``after`` (with ``"vector"``): a stage between the sum and the output up to which the
        Cube core applies the steps (a bias through the Mmad bias table, ReLU on the Fixpipe;
        the default when the Fixpipe cannot apply them all), the Vector cores the rest."""
        if unit not in EPILOGUE_UNITS:
            raise ScheduleError(f"epilogue_on({unit!r}): the unit is one of "
                                f"{', '.join(map(repr, EPILOGUE_UNITS))}")
        if self._epilogue() is not None:
            raise ScheduleError("epilogue_on(): already set; give epilogue_on() once")
        check_vector_step(f"epilogue_on({unit!r}", unit, rows, vector_cores, self.target)
        if after is not None:
            if unit != "vector":
                raise ScheduleError(f"epilogue_on({unit!r}, after={after!r}): 'after' splits "
                                    f"the steps between the Cube and the Vector cores; give it "
                                    f"with 'vector'")
            cube_split(self.algo, unit, after)  # the split's UnsupportedError, if any
        return self._add(EpilogueOn(unit, rows, vector_cores, after))

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

    def on(self, algo: Algorithm, *, cores: int | None = None) -> GemmSchedule:
        """These directives on ``algo``, the GEMM at other sizes (``algo/resize.py``), with
        ``bind``'s cores replaced by ``cores`` (None: kept), as ``Schedule.on`` does for its
        records: taken as they are, not checked again (a tile may exceed a smaller problem;
        the plan clamps it)."""
        check_same_tensors(self.algo, algo)
        recs = tuple(CubeBind(cores) if isinstance(d, CubeBind) and cores is not None else d
                     for d in self.directives)
        return GemmSchedule(algo, recs, self.target)

    # ----------------------------------------------------------------- queries
    def copies(self, level: str) -> int:
        return self.plan.copies(level)

    @property
    def tiling(self) -> GemmTiling:
        """Effective tiling: tiles clamped to the fractal-padded problem."""
        self._tile()
        return self.plan.tiling

    @property
    def row_blocks(self) -> bool:
        """Whether each core takes row blocks (``CubePlan.row_blocks``)."""
        self._tile()
        return self.plan.row_blocks

    @property
    def tile_classes(self) -> tuple[TileClass, ...]:
        """The output tiles as rectangles of equal-size tiles, in execution order (each one
        persistent loop in the kernel, with static sizes; ``CubePlan.tile_classes``)."""
        self._tile()
        return self.plan.tile_classes

    def tile_order(self) -> list[tuple[int, int, int]]:
        """(batch, m tile, n tile) of every tile in execution order (tile T runs on core
        T % cores)."""
        self._tile()
        return self.plan.tile_order()

    def tile_coords(self, tile: int) -> tuple[int, int, int]:
        """(batch, m tile, n tile) of tile number ``tile`` in execution order."""
        return self.tile_order()[tile]

    def loop_nest_text(self) -> str:
        """Pseudocode of the loops before lowering: one persistent loop per tile class."""
        self._tile()
        return self.plan.loop_nest_text()

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
                if d.after is not None:
                    rows += f", after={d.after!r}"
                lines.append(f"  .epilogue_on({d.unit!r}{rows})")
        return "\n".join(lines)

    # ----------------------------------------------------------------- helpers
    def _add(self, d: GemmDirective) -> GemmSchedule:
        return replace(self, directives=self.directives + (d,))

    def _epilogue(self) -> EpilogueOn | None:
        return next((d for d in self.directives if isinstance(d, EpilogueOn)), None)

    def _has_tile(self) -> bool:
        return any(isinstance(d, L1Tile) for d in self.directives)

    def _tile(self) -> L1Tile:
        for d in self.directives:
            if isinstance(d, L1Tile):
                return d
        raise ScheduleError(f"GemmSchedule({self.algo.name}): no L1 tile; call .tile(m, n, k) "
                            f"first (or use default_gemm_schedules)")

    def _m_granule(self) -> int:
        return self.plan.m_granule()

    def _n_granule(self) -> int:
        return self.plan.n_granule()


def _round_up(x: int, a: int) -> int:
    return -(-x // a) * a
