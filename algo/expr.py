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

from ascendsched.algo.guards import Guarded, expr_node
from ascendsched.algo.validate import Size, check_name, check_shape, check_size
from ascendsched.dtypes import DType, as_dtype, bool_, int32
from ascendsched.errors import AlgorithmError

BINARY_OPS = ("add", "sub", "mul", "div", "max", "min", "pow")
UNARY_OPS = ("exp", "log", "sqrt", "rsqrt", "abs", "relu", "neg", "reciprocal", "tanh", "sigmoid",
             "round")
FLOAT_UNARY_OPS = ("exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid", "round")
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
REDUCE_OPS = ("sum", "max", "min")
ROUND_MODES = ("rint", "trunc", "floor", "ceil", "round")
_DEFAULT_AXES = ("i", "j", "p", "q", "r", "s")


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
                f"but is indexed with {len(indices)} subscripts; give one per axis: "
                f"{self.name}[{', '.join(_DEFAULT_AXES[:len(self.shape)])}]"
            )
        exprs = tuple(_as_index(i, self.name) for i in indices)
        from ascendsched.algo.check import check_index_range

        for axis, (e, size) in enumerate(zip(exprs, self.shape)):
            check_index_range(self.name, axis, e, size)
        return Load(self, exprs, self.dtype)

    def __repr__(self) -> str:
        return f"Tensor({self.name}: {self.dtype}{list(self.shape)})"

    def __call__(self, *args: object, **kwargs: object) -> Load:
        raise AlgorithmError(
            f"tensor '{self.name}' is indexed with brackets, not called: {self.name}[i, j]")

    def _whole(self, *args: object) -> Expr:
        idx = ", ".join(_DEFAULT_AXES[:self.ndim])
        raise AlgorithmError(
            f"tensor '{self.name}' is a whole tensor, not an element: arithmetic is written per "
            f"element inside compute(), e.g. compute('y', {list(self.shape)}, lambda {idx}: "
            f"{self.name}[{idx}] + 1.0)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _whole
    __truediv__ = __rtruediv__ = __pow__ = __neg__ = __lt__ = __gt__ = __le__ = __ge__ = _whole

    def __str__(self) -> str:
        return self.name


def placeholder(name: str, shape: Sequence[Size], dtype: DType | str = "float16") -> Tensor:
    """An input tensor of the algorithm."""
    check_name("placeholder", name)
    dt = as_dtype(dtype)
    if dt.name not in ("float16", "bfloat16", "float32", "int8", "int32"):
        raise AlgorithmError(
            f"placeholder '{name}': unsupported dtype {dt}; inputs are float16, bfloat16, "
            f"float32, int8 or int32")
    return Tensor(name, check_shape(name, shape), dt)


def reduce_axis(extent: Size, name: str = "k") -> ReduceVar:
    """A reduction variable ranging over ``0 <= name < extent``."""
    check_name("reduce_axis", name)
    return ReduceVar(name, check_size(name, extent))


def compute(name: str, shape: Sequence[Size], fn: Callable[..., ExprLike],
            dtype: DType | str | None = None) -> Tensor:
    """A stage ``name[i, j, ...] = fn(i, j, ...)``; index names come from fn's parameters.

    ``dtype`` (optional) must equal the body's dtype; it documents intent and catches slips.
    """
    check_name("compute", name)
    shape_t = check_shape(name, shape)
    if not callable(fn):
        raise AlgorithmError(
            f"compute '{name}': fn must be a function of the index variables, e.g. "
            f"lambda i, j: x[i, j] * 2.0; got {type(fn).__name__} {fn!r}")
    sig = inspect.signature(fn).parameters.values()
    bad = [p.name for p in sig if p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD)]
    if bad:
        raise AlgorithmError(
            f"compute '{name}': fn's parameters {', '.join(bad)} are keyword-only; every "
            f"index variable is passed by position: lambda i, j: ... (or lambda *ix: ...)")
    if any(p.kind == p.VAR_POSITIONAL for p in sig):  # lambda *ix: rank-generic bodies
        params = list(_DEFAULT_AXES[:len(shape_t)]) if len(shape_t) <= len(_DEFAULT_AXES) else \
            [f"i{d}" for d in range(len(shape_t))]
    else:
        params = [p.name for p in sig]
    if len(params) != len(shape_t):
        raise AlgorithmError(
            f"compute '{name}': shape has {len(shape_t)} axes but fn takes {len(params)} "
            f"index arguments ({', '.join(params)}); give fn one parameter per axis: "
            f"lambda {', '.join(_DEFAULT_AXES[:len(shape_t)])}: ..."
        )
    axes = tuple(IndexVar(p, s) for p, s in zip(params, shape_t))
    body = fn(*axes)
    if not isinstance(body, Expr):
        raise AlgorithmError(
            f"compute '{name}': fn must return an expression built from tensors, got {body!r}; "
            f"a constant stage is not supported: read a tensor, e.g. x[i] * 0.0 + {body!r}")
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
