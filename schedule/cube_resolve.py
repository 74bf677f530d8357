"""``resolve_cube``: a general ``Schedule`` with a tensorized stage -> the :class:`CubePlan` the
Cube builders take (None when no stage is tensorized), or a ScheduleError saying which record
does not fit the Cube model and what does.

The Cube model, in the general language (axes of a GEMM stage ``C[b?, i, j] = sum_k ...``)::

    tile loops   split i and j once each (tiles of tm x tn; an axis not split is one tile),
                 the batch axis b never (it is the outermost part of the tile loop); the tile
                 loops stay in order i, j, are fused into one loop when both exist and bound
                 to Cube cores (bind), swizzle orders their tiles; tile T runs on core
                 T % cores
    K loops      split k into the L1 step (k_o, factor tk) and split its inner loop k_i into
                 the L0 step (k_i_o, factor k0); tensorize the innermost K loop (k_i_i, or
                 k_i with one split, k with none); the K loops stay inside the tile loops
    staging      cache_read(A, "L1", at=(C, k_o)) and cache_read(B, "L1", ...) together, same
                 copies; cache_read(A, "L0A", at=(C, k_i_o)) and cache_read(B, "L0B", ...)
                 likewise; cache_write(C, "L0C", copies); cache_write(C, "workspace", copies)
                 for the GM slots of a Vector epilogue
    placement    the steps after the sum on one unit: "fixpipe" (a cast, ReLU, per-column
                 bias or scale) or "vector" (rows, vector_cores on its place()); or a run of
                 them right after the sum on "fixpipe" and the rest on "vector"

Tile sizes must be multiples of the fractal (16, or 32 for int8 operands laid out along C0);
they are clamped to the problem padded to the fractal, as ``GemmSchedule.tile`` is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ascendsched.algo.algorithm import upstream
from ascendsched.errors import ScheduleError
from ascendsched.schedule.cube_directives import (
    CacheRead,
    CacheWrite,
    Place,
    Tensorize,
    TileSwizzle,
    reduce_axis_of,
    splits_of,
)
from ascendsched.schedule.cube_plan import CubePlan, Written
from ascendsched.schedule.gemm_records import EpilogueOn, L1Tile, Swizzle

if TYPE_CHECKING:
    from ascendsched.schedule.schedule import Schedule, Split

_LEVEL_OF = {"L1": "l1", "L0A": "l0", "L0B": "l0"}


def resolve_cube(s: Schedule) -> CubePlan | None:
    """The Cube plan of ``s`` (module docstring), or None when no stage is tensorized."""
    tz = next((d for d in s.directives if isinstance(d, Tensorize)), None)
    if tz is None:
        return None
    return _Resolver(s, tz).plan()


class _Resolver:
    def __init__(self, s: Schedule, tz: Tensorize) -> None:
        self.s, self.tz, self.st = s, tz, tz.stage
        t = s.algo.tensor(tz.stage)
        axes = s._axes(t)
        self.b = axes[0] if len(axes) == 3 else None
        self.i, self.j = axes[-2], axes[-1]
        k = reduce_axis_of(s, tz.stage)
        assert k is not None  # make_tensorize checked it
        self.k = k
        self.where = f"In schedule for '{s.algo.name}', tensorized stage '{self.st}'"

    def plan(self) -> CubePlan:
        self._check_others()
        base = CubePlan(self.s.algo, self.s.target, epilogue=self._epilogue())
        sp = base.spec
        i_split, j_split = self._tile_split(self.i), self._tile_split(self.j)
        if self.b is not None and any(d.axis == self.b for d in splits_of(self.s, self.st)):
            raise ScheduleError(f"{self.where}: the batch axis '{self.b}' is not split (a tile "
                                f"is one matrix of the batch); split only '{self.i}' and "
                                f"'{self.j}'")
        k_chain = self._k_chain()
        mg, ng, c0 = base.m_granule(), base.n_granule(), base.k_granule()
        tm = self._factor(i_split, mg, sp.m, "M")
        tn = self._factor(j_split, ng, sp.n, "N")
        tk = self._factor(k_chain[0] if k_chain else None, c0, sp.k, "K (L1 step)")
        k0 = None
        if len(k_chain) == 2:
            k0 = self._factor(k_chain[1], c0, tk, "K (L0 step)")
            if tk % k0:
                legal = [d for d in range(c0, tk + 1, c0) if tk % d == 0]
                raise ScheduleError(
                    f"{self.where}: the L0 K step '{k_chain[1].outer}' ({k0}) must divide the "
                    f"L1 K step {tk}; legal: {', '.join(map(str, legal))}")
        tile_loop = self._check_loops(k_chain)
        cores = self._cores(tile_loop)
        return replace(base, tile=L1Tile(tm, tn, tk), k0=k0,
                       copies_given=self._copies(k_chain, base), cores=cores,
                       swizzle=self._swizzle(tile_loop), source=str(self.s),
                       written=self._written(i_split, j_split, k_chain, base))

    def _written(self, i_split: Split | None, j_split: Split | None, k_chain: list[Split],
                 base: CubePlan) -> Written:
        """The names a message needs to spell the plan's decisions as these records do."""
        l0 = k_chain[1] if len(k_chain) == 2 else None
        l0_axis = l0.axis if l0 else k_chain[0].inner if k_chain else self.k
        splits = (("m", self.i, i_split.factor if i_split else None),
                  ("n", self.j, j_split.factor if j_split else None),
                  ("k", self.k, k_chain[0].factor if k_chain else None),
                  ("k0", l0_axis, l0.factor if l0 else None))
        placed = tuple(p.stage for p in self._places().values() if p.unit == "vector")
        return Written(self.st, splits, k_chain[0].outer if k_chain else None,
                       k_chain[-1].outer if k_chain else None, base.spec.a, base.spec.b,
                       placed or (self.s.algo.outputs[0].name,))

    # ----------------------------------------------------------------- structure
    def _check_others(self) -> None:
        from ascendsched.schedule.online import Online
        from ascendsched.schedule.schedule import (
            Bind,
            Buffering,
            ComputeAt,
            ComputeInline,
            Fuse,
            LoadAt,
            LoadOnce,
            Reorder,
            Split,
        )

        for d in self.s.directives:
            if isinstance(d, (ComputeAt, ComputeInline, Buffering, LoadOnce, LoadAt, Online)):
                raise ScheduleError(
                    f"{self.where}: {d!r} is a Vector-path directive; with a tensorized stage "
                    f"the Cube + Vector builder derives the epilogue's per-tile schedule (its "
                    f"rows per step: place(<stage>, 'vector', rows=...)); remove it")
            if isinstance(d, (Split, Reorder, Fuse, Bind)) and d.stage != self.st:
                raise ScheduleError(
                    f"{self.where}: {d!r} schedules stage '{d.stage}'; the Cube builder "
                    f"walks the tiles of '{self.st}' and computes the other stages per tile: "
                    f"schedule the loops of '{self.st}' instead")
            if isinstance(d, Tensorize) and d is not self.tz:
                raise ScheduleError(f"{self.where}: one tensorize per kernel")

    def _tile_split(self, axis: str) -> Split | None:
        sp = [d for d in splits_of(self.s, self.st) if d.axis == axis]
        inner = [d for d in splits_of(self.s, self.st) if sp and d.axis == sp[0].inner]
        if inner:
            raise ScheduleError(
                f"{self.where}: '{inner[0].axis}' is split again; the Cube takes one output "
                f"tile per iteration of the tile loops: split '{axis}' once")
        return sp[0] if sp else None

    def _k_chain(self) -> list[Split]:
        """The splits of the reduce axis: k -> (k_o, k_i), then k_i -> (k_i_o, k_i_i)."""
        splits = splits_of(self.s, self.st)
        chain: list[Split] = []
        at = self.k
        while True:
            nxt = [d for d in splits if d.axis == at]
            if not nxt:
                break
            chain.append(nxt[0])
            at = nxt[0].inner
        stray = [d for d in splits if d.axis not in (self.b, self.i, self.j)
                 and d not in chain and d.axis not in (x.inner for x in splits
                                                       if x.axis in (self.i, self.j))]
        if stray or len(chain) > 2:
            bad = stray[0] if stray else chain[2]
            raise ScheduleError(
                f"{self.where}: split('{self.st}', '{bad.axis}', {bad.factor}) does not fit "
                f"the Cube's K loops: split '{self.k}' into the L1 step and its inner loop into "
                f"the L0 step (split('{self.st}', '{self.k}', tk).split('{self.st}', "
                f"'{self.k}_i', k0)), then tensorize the innermost K loop")
        innermost = chain[-1].inner if chain else self.k
        if self.tz.loop != innermost:
            raise ScheduleError(
                f"{self.where}: tensorize('{self.st}', '{self.tz.loop}', "
                f"'{self.tz.intrinsic}') does not match the resolved tile structure: Mmad "
                f"runs one L0 K step, the innermost K loop, here '{innermost}' (K loops: "
                + (", ".join(d.outer for d in chain) or "none") + f"); tensorize "
                f"'{innermost}'")
        return chain

    def _factor(self, d: Split | None, granule: int, size: int, what: str) -> int:
        if d is None:
            return -(-size // granule) * granule
        if d.factor % granule:
            fix = -(-d.factor // granule) * granule
            raise ScheduleError(
                f"{self.where}: split('{self.st}', '{d.axis}', {d.factor}): the {what} tile "
                f"must be a multiple of {granule} (the Cube fractal of {self.s.algo.name}'s "
                f"operands); try {fix}" + (" or no split" if fix > size else ""))
        return d.factor

    def _check_loops(self, k_chain: list[Split]) -> str | None:
        """The tile loop when there is exactly one (fused), checking the loop order."""
        k_axes = [d.axis for d in k_chain]
        loops = self.s.loop_nest(self.st).loops
        kinds = []
        for name, axes in loops:
            if set(axes) <= {self.i, self.j}:
                kinds.append("tile")
            elif set(axes) <= set(k_axes) and len(axes) == 1:
                kinds.append("k")
            else:
                raise ScheduleError(
                    f"{self.where}: loop '{name}' fuses {', '.join(axes)}; the Cube fuses only "
                    f"the tile loops over '{self.i}' and '{self.j}'")
        want = sorted(range(len(loops)), key=lambda n: (kinds[n] == "k", n))
        tile_axes = [a for (_, axes), kd in zip(loops, kinds) if kd == "tile" for a in axes]
        k_order = [axes[0] for (_, axes), kd in zip(loops, kinds) if kd == "k"]
        if want != list(range(len(loops))) or tile_axes != sorted(
                tile_axes, key=[self.i, self.j].index) or k_order != k_axes:
            order = [n for (n, a), kd in zip(loops, kinds) if kd == "tile"]
            order += [d.outer for d in k_chain]
            raise ScheduleError(
                f"{self.where}: loops {', '.join(n for n, _ in loops)} do not fit the Cube "
                f"model: the tile loops ({self.i} outside {self.j}; their order is swizzle()'s "
                f"business) outside the L1 K step outside the L0 K step; "
                f"reorder('{self.st}', {', '.join(map(repr, order))})")
        tiles = [n for (n, _), kd in zip(loops, kinds) if kd == "tile"]
        return tiles[0] if len(tiles) == 1 else None

    def _cores(self, tile_loop: str | None) -> int:
        bound = self.s.loop_nest(self.st).bound
        if bound is None:
            return 1
        loop, cores = bound
        if loop != tile_loop:
            raise ScheduleError(
                f"{self.where}: bind('{self.st}', '{loop}', {cores}): the Cube binds every "
                f"output tile to cores: bind the one tile loop (fuse('{self.st}', "
                f"'{self.i}_o', '{self.j}_o') first when both axes are split)")
        limit = self.s.target.num_aic
        if not 1 <= cores <= limit:
            raise ScheduleError(
                f"{self.where}: bind('{self.st}', '{loop}', cores={cores}): a tensorized stage "
                f"runs on Cube cores and {self.s.target.name} has {limit}; use 1 <= cores <= "
                f"{limit}")
        return cores

    def _swizzle(self, tile_loop: str | None) -> Swizzle:
        sw = Swizzle(1, "m")
        for d in self.s.directives:
            if not isinstance(d, TileSwizzle):
                continue
            if d.stage != self.st or d.loop != tile_loop or d.axis not in (self.i, self.j):
                raise ScheduleError(
                    f"{self.where}: swizzle('{d.stage}', '{d.loop}', {d.width}, '{d.axis}'): "
                    f"the Cube swizzles the one tile loop of '{self.st}' "
                    f"({tile_loop or 'none: split i or j, and fuse both'}) along '{self.i}' "
                    f"or '{self.j}'")
            sw = Swizzle(d.width, "m" if d.axis == self.i else "n")
        return sw

    # ----------------------------------------------------------------- staging
    def _copies(self, k_chain: list[Split], base: CubePlan) -> tuple[tuple[str, int], ...]:
        sp = base.spec
        l1_at = k_chain[0].outer if k_chain else None
        l0_at = k_chain[-1].outer if k_chain else None
        given: dict[tuple[str, str], int] = {}
        out: dict[str, int] = {}
        for d in self.s.directives:
            if isinstance(d, CacheRead):
                role = "A" if d.tensor == sp.a else "B" if d.tensor == sp.b else None
                legal = {"A": ("L1", "L0A"), "B": ("L1", "L0B")}
                if role is None or d.scope not in legal[role]:
                    raise ScheduleError(
                        f"{self.where}: cache_read('{d.tensor}', '{d.scope}'): the Cube stages "
                        f"A ('{sp.a}') in L1 and L0A and B ('{sp.b}') in L1 and L0B"
                        + ("; the epilogue's inputs go through UB, planned by the builder"
                           if role is None else ""))
                want = l1_at if d.scope == "L1" else l0_at
                if d.at_loop is not None and (d.at_stage, d.at_loop) != (self.st, want):
                    raise ScheduleError(
                        f"{self.where}: cache_read('{d.tensor}', '{d.scope}', at=("
                        f"'{d.at_stage}', '{d.at_loop}')): the Cube loads {d.scope} once per "
                        + (f"{'L1' if d.scope == 'L1' else 'L0'} K step, at=('{self.st}', "
                           f"'{want}')" if want else f"tile ('{self.k}' is not split): "
                           "leave at unset")
                        + "; or leave at unset")
                given[(role, _LEVEL_OF[d.scope])] = d.copies
            elif isinstance(d, CacheWrite):
                if d.stage != self.st:
                    raise ScheduleError(
                        f"{self.where}: cache_write('{d.stage}', '{d.scope}'): only the "
                        f"tensorized stage's result is staged in L0C or a workspace")
                if d.scope == "workspace" and base.vector_epilogue is None:
                    raise ScheduleError(
                        f"{self.where}: cache_write('{d.stage}', 'workspace', copies={d.copies})"
                        f": GEMM '{self.s.algo.name}' has no Vector epilogue, so no workspace; "
                        f"place(<epilogue stage>, 'vector') first")
                out["l0c" if d.scope == "L0C" else "workspace"] = d.copies
        for level, scopes in (("l1", ("L1", "L1")), ("l0", ("L0A", "L0B"))):
            a, b = given.get(("A", level)), given.get(("B", level))
            if a is None and b is None:
                continue
            if a != b:
                raise ScheduleError(
                    f"{self.where}: cache_read('{sp.a}', '{scopes[0]}', copies={a}) and "
                    f"cache_read('{sp.b}', '{scopes[1]}', copies={b}): the Cube builder stages "
                    f"A and B of a level together; give both with the same copies")
            out[level] = a  # type: ignore[assignment]
        return tuple(out.items())

    # ----------------------------------------------------------------- placement
    def _places(self) -> dict[str, Place]:
        """The last place() of each stage."""
        return {d.stage: d for d in self.s.directives if isinstance(d, Place)}

    def _epilogue(self) -> EpilogueOn | None:
        algo = self.s.algo
        contraction = algo.tensor(self.st)
        units = {}
        for p in self._places().values():
            t = algo.tensor(p.stage)
            if p.stage == self.st:
                if p.unit != "cube":
                    units[p.stage] = p
            elif contraction not in upstream(t):
                raise ScheduleError(
                    f"{self.where}: place('{p.stage}', '{p.unit}'): '{p.stage}' does not come "
                    f"after the contraction; the Cube kernel places only the steps after the "
                    f"sum")
            else:
                units[p.stage] = p
        if not units:
            return None
        after = self._cube_side(units)
        if after is not None:  # the Cube core's way out up to it, the Vector cores after
            units = {n: p for n, p in units.items() if p.unit == "vector"}
        kinds = {(p.unit, p.rows, p.vector_cores) for p in units.values()}
        if len(kinds) > 1:
            raise ScheduleError(
                f"{self.where}: the Vector epilogue's places give different rows or "
                f"vector_cores ({sorted(kinds, key=str)}); give them once")
        unit, rows, vc = kinds.pop()
        return EpilogueOn(unit, rows, vc, after)

    def _cube_side(self, units: dict) -> str | None:
        """With stages on both units: the last stage placed on the Fixpipe, when every one of
        them comes before every stage placed on the Vector cores (the Cube core applies the
        steps up to it on its way out, ``EpilogueOn.after``); None with one unit."""
        algo = self.s.algo
        fix = [n for n, p in units.items() if p.unit == "fixpipe"]
        vec = [n for n, p in units.items() if p.unit == "vector"]
        if not fix or not vec:
            return None
        late = [f for f in fix if not any(algo.tensor(f) in upstream(algo.tensor(g))
                                          for g in fix if g != f)]
        if len(late) != 1 or not all(algo.tensor(f) in upstream(algo.tensor(v))
                                     for f in fix for v in vec):
            by = ", ".join(f"'{n}' on {p.unit}" for n, p in units.items())
            raise ScheduleError(
                f"{self.where}: {by}: the Cube core applies a run of steps right after the sum "
                f"on its way out and the Vector cores the rest, so every stage placed on "
                f"'fixpipe' must come before every stage placed on 'vector'")
        return late[0]
