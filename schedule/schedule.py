"""Schedules: plain frozen records of scheduling decisions bound to an algorithm.

Each method checks its input, then returns a new Schedule (calls chain)::

    s = Schedule(algo).split("y", "i", 8).bind("y", "i_o", cores=8).buffer("x", copies=2)

Only ``lower/build_loop_nest.py`` turns the records into loops. Vector-path model: the
output stage's axes are split into tile loops (outer) and a tile (inner, processed by vector
instructions); producer stages are inlined or computed per tile (``compute_at``); every tensor
a tile touches lives in UB (inputs through a ``cache_read`` buffer ``<name>_ub``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING

from ascendsched.algo.algorithm import Algorithm, root_output, upstream
from ascendsched.algo.expr import Reduce
from ascendsched.algo.gemm_epilogue import walk
from ascendsched.algo.tensor import Tensor
from ascendsched.errors import ScheduleError
from ascendsched.schedule import cube_directives as cube
from ascendsched.schedule.chunks import chunk_axis
from ascendsched.schedule.cube_directives import CubeDirective
from ascendsched.schedule.online import Online, online_record
from ascendsched.schedule.staging import LoadAt, make_load_at
from ascendsched.target import DEFAULT_TARGET, Target

if TYPE_CHECKING:
    from ascendsched.schedule.cube_plan import CubePlan


@dataclass(frozen=True)
class Split:
    stage: str
    axis: str
    outer: str
    inner: str
    factor: int


@dataclass(frozen=True)
class Reorder:
    stage: str
    order: tuple[str, ...]


@dataclass(frozen=True)
class Fuse:
    stage: str
    outer: str
    inner: str
    fused: str


@dataclass(frozen=True)
class Bind:
    stage: str
    loop: str
    cores: int


@dataclass(frozen=True)
class ComputeAt:
    stage: str
    consumer: str
    loop: str


@dataclass(frozen=True)
class ComputeInline:
    stage: str


@dataclass(frozen=True)
class Buffering:
    tensor: str  # an input (its UB cache) or a stage (its UB buffer)
    copies: int


@dataclass(frozen=True)
class LoadOnce:
    tensor: str  # an input every tile reads whole: loaded once per core, before the tile loops
    hoist: bool = True  # values of it alone computed once too (not per tile)


Directive = (Split | Reorder | Fuse | Bind | ComputeAt | ComputeInline | Buffering | LoadOnce
             | LoadAt | Online | CubeDirective)


class Scheduled:
    """What ``lower()`` takes: an algorithm (``algo``), a ``target`` and records saying how to
    compute it. ``cube`` is the resolved Cube plan when a stage is tensorized (None: Vector
    path only). ``Schedule`` is the one scheduling language; ``GemmSchedule`` is sugar for
    its Cube records."""

    algo: Algorithm
    target: Target

    @property
    def cube(self) -> CubePlan | None:
        raise NotImplementedError


@dataclass(frozen=True)
class LoopNest:
    """The resolved loops of one stage: outer loops (outermost first) and the axes' tiles."""

    loops: tuple[tuple[str, tuple[str, ...]], ...]  # (loop name, axes it iterates, fused)
    factors: dict[str, int]  # axis -> tile extent (the axis size when not split)
    bound: tuple[str, int] | None  # (loop name, cores)


def check_same_tensors(mine: Algorithm, other: Algorithm) -> None:
    """``on(other)``'s check: ``other`` names the tensors of ``mine`` (the same algorithm at
    other sizes), else a ScheduleError."""
    names = [t.name for t in mine.tensors]
    if [t.name for t in other.tensors] != names:
        raise ScheduleError(
            f"on('{other.name}'): the schedule of '{mine.name}' names tensors "
            f"{', '.join(names)}; give the same algorithm at other sizes "
            f"(ascendsched.algo.resize.resize)")


