"""Python control flow on expressions must fail loudly, never build a wrong algorithm.

Before: ``x if x > 0 else 0.0 * x`` built ``x`` and ``max(x, w)`` built ``w``, and ``check``
passed because the reference came from the same wrong expression.
"""

import numpy as np
import pytest

from ascendsched.algo import compute, eq, evaluate, maximum, placeholder, where
from ascendsched.errors import AlgorithmError
from tests.kit.reference import assert_matches_reference


@pytest.fixture
def xw():
    return placeholder("x", (8, 64), "float32"), placeholder("w", (8, 64), "float32")


def test_conditional_expression_names_where(xw):
    x, _ = xw
    with pytest.raises(AlgorithmError, match=r"no truth value.*where\(cond, a, b\)"):
        compute("y", (8, 64), lambda i, j: x[i, j] if x[i, j] > 0 else 0.0 * x[i, j])


@pytest.mark.parametrize("builtin", [max, min])
def test_builtin_max_min_names_maximum(xw, builtin):
    x, w = xw
    with pytest.raises(AlgorithmError, match=r"maximum\(a, b\)/minimum\(a, b\)"):
        compute("y", (8, 64), lambda i, j: builtin(x[i, j], w[i, j]))


def test_and_or_not_and_chained_comparisons(xw):
    x, w = xw
    with pytest.raises(AlgorithmError, match="nested where"):
        compute("y", (8, 64), lambda i, j: where((x[i, j] > 0) and (w[i, j] > 0), x[i, j], 0.0))
    with pytest.raises(AlgorithmError, match="no truth value"):
        compute("y", (8, 64), lambda i, j: where(0 < x[i, j] < 1, x[i, j], 0.0))
    with pytest.raises(AlgorithmError, match="nested where"):
        compute("y", (8, 64), lambda i, j: where((x[i, j] > 0) & (w[i, j] > 0), x[i, j], 0.0))


def test_equality_with_a_number_names_eq(xw):
    x, _ = xw
    with pytest.raises(AlgorithmError, match=r"use eq\(x\[i, j\], 0\)"):
        compute("y", (8, 64), lambda i, j: 1.0 if x[i, j] == 0 else x[i, j])
    y = compute("y", (8, 64), lambda i, j: where(eq(x[i, j], 0.0), 1.0, x[i, j]))
    xv = np.zeros((8, 64), np.float32)
    xv[0, :3] = [2.0, 0.0, -1.0]
    np.testing.assert_array_equal(evaluate(y, {"x": xv})["y"][0, :3], [2.0, 1.0, -1.0])


def test_numpy_functions_on_expressions_name_the_ascendsched_one(xw):
    x, _ = xw
    with pytest.raises(AlgorithmError, match=r"numpy's maximum\(\).*ascendsched.algo.maximum"):
        compute("y", (8, 64), lambda i, j: np.maximum(x[i, j], 0.0))
    y = compute("y", (8, 64), lambda i, j: np.float32(2.0) * x[i, j])  # numpy scalars mix in
    xv = np.arange(8 * 64, dtype=np.float32).reshape(8, 64)
    np.testing.assert_array_equal(evaluate(y, {"x": xv})["y"], 2 * xv)


def test_builtin_abs_and_power_match_numpy(xw):
    from ascendsched.algo import algorithm
    from ascendsched.schedule import Schedule

    x, _ = xw
    xv = np.random.default_rng(1).uniform(-2, 2, (8, 64)).astype(np.float32)
    a = compute("a", (8, 64), lambda i, j: abs(x[i, j]))
    np.testing.assert_array_equal(evaluate(a, {"x": xv})["a"], np.abs(xv))
    assert_matches_reference(Schedule(algorithm("absk", a)))
    p = compute("p", (8, 64), lambda i, j: x[i, j] ** 3 - 2.0 ** x[i, j])
    np.testing.assert_allclose(evaluate(p, {"x": xv})["p"], xv ** 3 - 2.0 ** xv, rtol=1e-6, atol=1e-6)
    with pytest.raises(AlgorithmError, match=r"only round\(x\)"):
        compute("r", (8, 64), lambda i, j: round(x[i, j], 2))


def test_max_of_two_expressions_still_works_with_maximum(xw):
    x, w = xw
    y = compute("y", (8, 64), lambda i, j: maximum(x[i, j], w[i, j]))
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((2, 8, 64)).astype(np.float32)
    np.testing.assert_array_equal(evaluate(y, {"x": xv, "w": wv})["y"], np.maximum(xv, wv))
