"""Everyday math beyond the primitives of ``expr.py``: tanh, sigmoid, pow, round, clip.

Each builds one expression node (``clip`` is ``minimum(maximum(x, lo), hi)``), so the numpy
reference (``evaluate.py``) computes the exact function and the lowering
(``lower/expand_math.py``) rewrites it into instructions the vector unit has::

    y = compute("y", (M, N), lambda i, j: tanh(x[i, j]) + x[i, j] ** 2)
    q = compute("q", (M, N), lambda i, j: round(clip(x[i, j] / s[i], -127.0, 127.0)))

``x ** y`` and ``pow(x, y)``: a constant exponent keeps numpy's meaning (``np.power``, negative
bases included for integer exponents); an expression exponent means ``exp(y * log(x))``, which
is NaN for ``x < 0`` (use a constant integer exponent for negative bases).
"""

from __future__ import annotations

from ascendsched.algo.expr import (
    Binary,
    Const,
    Expr,
    ExprLike,
    Unary,
    _is_index,
    _unify,
    maximum,
    minimum,
)
from ascendsched.dtypes import bool_
from ascendsched.errors import AlgorithmError


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
