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
    """A 1-D output that is a row reduction."""
    from ascendsched.algo.algorithm import algorithm
    from ascendsched.algo.ops import reduce_sum
    from ascendsched.algo.tensor import compute, placeholder, reduce_axis

    x = placeholder("x", (rows, cols), "float32")
    k = reduce_axis(cols, "k")
    return algorithm("row_sum", compute("y", (rows,), lambda i: reduce_sum(x[i, k], k)))


@pytest.mark.parametrize("algo, names", [
    (L.softmax(8, 32000), "'mx', 's' keep"),  # a Llama-2 vocabulary row of float32 values
    (_row_sum(8, 100000), "'y' keeps"),
])
def test_default_schedule_of_a_row_too_wide_for_ub_says_why_no_tile_helps(algo, names,
                                                                           monkeypatch):
    """When no candidate fits, chunked reductions included (here: none offered), the error
    says that the reductions hold whole rows unless split into chunks, when the default does
    that, and a split to write (not 'a smaller tile')."""
    from ascendsched.lower.schedule_for import schedule_for
    from ascendsched.schedule import default

    monkeypatch.setattr(default, "chunked_pieces", lambda *_: [])
    monkeypatch.setattr(default, "chunked_rows", lambda *_: [])
    cols = algo.outputs[0].shape[-1] if algo.name == "softmax" else 100000
    with pytest.raises(CapacityError) as e:
        schedule_for(algo)
    msg = str(e.value)
    assert f"no default schedule of '{algo.name}' fits ascend910b" in msg
    assert f"{names} whole rows of {cols} elements in UB, unless the schedule splits the " \
        "reduction axis into chunks" in msg
    assert "188160 B" in msg and "split('" in msg
    assert "Try a smaller tile" not in msg and "split the tiled axis" not in msg


@pytest.mark.parametrize("algo, width", [
    (L.softmax(8, 32000), 8000),  # a Llama-2 vocabulary row of float32 values
    (L.rmsnorm(4, 70000), 10000),  # gamma's pieces in one copy: 10 000 fit (18.28 us
])                                # modelled; 7 008, which fit with two: 19.45 us)
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


def test_a_1d_row_reduction_too_wide_for_ub_gets_chunks_by_default():
    """y[i] = sum_k x[i, k] over 100 000 float32 columns: one row per tile (8 rows, 8
    cores), the output's own reduction read in double-buffered chunks of 2048."""
    from ascendsched.lower.schedule_for import schedule_for
    from ascendsched.schedule.chunks import chunk_split

    s = schedule_for(_row_sum(8, 100000))
    assert chunk_split(s, "y").factor == 2048 and s.copies("x") == 2
    assert s.loop_nest("y").factors["i"] == 1 and s.loop_nest("y").bound == ("i_o", 8)
