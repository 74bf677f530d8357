"""Chunked reductions (``split`` of a Vector stage's reduce axis): rows read in chunks, each
reduced and combined into a running result, checked against numpy and the race checker with
a tail chunk, a tail tile and uneven work per core; the chunk loop's shape in the IR; the
errors of schedules that cannot read a reduction in chunks."""

from __future__ import annotations

import pytest

from ascendsched.algo import library as L
from ascendsched.algo.algorithm import algorithm
from ascendsched.algo.ops import exp, log, reduce_max, reduce_sum, rsqrt
from ascendsched.algo.tensor import compute, placeholder, reduce_axis
from ascendsched.api.check import check
from ascendsched.errors import ScheduleError
from ascendsched.lower.ir import For, iter_instrs
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule


def _softmax(rows: int, cols: int, piece: int, chunk: int, cores: int) -> Schedule:
    """Rows bound to cores, each cut into pieces; the row max and the sum of exponentials
    computed once per row, each over chunks of ``chunk`` columns."""
    return (Schedule(L.softmax(rows, cols)).compute_inline("xf").compute_inline("e")
            .split("y", "i", 1).split("y", "j", piece).bind("y", "i_o", cores)
            .compute_at("mx", "y", "i_o").split("mx", "k", chunk)
            .compute_at("s", "y", "i_o").split("s", "k2", chunk)
            .buffer("x", 2).buffer("y", 2))


def _rmsnorm(rows: int, cols: int, chunk: int) -> Schedule:
    """The reciprocal RMS as one stage, rsqrt(sum(x^2) / n + eps): the finished chunked sum
    feeds the rest of the stage's body."""
    x = placeholder("x", (rows, cols), "float16")
    k = reduce_axis(cols, "k")
    r = compute("r", (rows,), lambda i: rsqrt(reduce_sum(
        x[i, k].astype("float32") * x[i, k].astype("float32"), k) * (1.0 / cols) + 1e-6))
    y = compute("y", (rows, cols), lambda i, j: (x[i, j].astype("float32") * r[i]).astype(
        "float16"))
    return (Schedule(algorithm("rms", y)).split("y", "i", 2).split("y", "j", 512)
            .reorder("y", "i_o", "j_o").bind("y", "i_o", 3)
            .compute_at("r", "y", "i_o").split("r", "k", chunk).buffer("x", 2))


def _row_max(rows: int, cols: int, tile: int, chunk: int) -> Schedule:
    """A 1-D output that is the reduction itself: its tile of rows, each row in chunks."""
    x = placeholder("x", (rows, cols), "float32")
    k = reduce_axis(cols, "k")
    y = compute("y", (rows,), lambda i: reduce_max(x[i, k], k))
    return (Schedule(algorithm("row_max", y)).split("y", "i", tile).bind("y", "i_o", 2)
            .split("y", "k", chunk).buffer("x", 2))


