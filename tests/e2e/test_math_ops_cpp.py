"""The expanded math ops (tanh, sigmoid, round, pow, clip, float32 -> int8) through the whole
ladder, emitted C++ included (one g++ build per kernel)."""

import pytest

from ascendsched.algo import algorithm, clip, compute, placeholder, sigmoid, tanh
from ascendsched.api.check import check
from ascendsched.schedule import Schedule


@pytest.mark.slow
def test_math_ops_pass_every_rung():
    x = placeholder("x", (8, 64), "float32")
    w = placeholder("w", (8, 64), "float32")
    y = compute("y", (8, 64), lambda i, j: tanh(x[i, j]) + sigmoid(w[i, j] * 3.0)
                + round(x[i, j] * 3.0) + abs(x[i, j]) ** 1.5 + x[i, j] ** 3
                + clip(w[i, j], -0.5, 0.5))
    q = compute("q", (8, 64), lambda i, j: clip(x[i, j] * 60.0, -127.0, 127.0)
                .astype("int8", "trunc"))
    for algo in (algorithm("math_ops", y), algorithm("quant_trunc", q)):
        verdicts = check(Schedule(algo))
        assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
