"""Expression nodes and the rules that build them from Python operators.

Every node is a frozen dataclass with a ``dtype``. Python scalars adopt the dtype of the other
operand; two tensor operands must have the same dtype (cast explicitly). Comparisons build
``Compare`` nodes (``<``, ``<=``, ``>``, ``>=``; use ``eq``/``ne`` for equality, since ``==``
compares expressions structurally). Index variables combine into ``IndexArith`` (affine
subscripts) and never into values. Tensors and ``compute`` are in ``tensor.py``; the named
math functions and reductions in ``ops.py``::

    x[i, j] * 2.0               Binary("mul", Load(x, (i, j), float16), Const(2.0, float16),
                                       float16)
    x[i, j + 1]                 Load(x, (i, IndexArith("add", j, Const(1, int32))), float16)
    x[i, j].astype("float32")   Cast(Load(x, (i, j), float16), float32, "rint")
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Union

from ascendsched.algo.guards import Guarded, expr_node
from ascendsched.algo.validate import Size
from ascendsched.dtypes import DType, as_dtype, bool_, int32
from ascendsched.errors import AlgorithmError

if TYPE_CHECKING:
    from ascendsched.algo.tensor import Tensor

BINARY_OPS = ("add", "sub", "mul", "div", "max", "min", "pow")
UNARY_OPS = ("exp", "log", "sqrt", "rsqrt", "abs", "relu", "neg", "reciprocal", "tanh", "sigmoid",
             "round")
FLOAT_UNARY_OPS = ("exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid", "round")
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
REDUCE_OPS = ("sum", "max", "min")
ROUND_MODES = ("rint", "trunc", "floor", "ceil", "round")


class Expr(Guarded):
    """Base of expression nodes; gives them arithmetic operators."""

    dtype: DType

    def __add__(self, o: ExprLike) -> Expr:
        return _binary("add", self, o)

    def __radd__(self, o: ExprLike) -> Expr:
        return _binary("add", o, self)

    def __sub__(self, o: ExprLike) -> Expr:
        return _binary("sub", self, o)

    def __rsub__(self, o: ExprLike) -> Expr:
        return _binary("sub", o, self)

    def __mul__(self, o: ExprLike) -> Expr:
        return _binary("mul", self, o)

    def __rmul__(self, o: ExprLike) -> Expr:
        return _binary("mul", o, self)

    def __truediv__(self, o: ExprLike) -> Expr:
        return _binary("div", self, o)

    def __rtruediv__(self, o: ExprLike) -> Expr:
        return _binary("div", o, self)

    def __neg__(self) -> Expr:
        return Unary("neg", self)

    def __lt__(self, o: ExprLike) -> Expr:
        return _compare("lt", self, o)

    def __le__(self, o: ExprLike) -> Expr:
        return _compare("le", self, o)

    def __gt__(self, o: ExprLike) -> Expr:
        return _compare("gt", self, o)

    def __ge__(self, o: ExprLike) -> Expr:
        return _compare("ge", self, o)

    def __abs__(self) -> Expr:
        return Unary("abs", self)

    def __pow__(self, o: ExprLike) -> Expr:
        from ascendsched.algo.ops import pow_

        return pow_(self, o)

    def __rpow__(self, o: ExprLike) -> Expr:
        from ascendsched.algo.ops import pow_

        return pow_(o, self)

    def __round__(self, ndigits: int | None = None) -> Expr:
        from ascendsched.algo.ops import round_

        if ndigits is not None:
            raise AlgorithmError(
                f"round({self}, {ndigits}): only round(x) (to the nearest integer, ties to even) "
                f"is supported; scale around it, e.g. round(x * 100.0) / 100.0")
        return round_(self)

    def astype(self, dtype: DType | str, round_mode: str = "rint") -> Expr:
        return cast(self, dtype, round_mode)

    def __str__(self) -> str:
        from ascendsched.algo.printer import format_expr

        return format_expr(self)


ExprLike = Union[Expr, int, float]


@expr_node
class Const(Expr):
    value: int | float
    dtype: DType


@expr_node
class IndexVar(Expr):
    """A data-parallel loop variable of a ``compute``; ``extent`` is the axis size."""

    name: str
    extent: Size
    dtype: DType = int32


@expr_node
class ReduceVar(Expr):
    """A reduction variable; legal only inside a ``Reduce`` over it."""

    name: str
    extent: Size
    dtype: DType = int32


@expr_node
class IndexArith(Expr):
    """Integer index arithmetic (``i + 1``, ``2 * i``) used inside tensor subscripts."""

    op: str  # add | sub | mul
    a: Expr
    b: Expr
    dtype: DType = int32


@expr_node
class Load(Expr):
    tensor: Tensor
    indices: tuple[Expr, ...]
    dtype: DType


@expr_node
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: DType


@expr_node
class Unary(Expr):
    op: str
    x: Expr
    dtype: DType = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.op not in UNARY_OPS:
            raise AlgorithmError(f"unknown unary op {self.op!r}; known: {', '.join(UNARY_OPS)}")
        if not isinstance(self.x, Expr):
            raise AlgorithmError(
                f"{self.op}({self.x!r}): the argument must be an expression such as x[i]; for a "
                f"constant use Python's math module")
        if _is_index(self.x) and not isinstance(self.x, Const):
            raise AlgorithmError(
                f"{self.op}({self.x}): an index variable is a subscript, not a value; convert "
                f"it first: {self.op}({self.x}.astype('float32'))")
        if self.dtype is None:
            object.__setattr__(self, "dtype", self.x.dtype)
        if self.x.dtype is bool_:
            raise AlgorithmError(f"{self.op}({self.x}): cannot apply {self.op} to a comparison; "
                                 f"use where(cond, a, b)")
        if self.op in FLOAT_UNARY_OPS and not self.dtype.is_float:
            raise AlgorithmError(
                f"{self.op}({self.x}) needs a floating-point operand, got {self.dtype}; "
                f"cast first: {self.op}(x.astype('float32'))"
            )


@expr_node
class Compare(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: DType = bool_


@expr_node
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr
    dtype: DType


@expr_node
class Cast(Expr):
    x: Expr
    dtype: DType
    round_mode: str = "rint"


@expr_node
class Reduce(Expr):
    """``op`` over ``axes`` of ``body``, accumulated (and returned) in ``dtype``."""

    op: str
    body: Expr
    axes: tuple[ReduceVar, ...]
    dtype: DType


# --------------------------------------------------------------------------- casts
def cast(x: ExprLike, dtype: DType | str, round_mode: str = "rint") -> Expr:
    """Convert to ``dtype``; float -> int rounds with ``round_mode``; an integer result out of
    the target type's range saturates to its nearest bound (as the NPU's Cast does)."""
    dt = as_dtype(dtype)
    if round_mode not in ROUND_MODES:
        raise AlgorithmError(
            f"cast to {dt}: unknown round mode {round_mode!r}; use one of {', '.join(ROUND_MODES)}")
    e = x if isinstance(x, Expr) else Const(x, dt)
    if e.dtype is bool_:
        raise AlgorithmError("cast: cannot cast a comparison; use where(cond, 1, 0)")
    if e.dtype == dt:
        return e
    return Cast(e, dt, round_mode)


# --------------------------------------------------------------------------- helpers
def _const_for(value: int | float, like: DType, where_: str) -> Const:
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()  # a numpy scalar
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AlgorithmError(
            f"{where_}: cannot use {value!r} ({type(value).__name__}) in an expression; "
            f"operands are expressions (x[i], ...) or int/float constants")
    if isinstance(value, float) and not like.is_float:
        if value != int(value):
            raise AlgorithmError(
                f"{where_}: float constant {value} mixed with a {like} operand; cast the operand "
                f"first: x.astype('float32')")
        value = int(value)
    return Const(value, like)


def _is_index(e: Expr) -> bool:
    return isinstance(e, (IndexVar, ReduceVar, IndexArith)) or (
        isinstance(e, Const) and e.dtype is int32 and isinstance(e.value, int))


def _unify(a: ExprLike, b: ExprLike, what: str) -> tuple[Expr, Expr]:
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        raise AlgorithmError(f"{what}({a!r}, {b!r}): at least one operand must be an expression "
                             f"such as x[i]; compute constants in Python")
    if not isinstance(a, Expr):
        a = _const_for(a, b.dtype, what)  # type: ignore[union-attr]
    if not isinstance(b, Expr):
        b = _const_for(b, a.dtype, what)
    if a.dtype != b.dtype:
        raise AlgorithmError(
            f"{what}: operands have different dtypes ({a} is {a.dtype}, {b} is {b.dtype}); "
            f"insert a cast, e.g. ({b}).astype('{a.dtype}')"
        )
    return a, b


def _binary(op: str, a: ExprLike, b: ExprLike) -> Expr:
    ea = a if isinstance(a, Expr) else None
    eb = b if isinstance(b, Expr) else None
    if (ea is None or _is_index(ea)) and (eb is None or _is_index(eb)) and op in ("add", "sub", "mul"):
        ia = _as_index(a, "index arithmetic")
        ib = _as_index(b, "index arithmetic")
        return IndexArith(op, ia, ib)
    if (ea is not None and _is_index(ea) and not isinstance(ea, Const)) or (
            eb is not None and _is_index(eb) and not isinstance(eb, Const)):
        raise AlgorithmError(
            f"{op}: index variables can only be used as tensor subscripts (or added/multiplied "
            f"with integers inside them), not as values; got {a} {op} {b}")
    x, y = _unify(a, b, op)
    if x.dtype is bool_:
        raise AlgorithmError(f"{op}: cannot do arithmetic on the comparison {x}; turn it into a "
                             f"value with where(cond, 1.0, 0.0)")
    if op == "div" and not x.dtype.is_float:
        raise AlgorithmError(
            f"div: integer division of {x} by {y} ({x.dtype}) is not supported; "
            f"cast both operands to float32 first")
    return Binary(op, x, y, x.dtype)


def _compare(op: str, a: ExprLike, b: ExprLike) -> Expr:
    x, y = _unify(a, b, op)
    return Compare(op, x, y)


def _as_index(i: ExprLike, where_: str) -> Expr:
    if isinstance(i, bool):
        raise AlgorithmError(f"{where_}: boolean subscript {i!r}; subscripts are index variables "
                             f"or ints (x[i, 0])")
    if isinstance(i, int):
        return Const(i, int32)
    if isinstance(i, Expr) and _is_index(i):
        return i
    raise AlgorithmError(
        f"{where_}: subscript {i} is not an index expression (index variables, reduce "
        f"variables and integer constants combined with + - *); e.g. x[i, j + 1], x[i, 0]")
