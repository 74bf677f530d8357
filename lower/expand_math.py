"""``expand_math``: math the vector unit has no single basic instruction for, in ones it has.

Runs on each stage body after inlining (``build_loop_nest``), before instruction selection::

    tanh(x)           -> 1 + (-2) * reciprocal(exp(2 * x) + 1)
    sigmoid(x)        -> reciprocal(exp(-x) + 1)
    round(x)          -> Cast float32 -> float32 with CAST_RINT (float16/bfloat16 via float32)
    x ** n            -> products of repeated squares (n a constant integer; reciprocal if n < 0)
    x ** 0.5, ** -0.5 -> sqrt(x), rsqrt(x)
    x ** c, x ** y    -> exp(c * log(x)), exp(y * log(x))

AscendC has Tanh, Sigmoid, Power and Round as high-level APIs that need a temporary buffer
(asc-devkit docs/zh/api/SIMD-API/高阶API/数学计算/Tanh接口/Tanh.md, .../Power接口/Power.md,
.../Round接口/Round.md, 高阶API/激活函数/Sigmoid接口/Sigmoid.md); the expansions use only the
basic APIs the emitter already calls (Exp, Ln, Sqrt, Rsqrt, Reciprocal, Adds, Muls, Mul, Cast).
Cast on Atlas A2 (docs/zh/api/SIMD-API/基础API/Memory矢量计算/类型转换/Cast.md, A2 table) has
float -> float with CAST_RINT/FLOOR/CEIL/ROUND/TRUNC, which ``round`` uses. Casts the table lacks
(float32 -> int8, ...) are the target's exact chains (``target.cast_chains``), not expanded here.
"""

from __future__ import annotations

import numpy as np

from ascendsched.algo.check import children, with_children
from ascendsched.algo.expr import Binary, Cast, Const, Expr, Unary
from ascendsched.dtypes import DType, float32, store
from ascendsched.target import Target


def expand_math(e: Expr, target: Target) -> Expr:
    """``e`` with every tanh, sigmoid, round and pow expanded (the same
    object when there is none)."""
    kids = children(e)
    new = tuple(expand_math(c, target) for c in kids)
    if new != kids:
        e = with_children(e, new)
    if isinstance(e, Unary) and e.op in _UNARY:
        return _UNARY[e.op](e.x, e.dtype)
    if isinstance(e, Binary) and e.op == "pow":
        return _pow(e.a, e.b, e.dtype)
    return e


def _c(value: float | int, dt: DType) -> Const:
    return Const(value, dt)


def _mul(a: Expr, b: Expr, dt: DType) -> Expr:
    return Binary("mul", a, b, dt)


def _add(a: Expr, b: Expr, dt: DType) -> Expr:
    return Binary("add", a, b, dt)


def _tanh(x: Expr, dt: DType) -> Expr:
    # exp(2x) overflows to inf for large x: reciprocal(inf) = 0 gives 1; for very negative x,
    # exp -> 0 gives 1 - 2 = -1
    r = Unary("reciprocal", _add(Unary("exp", _mul(x, _c(2.0, dt), dt)), _c(1.0, dt), dt))
    return _add(_mul(r, _c(-2.0, dt), dt), _c(1.0, dt), dt)


def _sigmoid(x: Expr, dt: DType) -> Expr:
    return Unary("reciprocal", _add(Unary("exp", Unary("neg", x)), _c(1.0, dt), dt))


def _round(x: Expr, dt: DType) -> Expr:
    if isinstance(x, Const):
        return _c(store(dt, np.rint(np.float64(x.value))).item(), dt)
    if dt is float32:
        return Cast(x, float32, "rint")
    # float16/bfloat16 -> float32 is exact, and an integral float32 made from them is exact
    # in their own type again
    return Cast(Cast(Cast(x, float32), float32, "rint"), dt, "rint")


def _pow(x: Expr, y: Expr, dt: DType) -> Expr:
    if not isinstance(y, Const):
        return Unary("exp", _mul(y, Unary("log", x), dt))
    c = y.value
    if isinstance(c, int) or float(c).is_integer():
        n = abs(int(c))
        if n == 0:
            return _c(1 if not dt.is_float else 1.0, dt)
        out: Expr | None = None
        base = x
        while n:
            if n & 1:
                out = base if out is None else _mul(out, base, dt)
            n >>= 1
            if n:
                base = _mul(base, base, dt)
        assert out is not None
        return Unary("reciprocal", out) if int(c) < 0 else out
    if c == 0.5:
        return Unary("sqrt", x)
    if c == -0.5:
        return Unary("rsqrt", x)
    return Unary("exp", _mul(Unary("log", x), _c(float(c), dt), dt))


_UNARY = {"tanh": _tanh, "sigmoid": _sigmoid, "round": _round}
