"""The error catalogue: malformed algorithms, schedules and command-line inputs, one each.

Every entry must raise a typed ``ascendsched.errors`` error (never a raw TypeError, KeyError,
AttributeError or AssertionError) whose message names the object at fault (``names``) and a
way out (``fix``). Halide's test/error, as a table.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import sympy

from ascendsched import errors as E
from ascendsched.algo import (
    algorithm,
    cast,
    clip,
    compute,
    eq,
    evaluate,
    exp,
    maximum,
    placeholder,
    reduce_axis,
    reduce_max,
    reduce_sum,
    where,
)
from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.api.cli import load, load_inputs
from ascendsched.api.numerics import user_inputs
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import Schedule


@dataclass(frozen=True)
class Bad:
    id: str
    make: Callable[[Path], object]
    error: type[E.AscendSchedError]
    names: str  # regex: the object at fault
    fix: str  # regex: the way out the message offers


X = placeholder("x", (4, 8), "float32")
H = placeholder("h", (4, 8), "float16")
N = placeholder("n", (4, 8), "int32")
V = placeholder("v", (8,), "float32")
K = reduce_axis(8, "k")
_ROWS = reduce_axis(4, "r")  # the rows of X
SM = L.softmax(8, 256)
SPLIT = Schedule(SM).split("y", "i", 2)


def _stage(fn: Callable, shape: tuple = (4, 8)) -> object:
    return compute("y", shape, fn)


def _lower1(fn: Callable, shape: tuple = (4, 8)) -> object:
    return lower(Schedule(algorithm("k", compute("y", shape, fn))), stop_after="apply memory plan")


def _file(tmp: Path, text: str, name: str = "user.py") -> str:
    p = tmp / name
    p.write_text(text)
    return str(p)


ALGORITHMS = [
    Bad("shape-none", lambda t: placeholder("x", None), E.AlgorithmError, "'x'", r"tuple of sizes"),
    Bad("shape-float", lambda t: placeholder("x", (4, 8.0)), E.AlgorithmError, r"'x'.*8\.0",
        r"int or a sympy"),
    Bad("shape-zero", lambda t: placeholder("x", (0, 8)), E.AlgorithmError, "'x'", ">= 1"),
    Bad("shape-rank0", lambda t: placeholder("x", ()), E.AlgorithmError, "'x'", r"shape \(1,\)"),
    Bad("dtype-float64", lambda t: placeholder("x", (4,), "float64"), E.AlgorithmError,
        "float64", "supported tensor dtypes are"),
    Bad("dtype-bool-input", lambda t: placeholder("x", (4,), "bool"), E.AlgorithmError,
        "placeholder 'x'", "inputs are float16"),
    Bad("name-not-str", lambda t: placeholder(3, (4,)), E.AlgorithmError, "name 3", "e.g. '3'|t3"),
    Bad("name-space", lambda t: placeholder("my x", (4,)), E.AlgorithmError, "'my x'", "my_x"),
    Bad("name-cpp-keyword", lambda t: placeholder("float", (4,)), E.AlgorithmError, "'float'",
        "rename it"),
    Bad("algorithm-name-dash", lambda t: algorithm("my-kernel", _stage(lambda i, j: X[i, j])),
        E.AlgorithmError, "'my-kernel'", "my_kernel"),
    Bad("algorithm-name-is-tensor", lambda t: algorithm("y", _stage(lambda i, j: X[i, j])),
        E.AlgorithmError, "algorithm 'y'", "y_kernel"),
    Bad("algorithm-no-outputs", lambda t: algorithm("a", []), E.AlgorithmError, "'a'",
        r"algorithm\('a', \[y\]\)"),
    Bad("algorithm-input-as-output", lambda t: algorithm("a", X), E.AlgorithmError, "x",
        "compute"),
    Bad("algorithm-outputs-str", lambda t: algorithm("a", "y"), E.AlgorithmError, "'a'",
        "list of them"),
    Bad("two-tensors-same-name", lambda t: algorithm("a", compute(
        "y", (4, 8), lambda i, j: X[i, j] + placeholder("x", (4, 8), "float32")[i, j])),
        E.AlgorithmError, "named 'x'", "unique name"),
    Bad("fn-not-callable", lambda t: compute("y", (4,), "x + 1"), E.AlgorithmError,
        "compute 'y'", r"lambda i, j"),
    Bad("fn-keyword-only", lambda t: compute("y", (4,), lambda *, i: V[i]), E.AlgorithmError,
        "compute 'y'", "by position"),
    Bad("fn-arity", lambda t: compute("y", (4,), lambda i, j: X[i, j]), E.AlgorithmError,
        "compute 'y'", r"lambda i:"),
    Bad("fn-returns-number", lambda t: compute("y", (4,), lambda i: 1.0), E.AlgorithmError,
        "compute 'y'", r"x\[i\] \* 0.0"),
    Bad("store-comparison", lambda t: _stage(lambda i, j: X[i, j] > 0), E.AlgorithmError,
        "compute 'y'", r"where\(cond"),
    Bad("declared-dtype", lambda t: compute("y", (4, 8), lambda i, j: X[i, j], dtype="float16"),
        E.AlgorithmError, "compute 'y'", r"astype\('float16'\)"),
    Bad("rank-mismatch", lambda t: compute("y", (4,), lambda i: X[i]), E.AlgorithmError,
        "tensor 'x'", r"x\[i, j\]"),
    Bad("index-out-of-range", lambda t: compute("y", (8,), lambda i: V[i + 1]), E.AlgorithmError,
        "'v' axis 0", "shrink the stage"),
    Bad("index-float", lambda t: compute("y", (4,), lambda i: X[i, 1.5]), E.AlgorithmError,
        "1.5", r"x\[i, j \+ 1\]"),
    Bad("index-bool", lambda t: compute("y", (4,), lambda i: X[i, True]), E.AlgorithmError,
        "True", r"x\[i, 0\]"),
    Bad("dtype-mix", lambda t: _stage(lambda i, j: X[i, j] + H[i, j]), E.AlgorithmError,
        "float32.*float16", r"astype"),
    Bad("operand-str", lambda t: _stage(lambda i, j: X[i, j] + "1"), E.AlgorithmError, "'1'",
        "int/float constants"),
    Bad("index-as-value", lambda t: _stage(lambda i, j: X[i, j] * j), E.AlgorithmError,
        r"x\[i, j\] mul j", "subscripts"),
    Bad("exp-of-number", lambda t: exp(3.0), E.AlgorithmError, r"exp\(3.0\)", "math module"),
    Bad("exp-of-int", lambda t: _stage(lambda i, j: exp(N[i, j])), E.AlgorithmError,
        r"exp\(n\[i, j\]\)", r"astype\('float32'\)"),
    Bad("int-division", lambda t: _stage(lambda i, j: N[i, j] / N[i, j]), E.AlgorithmError,
        r"n\[i, j\]", "cast both operands to float32"),
    Bad("reduce-axis-zero", lambda t: reduce_axis(0, "k"), E.AlgorithmError, "'k'", ">= 1"),
    Bad("reduce-over-index-var", lambda t: compute("y", (4,), lambda i: reduce_sum(X[i, 0], i)),
        E.AlgorithmError, "reduce_sum", r"reduce_axis\(N, 'k'\)"),
    Bad("reduce-var-outside", lambda t: compute("y", (4,), lambda i: X[i, K]), E.AlgorithmError,
        "'k'", "reduce_sum/reduce_max"),
    Bad("reduce-comparison", lambda t: compute("y", (4,), lambda i: reduce_sum(X[i, K] > 0, K)),
        E.AlgorithmError, "reduce_sum", r"where\(cond, 1.0, 0.0\)"),
    Bad("where-python-bool", lambda t: where(X[0, 0] == X[0, 1], 1.0, 0.0), E.AlgorithmError,
        "where", r"eq\(a, b\)"),
    Bad("where-number-cond", lambda t: where(1, X[0, 0], 0.0), E.AlgorithmError, "where",
        r"eq\(a, b\), j <= i"),
    Bad("cast-unknown-dtype", lambda t: cast(X[0, 0], "float64"), E.AlgorithmError, "float64",
        "supported tensor dtypes"),
    Bad("cast-round-mode", lambda t: X[0, 0].astype("int8", "nearest"), E.AlgorithmError,
        "'nearest'", "rint, trunc"),
    Bad("if-on-expression", lambda t: _stage(lambda i, j: X[i, j] if X[i, j] > 0 else 0.0),
        E.AlgorithmError, r"\(x\[i, j\] > 0\)", r"where\(cond, a, b\)"),
    Bad("builtin-max", lambda t: _stage(lambda i, j: max(X[i, j], 0.0)), E.AlgorithmError,
        r"x\[i, j\]", r"maximum\(a, b\)"),
    Bad("eq-number", lambda t: _stage(lambda i, j: where(X[i, j] == 0, 1.0, X[i, j])),
        E.AlgorithmError, r"x\[i, j\] == 0", r"eq\(x\[i, j\], 0\)"),
    Bad("floordiv", lambda t: compute("y", (4,), lambda i: V[i // 2]), E.AlgorithmError, "//",
        "affine"),
    Bad("and-conditions", lambda t: _stage(lambda i, j: where((X[i, j] > 0) & (X[i, j] < 1),
                                                             1.0, 0.0)),
        E.AlgorithmError, "&", "nested where"),
    Bad("round-ndigits", lambda t: round(X[0, 0], 2), E.AlgorithmError, r"round\(x\[0, 0\], 2\)",
        r"x \* 100.0"),
    Bad("numpy-on-expression", lambda t: _stage(lambda i, j: np.exp(X[i, j])), E.AlgorithmError,
        "numpy's exp", r"ascendsched.algo.exp"),
    Bad("tensor-arithmetic", lambda t: X + 1.0, E.AlgorithmError, "tensor 'x'",
        r"compute\('y'"),
    Bad("tensor-called", lambda t: _stage(lambda i, j: X(i, j)), E.AlgorithmError, "tensor 'x'",
        r"x\[i, j\]"),
    Bad("pow-int-negative", lambda t: _stage(lambda i, j: N[i, j] ** -1), E.AlgorithmError,
        r"pow\(n\[i, j\], -1\)", r"astype\('float32'\)"),
    Bad("clip-bounds-swapped", lambda t: clip(X[0, 0], 1.0, -1.0), E.AlgorithmError,
        r"clip\(x\[0, 0\], 1.0, -1.0\)", r"clip\(x, -1.0, 1.0\)"),
    Bad("evaluate-missing-input", lambda t: evaluate(SM, {}), E.AlgorithmError, "'x'",
        r"\{'x': array"),
]

SCHEDULES = [
    Bad("schedule-of-tensor", lambda t: Schedule(SM.outputs[0]), E.ScheduleError, "tensor 'y'",
        r"algorithm\('y_kernel', y\)"),
    Bad("schedule-of-str", lambda t: Schedule("softmax"), E.ScheduleError, "'softmax'",
        r"algorithm\(name, outputs\)"),
    Bad("schedule-bad-target", lambda t: Schedule(SM, target="910b"), E.ScheduleError, "'910b'",
        "ASCEND_910B"),
    Bad("split-unknown-stage", lambda t: Schedule(SM).split("z", "i", 2), E.ScheduleError,
        "'z'", "stages: xf, mx, e, s, y"),
    Bad("split-unknown-axis", lambda t: Schedule(SM).split("y", "q", 2), E.ScheduleError, "'q'",
        "its axes are i, j"),
    Bad("split-factor-zero", lambda t: Schedule(SM).split("y", "i", 0), E.ScheduleError,
        r"split\('y', 'i', 0\)", "int >= 1"),
    Bad("split-factor-bool", lambda t: Schedule(SM).split("y", "i", True), E.ScheduleError,
        r"split\('y', 'i', True\)", "int >= 1"),
    Bad("split-factor-float", lambda t: Schedule(SM).split("y", "i", 2.5), E.ScheduleError,
        r"split\('y', 'i', 2.5\)", "int >= 1"),
    Bad("split-factor-too-big", lambda t: Schedule(SM).split("y", "i", 64), E.ScheduleError,
        r"split\('y', 'i', 64\)", "factor <= 8"),
    Bad("split-twice", lambda t: SPLIT.split("y", "i", 4), E.ScheduleError, "'i'",
        "change the existing factor"),
    Bad("split-name-clash", lambda t: Schedule(SM).split("y", "i", 2, outer="j"),
        E.ScheduleError, "'j'", r"outer='i_out'"),
    Bad("split-input", lambda t: Schedule(SM).split("x", "i", 2), E.ScheduleError, "'x'",
        "cache_read/buffer"),
    Bad("tile-lengths", lambda t: Schedule(SM).tile("y", ("i", "j"), (2,)), E.ScheduleError,
        r"tile\('y'\)", "one factor per axis"),
    Bad("reorder-missing-loop", lambda t: SPLIT.reorder("y", "j_o"), E.ScheduleError,
        r"reorder\('y'", "tile loops are i_o"),
    Bad("fuse-unknown", lambda t: SPLIT.fuse("y", "i_o", "j_o"), E.ScheduleError, "'j_o'",
        "tile loops are i_o"),
    Bad("bind-unknown-loop", lambda t: SPLIT.bind("y", "k_o", 2), E.ScheduleError, "'k_o'",
        "tile loops: i_o"),
    Bad("bind-too-many-cores", lambda t: SPLIT.bind("y", "i_o", 64), E.ScheduleError,
        "cores=64", "1 <= cores <= 48"),
    Bad("bind-cores-str", lambda t: SPLIT.bind("y", "i_o", "4"), E.ScheduleError, "cores='4'",
        "1 <= cores <= 48"),
    Bad("bind-twice", lambda t: SPLIT.bind("y", "i_o", 2).bind("y", "i_o", 2), E.ScheduleError,
        "'i_o'", "bind one loop once"),
    Bad("compute-at-output", lambda t: SPLIT.compute_at("y", "y", "i_o"), E.ScheduleError,
        "'y'", "computed at root"),
    Bad("compute-at-input", lambda t: SPLIT.compute_at("x", "y", "i_o"), E.ScheduleError, "'x'",
        "cache_read/buffer"),
    Bad("compute-at-non-consumer", lambda t: SPLIT.compute_at("s", "mx", "root"),
        E.ScheduleError, "'mx' does not consume 's'", "reads it: y"),
    Bad("compute-at-bad-loop", lambda t: SPLIT.compute_at("mx", "y", "j"), E.ScheduleError,
        "'j'", r"compute_at\('mx', 'y', 'i_o'\)"),
    Bad("inline-output", lambda t: Schedule(SM).compute_inline("y"), E.ScheduleError, "'y'",
        "remove this call"),
    Bad("inline-reduction", lambda t: Schedule(SM).compute_inline("mx"), E.ScheduleError,
        "'mx'", r"compute_at\('mx'"),
    Bad("buffer-copies", lambda t: Schedule(SM).buffer("x", 3), E.ScheduleError, "'x'",
        "1 .single. or 2"),
    Bad("buffer-unknown", lambda t: Schedule(SM).buffer("xx"), E.ScheduleError, "'xx'",
        "tensors are x, xf"),
    Bad("stage-left-at-root", lambda t: lower(SPLIT, stop_after="apply memory plan"), E.ScheduleError, "'xf'",
        r"compute_at\('xf', 'y', 'i_o'\)"),
    Bad("split-of-inner-stage", lambda t: lower(SPLIT.compute_inline("xf").compute_at(
        "mx", "y", "i_o").compute_at("e", "y", "i_o").compute_at("s", "y", "i_o")
        .split("e", "j", 128), stop_after="apply memory plan"), E.ScheduleError, "'e'", "schedule the loops of 'y'"),
    Bad("row-not-32-bytes", lambda t: lower(Schedule(L.bias_add(16, 1000)).split("y", "j", 100),
                                            stop_after="apply memory plan"),
        E.ScheduleError, r"split\('y', 'j', 100\)", "multiple of 16"),
    Bad("ub-capacity", lambda t: lower(Schedule(L.vadd(65536, "float32")).split("z", "i", 32768)
                                       .buffer("x").buffer("y").buffer("z"), stop_after="apply memory plan"),
        E.CapacityError, "x_ub|y_ub|z_ub", "copies=1|split"),
    Bad("lower-algorithm", lambda t: lower(SM), E.ScheduleError, "'softmax'",
        r"lower\(schedule_for\(algo\)\)"),
    Bad("lower-str", lambda t: lower("softmax"), E.ScheduleError, "'softmax'", "Schedule"),
    Bad("schedule-for-str", lambda t: schedule_for("softmax"), E.ScheduleError, "'softmax'",
        "Schedule, a GemmSchedule or an Algorithm"),
    Bad("symbolic-size", lambda t: schedule_for(algorithm("s", compute(
        "y", (sympy.Symbol("M"),), lambda i: placeholder("a", (sympy.Symbol("M"),),
                                                         "float32")[i] * 2.0))),
        E.UnsupportedError, "'a'", "integers"),
    Bad("transposed-read", lambda t: _lower1(lambda i, j: X[j, i], (8, 4)), E.UnsupportedError,
        r"x\[j, i\]", "store it transposed"),
    Bad("rows-and-columns-in-one-reduction", lambda t: _lower1(lambda j: reduce_sum(
        X[_ROWS, j] * placeholder("w", (4, 8), "float32")[j, _ROWS], _ROWS), (4,)),
        E.UnsupportedError, r"reduces over 'r', dimension 0 of 'x'",
        "store one of them transposed"),
    Bad("cast-int32-bfloat16", lambda t: _lower1(lambda i, j: N[i, j].astype("bfloat16")),
        E.UnsupportedError, "int32 -> bfloat16", "cast to an intermediate type"),
    Bad("bf16-arithmetic", lambda t: _lower1(lambda i, j: exp(placeholder(
        "b", (4, 8), "bfloat16")[i, j])), E.UnsupportedError, "'exp'.*bfloat16",
        "float32 first"),
    Bad("two-reduce-axes", lambda t: lower(Schedule(algorithm("k", compute(
        "y", (4,), lambda i: reduce_sum(placeholder("c", (4, 8, 8), "float32")[i, K, _K2],
                                        [K, _K2])))), stop_after="apply memory plan"),
        E.UnsupportedError, "reduces 2 axes", "nest reductions"),
    Bad("maximum-of-numbers", lambda t: maximum(1.0, 2.0), E.AlgorithmError, r"max\(1.0, 2.0\)",
        "compute constants in Python"),
    Bad("eq-of-numbers", lambda t: eq(1, 2), E.AlgorithmError, r"eq\(1, 2\)",
        "compute constants in Python"),
]
_K2 = reduce_axis(8, "k2")


def _quant(extra_shape: tuple[int, ...] = (8,)) -> object:
    x = placeholder("x", (8, 256), "float32")
    k = reduce_axis(256, "k")
    amax = compute("amax", (8,), lambda i: reduce_max(abs(x[i, k]), k))
    q = compute("q", (8, 256), lambda i, j: x[i, j] / amax[i])
    if extra_shape == (8,):
        return algorithm("quant", [q, amax])
    other = compute("colsum", extra_shape, lambda j: x[0, j] * 2.0)
    return algorithm("quant", [q, other])


SEVERAL = [
    Bad("output-stored-by-several-tiles", lambda t: lower(Schedule(_quant()).split("q", "i", 2)
                                                          .split("q", "j", 128), stop_after="apply memory plan"),
        E.ScheduleError, "'amax' does not vary along 'j'", r"Split only the axes 'amax' follows"),
    Bad("output-unrelated-shape", lambda t: lower(Schedule(_quant((256,))).split("q", "i", 2)
                                                  .compute_at("amax", "q", "i_o"), stop_after="apply memory plan"),
        E.ScheduleError, "output 'colsum'", "own algorithm"),
    Bad("compute-at-second-output", lambda t: Schedule(_quant()).split("q", "i", 2)
        .compute_at("amax", "q", "i_o"), E.ScheduleError, "'amax' is an output",
        "remove this call"),
    Bad("index-values-beyond-float16", lambda t: _lower1(lambda i, j: where(
        j <= i, placeholder("w16", (4, 4096), "float16")[i, j], 0.0), (4, 4096)),
        E.UnsupportedError, r"j - \(i\)", "compute them in float32"),
]

CLI = [
    Bad("cli-no-colon", lambda t: load("examples/softmax.py"), E.UserCodeError,
        "'examples/softmax.py'", "MODULE:FUNCTION"),
    Bad("cli-missing-file", lambda t: load(str(t / "nope.py") + ":f"), E.UserCodeError,
        "nope.py", r"\.py file or an importable module"),
    Bad("cli-missing-module", lambda t: load("no_such_module_xyz:f"), E.UserCodeError,
        "'no_such_module_xyz'", r"path to a \.py file"),
    Bad("cli-missing-function", lambda t: load(_file(t, "def schedule():\n    pass\n")
                                               + ":sched"),
        E.UserCodeError, "'sched'", "functions defined there: schedule"),
    Bad("cli-import-raises", lambda t: load(_file(t, "import math\nx = 1 / 0\n") + ":f"),
        E.UserCodeError, r"ZeroDivisionError.*user\.py:2", "fix the file"),
    Bad("cli-syntax-error", lambda t: load(_file(t, "def f(:\n    pass\n") + ":f"),
        E.UserCodeError, r"user\.py:1: SyntaxError", "fix the file"),
    Bad("cli-needs-arguments", lambda t: load(_file(t, "def f(m, n=4):\n    pass\n") + ":f"),
        E.UserCodeError, r"f\(\) needs arguments \(m\)", "give them defaults"),
    Bad("cli-returns-none", lambda t: load(_file(t, "def f():\n    x = 1\n") + ":f"),
        E.UserCodeError, r"f\(\) returned NoneType", "missing `return`"),
    Bad("cli-returns-tensor", lambda t: load(_file(t, (
        "from ascendsched.algo import compute, placeholder\n"
        "def f():\n    x = placeholder('x', (8,), 'float32')\n"
        "    return compute('y', (8,), lambda i: x[i])\n")) + ":f"),
        E.UserCodeError, "returned Tensor", "an Algorithm"),
    Bad("cli-function-raises", lambda t: load(_file(t, "def f():\n    return undefined_name\n")
                                              + ":f"),
        E.UserCodeError, r"NameError.*user\.py:2", r"f\(\) raised"),
    Bad("cli-not-callable", lambda t: load(_file(t, "f = 3\n") + ":f"), E.UserCodeError, "'f'",
        "wrap it"),
    Bad("inputs-missing", lambda t: user_inputs(SM, {}), E.InputError, "'softmax'",
        "missing: x"),
    Bad("inputs-unknown", lambda t: user_inputs(SM, {"x": np.zeros((8, 256)), "q": 1}),
        E.InputError, "unknown: q", "inputs of 'softmax' are x"),
    Bad("inputs-shape", lambda t: user_inputs(SM, {"x": np.zeros((8, 255))}), E.InputError,
        r"input 'x' has shape \[8, 255\]", "reshape it"),
    Bad("inputs-strings", lambda t: user_inputs(SM, {"x": np.full((8, 256), "a")}), E.InputError,
        "input 'x'", "give numbers"),
    Bad("inputs-int-fraction", lambda t: user_inputs(algorithm("k", compute(
        "y", (4, 8), lambda i, j: N[i, j] + 1)), {"n": np.full((4, 8), 0.5)}), E.InputError,
        "input 'n'", r"np\.rint"),
    Bad("inputs-not-a-mapping", lambda t: check(SM, inputs=[1, 2], cpp=False), E.InputError,
        "list", r"\{'x': x\}"),
    Bad("inputs-file-missing", lambda t: load_inputs(t / "in.npz"), E.InputError, "in.npz",
        r"numpy\.savez"),
    Bad("inputs-file-not-npz", lambda t: load_inputs(Path(_file(t, "hello", "in.npz"))),
        E.InputError, "in.npz", r"numpy\.savez"),
]

CATALOGUE = ALGORITHMS + SCHEDULES + SEVERAL + CLI
RAW = (TypeError, KeyError, AttributeError, AssertionError, IndexError, ValueError,
       subprocess.TimeoutExpired)


def test_the_catalogue_holds_at_least_50_distinct_inputs():
    ids = [b.id for b in CATALOGUE]
    assert len(ids) >= 50 and len(set(ids)) == len(ids)
    assert all(issubclass(b.error, E.AscendSchedError) for b in CATALOGUE)


@pytest.mark.parametrize("bad", CATALOGUE, ids=[b.id for b in CATALOGUE])
def test_malformed_input_raises_a_typed_error_naming_object_and_fix(bad, tmp_path):
    try:
        bad.make(tmp_path)
    except E.AscendSchedError as err:
        msg = str(err)
        assert isinstance(err, bad.error), f"{type(err).__name__}: {msg}"
        assert not isinstance(err, RAW), f"typed error also derives from a raw one: {type(err)}"
        assert re.search(bad.names, msg, re.S), f"object not named ({bad.names!r}): {msg}"
        assert re.search(bad.fix, msg, re.S), f"no way out ({bad.fix!r}): {msg}"
    else:
        pytest.fail(f"{bad.id}: no error raised")
