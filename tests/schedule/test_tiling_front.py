"""Tilings a new user reaches for first: a row reduction with a 1-D output, a tail tile of a
wide softmax. Each is checked against the numpy reference on the simulator."""

from ascendsched.algo import algorithm, compute, placeholder, reduce_axis, reduce_sum
from ascendsched.algo import library as L
from ascendsched.lower.build_loop_nest import build_loop_nest
from ascendsched.lower.lifetimes import buffer_lifetimes
from ascendsched.lower.plan_memory import plan_memory
from ascendsched.schedule import Schedule
from ascendsched.target import Scope
from tests.kit.reference import assert_matches_reference


def _row_sum(shape_out: tuple[int, ...]):
    x = placeholder("x", (9, 64), "float32")
    k = reduce_axis(64, "k")
    if len(shape_out) == 1:
        r = compute("r", shape_out, lambda i: reduce_sum(x[i, k], k))
    else:
        r = compute("r", shape_out, lambda i, j: reduce_sum(x[i, k], k))
    return algorithm("row_sum", r)


def test_row_reduction_with_a_1d_output_tiles_like_its_2d_twin():
    for shape in ((9,), (9, 1)):
        s = Schedule(_row_sum(shape)).split("r", "i", 2).bind("r", "i_o", 3) \
            .buffer("x").buffer("r")
        assert_matches_reference(s)


def _softmax_rows(m: int) -> Schedule:
    s = Schedule(L.softmax(m, 6144)).split("y", "i", 2)
    for st in ("xf", "mx", "e", "s"):
        s = s.compute_at(st, "y", "i_o")
    return s


def _ub_peak(s: Schedule) -> int:
    k = build_loop_nest(s)
    return plan_memory(k, buffer_lifetimes(k), s.target).peak(Scope.UB)


def test_a_tail_tile_keeps_ub_reuse():
    # 9 rows in 2-row tiles needed the no-reuse total (CapacityError); now the 1-row tail
    # reuses the space of the full tiles, whose peak is that of 8 rows
    assert _ub_peak(_softmax_rows(9)) == _ub_peak(_softmax_rows(8))
    assert_matches_reference(_softmax_rows(9))


def _batch_broadcast(dtype: str = "float32"):
    s = placeholder("s", (3, 8, 64), dtype)
    m = placeholder("m", (8, 64), dtype)
    return algorithm("masked", compute("o", (3, 8, 64), lambda b, i, j: s[b, i, j] + m[i, j]))


def test_2d_operand_broadcast_over_a_batch_axis():
    from ascendsched.lower.schedule_for import schedule_for

    for dtype in ("float32", "float16"):
        a = _batch_broadcast(dtype)
        assert_matches_reference(schedule_for(a))
        assert_matches_reference(Schedule(a).split("o", "b", 1).bind("o", "b_o", 3)
                                 .buffer("s").buffer("o"))
        assert_matches_reference(Schedule(a).split("o", "b", 2).split("o", "i", 4))
