"""Each malformed expression raises AlgorithmError naming the tensor and the problem."""

import pytest

from ascendsched.algo import algorithm, compute, placeholder, reduce_axis, reduce_sum
from ascendsched.errors import AlgorithmError


def test_rank_mismatch():
    x = placeholder("x", (4, 8), "float16")
    with pytest.raises(AlgorithmError, match=r"tensor 'x' has rank 2.*indexed with 1"):
        compute("y", (4,), lambda i: x[i])


def test_index_provably_out_of_range():
    x = placeholder("x", (8,), "float16")
    with pytest.raises(AlgorithmError, match=r"'x' axis 0 has size 8.*out of range"):
        compute("y", (8,), lambda i: x[i + 1])


def test_mixing_dtypes_without_cast():
    x = placeholder("x", (8,), "float16")
    w = placeholder("w", (8,), "float32")
    with pytest.raises(AlgorithmError, match=r"different dtypes.*float16.*float32.*cast"):
        compute("y", (8,), lambda i: x[i] + w[i])


def test_reduction_variable_outside_its_reduction():
    x = placeholder("x", (4, 8), "float32")
    k = reduce_axis(8, "k")
    with pytest.raises(AlgorithmError, match=r"compute 'y'.*reduction variable 'k'.*outside"):
        compute("y", (4,), lambda i: x[i, k])


def test_cycle_between_stages():
    x = placeholder("x", (4,), "float32")
    a = compute("a", (4,), lambda i: x[i] + 1.0)
    b = compute("b", (4,), lambda i: a[i] * 2.0)
    # A cycle cannot be written with the builder API; forge one as a deserialiser could.
    body = b.op.body
    from dataclasses import replace
    object.__setattr__(a, "op", replace(a.op, body=replace(body, a=replace(body.a, tensor=b))))
    with pytest.raises(AlgorithmError, match=r"cycle \(.*a -> b -> a|cycle \(.*b -> a -> b"):
        algorithm("cyclic", b)


def test_unknown_dtype_and_non_float_exp():
    with pytest.raises(AlgorithmError, match="unknown dtype 'float64'"):
        placeholder("x", (4,), "float64")
    from ascendsched.algo import exp
    x = placeholder("x", (4,), "int32")
    with pytest.raises(AlgorithmError, match="exp.*floating-point.*cast"):
        compute("y", (4,), lambda i: exp(x[i]))


def test_reduce_sum_rejects_non_reduce_axes():
    x = placeholder("x", (4,), "float32")
    with pytest.raises(AlgorithmError, match="reduce_axis"):
        compute("y", (1,), lambda i: reduce_sum(x[i], i))
