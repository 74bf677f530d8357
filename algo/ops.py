"""The named math functions and reductions of the language.

Each builds one expression node (``expr.py``; ``clip`` is ``minimum(maximum(x, lo), hi)``), so
the numpy reference (``evaluate.py``) computes the exact function and the lowering
(``lower/vector_instrs.py``, ``lower/expand_math.py``) rewrites it into instructions the vector
unit has::

    y = compute("y", (M, N), lambda i, j: tanh(x[i, j]) + x[i, j] ** 2)
    q = compute("q", (M, N), lambda i, j: round(clip(x[i, j] / s[i], -127.0, 127.0)))
    m = compute("m", (M,), lambda i: reduce_max(x[i, k], k))

``x ** y`` and ``pow(x, y)``: a constant exponent keeps numpy's meaning (``np.power``, negative
bases included for integer exponents); an expression exponent means ``exp(y * log(x))``, which
is NaN for ``x < 0`` (use a constant integer exponent for negative bases).
"""

from __future__ import annotations

from collections.abc import Sequence

from ascendsched.algo.expr import (
    Binary,
    Const,
    Expr,
    ExprLike,
    Reduce,
    ReduceVar,
    Select,
    Unary,
    _binary,
    _compare,
    _is_index,
    _unify,
    cast,
)
from ascendsched.dtypes import DType, as_dtype, bool_
from ascendsched.errors import AlgorithmError


def exp(x: Expr) -> Expr:
    return Unary("exp", x)


def log(x: Expr) -> Expr:
    return Unary("log", x)


def sqrt(x: Expr) -> Expr:
    return Unary("sqrt", x)


def rsqrt(x: Expr) -> Expr:
    return Unary("rsqrt", x)


def abs_(x: Expr) -> Expr:
    return Unary("abs", x)


def relu(x: Expr) -> Expr:
    return Unary("relu", x)


def reciprocal(x: Expr) -> Expr:
    return Unary("reciprocal", x)


def maximum(a: ExprLike, b: ExprLike) -> Expr:
    return _binary("max", a, b)


def minimum(a: ExprLike, b: ExprLike) -> Expr:
    return _binary("min", a, b)


def eq(a: ExprLike, b: ExprLike) -> Expr:
    return _compare("eq", a, b)


def ne(a: ExprLike, b: ExprLike) -> Expr:
    return _compare("ne", a, b)


def where(cond: Expr, a: ExprLike, b: ExprLike) -> Expr:
    """``a`` where ``cond`` holds, else ``b`` (elementwise)."""
    if isinstance(cond, bool):
        raise AlgorithmError(
            f"where(): the condition is the Python bool {cond}, not an elementwise comparison; "
            f"`a == b` between expressions compares them structurally: use eq(a, b) / ne(a, b)")
    if not isinstance(cond, Expr) or cond.dtype is not bool_:
        raise AlgorithmError(
            f"where(): the condition must be a comparison (x[i] > 0, eq(a, b), j <= i), got "
            f"{cond}")
    ea, eb = _unify(a, b, "where")
    return Select(cond, ea, eb, ea.dtype)


select = where


def reduce_sum(body: ExprLike, axis: ReduceVar | Sequence[ReduceVar],
               dtype: DType | str | None = None) -> Expr:
    """Sum of ``body`` over ``axis``, accumulated in ``dtype`` (default: body's dtype)."""
    return _reduce("sum", body, axis, dtype)


def reduce_max(body: ExprLike, axis: ReduceVar | Sequence[ReduceVar],
               dtype: DType | str | None = None) -> Expr:
    return _reduce("max", body, axis, dtype)


def reduce_min(body: ExprLike, axis: ReduceVar | Sequence[ReduceVar],
               dtype: DType | str | None = None) -> Expr:
    return _reduce("min", body, axis, dtype)


def tanh(x: Expr) -> Expr:
    """Hyperbolic tangent (float operands)."""
    return Unary("tanh", x)


