"""Reduced instances: a scheduled kernel at a size the simulators can run, with its structure.

``reduce_instance(sched)`` finds the smallest resize of the algorithm (``algo/resize.py``),
scheduled by the same directives (only ``bind``'s core count changes), whose kernel differs
from the full one only in loop bounds, GM offsets and strides, on-chip offsets located by the
tile's number, guard constants and block count (``lower/compare.py`` checks that on the
lowered IR). A schedule with a tensorized stage, a
``GemmSchedule`` or a general ``Schedule`` (its records replayed by its ``on``), is
reduced by the facts of its resolved Cube plan, so both spellings of one plan reduce to the
same sizes and cores. The lowering reads these facts from the sizes, so a reduced instance
keeps each of them (:func:`structure_facts` lists them):

- tile and tail sizes: a split axis keeps its factor and ``size % factor``; a GEMM keeps its
  effective tile (m, n, k, k0), swizzle width and the M, N, K remainders. Axes that are not
  split, N of a GEMM in row blocks (a block spans every column), axes a reduction runs along
  that the schedule does not chunk (the tile reads them whole; a chunked one keeps its chunk
  loop's factor, tail and trip class, so a 32 000-column row read in 256-column chunks may
  shrink to 7 chunks) and axes a UB buffer holds whole (a stage computed or an input staged
  at an outer tile loop spans the loops inside it; a ``load_once`` input is loaded whole:
  ``_held_whole``) keep their size;
- trip counts of vector tile loops and the GEMM L1 K loop: 0, 1 and 2 exactly (whether a loop
  or a version exists at all), and from 3 on the parity only (ping-pong event ids ``k % 2``,
  the constant copy number of a peeled tail, ``_mod2`` of flattened K counters), so a loop of 3
  or more runs 3 (odd) or 4 (even) times where nothing below needs more. A GEMM tile class's
  persistent loop keeps whether it is a loop (more than one tile on some core); its copies are
  ``t % 2`` of its own variable, so its parity does not matter, and the neighbours below keep
  3 or more trips where the full kernel has them;
- cores: 2 or more when the full kernel has 2 or more; the persistent loop's tail guard (uneven
  work) exactly when the full kernel has one. A full kernel with even work keeps even work: a
  guard would add an ``If`` the shipped kernel does not have;
- a fused or swizzled tile count of 1 (its index is a constant) and, for GEMM, whether each
  tile class's first tile lands on core 0 (else its core index is shifted, mod cores);
- neighbours: which tile versions (full or tail per axis) and which GEMM tile classes (with
  the parity of their persistent-loop iteration) one core runs 1 and 2 iterations apart,
  and which tile versions it runs after which at all, an odd or an even number of iterations
  later (a version that never follows itself depends on no earlier run of itself, and one
  that follows itself an odd number of iterations later never meets its own buffer copy).
  Dependences between versions exist only where such neighbours do: with two cores, 400 full
  tiles and a tail, a reduced 4 + tail has no full tile two iterations after a full tile on
  the same core, so the double buffer's distance-2 WAR inside the full version disappears
  (the sync placement then reached the same syncs in another order); 8 + tail keeps it.
  Loops run 3 or 4 times, but a loop may need more trips for its versions' neighbours;
- the parities of a core's iterations each tile version runs at (its copies and ping-pong ids
  are ``k % 2``, and which other channel's ids its flags may share depends on them).

The reduced algorithm keeps its constants (``1.0 / n`` in a mean): it is checked against its own
numpy reference. When no smaller instance keeps the structure (the full one is already
small, or none is found within ``SEARCH[-1]`` tiles per axis) the full instance is
returned as it is.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ascendsched.algo.algorithm import Algorithm
from ascendsched.algo.expr import Reduce
from ascendsched.algo.gemm_epilogue import is_matmul_stage, walk
from ascendsched.algo.resize import axis_class, resize
from ascendsched.schedule.chunks import chunk_split
from ascendsched.schedule.cube_plan import CubePlan
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.schedule import ComputeAt, Schedule, Split

MIN_TRIPS = 3  # loops of at least this many trips run MIN_TRIPS or MIN_TRIPS + 1 times
SEARCH = (16, 64)  # tiles per axis tried, a wider search if the first finds nothing


@dataclass(frozen=True)
class Reduction:
    """A full scheduled kernel and the reduced instance that stands for it."""

    full: Schedule | GemmSchedule
    reduced: Schedule | GemmSchedule

    @property
    def is_full(self) -> bool:
        return self.reduced is self.full

    def __str__(self) -> str:
        if self.is_full:
            return f"{describe(self.full)} (no smaller instance keeps its structure)"
        return f"{describe(self.full)} -> reduced {describe(self.reduced)}"


def reduce_instance(sched: Schedule | GemmSchedule) -> Reduction:
    """The smallest instance of ``sched`` with the same kernel structure (module docstring).
    A schedule with a tensorized stage, a ``GemmSchedule`` or its general spelling, is reduced
    by its Cube plan's facts (both spellings to the same sizes and cores)."""
    cube = sched.cube
    for limit in SEARCH:
        if cube is not None:
            red = _reduce_gemm(sched, limit)
        else:
            assert isinstance(sched, Schedule)  # a GemmSchedule always has a Cube plan
            red = _reduce_vector(sched, limit)
        if red is not None:
            return Reduction(sched, red)
    return Reduction(sched, sched)


