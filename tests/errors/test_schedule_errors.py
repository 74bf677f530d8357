"""Each illegal schedule raises an error naming the primitive, the limit and a fix."""

import pytest

from ascendsched.algo import library as L
from ascendsched.errors import CapacityError, ScheduleError
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule


def test_split_of_missing_axis():
    with pytest.raises(ScheduleError, match=r"split\('z', 'q', 64\).*no axis 'q'.*axes are i"):
        Schedule(L.vadd()).split("z", "q", 64)


def test_fuse_of_non_adjacent_loops():
    s = Schedule(L.bias_add(64, 1024)).split("y", "i", 8).split("y", "j", 256)
    with pytest.raises(ScheduleError, match=r"fuse.*not adjacent.*reorder"):
        s.fuse("y", "j_o", "i_o")


def test_more_cores_than_the_target_has():
    s = Schedule(L.vadd()).split("z", "i", 128)
    with pytest.raises(ScheduleError, match=r"cores=64.*48 vector cores.*1 <= cores <= 48"):
        s.bind("z", "i_o", 64)


def test_ub_tile_row_not_32_byte_aligned():
    s = Schedule(L.bias_add(16, 1000)).split("y", "j", 100)
    with pytest.raises(ScheduleError, match=r"200 B is not a multiple of 32 B.*multiple of 16"):
        lower(s, stop_after="apply memory plan")


def test_ub_footprint_over_capacity_counts_double_buffers_and_temporaries():
    s = Schedule(L.softmax(64, 8192)).split("y", "i", 8)
    for st in ("xf", "mx", "e", "s"):
        s = s.compute_at(st, "y", "i_o")
    s = s.buffer("x", 2).buffer("y", 2)
    with pytest.raises(CapacityError, match=r"x_ub|xf_ub|e_ub") as e:
        lower(s, stop_after="apply memory plan")
    assert "188160" in str(e.value)


def test_compute_at_illegal_location_lists_legal_ones():
    s = Schedule(L.softmax(64, 1024)).split("y", "i", 8)
    with pytest.raises(ScheduleError, match=r"Legal locations: compute_at\('mx', 'y', 'i_o'\)"):
        s.compute_at("mx", "y", "nowhere")


def test_stage_left_at_root_needs_a_placement():
    s = Schedule(L.softmax(8, 256))
    with pytest.raises(ScheduleError, match=r"computed at root.*compute_at\('xf', 'y'"):
        lower(s, stop_after="apply memory plan")


def test_bind_must_be_outermost_and_inline_rejects_reductions():
    s = Schedule(L.bias_add(64, 1024)).split("y", "i", 8).split("y", "j", 256)
    with pytest.raises(ScheduleError, match="only the outermost tile loop"):
        s.bind("y", "j_o", 4)
    with pytest.raises(ScheduleError, match="is a reduction"):
        Schedule(L.softmax()).compute_inline("mx")


def _row_sum(rows: int, cols: int):  # noqa: ANN202 -- Algorithm
    """A 1-D output that is a row reduction: no default reads its rows in chunks."""
    from ascendsched.algo.algorithm import algorithm
    from ascendsched.algo.ops import reduce_sum
    from ascendsched.algo.tensor import compute, placeholder, reduce_axis

    x = placeholder("x", (rows, cols), "float32")
    k = reduce_axis(cols, "k")
    return algorithm("row_sum", compute("y", (rows,), lambda i: reduce_sum(x[i, k], k)))


def test_default_schedule_of_a_row_too_wide_for_ub_says_why_no_tile_helps():
    """No default candidate of a 1-D row sum over 100 000 float32 columns fits: the error says
    that the reduction holds whole rows unless split into chunks, when the default does that,
    and a split to write (not 'a smaller tile')."""
    from ascendsched.lower.schedule_for import schedule_for

    with pytest.raises(CapacityError) as e:
        schedule_for(_row_sum(8, 100000))
    msg = str(e.value)
    assert "no default schedule of 'row_sum' fits ascend910b" in msg
    assert "'y' keeps whole rows of 100000 elements in UB, unless the schedule splits the " \
        "reduction axis into chunks" in msg
    assert "188160 B of UB" in msg and "split('y', 'k', " in msg
    assert "Try a smaller tile" not in msg and "split the tiled axis" not in msg


@pytest.mark.parametrize("algo, width", [
    (L.softmax(8, 32000), 8000),  # a Llama-2 vocabulary row of float32 values
    (L.rmsnorm(4, 70000), 7008),
])
def test_rows_too_wide_for_ub_get_chunked_reductions_by_default(algo, width):
    """Rows no tile holds whole: the default cuts them into pieces under a bound row loop and
    reads each row statistic in chunks of the piece's width (schedule/chunks.py)."""
    from ascendsched.lower.schedule_for import schedule_for
    from ascendsched.schedule.chunks import chunk_split

    s = schedule_for(algo)
    assert s.loop_nest("y").factors["j"] == width
    stats = [st.name for st in algo.stages if len(st.shape) == 1 and chunk_split(s, st.name)]
    assert stats == (["mx", "s"] if algo.name == "softmax" else ["ss"])
    assert all(chunk_split(s, n).factor == width for n in stats)
