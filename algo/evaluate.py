"""The numpy reference: computes every stage of an algorithm.

Rounding (documented contract every schedule is compared against): each operation computes in
its operand dtype and rounds its result to that dtype (round-to-nearest-even; bfloat16 emulated
in float32 storage); a reduction casts its body to the accumulation dtype, accumulates in it
(numpy pairwise summation; a float32 sum in float64, rounded once) and returns it in that dtype; a stage stores its body's dtype.
Integer arithmetic wraps (two's complement).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import sympy

from ascendsched.algo.algorithm import Algorithm, algorithm
from ascendsched.algo.expr import (
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    IndexArith,
    IndexVar,
    Load,
    Reduce,
    ReduceVar,
    Select,
    Size,
    Unary,
)
from ascendsched.algo.tensor import Tensor
from ascendsched.dtypes import store
from ascendsched.errors import AlgorithmError

# max/min (and relu, reductions by max/min) propagate NaN, as numpy does; the 910B docs do not
# say what Max/Min do with NaN, so the IR simulator and the host runtime follow this choice
# (emit_ascendc/runtime/kernel_operator.h, before nan_max, cites what the docs say)
_BIN = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
        "max": np.maximum, "min": np.minimum}
_CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal}
_RED = {"sum": np.sum, "max": np.max, "min": np.min}


def evaluate(algo: Algorithm | Tensor | Sequence[Tensor], inputs: Mapping[str, np.ndarray]
             ) -> dict[str, np.ndarray]:
    """Values of every tensor (inputs included) by name, in their dtypes' numpy storage."""
    a = algo if isinstance(algo, Algorithm) else algorithm("reference", algo)
    sizes = bind_sizes(a, inputs)
    values: dict[str, np.ndarray] = {}
    for t in a.inputs:
        values[t.name] = store(t.dtype, np.asarray(inputs[t.name]))
    with np.errstate(all="ignore"):
        for t in a.stages:
            shape = tuple(concrete(s, sizes) for s in t.shape)
            assert t.op is not None
            env = {}
            for pos, v in enumerate(t.op.axes):
                env[v] = np.arange(shape[pos]).reshape(
                    [1] * pos + [shape[pos]] + [1] * (len(shape) - pos - 1))
            out = _eval(t.op.body, env, values, sizes)
            values[t.name] = store(t.dtype, np.broadcast_to(out, shape)).copy()
    return values


def bind_sizes(a: Algorithm, inputs: Mapping[str, np.ndarray]) -> dict[sympy.Symbol, int]:
    """Bind symbolic sizes from the input arrays' shapes; check every input's shape."""
    sizes: dict[sympy.Symbol, int] = {}
    for t in a.inputs:
        if t.name not in inputs:
            raise AlgorithmError(f"evaluate: missing input '{t.name}' ({t.dtype}"
                                 f"{list(t.shape)}); pass {{'{t.name}': array, ...}}")
        arr = np.asarray(inputs[t.name])
        if arr.ndim != t.ndim:
            raise AlgorithmError(
                f"evaluate: input '{t.name}' has rank {arr.ndim}, expected shape {list(t.shape)}")
        for want, got in zip(t.shape, arr.shape):
            if isinstance(want, sympy.Symbol):
                if sizes.setdefault(want, got) != got:
                    raise AlgorithmError(
                        f"evaluate: size {want} bound to {sizes[want]} and {got} ('{t.name}')")
    for t in a.inputs:
        arr_shape = np.asarray(inputs[t.name]).shape
        want = tuple(concrete(s, sizes) for s in t.shape)
        if want != arr_shape:
            raise AlgorithmError(
                f"evaluate: input '{t.name}' has shape {list(arr_shape)}, expected {list(want)}")
    return sizes


def concrete(s: Size, sizes: Mapping[sympy.Symbol, int]) -> int:
    if isinstance(s, int):
        return s
    v = sympy.sympify(s).subs(sizes)
    if not v.is_number:
        raise AlgorithmError(f"size {s} is not bound by the inputs ({dict(sizes)})")
    return int(v)


