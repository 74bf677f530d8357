"""Default schedules of rank-3 row kernels (batched softmax and RMSNorm): when one step of the
first axis is too big for UB the tile takes rows of the middle axis, the leading tile loops
fused into one loop over the cores; the tiles fit with their buffering honoured and the
kernel matches numpy on the simulator."""

from __future__ import annotations

import pytest

from ascendsched.algo import (
    algorithm,
    compute,
    exp,
    placeholder,
    reduce_axis,
    reduce_max,
    reduce_sum,
    rsqrt,
)
from ascendsched.api.check import check
from ascendsched.lower.build_loop_nest import build_loop_nest
from ascendsched.lower.lifetimes import buffer_lifetimes
from ascendsched.lower.plan_memory import plan_memory
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import Schedule
from ascendsched.schedule.ub_budget import TileShape, row_extents, tile_bytes
from ascendsched.target import DEFAULT_TARGET as T
from ascendsched.target.model import Scope


def batched_softmax(b: int, m: int, n: int):  # noqa: ANN201 -- an Algorithm
    x = placeholder("x", (b, m, n), "float16")
    xf = compute("xf", (b, m, n), lambda p, i, j: x[p, i, j].astype("float32"))
    k = reduce_axis(n, "k")
    mx = compute("mx", (b, m), lambda p, i: reduce_max(xf[p, i, k], k))
    e = compute("e", (b, m, n), lambda p, i, j: exp(xf[p, i, j] - mx[p, i]))
    k2 = reduce_axis(n, "k2")
    s = compute("s", (b, m), lambda p, i: reduce_sum(e[p, i, k2], k2))
    y = compute("y", (b, m, n), lambda p, i, j: (e[p, i, j] / s[p, i]).astype("float16"))
    return algorithm("batched_softmax", y)


def batched_rmsnorm(b: int, m: int, n: int, eps: float = 1e-6):  # noqa: ANN201
    x = placeholder("x", (b, m, n), "float16")
    gamma = placeholder("gamma", (n,), "float16")
    xf = compute("xf", (b, m, n), lambda p, i, j: x[p, i, j].astype("float32"))
    k = reduce_axis(n, "k")
    ss = compute("ss", (b, m), lambda p, i: reduce_sum(xf[p, i, k] * xf[p, i, k], k))
    r = compute("r", (b, m), lambda p, i: rsqrt(ss[p, i] * (1.0 / n) + eps))
    y = compute("y", (b, m, n), lambda p, i, j:
                (xf[p, i, j] * r[p, i] * gamma[j].astype("float32")).astype("float16"))
    return algorithm("batched_rmsnorm", y)


KERNELS = {"softmax": batched_softmax, "rmsnorm": batched_rmsnorm}


def _ok(verdicts) -> None:  # noqa: ANN001
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


def test_row_extents_make_boxes_of_flattened_rows() -> None:
    assert row_extents((2, 384), 24) == (1, 24)
    assert row_extents((2, 384), 384) == (1, 384)
    assert row_extents((2, 384), 768) == (2, 384)
    assert row_extents((2, 384), 400) is None  # more than a step of the first, not two
    assert row_extents((4,), 3) == (3,) and row_extents((), 1) == ()
    assert row_extents((2, 3, 4), 12) == (1, 3, 4) and row_extents((2, 3, 4), 8) == (1, 2, 4)
    assert row_extents((2, 3, 4), 6) is None


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("shape", [(2, 384, 384), (4, 2048, 2048)])
def test_rank3_default_splits_the_middle_axis_and_fits(name: str, shape) -> None:
    # (2, 384, 384): one step of the first axis is 384 rows x 384 columns, about 1.2 MB of
    # float32 tiles: the default used to take it whole (CapacityError)
    algo = KERNELS[name](*shape)
    s = schedule_for(algo)
    nest = s.loop_nest("y")
    (loop, axes), = nest.loops
    assert axes == ("p", "i") and nest.bound == (loop, 48)  # fused, over every vector core
    assert nest.factors["p"] == 1 and 1 < nest.factors["i"] < shape[1]
    assert s.copies("x") == s.copies("y") == 2
    k = build_loop_nest(s, T)
    plan = plan_memory(k, buffer_lifetimes(k), T, warn=False)
    assert plan.compromises == () and plan.peak(Scope.UB) <= T.scope(Scope.UB).usable
    est = tile_bytes(algo, TileShape(nest.factors["i"], shape[2]), 2, T)
    assert 0.8 <= est / plan.peak(Scope.UB) <= 1.10, (est, plan.peak(Scope.UB))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_rank3_default_matches_numpy_on_the_simulator(name: str) -> None:
    _ok(check(KERNELS[name](2, 384, 384), cpp=False))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_leading_axis_split_by_1_with_an_odd_middle_axis_lowers(name: str) -> None:
    # the tile's per-row results are padded to 8 floats per step of the first axis; with that
    # axis split by 1 the padding never steps, so the rows stay contiguous (the builder used
    # to refuse: "max-reduction result over [mx.0, mx.1] is not contiguous")
    stages = {"softmax": ("xf", "mx", "e", "s"), "rmsnorm": ("xf", "ss", "r")}[name]
    for middle in (5, 1):  # whole middle axis (5 rows), and 1-row tiles
        s = Schedule(KERNELS[name](3, 5, 384)).split("y", "p", 1).split("y", "i", middle) \
            .fuse("y", "p_o", "i_o").bind("y", "p_o_i_o", 4)
        for st in stages:
            s = s.compute_at(st, "y", "p_o_i_o")
        _ok(check(s, cpp=False))
    _ok(check(KERNELS[name](3, 5, 384), cpp=False))  # and the default of that shape


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_tile_height_search_over_counts_that_make_no_box_finds_a_default(name: str) -> None:
    # (3, 4096, 512): the tile height search bisected through 6144 rows, which no box of
    # (3, 4096) makes, and the estimate raised InternalCompilerError; heights are now sized
    # as the tallest box below them
    s = schedule_for(KERNELS[name](3, 4096, 512))
    rows = s.loop_nest("y").factors
    assert row_extents((3, 4096), rows["p"] * rows["i"]) is not None
    _ok(check(s, cpp=False))