@pytest.mark.parametrize("sched", [
    _softmax(5, 1000, 256, 256, 2),     # 3 whole chunks and a 232-column tail, a tail piece
    _softmax(7, 3000, 1024, 640, 3),    # chunks narrower than pieces, uneven rows per core
    _softmax(4, 512, 512, 512, 2),      # one chunk: no chunk loop
    _rmsnorm(9, 1500, 400),
    _row_max(21, 700, 8, 128),
], ids=["softmax-tails", "softmax-narrow", "softmax-one", "rms-body", "row-max-1d"])
def test_chunked_reductions_match_numpy_and_are_race_free(sched: Schedule) -> None:
    verdicts = check(sched, cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


def _loops(stmts, out: list) -> list:  # noqa: ANN001
    for s in stmts:
        if isinstance(s, For):
            out.append(s)
        if hasattr(s, "body"):
            _loops(s.body, out)
    return out


def test_chunk_loops_load_their_own_chunks_and_no_whole_row() -> None:
    """Each reduction has a chunk loop of 4 trips (1000 = 3 x 256 + a 232 tail, the tail a
    branch of the last trip) loading its chunk into its own double-buffered buffer, the copy
    alternating with the trip; no buffer holds a whole row."""
    k = lower(_softmax(5, 1000, 256, 256, 2))
    chunks = [f for f in _loops(k.programs[0].body, []) if "chunks of" in f.comment]
    assert [(f.comment.split(":")[0], f.extent) for f in chunks] == [
        ("chunks of k (split by 256)", 4), ("chunks of k2 (split by 256)", 4)]
    for f, buf in zip(chunks, ("x_ub_mx", "x_ub_s")):
        assert [b.comment for b in f.body if hasattr(b, "conds")] == [
            "a whole chunk", "the tail chunk"]
        loads = [i for i, _ in iter_instrs(f.body) if i.op == "copy_gm_ub"]
        assert [ld.writes[0].tensor for ld in loads] == [buf, buf]
        assert [ld.reads[0].dims[-1].extent for ld in loads] == [256, 232]
        assert {str(ld.writes[0].copy) for ld in loads} == {f"({f.var} % 2)"}
    bufs = {b.name: b for b in k.buffers}
    assert bufs["x_ub_mx"].copies == 2 and bufs["x_ub_mx"].elems == 256
    assert max(b.elems * b.dtype.bytes for b in k.buffers) < 1000 * 4


def test_chunk_loops_are_not_tile_loops() -> None:
    s = _softmax(5, 1000, 256, 256, 2)
    assert s.loop_names("y") == ["i_o", "j_o"]
    assert s.loop_names("mx") == [] and s.loop_names("s") == []
    assert [n for n, _ in _row_max(21, 700, 8, 128).loop_nest("y").loops] == ["i_o"]


def test_reading_a_computed_stage_along_the_chunked_axis_says_inline_it() -> None:
    s = (Schedule(L.softmax(5, 1000)).compute_inline("e")
         .split("y", "i", 1).split("y", "j", 256).bind("y", "i_o", 2)
         .compute_at("xf", "y", "i_o")
         .compute_at("mx", "y", "i_o").split("mx", "k", 256)
         .compute_at("s", "y", "i_o"))
    with pytest.raises(ScheduleError, match=r"split\('mx', 'k', 256\): the reduction reads "
                       r"stage 'xf' along 'k'.*compute_inline\('xf'\)"):
        lower(s)


def test_chunks_of_an_inlined_stage_are_not_dropped_silently() -> None:
    s = (_rmsnorm(9, 1500, 400).compute_inline("r"))
    with pytest.raises(ScheduleError, match=r"split\('r', 'k', 400\): 'r' is inlined into its "
                       r"consumers.*compute_at\('r', 'y', <tile loop>\)"):
        lower(s)


def test_load_once_and_chunks_of_one_input_conflict() -> None:
    x = placeholder("x", (8, 1024), "float32")
    w = placeholder("w", (1024,), "float32")
    k = reduce_axis(1024, "k")
    d = compute("d", (8,), lambda i: reduce_sum(x[i, k] * w[k], k))
    s = Schedule(algorithm("dot", d)).split("d", "i", 8).split("d", "k", 256).load_once("w")
    with pytest.raises(ScheduleError, match=r"load_once\('w'\) keeps 'w' whole in UB.*"
                       r"chunks of 256; drop one"):
        lower(s)


def test_chunk_wider_than_the_reduction_and_a_second_split_are_refused() -> None:
    s = Schedule(L.softmax(4, 512))
    with pytest.raises(ScheduleError, match=r"split\('mx', 'k', 1024\).*exceeds the axis size "
                       r"512"):
        s.split("mx", "k", 1024)
    s = s.split("mx", "k", 128).split("mx", "k_i", 64)
    with pytest.raises(ScheduleError, match=r"split\('mx', 'k_i', 64\).*its reduce axis 'k' "
                       r"once \(chunks\)"):
        lower(s)


def test_a_stage_of_two_reductions_over_the_axis_cannot_be_chunked() -> None:
    x = placeholder("x", (4, 512), "float32")
    k = reduce_axis(512, "k")
    y = compute("y", (4,), lambda i: reduce_max(exp(x[i, k]), k))
    s = Schedule(algorithm("m", y)).split("y", "k", 128)
    assert lower(s) is not None  # one reduction: fine
    y2 = compute("y2", (4,), lambda i: reduce_max(x[i, k], k) + reduce_sum(x[i, k], k))
    with pytest.raises(ScheduleError, match=r"split\('y2', 'k', 128\): 'y2' reduces over 'k' "
                       r"in 2 reductions.*each reduction as a stage of its own"):
        Schedule(algorithm("m2", y2)).split("y2", "k", 128)


def test_every_sync_of_a_chunked_kernel_is_needed() -> None:
    """Drop any sync of the chunk loops (double-buffered chunk loads, tail chunk, running
    results): the checker reports a race or a flag error."""
    from ascendsched.api.sync_minimality import sync_minimality

    report = sync_minimality(_softmax(5, 1000, 256, 256, 2))
    assert report.needed > 10 and report.removable == (), str(report)


def test_default_of_a_vocabulary_wide_logsumexp_reads_chunks_per_tile_of_rows() -> None:
    """lse[i] = max + log(sum exp(x - max)) over 32 000 columns, a 1-D output (a
    cross-entropy's normaliser): tiles of 8 rows, both statistics read in chunks, equal to
    numpy race-free."""
    from ascendsched.lower.schedule_for import schedule_for
    from ascendsched.schedule.chunks import chunk_split

    x = placeholder("x", (64, 32000), "float16")
    k, k2 = reduce_axis(32000, "k"), reduce_axis(32000, "k2")
    mx = compute("mx", (64,), lambda i: reduce_max(x[i, k].astype("float32"), k))
    sm = compute("s", (64,), lambda i: reduce_sum(exp(x[i, k2].astype("float32") - mx[i]), k2))
    lse = compute("lse", (64,), lambda i: mx[i] + log(sm[i]))
    s = schedule_for(algorithm("logsumexp", lse))
    assert s.loop_nest("lse").factors["i"] == 2  # 64 rows over 48 cores: 2 per tile
    assert chunk_split(s, "mx").factor == chunk_split(s, "s").factor == 2048
    verdicts = check(s, cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


def test_default_of_a_2d_output_that_is_a_reduction_reads_chunks() -> None:
    """y[p, i] = sum_k x[p, i, k]^2 (4 x 300 x 4096 float32): 8 rows of 4096 float32 (one
    32-byte block of outputs) with their squares do not fit UB; the default reads them in
    chunks (it had no default before), equal to numpy race-free."""
    from ascendsched.lower.schedule_for import schedule_for
    from ascendsched.schedule.chunks import chunk_split

    x = placeholder("x", (4, 300, 4096), "float32")
    k = reduce_axis(4096, "k")
    y = compute("y", (4, 300), lambda p, i: reduce_sum(x[p, i, k] * x[p, i, k], k))
    s = schedule_for(algorithm("bsum", y))
    assert chunk_split(s, "y").factor == 1024 and s.loop_nest("y").factors == {"p": 1, "i": 8}
    verdicts = check(s, cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


@pytest.mark.parametrize("lead, n, dtype", [
    ((3, 5), 70001, "float32"),  # statistics of rank 2: whole 5-element UB rows of outputs
    ((2, 3), 40000, "float32"),  # a last output axis shorter than a 32-byte block
    ((1,), 100003, "float16"),  # one row: one core
])
def test_defaults_of_wide_statistics_of_any_rank_equal_numpy(lead, n, dtype) -> None:
    from ascendsched.lower.schedule_for import schedule_for
    from ascendsched.schedule.chunks import chunk_split

    x = placeholder("x", (*lead, n), dtype)
    k, k2 = reduce_axis(n, "k"), reduce_axis(n, "k2")
    mx = compute("mx", lead, lambda *ix: reduce_max(x[(*ix, k)].astype("float32"), k))
    sm = compute("s", lead, lambda *ix: reduce_sum(exp(x[(*ix, k2)].astype("float32")
                                                       - mx[ix]), k2))
    s = schedule_for(algorithm("logsumexp", compute("lse", lead,
                                                    lambda *ix: mx[ix] + log(sm[ix]))))
    assert chunk_split(s, "mx") is not None and chunk_split(s, "s") is not None
    verdicts = check(s, cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


@pytest.mark.slow  # g++ build and run
def test_default_of_a_vocabulary_wide_softmax_passes_every_rung() -> None:
    """softmax 64 x 32 000 (a Llama-2 vocabulary): no tile holds a row; the default reads
    the row statistics in chunks, and the whole ladder passes (on its reduced instance)."""
    from ascendsched.lower.schedule_for import schedule_for
    from ascendsched.schedule.chunks import chunk_split

    s = schedule_for(L.softmax(64, 32000))
    assert chunk_split(s, "mx") is not None and chunk_split(s, "s") is not None
    verdicts = check(s)
    names = [v.check for v in verdicts]
    assert "C++ run == numpy (y)" in names and "C++ trace race check" in names, names
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


@pytest.mark.parametrize("name, n, once, staged", [
    ("rmsnorm", 32000, True, False),     # gamma whole (62.5 KB) still leaves pieces of 6 400
    ("layernorm", 32000, False, True),   # gamma and beta whole would leave 3 696: their
    ("layernorm", 20000, True, False),   # pieces; 5 pieces a row: chunked, not fused (each
])                                       # would reduce its whole row again)
def test_default_wide_rows_load_row_free_inputs_once_or_in_one_copy(name, n, once,
                                                                     staged) -> None:
    """Rows no tile holds whole (96 rows): pieces under the bound row loop, statistics in
    chunks, x and y double buffered, or (LayerNorm over 32 000 columns, its row read three
    times) x staged in UB once per row and y in one copy; the row-free inputs (gamma, beta)
    loaded once when the pieces stay at least half as wide, else their pieces in one copy.
    Equal to numpy, race-free."""
    from ascendsched.lower.schedule_for import schedule_for
    from ascendsched.schedule.chunks import chunk_split

    s = schedule_for(getattr(L, name)(96, n))
    stats = {"rmsnorm": "ss", "layernorm": "mean"}[name]
    assert chunk_split(s, stats) is not None and s.loop_names("y") == ["i_o", "j_o"]
    at = s.loaded_at("x")
    assert (at is not None) == staged
    if staged:
        assert (at.loop, at.copies, s.copies("y")) == ("i_o", 1, 1)
    else:
        assert s.copies("x") == s.copies("y") == 2
    free = [t.name for t in s.algo.inputs if t.name != "x"]
    assert all(s.loaded_once(t) == once and s.copies(t) == 1 for t in free)
    verdicts = check(s, cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


def test_a_reduction_reading_a_stored_output_along_the_axis_says_how_to_rewrite_it() -> None:
    """e = exp(x) is an output and s = sum(e) reads it along the row: e is stored whole, so
    s cannot read it chunk by chunk, nor can e be inlined. The error says to write s over
    e's expression in the inputs; written so, the default chunks s and equals numpy."""
    from ascendsched.lower.schedule_for import schedule_for

    def two(reads_output: bool):  # noqa: ANN202
        x = placeholder("x", (64, 32000), "float16")
        e = compute("e", (64, 32000), lambda i, j: exp(x[i, j].astype("float32")))
        k = reduce_axis(32000, "k")
        s = compute("s", (64,), lambda i: reduce_sum(
            e[i, k] if reads_output else exp(x[i, k].astype("float32")), k))
        y = compute("y", (64, 32000), lambda i, j: (e[i, j] / s[i]).astype("float16"))
        return algorithm("two", [e, y])

    sched = (Schedule(two(True)).split("y", "i", 1).split("y", "j", 8000).bind("y", "i_o", 48)
             .compute_at("s", "y", "i_o").split("s", "k", 8000))
    with pytest.raises(ScheduleError, match=r"reads 'e' along 'k', an output of 'two' stored "
                       r"whole to GM.*write 's' over what 'e' is made of"):
        lower(sched)
    verdicts = check(schedule_for(two(False)), cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
