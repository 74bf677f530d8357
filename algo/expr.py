"""Tensor expressions: placeholders, index and reduction variables, ``compute`` and math.

Every node is a frozen dataclass with a ``dtype``. Python scalars adopt the dtype of the other
operand; two tensor operands must have the same dtype (cast explicitly). Comparisons build
``Compare`` nodes (``<``, ``<=``, ``>``, ``>=``; use ``eq``/``ne`` for equality, since ``==``
compares expressions structurally).

    x = placeholder("x", (M, N), "float16")
    m = compute("m", (M,), lambda i: reduce_max(x[i, k], k))        # k = reduce_axis(N, "k")
    y = compute("y", (M, N), lambda i, j: exp(x[i, j] - m[i]))
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Union

import sympy

from ascendsched.dtypes import DType, as_dtype, bool_, int32
from ascendsched.errors import AlgorithmError

Size = Union[int, sympy.Expr]

BINARY_OPS = ("add", "sub", "mul", "div", "max", "min")
UNARY_OPS = ("exp", "log", "sqrt", "rsqrt", "abs", "relu", "neg", "reciprocal")
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
REDUCE_OPS = ("sum", "max", "min")
ROUND_MODES = ("rint", "trunc", "floor", "ceil", "round")
_DEFAULT_AXES = ("i", "j", "p", "q", "r", "s")


class Expr:
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

    def astype(self, dtype: DType | str, round_mode: str = "rint") -> Expr:
        return cast(self, dtype, round_mode)

    def __str__(self) -> str:
        from ascendsched.algo.printer import format_expr

        return format_expr(self)


ExprLike = Union[Expr, int, float]


@dataclass(frozen=True, eq=True)
class Const(Expr):
    value: int | float
    dtype: DType


@dataclass(frozen=True)
class IndexVar(Expr):
    """A data-parallel loop variable of a ``compute``; ``extent`` is the axis size."""

    name: str
    extent: Size
    dtype: DType = int32


@dataclass(frozen=True)
class ReduceVar(Expr):
    """A reduction variable; legal only inside a ``Reduce`` over it."""

    name: str
    extent: Size
    dtype: DType = int32


@dataclass(frozen=True)
class IndexArith(Expr):
    """Integer index arithmetic (``i + 1``, ``2 * i``) used inside tensor subscripts."""

    op: str  # add | sub | mul
    a: Expr
    b: Expr
    dtype: DType = int32


@dataclass(frozen=True)
class Load(Expr):
    tensor: Tensor
    indices: tuple[Expr, ...]
    dtype: DType


@dataclass(frozen=True)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: DType


@dataclass(frozen=True)
class Unary(Expr):
    op: str
    x: Expr
    dtype: DType = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.op not in UNARY_OPS:
            raise AlgorithmError(f"unknown unary op {self.op!r}; known: {', '.join(UNARY_OPS)}")
        if self.dtype is None:
            object.__setattr__(self, "dtype", self.x.dtype)
        if self.op in ("exp", "log", "sqrt", "rsqrt", "reciprocal") and not self.dtype.is_float:
            raise AlgorithmError(
                f"{self.op}({self.x}) needs a floating-point operand, got {self.dtype}; "
                f"cast first: {self.op}(x.astype('float32'))"
            )


@dataclass(frozen=True)
class Compare(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: DType = bool_


@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr
    dtype: DType


@dataclass(frozen=True)
class Cast(Expr):
    x: Expr
    dtype: DType
    round_mode: str = "rint"


@dataclass(frozen=True)
class Reduce(Expr):
    """``op`` over ``axes`` of ``body``, accumulated (and returned) in ``dtype``."""

    op: str
    body: Expr
    axes: tuple[ReduceVar, ...]
    dtype: DType


# --------------------------------------------------------------------------- tensors
@dataclass(frozen=True)
class ComputeOp:
    axes: tuple[IndexVar, ...]
    body: Expr


@dataclass(frozen=True, eq=False)
class Tensor:
    """A placeholder (``op is None``) or a computed stage. Identity is by object."""

    name: str
    shape: tuple[Size, ...]
    dtype: DType
    op: ComputeOp | None = None

    __hash__ = object.__hash__

    @property
    def is_placeholder(self) -> bool:
        return self.op is None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, idx: ExprLike | tuple[ExprLike, ...]) -> Load:
        indices = idx if isinstance(idx, tuple) else (idx,)
        if len(indices) != len(self.shape):
            raise AlgorithmError(
                f"tensor '{self.name}' has rank {len(self.shape)} (shape {list(self.shape)}) "
                f"but is indexed with {len(indices)} subscripts"
            )
        exprs = tuple(_as_index(i, self.name) for i in indices)
        for axis, (e, size) in enumerate(zip(exprs, self.shape)):
            _check_index_range(self.name, axis, e, size)
        return Load(self, exprs, self.dtype)

    def __repr__(self) -> str:
        return f"Tensor({self.name}: {self.dtype}{list(self.shape)})"

    def __str__(self) -> str:
        return self.name


def placeholder(name: str, shape: Sequence[Size], dtype: DType | str = "float16") -> Tensor:
    """An input tensor of the algorithm."""
    dt = as_dtype(dtype)
    if dt.name not in ("float16", "bfloat16", "float32", "int8", "int32"):
        raise AlgorithmError(f"placeholder '{name}': unsupported dtype {dt}")
    return Tensor(name, _check_shape(name, shape), dt)


def reduce_axis(extent: Size, name: str = "k") -> ReduceVar:
    """A reduction variable ranging over ``0 <= name < extent``."""
    return ReduceVar(name, _check_size(name, extent))


def compute(name: str, shape: Sequence[Size], fn: Callable[..., ExprLike],
            dtype: DType | str | None = None) -> Tensor:
    """A stage ``name[i, j, ...] = fn(i, j, ...)``; index names come from fn's parameters.

    ``dtype`` (optional) must equal the body's dtype; it documents intent and catches slips.
    """
    shape_t = _check_shape(name, shape)
    sig = inspect.signature(fn).parameters.values()
    if any(p.kind == p.VAR_POSITIONAL for p in sig):  # lambda *ix: rank-generic bodies
        params = list(_DEFAULT_AXES[:len(shape_t)]) if len(shape_t) <= len(_DEFAULT_AXES) else \
            [f"i{d}" for d in range(len(shape_t))]
    else:
        params = [p.name for p in sig]
    if len(params) != len(shape_t):
        raise AlgorithmError(
            f"compute '{name}': shape has {len(shape_t)} axes but fn takes {len(params)} "
            f"index arguments ({', '.join(params)})"
        )
    axes = tuple(IndexVar(p, s) for p, s in zip(params, shape_t))
    body = fn(*axes)
    if not isinstance(body, Expr):
        raise AlgorithmError(f"compute '{name}': fn must return an expression, got {body!r}")
    if body.dtype is bool_:
        raise AlgorithmError(
            f"compute '{name}': a comparison cannot be stored; use where(cond, a, b)")
    if dtype is not None and as_dtype(dtype) != body.dtype:
        raise AlgorithmError(
            f"compute '{name}': declared dtype {as_dtype(dtype)} but the body is {body.dtype}; "
            f"cast the body: (...).astype('{as_dtype(dtype)}')"
        )
    from ascendsched.algo.check import check_stage_body

    check_stage_body(name, axes, body)
    return Tensor(name, shape_t, body.dtype, ComputeOp(axes, body))


# --------------------------------------------------------------------------- math functions
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
    if not isinstance(cond, Expr) or cond.dtype is not bool_:
        raise AlgorithmError(f"where(): the condition must be a comparison, got {cond}")
    ea, eb = _unify(a, b, "where")
    return Select(cond, ea, eb, ea.dtype)


select = where


def cast(x: ExprLike, dtype: DType | str, round_mode: str = "rint") -> Expr:
    """Convert to ``dtype``; float -> int rounds with ``round_mode``; an integer result out of
    the target type's range saturates to its nearest bound (as the NPU's Cast does)."""
    dt = as_dtype(dtype)
    if round_mode not in ROUND_MODES:
        raise AlgorithmError(f"cast: unknown round mode {round_mode!r}; use one of {ROUND_MODES}")
    e = x if isinstance(x, Expr) else Const(x, dt)
    if e.dtype is bool_:
        raise AlgorithmError("cast: cannot cast a comparison; use where(cond, 1, 0)")
    if e.dtype == dt:
        return e
    return Cast(e, dt, round_mode)


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


# --------------------------------------------------------------------------- helpers
def _reduce(op: str, body: ExprLike, axis: ReduceVar | Sequence[ReduceVar],
            dtype: DType | str | None) -> Expr:
    if not isinstance(body, Expr):
        raise AlgorithmError(f"reduce_{op}: the body must be an expression, got {body!r}")
    if isinstance(axis, ReduceVar):
        axes: tuple = (axis,)
    elif isinstance(axis, (list, tuple)):
        axes = tuple(axis)
    else:
        axes = ()
    if not axes or not all(isinstance(a, ReduceVar) for a in axes):
        raise AlgorithmError(f"reduce_{op}: axes must be reduce_axis() variables, got {axis!r}")
    acc = body.dtype if dtype is None else as_dtype(dtype)
    if body.dtype is bool_:
        raise AlgorithmError(f"reduce_{op}: cannot reduce a comparison")
    return Reduce(op, cast(body, acc), axes, acc)


def _const_for(value: int | float, like: DType, where_: str) -> Const:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AlgorithmError(f"{where_}: cannot use {value!r} in an expression")
    if isinstance(value, float) and not like.is_float:
        if value != int(value):
            raise AlgorithmError(
                f"{where_}: float constant {value} mixed with {like} operand; cast first")
        value = int(value)
    return Const(value, like)


def _is_index(e: Expr) -> bool:
    return isinstance(e, (IndexVar, ReduceVar, IndexArith)) or (
        isinstance(e, Const) and e.dtype is int32 and isinstance(e.value, int))


def _unify(a: ExprLike, b: ExprLike, what: str) -> tuple[Expr, Expr]:
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        raise AlgorithmError(f"{what}: at least one operand must be an expression")
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
        raise AlgorithmError(f"{op}: cannot do arithmetic on a comparison ({x})")
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
        raise AlgorithmError(f"{where_}: boolean subscript {i!r}")
    if isinstance(i, int):
        return Const(i, int32)
    if isinstance(i, Expr) and _is_index(i):
        return i
    raise AlgorithmError(
        f"{where_}: subscript {i} is not an index expression (index variables, reduce "
        f"variables and integer constants combined with + - *)")


def _check_size(name: str, s: Size) -> Size:
    if isinstance(s, bool) or not isinstance(s, (int, sympy.Expr)):
        raise AlgorithmError(f"'{name}': size {s!r} must be an int or a sympy expression")
    if isinstance(s, int) and s < 1:
        raise AlgorithmError(f"'{name}': size {s} must be >= 1")
    if isinstance(s, sympy.Expr) and s.is_number:
        return int(s)
    return s


def _check_shape(name: str, shape: Sequence[Size]) -> tuple[Size, ...]:
    if isinstance(shape, (int, sympy.Expr)):
        shape = (shape,)
    t = tuple(_check_size(name, s) for s in shape)
    if not t:
        raise AlgorithmError(f"tensor '{name}': rank-0 tensors are not supported; use shape (1,)")
    return t


def index_bounds(e: Expr) -> tuple[Size, Size] | None:
    """Inclusive (lo, hi) of an index expression over its variables' ranges, or None."""
    if isinstance(e, Const):
        return e.value, e.value  # type: ignore[return-value]
    if isinstance(e, (IndexVar, ReduceVar)):
        return 0, e.extent - 1
    if isinstance(e, IndexArith):
        a, b = index_bounds(e.a), index_bounds(e.b)
        if a is None or b is None:
            return None
        if e.op == "add":
            return a[0] + b[0], a[1] + b[1]
        if e.op == "sub":
            return a[0] - b[1], a[1] - b[0]
        cands = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
        if all(isinstance(c, int) for c in cands):
            return min(cands), max(cands)
        return None
    return None


def _check_index_range(tensor: str, axis: int, e: Expr, size: Size) -> None:
    b = index_bounds(e)
    if b is None:
        return
    lo, hi = b
    hi_out = sympy.simplify(sympy.sympify(hi) - sympy.sympify(size))
    lo_out = sympy.sympify(lo)
    if (hi_out.is_number and hi_out >= 0) or (lo_out.is_number and lo_out < 0):
        raise AlgorithmError(
            f"tensor '{tensor}' axis {axis} has size {size} but subscript {e} ranges over "
            f"[{lo}, {hi}]: index provably out of range")
