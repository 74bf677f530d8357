"""Default candidates for reductions read in chunks (``schedule/chunks.py``): rows no tile holds
whole (their row-free inputs loaded once or per piece), outputs that are row statistics, and
column reductions and statistics.

``schedule/default.py`` offers them: column reductions and statistics first (their tiles want
many columns, which the row-oriented candidates do not give), the row chunks last.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ascendsched.algo.algorithm import Algorithm, root_output
from ascendsched.algo.expr import Reduce
from ascendsched.algo.gemm_epilogue import reduces, walk
from ascendsched.schedule.chunks import (
    chunk_split,
    chunk_var,
    chunkable,
    column_reduction,
    column_stats,
    dividing_width,
    stat_rank,
)
from ascendsched.schedule.online import online_of
from ascendsched.schedule.schedule import Schedule
from ascendsched.schedule.ub_budget import TileShape, granule, input_deps, tile_bytes
from ascendsched.target import Target
from ascendsched.target.model import Scope


def chunked_pieces(algo: Algorithm, target: Target) -> list[TileShape]:
    """Pieces of rows whose statistics are reduced in chunks of the piece's width
    (``_candidate(chunk=...)``, ``schedule/chunks.py``): the last resort for rows no tile
    holds whole (a log-softmax over a 32 000-word vocabulary), each reduction reading the row
    again from GM. Offered when every reduction is computed once per row and reads inputs
    alone along its axis once the row-wide stages are inlined; the widest piece whose tile
    the UB estimate fits (its per-tile stages are then one piece wide, as the chunks are),
    then 3/4, 1/2 and 1/4 of it, each after the widest piece at least half as wide that
    divides the row."""
    out = root_output(algo)
    if stat_rank(algo) == len(out.shape) or not chunkable(algo):
        return []
    n = int(out.shape[-1])
    gran = granule(algo, target)
    widest = _widest(algo, target, once=False)
    # narrower ones too, for when the planner needs more than the estimate (it can: LayerNorm
    # 300 x 50 000 fits at half the estimate's width); before each, the widest piece at least
    # half as wide that divides the row. A tail piece and chunk cost a second version of
    # every statement, and the tail piece's loads wait for the piece loop's work: log-softmax
    # 4096 x 32 000 models 512.1 us in 8 000-column pieces, 663.4 us in the widest that fit
    # (8 800; the estimate's 11 744 does not).
    # (Not always: LayerNorm 300 x 50 000 models 189.2 us in 2 000-column pieces and 136.6 us
    # in the widest that fit, 4 656, which lower in about 0.55 s against 0.21 s.)
    return _quarters(n, widest, gran, (4, 3, 2, 1))


def row_reads(s: Schedule) -> int:
    """How often a schedule of chunked pieces (``chunked_pieces``) reads each row from GM:
    once per pass of its chunked statistics (a softmax's max and sum in one ``online`` pass)
    and once for its pieces. Reading it three times or more, the row staged in UB once per
    row (one copy: the next row's load then waits for the row's last piece) is offered first,
    modelled (``benchmarks/staging.py``, 8 000-column pieces): LayerNorm (mean, variance,
    pieces) 64 / 1 024 / 16 384 x 32 000: 30.3 -> 27.5, 233.3 -> 201.9, 3481.6 -> 2993.1 us.
    Read twice, the lost overlap costs more than the read saves: softmax 4096 x 32 000 512.2
    -> 617.0 us. So does a core's only row, whose load then precedes all its work: LayerNorm
    4 x 32 000 16.4 -> 16.7 us, so staging is offered when some core runs two rows or more.
    The output's pieces in two copies mostly leave too little UB for the planner to honour
    them beside the row; in one copy: 64 / 1 024 / 16 384 x 32 000 27.8, 205.6, 3050.0 us
    (against the default's 30.5, 233.0, 3473.5 before staging)."""
    chunked = [st for st in s.algo.stages if chunk_split(s, st.name) is not None]
    return len(chunked) - len(online_of(s)) + 1


def once_pieces(algo: Algorithm, target: Target) -> list[TileShape]:
    """``chunked_pieces`` with the row-free inputs (``gamma[j]``) loaded whole once per core
    (``load_once``) instead of a piece per piece of every row: offered first when the
    estimate still fits pieces at least half as wide as without (the widest piece at least
    half as wide that divides the row, then the widest; with two rows per core or more, 3/4
    and 1/2 of the widest the same way after them). Loaded per piece, RMSNorm's gamma
    is as much traffic as its x: 4096 x 32 000 models 511.7 us in 8 000-column pieces,
    416.5 us in 6 400 with gamma loaded once. LayerNorm's gamma and beta over 32 000 columns
    take 125 KB, leaving 3 696-column pieces (the estimate's 9 360 without): 283.2 us in
    3 200 against 238.8 us, so not offered there."""
    out = root_output(algo)
    if not row_free(algo, target) or stat_rank(algo) == len(out.shape) or not chunkable(algo):
        return []
    n = int(out.shape[-1])
    gran = granule(algo, target)
    widest = _widest(algo, target, once=True)
    if not widest or 2 * widest < _widest(algo, target, once=False):
        return []
    # 3/4 and 1/2 of it too, for when the planner needs more than the estimate (RMSNorm
    # 2625 x 19 310: neither the estimate's 9 296 nor 6 960 fits; 4 640 with gamma loaded
    # once models 202.3 us, the pieces of 4 816 with a piece of gamma per piece that came
    # next without them 273.8 us), each after the widest piece at least half as wide that
    # divides the row; only with two rows per core or more: a core's first row waits for all
    # of gamma (RMSNorm 35 x 38 457: 16.5 -> 18.6 us; LayerNorm 61 x 21 428, gamma and beta:
    # 22.9 -> 24.0 us)
    several_rows = math.prod(int(x) for x in out.shape[:-1]) >= 2 * target.num_aiv
    return _quarters(n, widest, gran, (4, 3, 2) if several_rows else (4,))


def _quarters(n: int, widest: int, gran: int, quarters: tuple[int, ...]) -> list[TileShape]:
    """Pieces of ``quarters``/4 of ``widest`` (whole ``gran`` steps), each after the widest
    piece at least half as wide that divides the row ``n`` (no tail piece)."""
    widths: list[int] = []
    for w in dict.fromkeys(max(1, widest // gran * f // 4) * gran for f in quarters):
        d = dividing_width(n, w, gran)
        widths += ([d] if d else []) + [w]
    return [TileShape(1, w) for w in dict.fromkeys(widths)]


def _widest(algo: Algorithm, target: Target, *, once: bool) -> int:
    """The widest piece of a row (32-byte multiples, at most half the row) whose tile the UB
    estimate fits with x and the output in two copies and the row-free inputs' pieces in one
    (``once``: those inputs whole instead, loaded once); 0 when none fits (``once``)."""
    free = row_free(algo, target)
    n = int(root_output(algo).shape[-1])
    gran = granule(algo, target)
    usable = target.scope(Scope.UB).usable

    def fits(c: int) -> bool:
        tile = TileShape(1, c * gran)
        if once:
            return free_once_bytes(algo, tile, 2, target, hoist=False) <= usable
        return tile_bytes(algo, tile, 2, target, hoist=False, single=free) <= usable

    c = largest(fits, 1, max(1, n // 2 // gran))
    return c * gran if not once or fits(c) else 0


def free_once_bytes(algo: Algorithm, tile: TileShape, copies: int, target: Target, *,
                    hoist: bool = True) -> int:
    """``tile_bytes`` of ``tile`` with the row-free inputs (``row_free``: ``gamma[j]``) whole
    in UB, loaded once per core, instead of one copy of their part of the tile."""
    free = row_free(algo, target)
    n = int(root_output(algo).shape[-1])
    block = target.block_bytes

    def padded(w: int) -> int:  # the row-free inputs' bytes over w columns
        return sum(-(-w * t.dtype.bytes // block) * block for t in algo.inputs
                   if t.name in free)

    return (tile_bytes(algo, tile, copies, target, hoist=hoist, single=free)
            - padded(tile.cols) + padded(n))


def row_free(algo: Algorithm, target: Target) -> frozenset[str]:
    """The inputs whose values are the same for every row of the output (``gamma[j]``)."""
    lead = frozenset(range(len(root_output(algo).shape) - 1))
    return frozenset(t.name for t, dep in input_deps(algo, target).items() if not dep & lead)


def chunked_rows(algo: Algorithm, target: Target) -> list[tuple[TileShape, int]]:
    """(tile, chunk width) of an output of row statistics (``lse[i]``, ``y[p, i] = sum_k
    x[p, i, k]``) whose rows no tile holds whole: tiles of one 32-byte block of outputs along
    the last axis (fewer when the cores would go without) and single rows of the others, every
    reduction (the output's own too) read in chunks of 2048 columns or, should the planner not
    fit them, 1024, 512 or 256 (each candidate a build and a plan)."""
    out = root_output(algo)
    if stat_rank(algo) != len(out.shape) or not chunkable(algo):
        return []
    rows, last = math.prod(int(d) for d in out.shape), int(out.shape[-1])
    block = target.elems_per_block(out.dtype.bytes)
    # a 1-D tile may be single elements; a UB row of a 2-D one is whole or 32-byte blocks
    per_tile = min(block, -(-rows // target.num_aiv)) if len(out.shape) == 1 else \
        min(block, last)
    size = min(int(v.extent) for st in algo.stages for e in walk(st.op.body)  # type: ignore
               if isinstance(e, Reduce) for v in e.axes)
    gran = granule(algo, target)
    return [(TileShape(1, per_tile), w) for w in (2048, 1024, 512, 256)
            if w % gran == 0 and w < size]


def column_tiles(algo: Algorithm, target: Target) -> list[tuple[TileShape, int | None]]:
    """(tile, rows per chunk) of a column reduction (``schedule.chunks.column_reduction``):
    tiles as wide as spreading the columns over the vector cores allows (32-byte multiples),
    one output row each, the reduced rows read in chunks of as many as two copies of the
    input and the temporaries of their float32 sum fit (estimated at 10 B per element read:
    2 x 2 B of float16 input, 4 B cast, 2 B for the first pairwise level), a power of two,
    then half and a quarter of that. Narrow tiles read each row as a DMA of a few blocks:
    a 4096 x 4096 float16 column sum in tiles of 8 columns and chunks of 1024 rows models
    108.8 us, in 96-column tiles (43 of them) and chunks of 128 rows 33.0 us (64 rows: 36.5;
    256 do not fit)."""
    if not column_reduction(algo):
        return []
    out = root_output(algo)
    n = int(out.shape[-1])
    rows = math.prod(int(d) for d in out.shape[:-1])
    width = strip_width(algo, target, n, rows)
    kv = chunk_var(Schedule(algo, target=target), out.name)
    size = int(kv.extent) if kv is not None else 1
    chunks = _heights(target, width, 10)
    return [(TileShape(1, width), c if c < size else None) for c in dict.fromkeys(
        min(c, size) for c in chunks)]


def largest(ok: Callable[[int], bool], lo: int, hi: int) -> int:
    """The largest x in [lo, hi] with ok(x), ok being monotone (lo when none)."""
    if ok(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def column_pieces(algo: Algorithm, target: Target) -> list[Schedule]:
    """Schedules of a 2-D output whose reductions are column statistics (``column_stats``:
    ``z[i, j] = x[i, j] - mean[j]``): strips of columns as wide as spreading them over the
    vector cores allows, bound; under each strip, the statistics computed once, each over
    chunks of rows, then the strip's pieces of as many rows; double buffered. Chunk heights
    from an estimate of 24 B per element of a piece (two copies of a float32 input and output
    and a float32 temporary; the planner has the last word), a power of two, then half and
    a quarter of it. Without them a column statistic was computed per row tile, over every
    row again (4096 x 1024: 4096 times over)."""
    if not column_stats(algo):
        return []
    out = root_output(algo)
    assert out.op is not None
    m, n = (int(d) for d in out.shape)
    i, j = (a.name for a in out.op.axes)
    width = strip_width(algo, target, n, 1)
    strips = -(-n // width)
    out_sched = []
    heights = [min(c, m) for c in _heights(target, width, 24)]
    if width == n:  # one strip: statistics before any row loop need all rows in UB, else
        heights = [m, *heights]  # they are computed again per piece of rows (few columns)
    for rows in dict.fromkeys(heights):
        s = Schedule(algo, target=target)
        if width < n:
            s = s.split(out.name, j, width)
        if rows < m:
            s = s.split(out.name, i, rows)
        if len(s.loop_names(out.name)) == 2:
            s = s.reorder(out.name, f"{j}_o", f"{i}_o")
        if width < n:
            s = s.bind(out.name, f"{j}_o", min(strips, target.num_aiv))
        at = f"{j}_o" if width < n else "root" if rows >= m else f"{i}_o"
        for st in algo.stages:
            if st is out or st in algo.outputs:
                continue
            if reduces(st):
                s = s.compute_at(st.name, out.name, at)
                kv = chunk_var(s, st.name)
                if kv is not None and rows < int(kv.extent):
                    s = s.split(st.name, kv.name, rows)
            elif not reduces(st):
                s = s.compute_inline(st.name)
        for t in (*algo.inputs, out):
            s = s.buffer(t.name, 2)
        out_sched.append(s)
    return out_sched


def strip_width(algo: Algorithm, target: Target, n: int, rows: int,
                cores: int | None = None) -> int:
    """Columns per tile when ``rows`` rows of ``n`` columns spread over ``cores`` cores (the
    vector cores): the share of one core, rounded up to 32 bytes of the narrowest dtype (at
    least that), at most ``n``."""
    gran = granule(algo, target)
    per_core = -(-n * rows // (cores or target.num_aiv))
    return min(n, max(gran, -(-min(per_core, n) // gran) * gran))


def _heights(target: Target, width: int, per_elem: int) -> list[int]:
    """Rows per chunk (or piece) of ``width`` columns: the largest power of two (the
    pairwise levels halve it) whose chunk fits UB at ``per_elem`` bytes per element, then
    half and a quarter of it, none below 8."""
    most = target.scope(Scope.UB).usable // (per_elem * width)
    top = 1 << max(0, most.bit_length() - 1)
    return [c for c in (top, top // 2, top // 4) if c >= 8]
