"""Front-end features through every rung, emitted C++ included (one g++ build per kernel):
several outputs, a causal mask, a batch-broadcast operand, user inputs with zero rows, -inf
and NaN."""

import numpy as np
import pytest

from ascendsched.algo import (
    algorithm,
    clip,
    compute,
    maximum,
    placeholder,
    reduce_axis,
    reduce_max,
    where,
)
from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.schedule import Schedule


def _ok(verdicts):
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


@pytest.mark.slow
def test_quantise_with_row_scale_output_and_a_zero_row():
    x = placeholder("x", (9, 256), "float32")
    k = reduce_axis(256, "k")
    amax = compute("amax", (9,), lambda i: reduce_max(abs(x[i, k]), k))
    scale = compute("scale", (9,), lambda i: maximum(amax[i], 1e-12) / 127.0)
    q = compute("q", (9, 256), lambda i, j: clip(round(x[i, j] / scale[i]), -127.0, 127.0)
                .astype("int8"))
    s = Schedule(algorithm("quant", [q, scale])).split("q", "i", 2).bind("q", "i_o", 3) \
        .compute_at("amax", "q", "i_o").buffer("x").buffer("q")
    xv = np.random.default_rng(0).uniform(-2, 2, (9, 256)).astype(np.float32)
    xv[1] = 0.0
    _ok(check(s, inputs={"x": xv}))


@pytest.mark.slow
def test_causal_mask_and_batch_broadcast():
    sq = placeholder("sq", (64, 64), "float32")
    causal = algorithm("causal", compute("o", (64, 64), lambda i, j: where(j <= i, sq[i, j],
                                                                          -1e30)))
    _ok(check(Schedule(causal).split("o", "i", 8).bind("o", "i_o", 4)))
    s = placeholder("s", (3, 8, 64), "float16")
    m = placeholder("m", (8, 64), "float16")
    bb = algorithm("batch_bias", compute("o", (3, 8, 64), lambda b, i, j: s[b, i, j] + m[i, j]))
    _ok(check(Schedule(bb).split("o", "b", 1).bind("o", "b_o", 3)))


@pytest.mark.slow
def test_user_inputs_with_inf_and_nan():
    x = np.linspace(-2, 2, 4096, dtype=np.float32)
    x[::7] = np.nan
    y = np.ones(4096, np.float32)
    y[::5] = -np.inf
    _ok(check(Schedule(L.vadd(4096, "float32")).split("z", "i", 1024), inputs={"x": x, "y": y}))
