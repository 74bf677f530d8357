"""Default search spaces: one for any GEMM (Cube path) and one for any vector kernel.

``default_space(algo)`` picks by the algorithm's shape (``looks_like_gemm``), so every library
kernel has one; ``library_space("softmax", 4096, 4096)`` builds a library algorithm and its space
with the call that rebuilds it. A space declared by hand is a few lines::

    space = vector_space(softmax(4096, 4096), rows=(1, 2, 4), cores=(24, 48))

Choices are derived from the problem and the target (granules, core counts); whether a point
fits is left to the schedule primitives and the memory planner (``autotune/space.py``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ascendsched.algo import library
from ascendsched.algo.algorithm import Algorithm, root_output
from ascendsched.algo.expr import Reduce
from ascendsched.algo.gemm_spec import looks_like_gemm
from ascendsched.autotune.space import Param, Space
from ascendsched.errors import AscendSchedError
from ascendsched.schedule import ub_budget
from ascendsched.schedule.chunks import chunk_var, chunkable, column_reduction, dividing_width
from ascendsched.schedule.default import best_tiles
from ascendsched.schedule.default_chunked import strip_width
from ascendsched.schedule.gemm import GemmSchedule, cube_geometry
from ascendsched.schedule.gemm_default import default_gemm_schedules, even_block_rows
from ascendsched.schedule.online import join_online, online_pairs
from ascendsched.schedule.schedule import Schedule
from ascendsched.target import DEFAULT_TARGET, Target
from ascendsched.target.model import Scope

GEMM_TILES = (16, 32, 64, 128, 256)
GEMM_K_TILES = (64, 128, 256, 512)
GEMM_K0 = (32, 64, 128)
SWIZZLE_WIDTHS = (1, 2, 3, 4, 8)  # 3: CATLASS GemmIdentityBlockSwizzle<3, 0> (its examples)
# CATLASS' Atlas A2 basic matmul tilings (hicann/catlass @0dfcf9df): L1 tile m x n x k and L0
# K step, both L1 and L0A/L0B double buffered (MmadAtlasA2Pingpong, STAGES = 2), one L0C tile,
# every AIC, GemmIdentityBlockSwizzle<3, 0> (examples/00_basic_matmul/basic_matmul.cpp:87-100;
# 256 x 128 is the alternative examples/06_optimized_matmul/optimized_matmul.cpp:89 names).
CATLASS_GEMM_TILES = ((128, 256, 256, 64), (256, 128, 256, 64))
CATLASS_SWIZZLE = (3, "m")
ESTIMATE_SEEDS = 4  # the default generator's best-estimated tilings a guided search tries first
VECTOR_ROWS = (1, 2, 4, 8, 16, 32, 64, 128)
VECTOR_COLS = (8192, 4096, 2048, 1024, 512, 256)
VECTOR_TILES = (512, 1024, 2048, 4096, 8192, 16384, 32768)
WHOLE = "whole"  # the axis is not split
COLUMN_CHUNKS = (16, 32, 64, 128, 256, 512, 1024)  # rows per chunk of a column reduction
WORKSPACE_COPIES = (1, 2, 3)  # GM slots between the Cube and a Vector epilogue


# ------------------------------------------------------------------------------- GEMM
@dataclass(frozen=True)
class GemmBuild:
    """A point of a GEMM space -> GemmSchedule (epilogue placement, tile, split_k, buffering,
    bind, swizzle). Epilogue knobs (``epilogue``, ``vector_cores``, ``workspace``) exist only
    in the spaces of GEMMs with an epilogue; a default value adds no directive."""

    target: Target

    def __call__(self, algo: Algorithm, c: Mapping[str, Any]) -> GemmSchedule:
        s = GemmSchedule(algo, target=self.target)
        unit = c.get("epilogue", "vector" if "vector_cores" in c else None)
        if unit == "vector" and ("epilogue" in c or c["vector_cores"] != 2):
            # before tile(): the tile checks depend on where the epilogue runs; a Vector-only
            # epilogue keeps the steps the default leaves on the Cube core (a bias) there
            split = None if "epilogue" in c else s.split
            s = s.epilogue_on("vector", **({"vector_cores": c["vector_cores"]}
                                           if c["vector_cores"] != 2 else {}),
                              after=split.after if split is not None else None)
        s = s.tile(c["tm"], c["tn"], c["tk"])
        s = s.split_k(c["k0"])
        for level in ("l1", "l0", "l0c"):
            if c[level] != 1:
                s = s.buffer(level, c[level])
        if c["cores"] > 1:
            s = s.bind(c["cores"])
        if (c["swizzle_w"], c["swizzle_dir"]) != (1, "m"):
            s = s.swizzle(c["swizzle_w"], c["swizzle_dir"])
        if unit == "vector" and c["workspace"] != 2:
            s = s.buffer("workspace", c["workspace"])
        return s


def gemm_space(algo: Algorithm, target: Target = DEFAULT_TARGET, *, name: str | None = None,
               algo_code: str = "algo", **choices: tuple[Any, ...]) -> Space:
    """L1 tile (tm, tn, tk), L0 K step k0, copies per level (l1, l0, l0c), Cube cores and
    swizzle (width, direction); with an epilogue, where it runs (``epilogue``: the Fixpipe or
    the Vector cores, when the Fixpipe can run it), the Vector cores per block that split a
    tile (``vector_cores``: 2 as the 910B pairs them, or 1) and the workspace slots
    (``workspace``). ``choices`` replaces a parameter's default choices.

    Seeds (tried first by a guided search): the default generator's ``ESTIMATE_SEEDS`` best
    tilings by ``schedule/gemm_cost.py``'s estimate, and CATLASS' basic matmul tilings."""
    base = GemmSchedule(algo, target=target)
    sp, g = base.spec, cube_geometry(target)
    c0 = g.c0(sp.in_dtype.bytes)
    mg, ng = base._m_granule(), base._n_granule()

    def sizes(cands: tuple[int, ...], dim: int, gran: int, least: int) -> tuple[int, ...]:
        padded = -(-dim // gran) * gran
        out = {min(-(-s // gran) * gran, padded) for s in cands}
        keep = sorted(s for s in out if s >= min(least, padded))
        return tuple(keep)

    aic = target.num_aic
    # row blocks (a softmax over rows wider than a tile): short blocks keep every core busy
    # and the Cube ahead of the Vector cores (4096 x 4096 x 128: 32-row blocks 95.6 us
    # modelled, 64-row 97.4), and blocks that spread the rows evenly over the cores, as the
    # default generator tries them (48-row blocks: 88.1 us)
    epi = base.vector_epilogue
    rowwise = epi is not None and bool(epi.rowwise)
    tms = sizes(GEMM_TILES, sp.m, mg, 16 if rowwise else 64)
    params = {
        "tm": tuple(sorted(set(tms) | even_block_rows(base))) if rowwise else tms,
        "tn": sizes(GEMM_TILES, sp.n, ng, 64),
        "tk": sizes(GEMM_K_TILES, sp.k, c0, 64),
        "k0": sizes(GEMM_K0, sp.k, c0, 32),
        "l1": (1, 2), "l0": (1, 2), "l0c": (1, 2),
        "cores": tuple(sorted({c for c in (aic // 3, 2 * aic // 3, 5 * aic // 6, aic) if c})),
        "swizzle_w": SWIZZLE_WIDTHS,
        "swizzle_dir": ("m", "n"),
    } | _epilogue_params(base)
    def clamp(v: int, dim: int, gran: int) -> int:
        return min(-(-v // gran) * gran, -(-dim // gran) * gran)

    seeds = [_gemm_point(s) for s in _estimate_seeds(algo, target)]
    for tm, tn, tk, k0 in CATLASS_GEMM_TILES:
        seeds.append({"tm": clamp(tm, sp.m, mg), "tn": clamp(tn, sp.n, ng),
                      "tk": clamp(tk, sp.k, c0), "k0": clamp(k0, sp.k, c0), "l1": 2, "l0": 2,
                      "l0c": 1, "cores": aic, "swizzle_w": CATLASS_SWIZZLE[0],
                      "swizzle_dir": CATLASS_SWIZZLE[1]} | _epilogue_point(base))
    return _make(name or f"{algo.name}-cube", algo, params, {"swizzle_dir", "epilogue"},
                 GemmBuild(target),
                 target, algo_code, choices, seeds)


def _estimate_seeds(algo: Algorithm, target: Target) -> list[GemmSchedule]:
    try:
        return list(itertools.islice(default_gemm_schedules(algo, target), ESTIMATE_SEEDS))
    except AscendSchedError:
        return []


def _gemm_point(s: GemmSchedule) -> dict[str, Any]:
    """The GEMM space values of ``s``'s resolved tiling (and epilogue placement)."""
    t = s.tiling
    return {"tm": t.tm, "tn": t.tn, "tk": t.tk, "k0": t.k0, "l1": t.l1_copies,
            "l0": t.l0_copies, "l0c": t.l0c_copies, "cores": t.cores,
            "swizzle_w": t.swizzle.width, "swizzle_dir": t.swizzle.direction
            } | _epilogue_point(s)