@dataclass(frozen=True, eq=False)
class Schedule(Scheduled):
    """An algorithm plus an ordered tuple of scheduling directives."""

    algo: Algorithm
    directives: tuple[Directive, ...] = ()
    target: Target = DEFAULT_TARGET

    def __post_init__(self) -> None:
        if isinstance(self.algo, Tensor):
            raise ScheduleError(
                f"Schedule() takes an Algorithm, not the tensor '{self.algo.name}': "
                f"Schedule(algorithm('{self.algo.name}_kernel', {self.algo.name}))")
        if not isinstance(self.algo, Algorithm):
            raise ScheduleError(
                f"Schedule() takes an Algorithm (ascendsched.algo.algorithm(name, outputs)), "
                f"got {type(self.algo).__name__} {self.algo!r}")
        if not isinstance(self.target, Target):
            raise ScheduleError(
                f"Schedule(target=...) takes a Target such as ascendsched.target.ASCEND_910B, "
                f"got {self.target!r}")

    # ----------------------------------------------------------------- primitives
    def split(self, stage: str, axis: str, factor: int, *, outer: str | None = None,
              inner: str | None = None) -> Schedule:
        """Split ``axis`` of ``stage`` into ``outer`` tile loop and ``inner`` tile of ``factor``.
        A Vector stage's reduce axis splits into chunks its reduction reads one after another
        (``schedule/chunks.py``); a contraction's into the Cube's K steps."""
        t = self._stage(stage, "split")
        outer = outer or f"{axis}_o"
        inner = inner or f"{axis}_i"
        axes = self._axes(t)
        sizes: dict[str, object] = dict(zip(axes, t.shape))
        kv = cube.reduce_var_of(self, stage)
        k = kv.name if kv is not None else None
        if kv is not None:  # a reduce axis, for a stage to tensorize (cube_resolve.py)
            sizes[kv.name] = kv.extent
        splits = cube.splits_of(self, stage)
        # a contraction's reduce axis may be split past its extent (the Cube pads K to its
        # fractal and clamps the tile, cube_resolve.py); a chunked reduction's may not
        derived = cube.derived_loops(self, stage, k) \
            if k is not None and chunk_axis(self, stage) is None else []
        sizes.update({d.inner: d.factor for d in splits})
        if axis not in sizes:
            several = [e for e in walk(t.op.body)  # type: ignore[union-attr]
                       if isinstance(e, Reduce) and any(v.name == axis for v in e.axes)]
            if several:
                raise ScheduleError(
                    f"split('{stage}', '{axis}', {factor}): '{stage}' reduces over '{axis}' in "
                    f"{len(several)} reductions; a reduce axis is split in a stage holding one "
                    f"reduction: write each reduction as a stage of its own")
            raise ScheduleError(
                f"split('{stage}', '{axis}', {factor}): stage '{stage}' has no axis '{axis}'; "
                f"its axes are {', '.join(axes)}"
                + (f" (reduce axis '{k}', and the inner loops of splits: "
                   f"{', '.join(d.inner for d in splits) or 'none'})" if k else ""))
        if any(d.axis == axis for d in splits):
            raise ScheduleError(
                f"split('{stage}', '{axis}', {factor}): '{axis}' is already split; "
                f"change the existing factor instead of splitting twice")
        if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
            raise ScheduleError(f"split('{stage}', '{axis}', {factor}): factor must be an int >= 1")
        size = sizes[axis]
        if isinstance(size, int) and factor > size and axis not in derived:
            raise ScheduleError(
                f"split('{stage}', '{axis}', {factor}): factor exceeds the axis size {size}; "
                f"use a factor <= {size} (or no split)")
        names = set(self.loop_names(stage)) | set(sizes) | {d.outer for d in splits}
        for n in (outer, inner):
            if n in names:
                raise ScheduleError(
                    f"split('{stage}', '{axis}', {factor}): loop name '{n}' is already used; "
                    f"pass fresh names: outer='{axis}_out', inner='{axis}_in'")
        return self._add(Split(stage, axis, outer, inner, factor))

    def tile(self, stage: str, axes: tuple[str, ...], factors: tuple[int, ...]) -> Schedule:
        """Split several axes at once (outer loops keep the axes' order)."""
        if len(axes) != len(factors):
            raise ScheduleError(f"tile('{stage}'): {len(axes)} axes but {len(factors)} factors; "
                                f"give one factor per axis")
        s = self
        for a, f in zip(axes, factors):
            s = s.split(stage, a, f)
        return s

    def reorder(self, stage: str, *order: str) -> Schedule:
        """Order the tile loops of ``stage`` outermost first."""
        self._stage(stage, "reorder")
        loops = [n for n, _ in self.loop_nest(stage).loops]
        if sorted(order) != sorted(loops):
            raise ScheduleError(
                f"reorder('{stage}', {', '.join(map(repr, order))}): give every tile loop once; "
                f"the tile loops are {', '.join(loops) or '(none: split an axis first)'}")
        return self._add(Reorder(stage, tuple(order)))

    def fuse(self, stage: str, outer: str, inner: str, *, fused: str | None = None) -> Schedule:
        """Fuse two adjacent tile loops (``outer`` directly encloses ``inner``) into one."""
        self._stage(stage, "fuse")
        loops = [n for n, _ in self.loop_nest(stage).loops]
        for n in (outer, inner):
            if n not in loops:
                raise ScheduleError(
                    f"fuse('{stage}', '{outer}', '{inner}'): '{n}' is not a tile loop of "
                    f"'{stage}'; its tile loops are {', '.join(loops) or '(none)'}")
        if loops.index(inner) != loops.index(outer) + 1:
            raise ScheduleError(
                f"fuse('{stage}', '{outer}', '{inner}'): loops are not adjacent with '{outer}' "
                f"directly outside '{inner}' (order: {', '.join(loops)}); reorder them first")
        return self._add(Fuse(stage, outer, inner, fused or f"{outer}_{inner}"))

    def bind(self, stage: str, loop: str, cores: int) -> Schedule:
        """Distribute the iterations of ``loop`` (the outermost tile loop) over ``cores``."""
        self._stage(stage, "bind")
        nest = self.loop_nest(stage)
        loops = [n for n, _ in nest.loops]
        if loop not in loops:
            raise ScheduleError(
                f"bind('{stage}', '{loop}'): no tile loop '{loop}'; tile loops: "
                f"{', '.join(loops) or '(none: split an axis first)'}")
        if loops[0] != loop:
            raise ScheduleError(
                f"bind('{stage}', '{loop}'): only the outermost tile loop ('{loops[0]}') can be "
                f"bound to cores; reorder('{stage}', '{loop}', ...) first")
        limit = self.target.num_aiv
        if isinstance(cores, bool) or not isinstance(cores, int) or not 1 <= cores <= limit:
            raise ScheduleError(
                f"bind('{stage}', '{loop}', cores={cores!r}): {self.target.name} has {limit} vector "
                f"cores; use 1 <= cores <= {limit}")
        if nest.bound is not None:
            raise ScheduleError(f"bind('{stage}'): '{nest.bound[0]}' is already bound to "
                                f"{nest.bound[1]} cores; bind one loop once")
        return self._add(Bind(stage, loop, cores))

    def compute_at(self, stage: str, consumer: str, loop: str) -> Schedule:
        """Compute ``stage`` inside ``consumer``'s ``loop``, in UB: once per tile at the
        innermost tile loop, or once per iteration of an outer tile loop over the box every
        inner tile of that iteration reads (Halide's compute_at at an outer level: a row's
        statistics once per row while the row's pieces are tiles of the loop inside)."""
        t = self._stage(stage, "compute_at")
        c = self._stage(consumer, "compute_at")
        if t in self.algo.outputs:
            root = self.root()
            raise ScheduleError(
                f"compute_at('{stage}', ...): '{stage}' is an output; "
                + ("outputs are computed at root: remove this call" if t is root else
                   f"every output besides '{root.name}' (whose loops the schedule splits) is "
                   f"computed in '{root.name}''s tile and stored from there: remove this call"))
        if c is t or t not in upstream(c):
            raise ScheduleError(
                f"compute_at('{stage}', '{consumer}', '{loop}'): '{consumer}' does not consume "
                f"'{stage}' (directly or through other stages); compute it at a stage that reads "
                f"it: {', '.join(c.name for c in self.algo.consumers(t)) or '(none)'}")
        legal = self.legal_compute_at(consumer)
        if loop not in legal:
            raise ScheduleError(
                f"compute_at('{stage}', '{consumer}', '{loop}'): '{loop}' is not a tile loop of "
                f"'{consumer}'. Legal locations: "
                + (", ".join(f"compute_at('{stage}', '{consumer}', '{n}')" for n in legal)
                   or f"(none: split '{consumer}' first, or compute_inline('{stage}'))"))
        return self._add(ComputeAt(stage, consumer, loop))

    def compute_inline(self, stage: str) -> Schedule:
        """Substitute ``stage``'s expression into every consumer (no buffer of its own)."""
        t = self._stage(stage, "compute_inline")
        if t in self.algo.outputs:
            raise ScheduleError(
                f"compute_inline('{stage}'): '{stage}' is an output of '{self.algo.name}' and is "
                f"stored to GM; it cannot be inlined: remove this call")
        assert t.op is not None
        if isinstance(t.op.body, Reduce):
            raise ScheduleError(
                f"compute_inline('{stage}'): '{stage}' is a reduction; inlining would recompute "
                f"it per element. Use compute_at('{stage}', <consumer>, <tile loop>)")
        return self._add(ComputeInline(stage))

    def buffer(self, tensor: str, copies: int = 2) -> Schedule:
        """Number of UB copies of ``tensor``'s tile buffer (2 = double buffering)."""
        if not any(t.name == tensor for t in self.algo.tensors):
            raise ScheduleError(
                f"buffer('{tensor}', copies={copies!r}): algorithm '{self.algo.name}' has no "
                f"tensor '{tensor}'; its tensors are {', '.join(t.name for t in self.algo.tensors)}")
        if isinstance(copies, bool) or copies not in (1, 2):
            raise ScheduleError(
                f"buffer('{tensor}', copies={copies}): 1 (single) or 2 (double buffering) copies")
        return self._add(Buffering(tensor, copies))

    def load_once(self, tensor: str, *, hoist: bool = True) -> Schedule:
        """Load input ``tensor`` whole, once per core, before the tile loops, into one UB copy
        that stays for the whole kernel, instead of once per tile: for an input every tile
        reads whole (``gamma[j]`` when only rows are tiled), or one whose tiles read parts of
        it many times (``gamma[j]`` when each row is cut into pieces: each piece reads its part
        of the one copy). Saves a DMA per tile, costs the whole input's bytes for the whole
        kernel. ``hoist``: values computed from such
        inputs alone (``float32(gamma[j])``) are computed once too, before the tile loops,
        and hold their own UB for the whole kernel; ``hoist=False`` recomputes them per tile
        in temporaries (less UB, for rows too wide for both)."""
        t = self.algo.tensor(tensor)
        if not t.is_placeholder:
            raise ScheduleError(f"load_once('{tensor}'): '{tensor}' is a stage, not an input")
        if self.loaded_at(tensor) is not None:
            raise ScheduleError(f"load_once('{tensor}'): cache_read('{tensor}', 'UB', at=...) "
                                f"already stages it at a tile loop; drop one of the two")
        return self._add(LoadOnce(tensor, hoist))

    def online(self, stage: str, max_stage: str) -> Schedule:
        """Reduce ``stage`` (a row sum of ``exp(... - max_stage[row])``) in ``max_stage``'s
        chunk loop, the running sum rescaled as the running max grows: rows read in chunks
        are read once for both statistics (``schedule/online.py``)."""
        return self._add(online_record(self, stage, max_stage))

    def cache_read(self, tensor: str, scope: str = "UB", *, at: tuple[str, str] | None = None,
                   copies: int = 2) -> Schedule:
        """Stage input ``tensor`` in ``scope``: ``"UB"`` (the Vector path: per tile,
        ``buffer(tensor, copies)``; with ``at=(output, outer tile loop)``, once per iteration
        of that loop for every tile and chunk inside it), or ``"L1"``/``"L0A"``/``"L0B"`` for
        a tensorized stage's operands, loaded once per iteration of loop ``at=(stage, loop)``."""
        if scope == "UB" and at is None:
            return self.buffer(tensor, copies)
        if scope == "UB":
            return self._add(make_load_at(self, tensor, at, copies))
        return self._add(cube.make_cache_read(self, tensor, scope, at, copies))

    def cache_write(self, stage: str, scope: str = "UB", *, copies: int = 2) -> Schedule:
        """Stage ``stage``'s result in ``scope``: ``"UB"`` (``buffer(stage, copies)``),
        ``"L0C"`` (a tensorized stage's accumulator) or ``"workspace"`` (the GM slots
        between the Cube and a Vector epilogue; default 2)."""
        if scope == "UB":
            return self.buffer(stage, copies)
        return self._add(cube.make_cache_write(self, stage, scope, copies))

    def tensorize(self, stage: str, loop: str, intrinsic: str = "mmad") -> Schedule:
        """Run the contraction of ``stage`` under ``loop`` (its innermost reduce loop) as
        ``intrinsic`` on the Cube (``schedule/cube_resolve.py`` says which loop structures
        the Cube builder builds)."""
        return self._add(cube.make_tensorize(self, stage, loop, intrinsic))

    def place(self, stage: str, unit: str, *, rows: int | None = None,
              vector_cores: int = 2) -> Schedule:
        """Run ``stage`` on ``"cube"``, ``"vector"`` or ``"fixpipe"`` (default: contractions
        on the Cube, the Fixpipe for the steps after the sum when it can apply them, the
        rest on the Vector cores). ``rows``, ``vector_cores``: a Vector epilogue's rows per
        step and Vector cores per tile (2: each half of the rows; or 1)."""
        return self._add(cube.make_place(self, stage, unit, rows, vector_cores))

    def swizzle(self, stage: str, loop: str, width: int, axis: str) -> Schedule:
        """Order the tiles of tile loop ``loop`` in strips of ``width`` tiles along output
        axis ``axis`` (so cores working at once share operand tiles in L2)."""
        return self._add(cube.make_swizzle(self, stage, loop, width, axis))

    def on(self, algo: Algorithm, *, cores: int | None = None) -> Schedule:
        """These records on ``algo``, an algorithm of the same tensors at other sizes
        (``algo/resize.py``), with ``bind``'s cores replaced by ``cores`` (None: kept). The
        records are taken as they are, not checked again: a split factor may exceed a smaller
        axis (a Cube plan clamps its tiles; ``schedule/reduce.py`` keeps every tile count)."""
        check_same_tensors(self.algo, algo)
        recs = tuple(replace(d, cores=cores) if isinstance(d, Bind) and cores is not None
                     else d for d in self.directives)
        return Schedule(algo, recs, self.target)

    # ----------------------------------------------------------------- queries
    @cached_property
    def cube(self) -> CubePlan | None:
        """The resolved Cube plan when a stage is tensorized (``cube_resolve.py``), else
        None."""
        from ascendsched.schedule.cube_resolve import resolve_cube

        return resolve_cube(self)

    def root(self) -> Tensor:
        """The output whose loops the schedule splits, binds and fuses
        (:func:`ascendsched.algo.algorithm.root_output`)."""
        return root_output(self.algo)

    def loop_names(self, stage: str) -> list[str]:
        return [n for n, _ in self.loop_nest(stage).loops]

    def loop_nest(self, stage: str) -> LoopNest:
        t = self.algo.tensor(stage)
        axes = self._axes(t)
        factors = {a: s for a, s in zip(axes, t.shape)}
        loops: list[tuple[str, tuple[str, ...]]] = []
        bound = None
        for d in self.directives:
            if getattr(d, "stage", None) != stage:
                continue
            # a split of a chunked reduce axis makes chunk loops, not tile loops
            if isinstance(d, Split) and d.axis not in axes and d.axis == chunk_axis(self, stage):
                continue
            if isinstance(d, Split):
                factors[d.axis] = d.factor
                loops.append((d.outer, (d.axis,)))
            elif isinstance(d, Reorder):
                by = dict(loops)
                loops = [(n, by[n]) for n in d.order]
            elif isinstance(d, Fuse):
                i = [n for n, _ in loops].index(d.outer)
                loops[i:i + 2] = [(d.fused, loops[i][1] + loops[i + 1][1])]
            elif isinstance(d, Bind):
                bound = (d.loop, d.cores)
        return LoopNest(tuple(loops), factors, bound)

    def legal_compute_at(self, consumer: str) -> list[str]:
        loops = self.loop_names(consumer)
        at = self.placement(consumer)
        if at is not None:  # consumer itself computed at another stage: same level
            return [at.loop]
        return loops[::-1] if loops else ["root"]  # the innermost (per tile) first

    def placement(self, stage: str) -> ComputeAt | ComputeInline | None:
        """The last compute_at/compute_inline directive of ``stage`` (None: default)."""
        p = None
        for d in self.directives:
            if isinstance(d, (ComputeAt, ComputeInline)) and d.stage == stage:
                p = d
        return p

    def loaded_once(self, tensor: str) -> bool:
        return any(isinstance(d, LoadOnce) and d.tensor == tensor for d in self.directives)

    def hoists(self, tensor: str) -> bool:
        """Values of load_once input ``tensor`` alone are computed once (``load_once``)."""
        return any(isinstance(d, LoadOnce) and d.tensor == tensor and d.hoist
                   for d in self.directives)

    def loaded_at(self, tensor: str) -> LoadAt | None:
        """The ``cache_read(tensor, "UB", at=...)`` record of input ``tensor`` (the last)."""
        got = None
        for d in self.directives:
            if isinstance(d, LoadAt) and d.tensor == tensor:
                got = d
        return got

    def copies(self, tensor: str) -> int:
        n = 1
        for d in self.directives:
            if isinstance(d, (Buffering, LoadAt)) and d.tensor == tensor:
                n = d.copies
        return n

    def __str__(self) -> str:
        from ascendsched.schedule.printer import format_schedule

        return format_schedule(self)

    # ----------------------------------------------------------------- helpers
    def _add(self, d: Directive) -> Schedule:
        return replace(self, directives=self.directives + (d,))

    def _stage(self, name: str, prim: str) -> Tensor:
        try:
            t = self.algo.tensor(name)
        except Exception:
            raise ScheduleError(
                f"{prim}('{name}', ...): algorithm '{self.algo.name}' has no stage '{name}'; "
                f"stages: {', '.join(s.name for s in self.algo.stages)}") from None
        if t.is_placeholder:
            raise ScheduleError(
                f"{prim}('{name}', ...): '{name}' is an input, not a stage; inputs take only "
                f"cache_read/buffer")
        return t

    @staticmethod
    def _axes(t: Tensor) -> list[str]:
        assert t.op is not None
        return [a.name for a in t.op.axes]