def _eval(e: Expr, env: dict, values: dict[str, np.ndarray], sizes: Mapping) -> np.ndarray:
    if isinstance(e, Const):
        return np.asarray(store(e.dtype, e.value))
    if isinstance(e, (IndexVar, ReduceVar)):
        return env[e]
    if isinstance(e, IndexArith):
        a, b = _eval(e.a, env, values, sizes), _eval(e.b, env, values, sizes)
        return {"add": np.add, "sub": np.subtract, "mul": np.multiply}[e.op](a, b)
    if isinstance(e, Load):
        idx = [np.asarray(_eval(i, env, values, sizes), dtype=np.int64) for i in e.indices]
        arr = values[e.tensor.name]
        for axis, (ix, n) in enumerate(zip(idx, arr.shape)):
            if ix.size and (ix.min() < 0 or ix.max() >= n):
                raise AlgorithmError(
                    f"tensor '{e.tensor.name}' axis {axis} (size {n}) indexed out of range "
                    f"[{ix.min()}, {ix.max()}] by {e}")
        return arr[tuple(idx)]
    if isinstance(e, Binary):
        a, b = _eval(e.a, env, values, sizes), _eval(e.b, env, values, sizes)
        if e.op == "pow":
            return store(e.dtype, _pow(a, b, isinstance(e.b, Const)))
        return store(e.dtype, _BIN[e.op](a, b))
    if isinstance(e, Unary):
        x = _eval(e.x, env, values, sizes)
        return store(e.dtype, _unary(e.op, x))
    if isinstance(e, Compare):
        return _CMP[e.op](_eval(e.a, env, values, sizes), _eval(e.b, env, values, sizes))
    if isinstance(e, Select):
        c = _eval(e.cond, env, values, sizes)
        return store(e.dtype, np.where(c, _eval(e.a, env, values, sizes),
                                       _eval(e.b, env, values, sizes)))
    if isinstance(e, Cast):
        # a cast to an integer saturates (the vector unit's Cast, dtypes.store)
        return store(e.dtype, _eval(e.x, env, values, sizes), e.round_mode, saturate=True)
    if isinstance(e, Reduce):
        inner = dict(env)
        depth = max([np.ndim(v) for v in env.values()], default=0)
        n = len(e.axes)
        for pos, rv in enumerate(e.axes):
            ext = concrete(rv.extent, sizes)
            inner[rv] = np.arange(ext).reshape([1] * pos + [ext] + [1] * (n - pos - 1 + depth))
        body = _eval(e.body, inner, values, sizes)
        full = np.broadcast_to(body, np.broadcast_shapes(
            body.shape, *(np.shape(inner[rv]) for rv in e.axes)))
        # float32 sums accumulate in float64 and round once: numpy sums along a leading axis
        # one row after another, and with cancellation (416 in magnitude summing to 0.17) its
        # float32 rounding exceeded the kernel's (a tree, as the hardware's) tenfold
        acc = (np.float64 if e.dtype.name == "float32" else e.dtype.np) if e.dtype.is_float \
            else np.int64
        red = _RED[e.op](full, axis=tuple(range(n)), dtype=acc) if e.op == "sum" else \
            _RED[e.op](full, axis=tuple(range(n)))
        return store(e.dtype, red)
    raise AlgorithmError(f"evaluate: unknown expression node {e!r}")


def _pow(a: np.ndarray, b: np.ndarray, const_exponent: bool) -> np.ndarray:
    """np.power for a constant exponent; exp(b * log(a)) for an expression exponent
    (``algo/ops.py``: NaN for a < 0)."""
    if not const_exponent:
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        return np.exp(b64 * np.log(a64))
    if a.dtype.kind in "iu":
        return np.power(a.astype(np.int64), b.astype(np.int64))
    return np.power(a.astype(np.float64), b.astype(np.float64))


def _unary(op: str, x: np.ndarray) -> np.ndarray:
    if op == "tanh":
        return np.tanh(x.astype(np.float64))
    if op == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
    if op == "round":
        return np.rint(x)
    if op == "exp":
        return np.exp(x)
    if op == "log":
        return np.log(x)
    if op == "sqrt":
        return np.sqrt(x)
    if op == "rsqrt":
        return np.reciprocal(np.sqrt(x))
    if op == "reciprocal":
        return np.reciprocal(x) if x.dtype.kind == "f" else 1 / x
    if op == "abs":
        return np.abs(x)
    if op == "relu":
        return np.maximum(x, np.zeros((), x.dtype))
    if op == "neg":
        return np.negative(x)
    raise AlgorithmError(f"unknown unary op {op}")