def _epilogue_params(base: GemmSchedule) -> dict[str, tuple[Any, ...]]:
    """The epilogue knobs of a GEMM: none without an epilogue; a Vector epilogue (one the
    Fixpipe cannot run) tunes its Vector cores and workspace slots; an epilogue the Fixpipe
    can run (bias, ReLU, scale) may also move to the Vector cores."""
    e = base.spec.epilogue
    if base.vector_epilogue is None and not (e.bias or e.relu or e.scale):
        return {}
    cap = base.target.cross_flag_max_pending  # buffer('workspace') checks the same limit
    knobs = {"vector_cores": (2, 1), "workspace": tuple(w for w in WORKSPACE_COPIES if w <= cap)}
    return knobs if base.vector_epilogue is not None else {"epilogue": ("fixpipe", "vector")
                                                           } | knobs


def _epilogue_point(s: GemmSchedule) -> dict[str, Any]:
    """``s``'s values of the epilogue knobs ``_epilogue_params`` gives its algorithm."""
    params = _epilogue_params(GemmSchedule(s.algo, target=s.target))
    got = {"epilogue": "vector" if s.vector_epilogue is not None else "fixpipe",
           "vector_cores": s.epilogue_vector_cores, "workspace": s.copies("workspace")}
    return {k: got[k] for k in params}


