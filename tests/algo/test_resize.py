"""algo/resize.py: axis classes linked through subscripts, and the DAG rebuilt at new sizes."""

from dataclasses import replace

import numpy as np
import pytest

from ascendsched.algo import compute, evaluate, placeholder, reduce_axis, reduce_sum
from ascendsched.algo import library as L
from ascendsched.algo.algorithm import algorithm
from ascendsched.algo.expr import Const
from ascendsched.algo.gemm_spec import match_gemm
from ascendsched.algo.resize import axis_class, axis_classes, resize
from ascendsched.api.numerics import random_inputs
from ascendsched.errors import AlgorithmError


def _shapes(a):
    return {t.name: tuple(t.shape) for t in a.tensors}


def test_rmsnorm_columns_form_one_class_with_the_reduction_and_gamma():
    a = L.rmsnorm(8, 1024)
    cols = axis_class(a, ("y", "j"))
    assert {("x", 1), ("gamma", 0), ("xf", 1), ("ss", "k"), ("y", 1)} <= cols.members
    assert cols.reduced_over and not cols.fixed
    rows = axis_class(a, ("y", "i"))
    assert {("x", 0), ("ss", 0), ("r", "i"), ("y", 0)} <= rows.members
    assert not rows.reduced_over
    assert len(axis_classes(a)) == 2


def test_resized_rows_equal_the_library_kernel_at_that_size():
    for make in (L.softmax, L.rmsnorm, L.layernorm):
        a = resize(make(8, 256), {("y", "i"): 24})
        want = make(24, 256)
        assert _shapes(a) == _shapes(want)
        ins = random_inputs(want, 3)
        got, ref = evaluate(a, ins), evaluate(want, ins)
        np.testing.assert_array_equal(got["y"], ref["y"])


def test_columns_move_together_and_constants_stay():
    a = resize(L.rmsnorm(8, 1024), {("gamma", 0): 512})
    assert _shapes(a)["x"] == (8, 512) and _shapes(a)["y"] == (8, 512)
    ss = a.tensor("ss").op.body
    assert ss.axes[0].extent == 512
    consts = []

    def walk(e):
        if isinstance(e, Const):
            consts.append(e.value)
        for f in ("a", "b", "x", "body"):
            if hasattr(e, f):
                walk(getattr(e, f))

    walk(a.tensor("r").op.body)
    assert 1.0 / 1024 in consts  # the mean still divides by the original n


def test_gemm_resize_keeps_the_spec_but_the_sizes():
    g = L.batched_gemm(4, 100, 120, 130, "bfloat16", "float32", trans_b=True, shared_b=True)
    r = resize(g, {("C", "i"): 50, ("C", "j"): 40, ("C", "k"): 64, ("C", "p"): 2})
    assert match_gemm(r) == replace(match_gemm(g), m=50, n=40, k=64, batch=2)
    assert _shapes(r)["B"] == (40, 64)  # shared B^T has no batch axis


def test_untouched_sizes_return_the_same_algorithm():
    a = L.softmax(8, 128)
    assert resize(a, {("y", "i"): 8}) is a


def test_two_sizes_for_one_class_are_refused():
    with pytest.raises(AlgorithmError, match="one size per class"):
        resize(L.rmsnorm(8, 1024), {("y", "j"): 512, ("gamma", 0): 256})


def test_a_scaled_subscript_keeps_its_size():
    x = placeholder("x", (16,))
    y = compute("y", (8,), lambda i: x[2 * i])
    a = algorithm("strided", y)
    assert axis_class(a, ("y", "i")).fixed
    with pytest.raises(AlgorithmError, match="product"):
        resize(a, {("y", "i"): 4})


def test_sizes_stay_positive():
    x = placeholder("x", (8, 4))
    k = reduce_axis(4, "k")
    a = algorithm("rowsum", compute("s", (8,), lambda i: reduce_sum(x[i, k], k)))
    with pytest.raises(AlgorithmError, match=">= 1"):
        resize(a, {("s", "k"): 0})
    assert _shapes(resize(a, {("s", "k"): 9}))["x"] == (8, 9)