def describe(sched: Schedule | GemmSchedule) -> str:
    """The problem size and cores of a scheduled kernel, e.g. ``y[28, 4096] on 2 cores``."""
    cube = sched.cube
    if cube is not None:
        sp = cube.spec
        b = f"{sp.batch} x " if sp.batched else ""
        return f"gemm {b}{sp.m} x {sp.n} x {sp.k} on {cube.tiling.cores} cores"
    out = sched.algo.outputs[0]
    nest = sched.loop_nest(out.name)
    cores = nest.bound[1] if nest.bound else 1
    return f"{out.name}{list(out.shape)} on {cores} core{'s' if cores > 1 else ''}"


def trip_class(n: int) -> int | tuple[str, int]:
    """What the lowering can tell apart about a trip count: below MIN_TRIPS the count itself,
    from MIN_TRIPS on its parity."""
    return n if n < MIN_TRIPS else (f"{MIN_TRIPS}+", n % 2)


def reduced_trips(n: int) -> int:
    """The smallest trip count with ``n``'s trip class."""
    return n if n < MIN_TRIPS else MIN_TRIPS + (n - MIN_TRIPS) % 2


def structure_facts(sched: Schedule | GemmSchedule) -> tuple:
    """Everything the lowering of ``sched`` reads from its sizes (module docstring); two
    instances with equal facts lower to kernels that differ only in sizes."""
    cube = sched.cube
    if cube is not None:
        return _gemm_facts(cube, cube.tiling.cores)
    assert isinstance(sched, Schedule)
    out = sched.algo.outputs[0]
    nest = sched.loop_nest(out.name)
    sizes = {a.name: int(s) for a, s in zip(out.op.axes, out.shape)}  # type: ignore[union-attr]
    return _vector_facts(sched, sizes, nest.bound[1] if nest.bound else 1)


