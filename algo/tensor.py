"""Tensors: placeholders (the inputs), ``compute`` stages and reduction axes.

A ``Tensor`` is a placeholder (``op is None``) or a computed stage whose ``ComputeOp`` holds
one ``IndexVar`` per axis and the body expression (``expr.py``) over them. ``compute`` names
the index variables after ``fn``'s parameters, checks the body (``check.py``) and returns the
stage; subscripting a tensor builds a ``Load``::

    x = placeholder("x", (M, N), "float16")
    k = reduce_axis(N, "k")
    m = compute("m", (M,), lambda i: reduce_max(x[i, k], k))
    y = compute("y", (M, N), lambda i, j: exp(x[i, j] - m[i]))
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ascendsched.algo.expr import Expr, ExprLike, IndexVar, Load, ReduceVar, _as_index
from ascendsched.algo.validate import Size, check_name, check_shape, check_size
from ascendsched.dtypes import DType, as_dtype, bool_
from ascendsched.errors import AlgorithmError

_DEFAULT_AXES = ("i", "j", "p", "q", "r", "s")


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