# ------------------------------------------------------------------------------- vector
@dataclass(frozen=True)
class VectorBuild:
    """A point of a vector space -> Schedule: splits of the output's first and last axes, the
    order of their tile loops, cores on the outer one, producer placement, copies."""

    target: Target
    out: str
    axes: tuple[str, ...]
    shape: tuple[int, ...]
    stages: tuple[tuple[str, bool], ...]  # (producer stage, is a reduction)
    buffers: tuple[str, ...]
    once: tuple[str, ...] = ()  # inputs that may be loaded once (``once_<input>``)
    per_row: frozenset[str] = frozenset()  # stages ``stats="outer"`` computes at the outer loop
    row_stats: frozenset[str] = frozenset()  # of one value per row: ``stats="chunks"``

    def __call__(self, algo: Algorithm, c: Mapping[str, Any]) -> Schedule:
        s = Schedule(algo, target=self.target)
        first, last = self.axes[0], self.axes[-1]
        splits = {}  # axis -> factor
        if len(self.axes) == 1:
            if c["tile"] != WHOLE:
                splits[first] = c["tile"]
        else:
            if c["rows"] != WHOLE:
                splits[first] = c["rows"]
            if c["cols"] != WHOLE:
                splits[last] = c["cols"]
        how = c.get("order", "rows")
        order = [first, last] if how in ("rows", "fused") else [last, first]
        if len(self.axes) == 1:
            order = [first]
        for ax in order:
            if ax in splits:
                s = s.split(self.out, ax, splits[ax])
        loops = s.loop_names(self.out)
        if how == "fused" and len(loops) == 2:  # row and column tiles in one bound loop
            s = s.fuse(self.out, *loops)
            loops = s.loop_names(self.out)
        if loops:
            tiles = 1
            for ax in s.loop_nest(self.out).loops[0][1]:
                tiles *= -(-self.shape[self.axes.index(ax)] // splits[ax])
            cores = min(c["cores"], tiles)
            if cores > 1:
                s = s.bind(self.out, loops[0], cores)
        if c.get("chunk", WHOLE) != WHOLE:  # a column reduction's rows, in chunks
            kv = chunk_var(s, self.out)
            assert kv is not None
            s = s.split(self.out, kv.name, c["chunk"])
        outer = c.get("stats", "tile") in ("outer", "chunks")
        chunks = c.get("stats") == "chunks" and c.get("cols", WHOLE) != WHOLE
        for st, is_red in self.stages:
            if chunks and st in self.row_stats:  # once per row, reduced in chunks of a piece
                s = s.compute_at(st, self.out, s.legal_compute_at(self.out)[-1])
                kv = chunk_var(s, st)
                if kv is not None:
                    s = s.split(st, kv.name, min(c["cols"], int(kv.extent)))
            elif chunks:  # row-wide stages: computed per chunk and per piece
                s = s.compute_inline(st)
            elif outer and st in self.per_row:  # once per iteration of the outer tile loop
                s = s.compute_at(st, self.out, s.legal_compute_at(self.out)[-1])
            elif is_red or c.get(f"place_{st}", "at") == "at":
                s = s.compute_at(st, self.out, s.legal_compute_at(self.out)[0])
            else:
                s = s.compute_inline(st)
        if chunks and c.get("online", False):  # a softmax's two statistics in one pass
            s = join_online(s)
        loaded_once = {b for b in self.once if c.get(f"once_{b}", "tile") != "tile"}
        for b in sorted(loaded_once):
            s = s.load_once(b, hoist=c[f"once_{b}"] == "once")
        # a row staged in UB once for its pieces and chunks: with rows outer, pieces inside
        loops = s.loop_names(self.out)
        staged = {b for b in self.buffers if c.get(f"stage_{b}", "tile") == "row"} \
            if len(loops) == 2 and how == "rows" else set()
        for b in sorted(staged):
            s = s.cache_read(b, "UB", at=(self.out, loops[0]), copies=c[f"copies_{b}"])
        for b in self.buffers:
            if c[f"copies_{b}"] != 1 and b not in loaded_once | staged:
                s = s.buffer(b, c[f"copies_{b}"])
        return s


def vector_space(algo: Algorithm, target: Target = DEFAULT_TARGET, *, name: str | None = None,
                 algo_code: str = "algo", **choices: tuple[Any, ...]) -> Space:
    """Tile of the output (``tile`` for 1-D; ``rows``/``cols`` and their loop ``order`` for
    2-D and up: ``rows`` or ``cols`` outer, the outer one bound, or ``fused``: one loop of
    both, bound, as the default schedule spreads the pieces of wide rows), vector ``cores``,
    ``place_<stage>`` (``"at"``: computed per tile, or ``"inline"``) per elementwise producer,
    ``stats`` (``"tile"``; ``"outer"``: the stages the default computes once per row,
    ``ub_budget.computed_per_row``, at the outer tile loop: once per row when the pieces of
    a row are the inner tiles; ``"chunks"``, when ``schedule.chunks.chunkable``: only the row
    statistics there, each reduction read in chunks of ``cols``, the row-wide stages
    inlined: rows no tile holds; with ``online`` a softmax's max and sum in one pass,
    ``schedule/online.py``), ``copies_<tensor>`` per input and the output, and
    ``stage_<input>`` (``"tile"``; ``"row"``: with rows outer and pieces of them inside,
    ``cache_read(input, "UB", at=(out, <row loop>))``: each row loaded once for all its
    pieces and chunks) per input that varies along every output axis, when a row overflows
    UB (``stats="chunks"`` reads it again per statistic), and
    ``once_<input>`` (``"tile"``; ``"once"``: ``load_once``, one copy loaded before the tile
    loops, and the values of it alone computed there too; ``"load"``: loaded once, those
    values computed per tile, ``load_once(..., hoist=False)``) per input that does not vary along
    every output axis (``gamma[j]``; with that axis split, each tile reads its part of the one
    copy). A load_once that overflows UB is pruned by the planner's own checks, like any
    point. A column reduction (``schedule.chunks.column_reduction``: ``db[j] = sum_i
    dy[i, j]``) also gets, among its column tiles, the widths each core count takes, and
    ``chunk``: its rows read whole or in chunks of 16..1024. ``rows`` also offers the
    default's tallest whole-row tile of each buffering, and the space's seeds are those tiles
    as points (``_vector_seeds``)."""
    out = algo.outputs[0]
    assert out.op is not None
    axes = tuple(a.name for a in out.op.axes)
    shape = tuple(int(x) for x in out.shape)
    align = ub_budget.granule(algo, target)
    params: dict[str, tuple[Any, ...]] = {}
    fit = _whole_row_tiles(algo, target) if len(axes) > 1 else {}
    if len(axes) == 1:
        params["tile"] = _factors(VECTOR_TILES, shape[0], align) or (WHOLE,)
    else:
        heights = sorted({r for r in VECTOR_ROWS if r < shape[0]} | set(fit.values()))
        params["rows"] = tuple(heights) + (WHOLE,)
        params["cols"] = _columns(shape[-1], align) + (WHOLE,)
        if len(params["cols"]) > 1:
            params["order"] = ("rows", "cols", "fused")
    params["cores"] = tuple(c for c in (8, 16, 24, 32, 40, 48) if c < target.num_aiv) + (
        target.num_aiv,)
    if column_reduction(algo):  # tiles of the columns each core takes; rows in chunks
        key = "tile" if len(axes) == 1 else "cols"
        rows = math.prod(shape[:-1])
        widths = {strip_width(algo, target, shape[-1], rows, c) for c in params["cores"]}
        params[key] = tuple(sorted({*params[key], *widths} - {WHOLE, shape[-1]})) + (WHOLE,)
        kv = chunk_var(Schedule(algo, target=target), out.name)
        assert kv is not None
        params["chunk"] = tuple(c for c in COLUMN_CHUNKS if c < int(kv.extent)) + (WHOLE,)
    stages = []
    for st in algo.stages:
        if st is out:
            continue
        assert st.op is not None
        red = isinstance(st.op.body, Reduce)
        stages.append((st.name, red))
        if not red:
            params[f"place_{st.name}"] = ("at", "inline")
    per_row = ub_budget.computed_per_row(algo)
    if "order" in params and per_row:
        params["stats"] = ("tile", "outer") + (("chunks",) if chunkable(algo) else ())
    buffers = tuple(t.name for t in algo.inputs) + (out.name,)
    for b in buffers:
        params[f"copies_{b}"] = (1, 2)
    once = _broadcast_inputs(algo, target)
    for b in once:
        params[f"once_{b}"] = ("tile", "once", "load")
    if "chunks" in params.get("stats", ()) and any(
            st != out.name for st, _ in online_pairs(algo)):
        params["online"] = (False, True)
    if "chunks" in params.get("stats", ()) and _rows_overflow(algo, target):
        for t in algo.inputs:  # rows no tile holds: read again by each chunked statistic
            if t.name not in once:
                params[f"stage_{t.name}"] = ("tile", "row")
    nominal = {"order", "stats", "online"} | {k for k in params if k.startswith(("place_", "once_",
                                                                        "stage_"))}
    row_stats = frozenset(st.name for st in algo.stages
                          if st is not out and len(st.shape) == len(out.shape) - 1)
    build = VectorBuild(target, out.name, axes, shape, tuple(stages), buffers, once, per_row,
                        row_stats)
    return _make(name or f"{algo.name}-vector", algo, params, nominal, build, target,
                 algo_code, choices, _vector_seeds(algo, params, fit))


def _whole_row_tiles(algo: Algorithm, target: Target) -> dict[int, int]:
    """Copies -> rows of the default's first whole-row tile with that buffering
    (``schedule.default.best_tiles``; none where a row does not fit)."""
    n = int(root_output(algo).shape[-1])
    return {c: t.rows for c, t in best_tiles(algo, target).items()
            if t.cols == n and t.rows < int(root_output(algo).shape[0])}


def _vector_seeds(algo: Algorithm, params: dict[str, tuple[Any, ...]], fit: dict[int, int]
                  ) -> list[dict[str, Any]]:
    """The default's whole-row tiles as points, a guided search's first trials: each
    buffering's tallest tile with that many copies of every input and the output, the
    default's placements (``computed_per_tile`` per tile, the rest inlined), inputs of no row
    axis loaded once, every core. The single-buffered one is often taller: LayerNorm
    4096 x 4096 in tiles of 3 rows, one copy each, models 49.0 us against the default's 2
    double-buffered rows, 51.9 us (fewer tiles: fewer barriers and per-row instructions on
    the Vector pipe, which bounds it; the next tile's load still overlaps all but the cast
    that reads its input first)."""
    per_tile = ub_budget.computed_per_tile(algo)
    out = []
    for copies, rows in fit.items():
        pt: dict[str, Any] = {k: v[0] for k, v in params.items()}
        pt.update(rows=rows, cols=WHOLE, cores=params["cores"][-1])
        if "chunk" in params:  # a column reduction's rows: read whole, as the tile holds them
            pt["chunk"] = WHOLE
        for k in params:
            if k.startswith("place_"):
                pt[k] = "at" if k[len("place_"):] in per_tile else "inline"
            elif k.startswith("copies_"):
                pt[k] = copies
            elif k.startswith("once_"):
                pt[k] = "once"
        out.append(pt)
    return out


def _rows_overflow(algo: Algorithm, target: Target) -> bool:
    """Whether one whole row of ``algo``'s output, one copy, overflows UB by the default
    schedule's estimate (its statistics are then read in chunks)."""
    out = root_output(algo)
    row = ub_budget.TileShape(1, int(out.shape[-1]))
    return ub_budget.tile_bytes(algo, row, 1, target) > target.scope(Scope.UB).usable


def _broadcast_inputs(algo: Algorithm, target: Target) -> tuple[str, ...]:
    """Inputs whose values do not vary along some output axis (``gamma[j]`` of a row-wise
    kernel): those a tiling of that axis alone lets every tile read whole."""
    out = root_output(algo)
    every = frozenset(range(len(out.shape)))
    deps = ub_budget.input_deps(algo, target)
    return tuple(t.name for t in algo.inputs if t in deps and deps[t] != every)


def _factors(cands: tuple[int, ...], size: int, align: int) -> tuple[int, ...]:
    return tuple(sorted(f for f in cands if f < size and f % align == 0))


def _columns(size: int, align: int) -> tuple[int, ...]:
    """Column tiles of a row of ``size``: ``VECTOR_COLS`` below it and, beside each, the widest
    aligned width above its half that divides the row (``dividing_width``, as the default
    schedule's pieces): 8 000 for a 32 000-word vocabulary, 5 504 for 11 008."""
    cols = _factors(VECTOR_COLS, size, align)
    return tuple(sorted(set(cols) | {d for c in cols if (d := dividing_width(size, c, align))}))


def _make(name: str, algo: Algorithm, params: dict[str, tuple[Any, ...]], nominal: set[str],
          build: Callable, target: Target, algo_code: str,
          overrides: Mapping[str, tuple[Any, ...]],
          seeds: list[dict[str, Any]] | None = None) -> Space:
    for k, v in overrides.items():
        if k not in params:
            raise AscendSchedError(f"space {name}: no parameter '{k}'; parameters: "
                                   + ", ".join(params))
        params[k] = tuple(v)
    ps = tuple(Param(k, v, ordinal=k not in nominal) for k, v in params.items())
    pts = tuple(tuple(d[k] for k in params) for d in seeds or ())
    return Space(name, algo, ps, build, target, algo_code, pts)


# ------------------------------------------------------------------------------- defaults
def default_space(algo: Algorithm, target: Target = DEFAULT_TARGET, *, algo_code: str = "algo",
                  **choices: tuple[Any, ...]) -> Space:
    """The default space of ``algo``: the Cube space for a GEMM, else the vector space."""
    make = gemm_space if looks_like_gemm(algo) else vector_space
    return make(algo, target, algo_code=algo_code, **choices)


LIBRARY: dict[str, Callable[..., Algorithm]] = {
    "vadd": library.vadd, "fused_mul_add_relu": library.fused_mul_add_relu,
    "bias_add": library.bias_add, "softmax": library.softmax, "rmsnorm": library.rmsnorm,
    "layernorm": library.layernorm, "column_sum": library.column_sum, "gemm": library.gemm,
    "batched_gemm": library.batched_gemm, "gemm_int8": library.gemm_int8,
    "gemm_softmax": library.gemm_softmax,
}


def library_space(kernel: str, *args: int, target: Target = DEFAULT_TARGET,
                  **choices: tuple[Any, ...]) -> Space:
    """The default space of library kernel ``kernel`` built with ``args`` (its sizes)."""
    if kernel not in LIBRARY:
        raise AscendSchedError(f"no library kernel '{kernel}'; kernels: {', '.join(LIBRARY)}")
    algo = LIBRARY[kernel](*args)
    code = f"{kernel}({', '.join(map(str, args))})"
    sp = default_space(algo, target, algo_code=code, **choices)
    shape = "x".join(map(str, args)) or "default"
    return Space(f"{kernel}-{shape}", sp.algo, sp.params, sp.build, target, code, sp.seeds)
