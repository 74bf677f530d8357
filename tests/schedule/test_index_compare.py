"""Comparisons of subscript variables (a causal mask) and index casts lower to vector code:
iota rows built in UB plus the tile's start, compared as data."""

import numpy as np
import pytest

from ascendsched.algo import (
    algorithm,
    compute,
    evaluate,
    placeholder,
    reduce_axis,
    reduce_sum,
    where,
)
from ascendsched.errors import UnsupportedError
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import Schedule
from tests.kit.reference import assert_matches_reference

S = placeholder("sq", (64, 64), "float32")
CAUSAL = algorithm("causal", compute("o", (64, 64), lambda i, j: where(j <= i, S[i, j], -1e30)))


def test_causal_mask_reference_is_the_lower_triangle():
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    np.testing.assert_array_equal(evaluate(CAUSAL, {"sq": x})["o"],
                                  np.where(np.tri(64, dtype=bool), x, np.float32(-1e30)))


@pytest.mark.parametrize("sched", [
    lambda: schedule_for(CAUSAL),
    lambda: Schedule(CAUSAL).split("o", "i", 8).bind("o", "i_o", 4),
    lambda: Schedule(CAUSAL).tile("o", ("i", "j"), (16, 32)),
    lambda: Schedule(CAUSAL).split("o", "i", 5),  # tail tile
], ids=["default", "rows on cores", "2-D tiles", "tail"])
def test_causal_mask_lowers_for_every_tiling(sched):
    assert_matches_reference(sched())


def test_affine_index_comparisons_casts_and_masked_reductions():
    h = placeholder("h", (16, 128), "float16")
    assert_matches_reference(Schedule(algorithm("band", compute(
        "o", (16, 128), lambda i, j: where(j > 2 * i + 3, h[i, j], 0.0)))).split("o", "i", 4))
    x = placeholder("x", (8, 64), "float32")
    assert_matches_reference(Schedule(algorithm("ramp", compute(
        "o", (8, 64), lambda i, j: x[i, j] * j.astype("float32") + i.astype("float32"))))
        .split("o", "j", 32))
    k = reduce_axis(64, "k")
    assert_matches_reference(Schedule(algorithm("prefix", compute(
        "o", (64,), lambda i: reduce_sum(where(k <= i, S[i, k], 0.0), k)))).split("o", "i", 8))


def test_index_values_beyond_float16_say_so():
    h = placeholder("h", (4, 4096), "float16")
    a = algorithm("wide", compute("o", (4, 4096), lambda i, j: where(j <= i, h[i, j], 0.0)))
    with pytest.raises(UnsupportedError, match=r"reach \d+.*float16.*float32"):
        lower(Schedule(a).split("o", "j", 2048), stop_after="apply memory plan")
