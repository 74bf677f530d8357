"""NaN through max/min: the reference (numpy), the IR simulator and the comparison agree that a
NaN operand gives NaN (fast rungs; the emitted C++ is in test_nan_semantics_cpp.py)."""

import numpy as np

from ascendsched.algo import evaluate
from ascendsched.api.check import check
from ascendsched.api.numerics import compare
from tests.e2e.nan_cases import elementwise, nan_inputs, row_extremes


def _ok(verdicts):
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


def test_reference_propagates_nan_through_max_and_min():
    s = row_extremes()
    ins = nan_inputs(("x",))
    o = evaluate(s.algo, ins)["o"]
    assert np.array_equal(np.isnan(o), np.isnan(ins["x"]).any(axis=1))
    e = elementwise()
    ins2 = nan_inputs(("x", "y"))
    want = np.isnan(ins2["x"]) | np.isnan(ins2["y"])
    assert np.array_equal(np.isnan(evaluate(e.algo, ins2)["o"]), want)


def test_ir_execution_agrees_with_numpy_on_nan():
    for s, names in ((elementwise(), ("x", "y")), (row_extremes(), ("x",)),
                     (row_extremes("float16"), ("x",))):
        dtype = s.algo.inputs[0].dtype.name
        _ok(check(s, cpp=False, inputs=nan_inputs(names, dtype)))


def test_a_nan_mismatch_fails_and_says_so():
    want = np.array([1.0, np.nan, 3.0], np.float32)
    ok, detail = compare(np.array([1.0, 2.0, 3.0], np.float32), want, "float32")
    assert not ok and detail == "max abs error 0, 1 elements NaN in only one of the two"
    assert compare(want.copy(), want, "float32") == (True, "max abs error 0")
