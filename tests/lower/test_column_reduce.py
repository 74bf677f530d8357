"""Column reductions on the Vector cores (``sum_k x[k, j]``: the reduce axis subscripted before
the output's): rows combined pairwise, ``lower/select_reduce.py`` ``emit_column_reduce``;
their default schedules (``schedule/default_chunked.py``), checked against numpy and the race
checker, with odd row counts, tail chunks, tail tiles and uneven work per core."""

from __future__ import annotations

import pytest

from ascendsched.algo.algorithm import algorithm
from ascendsched.algo.ops import reduce_max, reduce_min, reduce_sum
from ascendsched.algo.tensor import compute, placeholder, reduce_axis
from ascendsched.api.check import check
from ascendsched.lower.ir import For, iter_instrs
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import Schedule
from ascendsched.schedule.chunks import chunk_split, chunkable, column_reduction, column_stats

OPS = {"sum": reduce_sum, "max": reduce_max, "min": reduce_min}


def _colred(m: int, n: int, op: str = "sum", dtype: str = "float16"):  # noqa: ANN202
    x = placeholder("x", (m, n), dtype)
    k = reduce_axis(m, "k")
    return algorithm("colred", compute("y", (n,), lambda j: OPS[op](
        x[k, j].astype("float32"), k)))


def _centered(m: int, n: int):  # noqa: ANN202
    """z = x - mean over the rows of each column (a batch norm's centring)."""
    x = placeholder("x", (m, n), "float32")
    k = reduce_axis(m, "k")
    mean = compute("mean", (n,), lambda j: reduce_sum(x[k, j], k) * (1.0 / m))
    return algorithm("centered", compute("z", (m, n), lambda i, j: x[i, j] - mean[j]))


def _ok(sched: Schedule) -> None:
    verdicts = check(sched, cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


@pytest.mark.parametrize("m, n, op, dtype", [
    (1, 100, "sum", "float16"),     # one row: a copy
    (2, 64, "max", "float32"),      # one level
    (3, 64, "min", "float16"),      # an odd last row folded in
    (67, 300, "sum", "float16"),    # odd counts at several levels, a 44-column tail chunk
    (300, 7, "max", "float32"),     # columns narrower than a block
])
def test_default_column_reductions_equal_numpy(m, n, op, dtype) -> None:
    s = schedule_for(_colred(m, n, op, dtype))
    assert column_reduction(s.algo) and not chunkable(s.algo)
    _ok(s)


def test_chunks_of_rows_with_a_tail_chunk_and_a_tail_tile_on_uneven_cores() -> None:
    s = (Schedule(_colred(1000, 333)).split("y", "j", 48).bind("y", "j_o", 3)
         .split("y", "k", 96).buffer("x", 2).buffer("y", 2))
    _ok(s)


def test_rows_combine_in_log2_levels_whatever_the_width() -> None:
    """64 rows: 6 pairwise levels, each one instruction over every kept row (per 64-lane
    column chunk), never a loop over the rows."""
    for n in (64, 4096):
        k = lower(Schedule(_colred(64, n, dtype="float32")).split("y", "j", 64))
        adds = [i for p in k.programs for i, around in iter_instrs(p.body)
                if i.op == "vec_binary" and "rows pairwise" in i.comment]
        assert len(adds) == 6, [i.comment for i in adds]
        assert not any(isinstance(n_, For) and "rows" in n_.comment
                       for p in k.programs for _, around in iter_instrs(p.body) for n_ in around)


def test_default_tiles_spread_the_columns_and_read_rows_in_chunks() -> None:
    """4096 x 4096: 96-column tiles over 43 cores, 128 rows per chunk (8-column tiles of 1024
    rows read each row as a 16-byte DMA: 108.8 us modelled against 33.0)."""
    s = schedule_for(_colred(4096, 4096))
    assert s.loop_nest("y").factors["j"] == 96 and chunk_split(s, "y").factor == 128
    _ok(s)


def test_a_middle_axis_sum_of_a_3d_input() -> None:
    x = placeholder("x", (2, 500, 300), "float32")
    k = reduce_axis(500, "k")
    s = schedule_for(algorithm("msum", compute("y", (2, 300), lambda p, j: reduce_sum(
        x[p, k, j], k))))
    _ok(s)


def test_column_statistics_are_computed_once_per_strip_of_columns() -> None:
    """z = x - mean[j]: the mean of each strip of columns is computed once, over chunks of
    rows, before the strip's rows (it was computed again for every row tile)."""
    s = schedule_for(_centered(4096, 1024))
    assert column_stats(s.algo) and not chunkable(s.algo)
    assert s.placement("mean").loop == "j_o" and chunk_split(s, "mean") is not None
    _ok(s)
    _ok(schedule_for(_centered(100, 70)))
    for m in (300, 5000):  # 8 columns, one strip: the means before the rows, if they fit
        s = schedule_for(_centered(m, 8))
        assert s.placement("mean").loop == ("root" if m == 300 else "i_o")
        _ok(s)


@pytest.mark.slow  # g++ build and run
def test_a_bias_gradient_passes_every_rung() -> None:
    """db[j] = sum_i dy[i, j] (777 x 4096, float16): the whole ladder, emitted C++ included."""
    dy = placeholder("dy", (777, 4096), "float16")
    k = reduce_axis(777, "k")
    s = schedule_for(algorithm("bias_grad", compute("db", (4096,), lambda j: reduce_sum(
        dy[k, j].astype("float32"), k))))
    verdicts = check(s)
    assert "C++ run == numpy (db)" in [v.check for v in verdicts]
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


def test_every_sync_of_a_chunked_column_reduction_is_needed() -> None:
    """Drop any sync (double-buffered row chunks, the pairwise levels, a tail chunk, a tail
    tile): the checker reports a race or a flag error."""
    from ascendsched.api.sync_minimality import sync_minimality

    report = sync_minimality(Schedule(_colred(100, 70)).split("y", "j", 32).bind("y", "j_o", 2)
                             .split("y", "k", 24).buffer("x", 2).buffer("y", 2))
    assert report.needed > 10 and report.removable == (), str(report)
