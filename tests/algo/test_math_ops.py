"""tanh, sigmoid, pow, round, clip and the float32 -> int8 cast: the reference is numpy's own
function (not the expression's evaluation), and the lowered kernel matches it."""

import numpy as np
import pytest

from ascendsched.algo import algorithm, clip, compute, evaluate, placeholder, pow_, sigmoid, tanh
from ascendsched.api.numerics import approx_rtol, random_inputs
from ascendsched.errors import AlgorithmError
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule
from ascendsched.sim.execute import run_kernel

X = placeholder("x", (8, 64), "float32")
W = placeholder("w", (8, 64), "float32")
H = placeholder("h", (8, 64), "float16")


def _want_int8(v: np.ndarray) -> np.ndarray:
    return v.astype(np.int64).astype(np.int8)


CASES = {
    "tanh": (lambda i, j: tanh(X[i, j] * 4.0), lambda x, w, h: np.tanh(x * 4)),
    "sigmoid": (lambda i, j: sigmoid(X[i, j] * 8.0), lambda x, w, h: 1 / (1 + np.exp(-x * 8))),
    "round": (lambda i, j: round(X[i, j] * 3.0), lambda x, w, h: np.rint(x * 3)),
    "round_f16": (lambda i, j: round(H[i, j] * 3.0),
                  lambda x, w, h: np.rint((h * np.float16(3)).astype(np.float16))),
    "tanh_f16": (lambda i, j: tanh(H[i, j]), lambda x, w, h: np.tanh(h.astype(np.float64))),
    "cube": (lambda i, j: X[i, j] ** 3, lambda x, w, h: x.astype(np.float64) ** 3),
    "inverse_square": (lambda i, j: X[i, j] ** -2, lambda x, w, h: x.astype(np.float64) ** -2),
    "sqrt_power": (lambda i, j: abs(X[i, j]) ** 0.5, lambda x, w, h: np.abs(x) ** 0.5),
    "power_1.3": (lambda i, j: abs(X[i, j]) ** 1.3, lambda x, w, h: np.abs(x) ** 1.3),
    "power_tensor": (lambda i, j: pow_(abs(X[i, j]), W[i, j]),
                     lambda x, w, h: np.abs(x).astype(np.float64) ** w),
    "clip": (lambda i, j: clip(X[i, j], -0.5, 0.75), lambda x, w, h: np.clip(x, -0.5, 0.75)),
    "int8_rint": (lambda i, j: clip(X[i, j] * 60.0, -127.0, 127.0).astype("int8"),
                  lambda x, w, h: _want_int8(np.rint(np.clip(x * np.float32(60), -127, 127)))),
    "int8_trunc": (lambda i, j: (X[i, j] * 60.0).astype("int8", "trunc"),
                   lambda x, w, h: _want_int8(np.trunc(x * np.float32(60)))),
    "int8_round": (lambda i, j: (X[i, j] * 60.0).astype("int8", "round"),
                   lambda x, w, h: _want_int8(np.sign(x * np.float32(60))
                                              * np.floor(np.abs(x * np.float32(60)) + 0.5))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_op_matches_numpy_in_reference_and_kernel(name):
    body, want_fn = CASES[name]
    y = compute("y", (8, 64), body)
    algo = algorithm("k", y)
    ins = random_inputs(algo, seed=3)
    full = {"x": np.zeros((8, 64), np.float32), "w": np.zeros((8, 64), np.float32),
            "h": np.zeros((8, 64), np.float16), **ins}  # the inputs this case does not use: 0
    want = want_fn(full["x"], full["w"], full["h"])
    ref = evaluate(algo, ins)["y"]
    got = run_kernel(lower(Schedule(algo)), ins).outputs["y"]
    tol = {"rtol": 4e-3, "atol": 2e-3} if y.dtype.name == "float16" else {"rtol": 2e-5,
                                                                             "atol": 1e-5}
    # the documented error of the approximate instructions the ops become (Reciprocal in tanh
    # and sigmoid): relative, and for tanh = 1 - 2 * reciprocal(exp(2x) + 1) at most twice it
    # in absolute terms (the reciprocal is in (0, 1])
    approx = approx_rtol(algo, "y")
    tol = {"rtol": tol["rtol"] + approx, "atol": tol["atol"] + 2 * approx}
    if y.dtype.is_float:
        np.testing.assert_allclose(ref.astype(np.float64), want, **tol)
        np.testing.assert_allclose(got.astype(np.float64), want, **tol)
    else:
        np.testing.assert_array_equal(ref, want)
        np.testing.assert_array_equal(got, want)


def test_bad_uses_name_the_fix():
    i8 = placeholder("q", (8,), "int32")
    with pytest.raises(AlgorithmError, match=r"non-negative integer exponent.*astype\('float32'\)"):
        compute("y", (8,), lambda i: i8[i] ** -1)
    with pytest.raises(AlgorithmError, match=r"needs a floating-point operand.*astype"):
        compute("y", (8,), lambda i: tanh(i8[i]))
    with pytest.raises(AlgorithmError, match=r"lower bound exceeds.*clip\(x, -1.0, 1.0\)"):
        compute("y", (8, 64), lambda i, j: clip(X[i, j], 1.0, -1.0))
