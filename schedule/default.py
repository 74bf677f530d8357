"""Default schedules derived from the target, offered best first.

``lower``'s ``schedule_for`` takes the first candidate whose buffers the memory planner fits
with the buffering asked for (else the first that fits at all). The rules:
- reductions and stages with several consumers are computed per tile (``compute_at``), other
  producer stages are inlined;
- tiles are sized with the UB bytes they really need (``schedule/ub_budget.py``: every copy of
  the inputs and the output, the per-tile stages and the temporaries of their expressions, by
  liveness), so the double buffering fits beside them;
- the last axis stays whole when a row fits, else it is split to a multiple of 32 bytes; the
  tile grows over leading rows, and among the tile heights that fit the one that gives the
  busiest core the fewest rows wins (ties: the taller tile, fewer DMA and vector heads), the
  heights at which the row reductions still halve pairwise first (``reductions_halve``);
- rows are flattened over the leading axes and a tile is a box of them (``row_extents``):
  a (2, 384, 384) softmax gets tiles of some rows of the middle axis (``split('y', 'p', 1)
  .split('y', 'i', 8)``), the leading tile loops fused into one so every tile can go to any
  core and a tail tile is a branch of the loop body;
- a row too wide for one tile is cut into pieces. With at least two rows per core the row
  loop is bound and the pieces are its inner tiles, the per-row stages (statistics and the
  row-wide stages they read) computed once per row and the inputs of no row axis loaded once
  (``_rows_outer_pieces``); otherwise, or when those row-wide buffers do not fit, the piece
  loop is fused under the row loop, so the pieces of every row spread over the cores (each
  piece still reduces its whole row), cut evenly (``_even_cut``: as many pieces as the widest
  that fits would give, none short, so no core runs only tails); a row of statistics in more
  than two pieces, or in two with ``FEW_ROWS_PER_CORE`` rows per core or more, goes to the
  chunked pieces below instead (read once per row, not once per piece);
- rows no tile holds whole, not even in pieces, get their statistics read in chunks
  (``schedule/chunks.py``), last: pieces of each row under the bound row loop with the
  statistics computed once per row in chunks of the piece's width (softmax over a 32 000-word
  vocabulary; the row staged in UB once per row first where the statistics would read it
  twice more: ``row_reads``), or, for an output of row statistics (logsumexp), tiles of a
  32-byte block of it, each reading its rows in chunks (``schedule/default_chunked.py``);
- a column reduction (``db[j] = sum_i dy[i, j]``) or a 2-D output of column statistics
  (``z = x - mean[j]``) gets its own candidates first: tiles or strips of the columns each
  core takes, the rows read in chunks (``schedule/default_chunked.py``);
- a 2-D output that nothing reduces (bias add), whose double-buffered whole rows leave at
  most two rows per tile, gets half rows in two copies first, its row-free inputs loaded
  whole once (``_half_rows``), given 16 rows per vector core or more;
- the outermost tile loop is bound to min(tiles, vector cores) cores;
- inputs every tile reads whole (``gamma[j]`` with only rows tiled) are loaded once per core
  (``load_once``); the other input tiles and the output tile are double buffered when a core
  runs more than one tile (loads, vector work and stores of neighbouring tiles then overlap),
  unless that leaves one row per tile and one copy fits more (``_buffered_tiles``);
  single-buffered candidates and smaller tiles follow as fallbacks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from ascendsched.algo.algorithm import Algorithm, root_output
from ascendsched.algo.expr import Load, Reduce
from ascendsched.algo.gemm_epilogue import reduces, walk
from ascendsched.algo.gemm_spec import looks_like_gemm
from ascendsched.algo.tensor import Tensor
from ascendsched.schedule.chunks import chunk_var, chunkable, stat_rank
from ascendsched.schedule.default_chunked import (
    chunked_pieces,
    chunked_rows,
    column_pieces,
    column_tiles,
    free_once_bytes,
    largest,
    once_pieces,
    row_free,
    row_reads,
)
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.gemm_default import default_gemm_schedules
from ascendsched.schedule.online import join_online
from ascendsched.schedule.schedule import Schedule
from ascendsched.schedule.ub_budget import (
    TileShape,
    computed_per_row,
    computed_per_tile,
    granule,
    input_deps,
    invariant_inputs,
    reductions_halve,
    row_extents,
    tile_bytes,
)
from ascendsched.target import DEFAULT_TARGET, Target
from ascendsched.target.model import Scope

FALLBACKS = 6  # smaller tiles offered after the best one of each buffering
# A whole row over the UB estimate is still offered (the planner's in-place reuse may fit it)
# unless the estimate is beyond this many times usable UB: over the library kernels (softmax,
# RMSNorm, LayerNorm, bias add; 64 and 4096 rows x 6144..32768 columns, both bufferings, with
# and without hoisting) the planner fitted rows estimated at up to 1.62x (RMSNorm 16384 wide,
# buffering given up) and none estimated at 1.79x or more; each hopeless candidate cost a
# build and a memory plan (LayerNorm 16384 wide: 3 of them, 0.12 s of its 0.41 s compile).
WHOLE_ROW_SLACK = 1.7
# Under this many rows per Vector core, rows too wide for a tile go in two pieces fused under
# the row loop before the chunked pieces (each piece reduces its whole row again, but the
# pieces of few rows spread over the cores where whole rows cannot): LayerNorm on 48 cores,
# modelled, fused against chunked, 13877 / 16384 wide: 64 rows +8% / +14% for chunked, 100
# rows +6% / +6%, 200 rows +4% / -2%, 1000 rows -3% / -16%, 4096 rows -2% / -18%.
FEW_ROWS_PER_CORE = 4
# A row piece that divides the row (no tail version) comes before the widest piece cut evenly
# unless it gives the busiest core more than this many times the work (``_tiles``)
DIVIDING_SLACK = 1.25


def default_schedules(algo: Algorithm, target: Target = DEFAULT_TARGET
                      ) -> Iterator[Schedule | GemmSchedule]:
    """Candidate default schedules, best first (a GEMM gets Cube schedules:
    ``schedule/gemm_default.py``)."""
    if looks_like_gemm(algo):
        yield from default_gemm_schedules(algo, target)
        return
    out = root_output(algo)
    seen: set[str] = set()
    usable = target.scope(Scope.UB).usable
    for tile, chunk in column_tiles(algo, target):  # a column reduction: wide tiles first
        yield _candidate(algo, target, tile, 2, hoist=False, chunk=chunk)
    yield from column_pieces(algo, target)  # column statistics, then their strip's rows
    for tile in _half_rows(algo, target):  # elementwise rows: two copies of more rows
        yield _candidate(algo, target, tile, 2, load_free=True)
    rows_outer = True  # not offered yet
    n = int(out.shape[-1])
    chunks = stat_rank(algo) != len(out.shape) and chunkable(algo)
    few_rows = math.prod(_lead(algo)) < FEW_ROWS_PER_CORE * target.num_aiv
    for copies, tile in _buffered_tiles(algo, target):
        if rows_outer and tile.cols < n:
            # before the first piece fused under the rows: pieces under a bound loop of rows
            rows_outer = False
            for piece in _rows_outer_pieces(algo, target):
                yield _candidate(algo, target, piece, 1, hoist=False, rows_outer=True)
        if chunks and -(-n // tile.cols) > (2 if few_rows else 1):
            # pieces fused under the rows each reduce their whole row again: the chunked
            # pieces below read it once (LayerNorm 4096 x 20 000 in 4 000-column pieces:
            # 1247.5 us modelled fused, 476.7 us chunked with gamma and beta loaded once;
            # 4451 x 15771 in two pieces 596.8 fused, 465.1 chunked). Two pieces per row
            # stay first for a few rows per core, which the fused pieces spread better
            # (LayerNorm 64 x 16384: 17.1 fused, 19.5 chunked; 1000 x 16384: 109.0, 91.4)
            continue
        # values of the loaded-once inputs computed once, then (if that changes the UB
        # estimate: they hold UB all the time) per tile, for rows too wide for both
        need = {h: tile_bytes(algo, tile, copies, target, hoist=h) for h in (True, False)}
        hoists = (True, False) if need[True] != need[False] else (True,)
        for hoist in hoists:
            if need[hoist] > WHOLE_ROW_SLACK * usable:
                continue  # only a whole row is offered over the estimate: hopelessly over
            s = _candidate(algo, target, tile, copies, hoist)
            key = str(s)
            if key not in seen:
                seen.add(key)
                yield s
    # last: rows whose reductions read them in chunks (no row-wide buffer at all), their
    # row-free inputs loaded once while that leaves wide pieces, then a piece per piece
    for piece in once_pieces(algo, target):
        yield _candidate(algo, target, piece, 2, hoist=False, rows_outer=True, chunk=piece.cols,
                         load_free=True)
    several_rows = math.prod(_lead(algo)) > target.num_aiv  # some core runs two rows
    for piece in chunked_pieces(algo, target):
        plain = _candidate(algo, target, piece, 2, hoist=False, rows_outer=True,
                           chunk=piece.cols)
        if several_rows and row_reads(plain) >= 3:
            # the row staged in UB first, y double buffered, then in one copy (``row_reads``)
            for copies in (2, 1):
                yield _candidate(algo, target, piece, copies, hoist=False, rows_outer=True,
                                 chunk=piece.cols, staged=True)
        yield plain
    for tile, width in chunked_rows(algo, target):
        yield _candidate(algo, target, tile, 2, hoist=False, chunk=width)


def best_tiles(algo: Algorithm, target: Target = DEFAULT_TARGET) -> dict[int, TileShape]:
    """The tile the default offers first with each buffering (copies 2, then 1), by the UB
    estimate. Single-buffered tiles may be taller: fewer tiles, so fewer per-tile barriers and
    short row-statistic instructions, which a Vector-bound kernel can use (the tuner's vector
    spaces seed their search with both)."""
    out: dict[int, TileShape] = {}
    for copies in (2, 1):
        tiles = _tiles(algo, target, copies)
        if tiles:
            out[copies] = tiles[0]
    return out


def _buffered_tiles(algo: Algorithm, target: Target) -> Iterator[tuple[int, TileShape]]:
    """(copies, tile) of both bufferings, double first, but single first when double
    buffering leaves one row per tile and one copy fits two or more: a one-row tile pays the
    row statistics' chain (its reductions, broadcasts and barriers) row by row, while with
    one copy the next tile's load still overlaps all but the cast that reads its input first
    (softmax 4096 x 8192: 84.8 us modelled in double-buffered rows, 74.4 us in single-buffered
    pairs; 8192 x 8192: 158.1 -> 137.2 us; bias add 4096 x 11008 in 3 rows: 75.0 -> 73.7 us).
    A piece of a row never outranks whole rows of either buffering: its tile loop goes over
    the columns (a few cores) and each piece still reduces whole rows. Lazy: the
    single-buffered tiles are otherwise sized only when the double-buffered whole rows are
    exhausted (``schedule_for`` takes the first candidate that fits, usually the first)."""
    out = root_output(algo)
    n = int(out.shape[-1])
    rows = len(out.shape) > 1
    double = _tiles(algo, target, 2)
    order: list[tuple[int, list[TileShape] | None]] = [(2, double), (1, None)]
    if rows and double and double[0].cols == n and double[0].rows == 1:
        single = _tiles(algo, target, 1)
        if single and single[0].cols == n and single[0].rows > 1:
            order = [(1, single), (2, double)]
    pieces: list[tuple[int, TileShape]] = []
    for copies, tiles in order:
        for t in tiles if tiles is not None else _tiles(algo, target, copies):
            if rows and t.cols < n:
                pieces.append((copies, t))
            else:
                yield copies, t
    yield from pieces


def _half_rows(algo: Algorithm, target: Target) -> list[TileShape]:
    """Tiles of half rows, double buffered, the inputs the same for every row (``bias[j]``)
    loaded whole once per core, for a 2-D output that nothing reduces whose double-buffered
    whole rows leave at most two rows per tile: as many bytes per tile as single-buffered
    whole rows, and the loads overlap the work (modelled, bias add: 4096 x 11008 73.7 -> 71.0
    us, 1024 x 16384 35.4 -> 34.3, 2048 x 13824 51.5 -> 49.9, 4096 x 8192 55.9 -> 55.7;
    4096 x 4096 fits five whole rows twice and keeps them). Only with 16 rows per vector
    core or more: with fewer, the tiles' extra DMA heads outweigh the overlap (bias add of
    3 to 319 rows of 7 700 to 13 500 columns: up to 5.7% slower; 1287 x 11781 6.4% faster)."""
    out, lead = root_output(algo), _lead(algo)
    if len(out.shape) < 2 or math.prod(lead) < 16 * target.num_aiv or any(
            reduces(st) for st in algo.stages):
        return []
    n = int(out.shape[-1])
    usable = target.scope(Scope.UB).usable
    if tile_bytes(algo, TileShape(_box_rows(lead, 3), n), 2, target) <= usable:
        return []
    gran = granule(algo, target)
    w = -(-n // 2 // gran) * gran

    def fits(rows: int) -> bool:
        return free_once_bytes(algo, TileShape(_box_rows(lead, rows), w), 2, target) <= usable

    rows = _box_rows(lead, largest(fits, 1, math.prod(lead)))
    return [TileShape(rows, w)] if w < n and rows >= 2 and fits(rows) else []


def _lead(algo: Algorithm) -> tuple[int, ...]:
    """The output's sizes along every axis but the last (its rows, flattened)."""
    return tuple(int(x) for x in root_output(algo).shape[:-1])