def sigmoid(x: Expr) -> Expr:
    """``1 / (1 + exp(-x))`` (float operands)."""
    return Unary("sigmoid", x)


def round_(x: Expr) -> Expr:
    """To the nearest integer value, ties to even (``np.rint``), in ``x``'s float dtype.

    The builtin ``round(x)`` calls this; to convert to an integer type use
    ``x.astype('int8', 'rint')``."""
    return Unary("round", x)


def clip(x: ExprLike, lo: ExprLike, hi: ExprLike) -> Expr:
    """``min(max(x, lo), hi)`` elementwise (``np.clip``)."""
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo > hi:
        raise AlgorithmError(f"clip({x}, {lo}, {hi}): the lower bound exceeds the upper bound; "
                             f"swap them: clip(x, {hi}, {lo})")
    return minimum(maximum(x, lo), hi)


def pow_(base: ExprLike, exponent: ExprLike) -> Expr:
    """``base ** exponent`` (see the module docstring for its meaning)."""
    what = f"pow({base}, {exponent})"
    if type(exponent).__module__ == "numpy" and hasattr(exponent, "item"):
        exponent = exponent.item()  # type: ignore[union-attr]
    for v in (base, exponent):
        if isinstance(v, Expr) and (v.dtype is bool_ or (_is_index(v) and not isinstance(v, Const))):
            raise AlgorithmError(
                f"{what}: {v} is a {'comparison' if v.dtype is bool_ else 'subscript variable'}, "
                f"not a value; use where() for comparisons and .astype('float32') for indices")
    if isinstance(base, Expr) and not isinstance(exponent, Expr):
        if isinstance(exponent, bool) or not isinstance(exponent, (int, float)):
            raise AlgorithmError(f"{what}: the exponent must be a number or an expression, not "
                                 f"{type(exponent).__name__}")
        if isinstance(exponent, float) and exponent.is_integer() and abs(exponent) < 2**31:
            exponent = int(exponent)
        if not base.dtype.is_float and not (isinstance(exponent, int) and exponent >= 0):
            raise AlgorithmError(
                f"{what}: an integer ({base.dtype}) base takes a non-negative integer exponent; "
                f"cast the base first: ({base}).astype('float32') ** {exponent}")
        return Binary("pow", base, Const(exponent, base.dtype), base.dtype)
    a, b = _unify(base, exponent, "pow")
    if not a.dtype.is_float:
        raise AlgorithmError(
            f"{what}: an expression exponent needs float operands (it is exp(y * log(x))), got "
            f"{a.dtype}; cast both to float32, or use a constant integer exponent")
    return Binary("pow", a, b, a.dtype)


# --------------------------------------------------------------------------- helpers
def _reduce(op: str, body: ExprLike, axis: ReduceVar | Sequence[ReduceVar],
            dtype: DType | str | None) -> Expr:
    if not isinstance(body, Expr):
        raise AlgorithmError(
            f"reduce_{op}: the body must be an expression over the reduce axis, e.g. "
            f"reduce_{op}(x[i, k], k), got {body!r}")
    if isinstance(axis, ReduceVar):
        axes: tuple = (axis,)
    elif isinstance(axis, (list, tuple)):
        axes = tuple(axis)
    else:
        axes = ()
    if not axes or not all(isinstance(a, ReduceVar) for a in axes):
        raise AlgorithmError(
            f"reduce_{op}: axes must be reduce_axis() variables (k = reduce_axis(N, 'k')), "
            f"got {axis!r}")
    acc = body.dtype if dtype is None else as_dtype(dtype)
    if body.dtype is bool_:
        raise AlgorithmError(f"reduce_{op}: cannot reduce the comparison {body}; reduce "
                             f"where(cond, 1.0, 0.0) to count or mask")
    return Reduce(op, cast(body, acc), axes, acc)