# --------------------------------------------------------------------------- vector path
def _reduce_vector(sched: Schedule, limit: int) -> Schedule | None:
    out = sched.algo.outputs[0]
    assert out.op is not None
    nest = sched.loop_nest(out.name)
    sizes = {a.name: int(s) for a, s in zip(out.op.axes, out.shape)}
    cores = nest.bound[1] if nest.bound else 1
    want, cheap = _vector_facts(sched, sizes, cores), _vector_facts(sched, sizes, cores, False)
    split = [a for _, axes in nest.loops for a in axes if nest.factors[a] < sizes[a]]
    whole = _held_whole(sched)
    shrink = [a for a in split if a not in whole and _resizable(sched, out.name, a, split)]
    f = nest.factors
    ranges = [range(1, min(sizes[a] // f[a], limit) + 1) for a in shrink]
    bound = [axes for name, axes in nest.loops if nest.bound and nest.bound[0] == name]
    cands: list[tuple[tuple[int, int, int], dict[str, int], int]] = []
    for fulls in itertools.product(*ranges):
        new = {**sizes, **{a: n * f[a] + sizes[a] % f[a] for a, n in zip(shrink, fulls)}}
        tiles = math.prod(-(-new[a] // f[a]) for a in bound[0]) if bound else 1
        cands.extend(((math.prod(new.values()), -(-tiles // c), c), new, c)
                     for c in range(min(2, cores), cores + 1))
    # least work first, then the fewest trips per core, then the fewest cores
    cands.sort(key=lambda c: c[0])
    for _, new, c in cands:
        if _vector_facts(sched, new, c, False) == cheap and _vector_facts(sched, new, c) == want:
            if new == sizes and c == cores:
                return sched
            algo = resize(sched.algo, {(out.name, a): n for a, n in new.items()})
            return sched.on(algo, cores=c)
    return None


def _held_whole(sched: Schedule) -> frozenset[str]:
    """The output's axes some UB buffer holds whole, whose sizes are then buffer sizes: those
    of the tile loops inside a loop a stage is computed at or an input staged at (its box
    spans them: softmax's ``mx`` computed at the column tile loop holds every row's max), and
    those a ``load_once`` input runs along (loaded whole: ``bias[j]``)."""
    out = sched.algo.outputs[0]
    nest = sched.loop_nest(out.name)
    names = [n for n, _ in nest.loops]
    levels = [names.index(p.loop) for st in sched.algo.stages
              if isinstance(p := sched.placement(st.name), ComputeAt) and p.loop in names]
    levels += [names.index(d.loop) for t in sched.algo.inputs
               if (d := sched.loaded_at(t.name)) is not None and d.loop in names]
    held = {a for lv in levels for _, axes in nest.loops[lv + 1:] for a in axes}
    once = {(t.name, k) for t in sched.algo.inputs if sched.loaded_once(t.name)
            for k in range(len(t.shape))}
    if once:
        held |= {a.name for a in out.op.axes  # type: ignore[union-attr]
                 if axis_class(sched.algo, (out.name, a.name)).members & once}
    return frozenset(held)


def _resizable(sched: Schedule, out: str, axis: str, split: list[str]) -> bool:
    """A split axis can shrink unless a reduction the schedule does not chunk runs along it
    (the tile reads it whole; a chunked one reads it in a loop of chunks, whose structure the
    facts keep: ``_reduction_facts``), a product indexes it, or another split axis of the
    output shares its class."""
    c = axis_class(sched.algo, (out, axis))
    others = {(out, a) for a in split if a != axis}
    whole = [k for k, _ in _reductions(sched.algo) if k in c.members and not _chunked(sched, k)]
    return not whole and not c.fixed and not (c.members & others)


def _chunked(sched: Schedule, key: tuple[str, str]) -> Split | None:
    """The split that chunks reduction ``key`` = (stage, reduce variable), if any."""
    d = chunk_split(sched, key[0])
    return d if d is not None and d.axis == key[1] else None


def _vector_facts(sched: Schedule, sizes: dict[str, int], cores: int,
                  neighbours: bool = True) -> tuple:
    """The loop structure ``lower/build_loop_nest.py`` derives from the sizes (its
    ``_gen_loops``): per tile loop, each axis's tail size and whether it has one tile; a serial
    loop its trip class, a fused loop the fused trip class, the bound loop its trip class per
    core, whether work is uneven and whether it runs on more than one core; and (unless
    ``neighbours`` is False, a cheaper first test) the versions' neighbours."""
    out = sched.algo.outputs[0]
    nest = sched.loop_nest(out.name)
    f = nest.factors
    facts: list[tuple] = []
    looped: set[str] = set()
    for name, axes in nest.loops:
        looped.update(axes)
        tiles = {a: -(-sizes[a] // f[a]) for a in axes}
        tails = tuple((a, sizes[a] % f[a], tiles[a] == 1) for a in axes)
        total = math.prod(tiles.values())
        if nest.bound is not None and nest.bound[0] == name:
            # one axis with a tail: the full tiles' loop, then the tail peeled on core
            # full % cores with copy (full // cores) % 2 (build_loop_nest ``_peeled_tail``)
            peel = len(axes) == 1 and tails[0][1] != 0
            count = sizes[axes[0]] // f[axes[0]] if peel else total
            facts.append((name, tails, cores > 1, trip_class(-(-count // cores)),
                          count % cores != 0, peel and (count // cores) % 2,
                          neighbours and _version_adjacency(axes, sizes, f, cores)))
        elif len(axes) > 1:
            facts.append((name, tails, trip_class(total),
                          neighbours and _version_adjacency(axes, sizes, f, 1)))
        else:  # a serial loop over the full tiles, then the tail version (copy full % 2)
            facts.append((name, tails, trip_class(sizes[axes[0]] // f[axes[0]])))
    whole = tuple((a, s) for a, s in sizes.items() if a not in looped)
    return tuple(facts) + (whole, _reduction_facts(sched, sizes))


def _version_adjacency(axes: tuple[str, ...], sizes: dict[str, int], f: dict[str, int],
                       cores: int) -> frozenset[tuple[int, ...]]:
    """Which tile versions (full or tail along each axis) one core runs ``d`` iterations
    apart, for d = 1 and 2, in a fused or bound loop over ``axes``: (d, version, version);
    and (0, version, version, parity) for any distance (``_far_neighbours``).

    Dependences between versions (a tail tile reusing the other copy of a double buffer two
    tiles after a full one) exist only where such neighbours exist; tile ``v`` of the loop is
    on core ``v % cores`` (``lower/build_loop_nest.py``, outer axes major)."""
    tiles = [-(-sizes[a] // f[a]) for a in axes]
    v = np.arange(math.prod(tiles))
    code = np.zeros_like(v)
    inner = 1
    for a, n in zip(reversed(axes), reversed(tiles)):
        code = code * 2 + ((v // inner) % n >= sizes[a] // f[a])
        inner *= n
    return _neighbours(code, cores) | _far_neighbours(code, cores) | _parities(code, cores)


def _neighbours(label: np.ndarray, cores: int) -> frozenset[tuple[int, int, int]]:
    """(d, label[i], label[i + d * cores]) over i, for d = 1 and 2 (one core's tiles d
    iterations of its loop apart)."""
    out: set[tuple[int, int, int]] = set()
    for d in (1, 2):
        s = d * cores
        if s < len(label):
            pairs = np.unique(np.stack([label[:-s], label[s:]]), axis=1)
            out.update((d, int(a), int(b)) for a, b in pairs.T)
    return frozenset(out)


def _far_neighbours(label: np.ndarray, cores: int) -> frozenset[tuple[int, int, int, int]]:
    """(0, a, b, parity) where one core runs a tile labelled ``b`` an odd (parity 1) or even
    (parity 0) number of iterations after one labelled ``a``: a version that never follows
    itself on a core has no dependence on itself, and its sync differs from one that does
    (batched softmax 4 x 2048 x 2048 runs each core's tail tile at most once; a reduced 3 x 18
    on 2 cores ran one core's twice, three iterations apart); double-buffered tiles alternate
    their copies with the iteration's parity, so a version that follows itself only an odd
    number of iterations later never meets its own copy (softmax 64 x 32000 in fused 1 x 512
    tiles on 16 cores runs a core's column-tail tiles 126 iterations apart, its reduced
    2 x 32000 on 9 cores 7 apart, and the full kernel had one pair more)."""
    n = len(label)
    step = np.arange(n) // cores  # the iteration of each tile on its core
    core = np.arange(n) % cores
    out: set[tuple[int, int, int, int]] = set()
    for c in range(min(cores, n)):
        mine, at = label[core == c], step[core == c]
        # per label and parity of the iteration: its first and last iteration
        first: dict[tuple[int, int], int] = {}
        last: dict[tuple[int, int], int] = {}
        for x in np.unique(mine):
            for p in (0, 1):
                hits = at[(mine == x) & (at % 2 == p)]
                if hits.size:
                    first[(int(x), p)], last[(int(x), p)] = int(hits.min()), int(hits.max())
        out.update((0, a, b, (pa + pb) % 2) for (a, pa), fa in first.items()
                   for (b, pb), lb in last.items() if lb > fa)
    return frozenset(out)


def _parities(label: np.ndarray, cores: int) -> frozenset[tuple[int, int, int]]:
    """(3, label, parity) for each tile version and the parity of the core's iterations it
    runs at: a version's double-buffered copies and ping-pong ids are ``k % 2`` of that
    iteration, and the event ids a version's own flags may share with another channel's
    depend on which of them it meets (LayerNorm 77 x 2000 in fused 2 x 400 tiles on 16
    cores runs its row-tail tiles at iterations 11 and 12; a reduced 7 x 2000 on 7 cores ran
    them at iteration 2 alone, and there its tail flag shared id 1 with the full tiles' copy
    0, where the full kernel, whose tail also runs at an odd iteration, gives it id 3)."""
    step = np.arange(len(label)) // cores
    pairs = np.unique(np.stack([label, step % 2]), axis=1)
    return frozenset((3, int(a), int(p)) for a, p in pairs.T)


def _reductions(algo: Algorithm) -> Iterator[tuple[tuple[str, str], int]]:
    """Every reduction variable: its key (stage, variable) and extent."""
    for st in algo.stages:
        assert st.op is not None
        for e in walk(st.op.body):
            if isinstance(e, Reduce):
                yield from (((st.name, v.name), int(v.extent)) for v in e.axes)


def _reduction_facts(sched: Schedule, sizes: dict[str, int]) -> tuple:
    """Per reduction variable at the output sizes ``sizes`` (one in the class of a resized
    output axis moves with it): its extent (a tile reads it whole), or for one the schedule
    chunks its chunk loop's structure: the factor, the tail chunk and the whole chunks' trip
    class (their copies and ids alternate with the trip's parity)."""
    facts = []
    for key, extent, moves, d in _reduction_parts(sched):
        n = extent + sum(sizes[a] - old for a, old in moves)
        facts.append((key, n) if d is None else
                     (key, "chunks", d.factor, n % d.factor, trip_class(n // d.factor)))
    return tuple(facts)


@functools.lru_cache(maxsize=64)
def _reduction_parts(sched: Schedule) -> tuple[tuple[tuple[str, str], int,
                                                    tuple[tuple[str, int], ...], Split | None],
                                              ...]:
    """Per reduction variable: its key, extent, the output axes (with their sizes) whose class
    holds it and the split that chunks it; once per schedule (the reduction search asks the
    facts of thousands of candidate sizes)."""
    algo = sched.algo
    out = algo.outputs[0]
    axes = [(a.name, int(n), axis_class(algo, (out.name, a.name)).members)
            for a, n in zip(out.op.axes, out.shape)]  # type: ignore[union-attr]
    return tuple((key, extent, tuple((a, n) for a, n, m in axes if key in m),
                  _chunked(sched, key)) for key, extent in _reductions(algo))


# --------------------------------------------------------------------------- GEMM path
def _reduce_gemm(sched: Schedule | GemmSchedule, limit: int) -> Schedule | GemmSchedule | None:
    """The Cube path of :func:`reduce_instance`, on ``sched``'s resolved Cube plan."""
    plan = sched.cube
    assert plan is not None
    t, sp = plan.tiling, plan.spec
    want, cheap = _gemm_facts(plan, t.cores), _gemm_facts(plan, t.cores, False)
    mtail, ntail = sp.m - (t.mt - 1) * t.tm, sp.n - (t.nt - 1) * t.tn
    k = reduced_trips(sp.k // t.tk) * t.tk + sp.k % t.tk
    w = t.swizzle.width
    m_cap = limit + (3 * w if t.swizzle.direction == "m" else 0)
    n_cap = limit + (3 * w if t.swizzle.direction == "n" else 0)
    batches = range(1, 2) if sp.batch == 1 else range(2, min(sp.batch, limit) + 1)
    # row blocks span the whole width (each tile class's valid N is N, a fact): N stays
    n_tiles = (t.nt,) if plan.row_blocks else range(1, min(t.nt, n_cap) + 1)
    cands = [((b * mt * nt, -(-b * mt * nt // c), c), (b, mt, nt), c) for b in batches
             for mt in range(1, min(t.mt, m_cap) + 1) for nt in n_tiles
             for c in range(min(2, t.cores), t.cores + 1)]
    # least work first, then the fewest tiles per core, then the fewest cores
    cands.sort(key=lambda c: c[0])
    built: dict[tuple[int, int, int], CubePlan] = {}
    for _, (b, mt, nt), c in cands:
        m, n = (mt - 1) * t.tm + mtail, (nt - 1) * t.tn + ntail
        if (b, mt, nt) not in built:
            built[(b, mt, nt)] = _cube_plan(_gemm_candidate(sched, plan, b, m, n, k))
        cand = built[(b, mt, nt)]
        if _gemm_facts(cand, c, False) == cheap and _gemm_facts(cand, c) == want:
            if (b, m, n, k, c) == (sp.batch, sp.m, sp.n, sp.k, t.cores):
                return sched
            return _gemm_candidate(sched, plan, b, m, n, k, c)
    return None


def _cube_plan(sched: Schedule | GemmSchedule) -> CubePlan:
    """The Cube plan of a candidate (a Cube schedule's records on a resized algorithm)."""
    plan = sched.cube
    assert plan is not None
    return plan


def _gemm_candidate(sched: Schedule | GemmSchedule, plan: CubePlan, batch: int, m: int, n: int,
                    k: int, cores: int | None = None) -> Schedule | GemmSchedule:
    """``sched``'s directives on the GEMM resized to (batch, m, n, k), bound to ``cores``
    (None: bound as it was; the facts take the core count as an argument). ``plan``:
    ``sched``'s Cube plan."""
    sp = plan.spec
    stage = sp.gemm_stage if plan.vector_epilogue is None else next(
        t.name for t in sched.algo.stages if is_matmul_stage(t))  # the original's sum stage
    out = sched.algo.tensor(stage)  # the sum; epilogue stages resize with it
    assert out.op is not None
    axes = [a.name for a in out.op.axes]
    body = next(e for e in walk(out.op.body) if isinstance(e, Reduce))  # under any epilogue
    sizes = {(out.name, axes[-2]): m, (out.name, axes[-1]): n,
             (out.name, body.axes[0].name): k}
    if sp.batched:
        sizes[(out.name, axes[0])] = batch
    algo = resize(sched.algo, sizes)
    return sched.on(algo, cores=cores)


def _gemm_facts(plan: CubePlan, cores: int, neighbours: bool = True) -> tuple:
    """What ``lower/build_gemm.py`` derives from the sizes on ``cores`` cores: the effective
    tiling, the K loop's trip class and tail, and per tile class (its ``_class_loop``): shape,
    swizzle, valid sizes, whether rows/columns are more than one, whether it is a loop (more
    than one tile per core), the guard (uneven work) and whether its first tile is on core 0;
    and (unless ``neighbours`` is False, a cheaper first test) the classes' neighbours, which
    also say whether a core runs 2 or 3 tiles of a class. The trip count's parity does not
    matter here: copies in a class loop are ``t % 2`` of its own variable and restart at the
    next class (the neighbours' parities cover that)."""
    t, sp = plan.tiling, plan.spec
    cores = min(cores, t.tiles)
    classes = []
    counts = [sp.batch * c.rows * c.cols for c in plan.tile_classes]
    base = 0
    for c, count in zip(plan.tile_classes, counts):
        iters = -(-count // cores)
        classes.append((c.label, c.width, c.direction, c.mv, c.nv, c.rows > 1, c.cols > 1,
                        iters > 1, iters * cores > count, base % cores == 0))
        base += count
    k_steps = sp.k // t.tk + (sp.k % t.tk > 0)
    l0_steps = sum(-(-min(t.tk, sp.k - i * t.tk) // t.k0) for i in range(k_steps))
    # a double buffer whose copy depends on the tile's iteration t, not only on the K loops
    # (lower/build_gemm.py: L0C t % 2; L1 (t * K steps + kt) % 2; L0 likewise per L0 step)
    by_tile = (t.l0c_copies == 2 or (t.l1_copies == 2 and k_steps % 2 == 1)
               or (t.l0_copies == 2 and l0_steps % 2 == 1))
    return (t.tm, t.tn, t.tk, t.k0, t.kk, t.l1_copies, t.l0_copies, t.l0c_copies, t.swizzle,
            sp.batch > 1, cores > 1, trip_class(sp.k // t.tk), sp.k % t.tk, tuple(classes),
            neighbours and _class_adjacency(counts, cores, by_tile))


def _class_adjacency(counts: list[int], cores: int, by_tile: bool) -> frozenset[tuple]:
    """Which tile classes one core runs ``d`` tiles apart (d = 1, 2): within a class just the
    class, across classes each side with the parity of its persistent-loop iteration when a
    double buffer's copy depends on it (``by_tile``: the copy restarts at each class, so
    whether the last tiles of one class and the first of the next use the same copy decides
    which dependences exist between them).

    Tile ``T`` (numbered across the classes) runs on core ``T % cores`` in iteration
    ``(T - base) // cores`` of its class's loop (``lower/build_gemm.py``)."""
    bases = np.cumsum([0] + counts[:-1])
    tile = np.arange(sum(counts))
    cls = np.searchsorted(bases, tile, side="right") - 1
    parity = (tile - bases[cls]) // cores % 2 if by_tile else np.zeros_like(tile)
    inside = {("in", d, a) for d, a, b in _neighbours(cls, cores) if a == b}
    across = {("across", d, a, b) for d, a, b in _neighbours(cls * 2 + parity, cores)
              if a // 2 != b // 2}
    return frozenset(inside | across)