def _tiles(algo: Algorithm, target: Target, copies: int) -> list[TileShape]:
    """Tile shapes that fit UB with ``copies`` copies of the inputs and the output, the best
    first, then up to FALLBACKS smaller ones. A tile's rows are flattened over the leading
    axes and must make a box (``row_extents``): whole inner axes times part of one axis, so a
    rank-3 output whose middle axis is too long for one step of the first is tiled along it."""
    usable = target.scope(Scope.UB).usable
    lead = _lead(algo)
    n = int(root_output(algo).shape[-1])
    total = math.prod(lead)
    one_d = len(root_output(algo).shape) == 1
    gran = granule(algo, target)

    def fits(rows: int, cols: int) -> bool:  # monotone in rows: sized as the box below
        return tile_bytes(algo, TileShape(_box_rows(lead, rows), cols), copies,
                          target) <= usable

    if one_d:  # whole 256-byte repeats where one fits: a 1-D elementwise op's full rate
        rep = max(gran, target.repeat_bytes // max(t.dtype.bytes for t in algo.tensors))
        # a row reduction into a 1-D output reads whole rows per element (a row max of
        # 999 x 1000 float16: 128 elements read 250 KB): then 32-byte steps, or single
        # elements (a float32 row sum of 4096-wide bfloat16 rows: 16 rows need 430 KB)
        gran = rep if fits(1, min(rep, n)) else gran if fits(1, min(gran, n)) else 1

    def count(t: TileShape) -> int:
        ext = row_extents(lead, t.rows)
        assert ext is not None
        return math.prod(-(-a // e) for a, e in zip(lead, ext)) * -(-n // t.cols)

    if fits(1, n):
        cols = n
        hi = largest(lambda r: fits(r, n), 1, total)
        heights = [r for r in range(hi, 0, -1) if row_extents(lead, r) is not None]
    else:
        widest = largest(lambda c: fits(1, c * gran), 1, max(1, n // gran)) * gran
        cols, heights = widest, [1]
        if one_d:  # a 1-D output: the width plays the height's part
            return _ranked([TileShape(1, c * gran) for c in range(widest // gran, 0, -1)],
                           algo, target, copies, lambda t: t.cols, count)
        # one whole row over the estimate: still offered first (the planner's in-place reuse
        # often fits it, and a column split cannot shrink a row reduction's tiles)
        whole = _ranked([TileShape(1, n)], algo, target, copies, lambda t: t.rows, count)
        # then the widest row piece the estimate fits, and narrower ones in case the planner
        # needs more than the estimate (it can, by up to ~20%): pieces that divide the row
        # first (no tail version, whose own buffers would double the row-wide temporaries),
        # unless they give the busiest core over DIVIDING_SLACK times the work of the widest
        # cut evenly (bias add 63 x 33392 = 16 x 2087: 16-column pieces modelled 647.1 us,
        # the widest cut evenly 15.6 us)
        heads = _head_elements(algo, target)

        def work(w: int) -> float:
            return _busiest_work(count(TileShape(1, w)), w, heads, target)

        most = DIVIDING_SLACK * work(_even_cut(n, widest, gran))
        even = [w for w in range(widest // gran * gran, 0, -gran)
                if n % w == 0 and work(w) <= most][:FALLBACKS]
        widths = [widest] + even + sorted({max(gran, widest * f // FALLBACKS // gran * gran)
                                           for f in range(FALLBACKS, 0, -1)}, reverse=True)
        # (single-buffered only; ``default_schedules`` ranks whole rows of either buffering
        # before any row piece)
        widths = list(dict.fromkeys(widths)) if copies == 1 else [widest] + even[:1]
        # each as the even cut of the row into as many pieces: a fused piece loop numbers a
        # row's pieces one after the other, so with a row in p pieces and a core count that p
        # divides each core runs the same piece of every row it gets, and a narrow tail piece
        # leaves its cores idle (LayerNorm 4451 x 15771 on 48 cores: pieces 11696 + 4075,
        # 890.9 us modelled; 7888 + 7883, 596.8 us)
        widths = list(dict.fromkeys(_even_cut(n, w, gran) for w in widths))
        # pieces that divide the row first: no tail version (layernorm 1024x16384: 4096-wide
        # pieces model 2276 us and compile in 0.37 s, the widest, 7024, 2523 us and 0.97 s)
        widths = [w for w in widths if n % w == 0] + [w for w in widths if n % w]
        return whole + [t for w in widths
                        for t in _ranked([TileShape(1, w)], algo, target, copies,
                                         lambda t: t.rows, count)]
    # heights at which the row reductions still halve pairwise first (the faster path)
    fast = [r for r in heights if reductions_halve(algo, TileShape(r, cols), target)]
    slow = [r for r in heights if r not in fast]
    return [t for hs in (fast, slow) for t in _ranked([TileShape(r, cols) for r in hs], algo,
                                                         target, copies, lambda t: t.rows, count)]


def _even_cut(n: int, width: int, gran: int) -> int:
    """The narrowest width, in whole ``gran`` steps and at most ``width``, that cuts ``n``
    into as many pieces as ``width`` does: the last piece is short by less than a step per
    other piece (35738 in three: 11920, 11920, 11898)."""
    pieces = -(-n // width)
    piece = -(-n // pieces)
    return min(width, -(-piece // gran) * gran)


def _box_rows(lead: tuple[int, ...], rows: int) -> int:
    """The most rows, at most ``rows``, that make a box over the leading axes (the tile
    height search bisects over every count: 6144 rows over (3, 4096) make none)."""
    while row_extents(lead, rows) is None:
        rows -= 1
    return rows


def _ranked(tiles: list[TileShape], algo: Algorithm, target: Target, copies: int,
            size: Callable[[TileShape], int], count: Callable[[TileShape], int]
            ) -> list[TileShape]:
    """The tile that gives the busiest core the least work first (its ``count`` tiles times
    the tile plus the per-tile DMA heads, in tile units; ties: the larger tile), then smaller
    tiles in decreasing size; double buffering needs more tiles than cores."""
    per_unit = tiles[0].rows * tiles[0].cols / size(tiles[0]) if tiles else 1.0
    heads = _head_elements(algo, target) / per_unit

    def busiest(t: TileShape) -> tuple[float, int]:
        return _busiest_work(count(t), size(t), heads, target), -size(t)

    if copies > 1:
        tiles = [t for t in tiles if count(t) > target.num_aiv]
    if not tiles:
        return []
    best = min(tiles, key=busiest)
    rest = [t for t in tiles if size(t) < size(best)]
    step = max(1, len(rest) // FALLBACKS)
    return [best] + rest[::step][:FALLBACKS]


def _busiest_work(tiles: int, size: float, heads: float, target: Target) -> float:
    """The busiest core's work, in tile units: its share of ``tiles`` over min(tiles, Vector
    cores), each ``size`` plus the fixed DMA cost ``heads``."""
    return -(-tiles // min(tiles, target.num_aiv)) * (size + heads)


def _head_elements(algo: Algorithm, target: Target) -> float:
    """The fixed DMA cost of one tile (one GM -> UB head per input, one UB -> GM head), in
    output elements streamed meanwhile at a core's share of the HBM bandwidth."""
    c = target.costs
    if c is None:
        return 0.0
    io_bytes = sum(t.dtype.bytes for t in algo.inputs) + sum(o.dtype.bytes for o in algo.outputs)
    share = c.hbm_bytes_per_s / target.clock_hz / target.num_aiv  # bytes per cycle
    cycles = c.head_gm_ub * len(algo.inputs) + c.head_ub_gm
    return cycles * share / io_bytes


def _rows_outer_pieces(algo: Algorithm, target: Target) -> list[TileShape]:
    """Pieces of a row too wide for one tile, under a bound loop of single rows whose
    per-row stages (statistics, and the row-wide stages they read) are computed once per row
    (``_candidate(rows_outer=True)``): offered when every core gets at least two rows, widest
    first, the widths that divide the row and whose row-level buffers the UB can hold at all.

    Against pieces fused under the rows (each reducing its whole row again), modelled with the
    first that fits: LayerNorm 4096 x 12288 259.0 -> 195.4 us, 128 x 12288 19.1 -> 18.2 us;
    64 x 12288 (some cores one row, some two) 14.7 -> 16.1 us, so fewer rows keep the fused
    pieces. (Whole rows that fit stay first: LayerNorm 4096 x 10240's, single-buffered, model
    230.2 us against 145.4 us so, but RMSNorm 1024 x 16384's 61.4 us against 97.7.)"""
    rows = math.prod(_lead(algo))
    if rows < 2 * target.num_aiv:
        return []
    out = root_output(algo)
    n = int(out.shape[-1])
    gran = granule(algo, target)
    usable = target.scope(Scope.UB).usable
    # what stays in UB across a row's pieces: the inputs loaded once, one row of every other
    # input, one row of each row-wide stage computed per row and one of each row reduction
    # of a computed value (``sum(d * d)``), less the largest of those (the planner may put one
    # in place of another): a lower bound of the planner's peak (LayerNorm 16384 wide: 224 KB
    # of 184 KB usable, its three failing candidates cost 0.1 s of compile time)
    deps = input_deps(algo, target)
    last = len(out.shape) - 1
    held = sum(n * t.dtype.bytes for t in algo.inputs if last in deps.get(t, ()))
    names = computed_per_row(algo)
    per_row = [st for st in algo.stages if st.name in names]
    wide = sorted([n * st.dtype.bytes for st in per_row if len(st.shape) == len(out.shape)]
                  + [n * r.dtype.bytes for st in per_row for r in walk(st.op.body)
                     if isinstance(r, Reduce) and not isinstance(r.body, Load)])
    if held + sum(wide[:-1]) > usable:
        return []
    widths = [w for w in range(n // 2 // gran * gran, gran - 1, -gran) if n % w == 0]
    return [TileShape(1, w) for w in widths[:3]]


def _candidate(algo: Algorithm, target: Target, tile: TileShape, copies: int,
               hoist: bool = True, rows_outer: bool = False, chunk: int | None = None,
               load_free: bool = False, staged: bool = False) -> Schedule:
    """The default schedule of one tile shape (see the module docstring). ``rows_outer``: the
    pieces of each row stay under the bound row loop (not fused with it), the per-row stages
    are computed at the row loop and the inputs of no row axis are loaded once. ``chunk``: only
    the row statistics (``schedule.chunks.stat_rank``) are computed, per row or per tile of
    an output of them, each reduction, the output's own too, in chunks of that width; the
    row-wide stages are inlined, and under ``rows_outer`` the inputs that are the same for
    every row (``gamma[j]``) are loaded once (``load_free``) or their pieces stay in one
    copy; ``staged`` (with ``rows_outer``): the other inputs' rows are loaded into UB once per
    row, in one copy (``cache_read(..., at=(output, row loop))``), which its chunks and pieces
    read."""
    out = root_output(algo)
    s = Schedule(algo, target=target)
    assert out.op is not None
    axes = [a.name for a in out.op.axes]
    lead = _lead(algo)
    if tile.cols < int(out.shape[-1]):
        s = s.split(out.name, axes[-1], tile.cols)
    ext = row_extents(lead, tile.rows)
    assert ext is not None
    before = s.loop_names(out.name)
    for a, e, size in zip(axes, ext, lead):
        if e < size:
            s = s.split(out.name, a, e)
    # the leading axes' tile loops as one loop: any of its tiles can go to any core, and a
    # tail tile is a branch of that loop's body, whose buffers reuse the full tile's UB; the
    # pieces of a row too wide for one tile join them, under the rows (bound alone, the
    # column loop kept LayerNorm 64 x 16384 on 4 cores: 174711 modelled cycles, 21925 so)
    row_loops = [n for n in s.loop_names(out.name) if n not in before]
    if row_loops and before:
        s = s.reorder(out.name, *row_loops, *before)
        if not rows_outer:
            row_loops += before
    fused = row_loops[0] if row_loops else ""
    for inner in row_loops[1:]:
        s = s.fuse(out.name, fused, inner)
        fused = f"{fused}_{inner}"
    loops = s.loop_names(out.name)
    tiles = 1
    if loops:
        nest = s.loop_nest(out.name)
        for a in nest.loops[0][1]:
            tiles *= -(-int(out.shape[axes.index(a)]) // nest.factors[a])
        cores = min(tiles, target.num_aiv)
        if cores > 1:
            s = s.bind(out.name, loops[0], cores)
        tiles = -(-tiles // max(cores, 1))
    per_tile = computed_per_row(algo) if rows_outer else computed_per_tile(algo)
    if chunk is not None:
        per_tile = frozenset(st.name for st in algo.stages if st.name in per_tile
                             and len(st.shape) == stat_rank(algo))
    at = loops[0] if rows_outer else s.legal_compute_at(out.name)[0]

    def chunked(s: Schedule, st: Tensor) -> Schedule:
        kv = chunk_var(s, st.name) if chunk is not None else None
        return s if kv is None else s.split(st.name, kv.name, min(chunk, int(kv.extent)))

    for st in algo.stages:
        if st is out:
            s = chunked(s, st)
        elif st in algo.outputs:
            continue  # the outputs the lowering computes in the root's tile
        elif st.name in per_tile:
            s = chunked(s.compute_at(st.name, out.name, at), st)
        else:
            s = s.compute_inline(st.name)
    if chunk is not None:  # a softmax's max and sum: one pass over the chunks, not two
        s = join_online(s)
    free = row_free(algo, target)  # gamma[j]: the same for every row
    single: frozenset[str] = frozenset()
    if load_free:
        fixed: frozenset[str] = free
    elif chunk is not None:
        fixed = frozenset()
        # their pieces in one copy: each is read by its piece's vector work alone, and two
        # copies take the UB of wider pieces (RMSNorm 4096 x 32 000 in 8 000-column pieces:
        # gamma's pieces double buffered 562.1 us modelled, in one copy 511.7 us)
        single = free if rows_outer else frozenset()
    elif rows_outer:  # every row reads them whole, each piece its part
        fixed = free
    else:
        fixed = invariant_inputs(algo, tile, target) if loops else frozenset()
    for name in sorted(fixed):
        s = s.load_once(name, hoist=hoist)
    rows: frozenset[str] = frozenset()
    if staged:
        rows = frozenset(t.name for t in algo.inputs if t.name not in free)
        for name in sorted(rows):
            s = s.cache_read(name, "UB", at=(out.name, loops[0]), copies=1)
    # the chunks of an output of row statistics alternate between two copies within one tile
    # too (row sum of 8 x 100 000 float32 on 8 cores: modelled 22.5 -> 20.8 us); a row's
    # pieces are not worth the narrower pieces two copies need (RMSNorm 4 x 70 000: 7 008
    # columns, one copy, 20.1 us; 2 800, two copies, 24.1 us)
    if copies > 1 and (tiles > 1 or chunk is not None and stat_rank(algo) == len(out.shape)):
        for t in algo.inputs:
            if t.name not in fixed | single | rows:
                s = s.buffer(t.name, copies)
        for o in algo.outputs:
            s = s.buffer(o.name, copies)
    return s

