"""``online``: a softmax's row max and sum of exponentials reduced in one chunk loop, the sum
rescaled as the max grows: numpy and the race checker agree with tails everywhere, the row is
read twice instead of three times, every sync is needed, and the schedules it cannot run say
why."""

from __future__ import annotations

import pytest

from ascendsched.algo import library as L
from ascendsched.algo.algorithm import algorithm
from ascendsched.algo.ops import exp, reduce_max, reduce_sum
from ascendsched.algo.tensor import compute, placeholder, reduce_axis
from ascendsched.api.check import check
from ascendsched.errors import ScheduleError
from ascendsched.lower.ir import iter_instrs
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule
from ascendsched.schedule.online import online_pairs


def _softmax(rows: int, cols: int, tile: int, piece: int, chunk: int, cores: int, *,
             online: bool = True) -> Schedule:
    s = (Schedule(L.softmax(rows, cols)).compute_inline("xf").compute_inline("e")
         .split("y", "i", tile).split("y", "j", piece).bind("y", "i_o", cores)
         .compute_at("mx", "y", "i_o").split("mx", "k", chunk)
         .compute_at("s", "y", "i_o").split("s", "k2", chunk)
         .buffer("x", 2).buffer("y", 2))
    return s.online("s", "mx") if online else s


@pytest.mark.parametrize("sched", [
    _softmax(5, 1000, 1, 256, 256, 2),   # 3 whole chunks and a 232-column tail, a tail piece
    _softmax(7, 3000, 2, 1024, 640, 3),  # two rows a tile (a tail tile), uneven cores
    _softmax(4, 512, 1, 512, 512, 2),    # one chunk: no chunk loop
], ids=["tails", "two-rows", "one-chunk"])
def test_online_softmax_matches_numpy_and_is_race_free(sched: Schedule) -> None:
    verdicts = check(sched, cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


def test_rows_whose_max_grows_late_are_rescaled() -> None:
    """Rows whose largest values come in the last chunk (the running sum must be scaled down
    by exp(old max - new max)) and rows of large values (a sum against a stale max would
    overflow float32): the IR's output equals numpy's softmax."""
    import numpy as np

    from ascendsched.sim.execute import run_kernel

    rows, cols = 3, 1000
    x = np.linspace(-20.0, 60.0, rows * cols, dtype=np.float32).reshape(rows, cols)
    x[1] = x[1][::-1]  # the largest first: the max never grows
    x = x.astype(np.float16)
    got = run_kernel(lower(_softmax(rows, cols, 1, 256, 256, 2)), {"x": x}).outputs["y"]
    xf = x.astype(np.float32)
    want = np.exp(xf - xf.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=1e-6)


def _count(k, op: str, buffer: str | None = None) -> int:  # noqa: ANN001 -- a Kernel
    """Statements of ``op`` in ``k`` (reading ``buffer``, if given)."""
    return sum(1 for p in k.programs for i, _ in iter_instrs(p.body)
               if i.op == op and (buffer is None or i.reads[0].tensor == buffer))


def test_online_reads_the_row_twice_and_casts_each_chunk_once() -> None:
    """The max and the sum share one chunk loop, its load and its cast: x is read by two
    loops (statistics, output) instead of three, in bytes too (the DMA replay)."""
    from ascendsched.sim.gm_traffic import gm_traffic

    plain, online = (lower(_softmax(8, 4096, 1, 1024, 1024, 8, online=o)) for o in (False, True))
    assert (_count(plain, "copy_gm_ub", "x"), _count(online, "copy_gm_ub", "x")) == (3, 2)
    reads = [gm_traffic(k, 0).read_bytes["x"] for k in (plain, online)]
    assert reads == [3 * 8 * 4096 * 2, 2 * 8 * 4096 * 2]
    casts = [_count(k, "vec_cast") for k in (plain, online)]
    assert casts[1] == casts[0] - 1, casts  # the sum's own cast of the chunk is gone


def test_every_sync_of_an_online_kernel_is_needed() -> None:
    from ascendsched.api.sync_minimality import sync_minimality

    report = sync_minimality(_softmax(5, 1000, 1, 256, 256, 2))
    assert report.needed > 10 and report.removable == (), str(report)


def test_the_schedule_prints_the_directive() -> None:
    assert "  .online('s', 'mx')" in str(_softmax(5, 1000, 1, 256, 256, 2)).splitlines()


def test_online_pairs_of_the_library() -> None:
    assert online_pairs(L.softmax(4, 64)) == [("s", "mx")]
    assert online_pairs(L.rmsnorm(4, 64)) == [] and online_pairs(L.layernorm(4, 64)) == []


def test_online_needs_both_statistics_in_chunks_of_one_width() -> None:
    base = (Schedule(L.softmax(4, 1000)).compute_inline("xf").compute_inline("e")
            .split("y", "i", 1).compute_at("mx", "y", "i_o").compute_at("s", "y", "i_o"))
    with pytest.raises(ScheduleError, match=r"online\('s', 'mx'\): 'mx' is not read in chunks"
                                            r".*split\('mx'"):
        base.split("s", "k2", 256).online("s", "mx")
    with pytest.raises(ScheduleError, match=r"the chunks differ \('s' 200 of 1000, 'mx' 256 "
                                            r"of 1000\).*split them by one factor"):
        base.split("mx", "k", 256).split("s", "k2", 200).online("s", "mx")


def test_online_refuses_sums_a_new_max_cannot_rescale() -> None:
    """The max's stage must be a max; a sum of squares minus the max is no sum of
    exp(... - max), nor is one that reads the max again outside the exponential."""
    with pytest.raises(ScheduleError, match=r"'s' must be one max-reduction"):
        Schedule(L.softmax(4, 1000)).online("mx", "s")
    x = placeholder("x", (4, 1000), "float32")
    k, k2 = reduce_axis(1000, "k"), reduce_axis(1000, "k2")
    mx = compute("mx", (4,), lambda i: reduce_max(x[i, k], k))
    sq = compute("sq", (4,), lambda i: reduce_sum(x[i, k2] * x[i, k2] - mx[i], k2))
    y = compute("y", (4, 1000), lambda i, j: x[i, j] * sq[i])
    with pytest.raises(ScheduleError, match=r"not of exp\(\.\.\. - mx\[\.\.\.\]\)"):
        Schedule(algorithm("sq_kernel", y)).online("sq", "mx")
    tw = compute("tw", (4,), lambda i: reduce_sum(exp(x[i, k2] - mx[i]) * mx[i], k2))
    with pytest.raises(ScheduleError, match=r"is not of exp"):
        Schedule(algorithm("tw_kernel", compute("z", (4, 1000), lambda i, j: x[i, j] * tw[i]))
                 ).online("tw", "mx")


def test_online_needs_both_statistics_at_one_loop() -> None:
    s = (Schedule(L.softmax(4, 1000)).compute_inline("xf").compute_inline("e")
         .split("y", "i", 2).split("y", "i_i", 1)
         .compute_at("mx", "y", "i_o").split("mx", "k", 256)
         .compute_at("s", "y", "i_i_o").split("s", "k2", 256))
    with pytest.raises(ScheduleError, match=r"computed at one tile loop"):
        s.online("s", "mx")


def test_a_stage_reading_the_max_before_the_sum_is_reduced_is_refused() -> None:
    """The online loop finishes the max only with the sum: a per-row stage between them that
    reads the max would see it unfinished."""
    x = placeholder("x", (4, 1000), "float32")
    k, k2 = reduce_axis(1000, "k"), reduce_axis(1000, "k2")
    mx = compute("mx", (4,), lambda i: reduce_max(x[i, k], k))
    d = compute("d", (4,), lambda i: mx[i] * 2.0)
    s = compute("s", (4,), lambda i: reduce_sum(exp(x[i, k2] - mx[i]), k2))
    y = compute("y", (4, 1000), lambda i, j: exp(x[i, j] - d[i]) / s[i])
    sched = (Schedule(algorithm("twice", y)).split("y", "i", 1)
             .compute_at("mx", "y", "i_o").split("mx", "k", 256)
             .compute_at("d", "y", "i_o")
             .compute_at("s", "y", "i_o").split("s", "k2", 256).online("s", "mx"))
    with pytest.raises(ScheduleError, match=r"'d' reads 'mx' before 's' is reduced.*"
                                            r"compute_inline\('d'\)"):
        lower(sched)


@pytest.mark.slow  # g++ builds and runs of a mixed kernel
def test_a_vector_epilogue_of_rows_no_tile_holds_reads_them_in_one_online_pass() -> None:
    """GEMM + softmax with 30 000 logits a row (an LM head's shape, smaller): the default
    Vector epilogue reads each row of scores from the workspace in chunks, its max and sum in
    one online loop, and the whole ladder passes on the mixed kernel."""
    from ascendsched.lower.schedule_for import schedule_for

    sched = schedule_for(L.gemm_softmax(80, 30000, 64))
    assert str(lower(sched)).count("(online)") >= 1
    verdicts = check(sched)
    names = [v.check for v in verdicts]
    assert "C++ run == numpy (P)" in names and "C++ trace race check" in names, names
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
