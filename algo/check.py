"""Well-formedness checks of a stage body, run by ``compute`` (loopy's check.py style), and
the walkers they share: children, rebuilding, inlining."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import replace

import sympy

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
from ascendsched.errors import AlgorithmError


def check_stage_body(name: str, axes: tuple[IndexVar, ...], body: Expr) -> None:
    """Raise AlgorithmError if ``body`` uses foreign index variables or free reduce variables."""
    _check(name, set(axes), frozenset(), body, set())


def children(e: Expr) -> tuple[Expr, ...]:
    """Direct sub-expressions of ``e`` (subscripts included)."""
    if isinstance(e, Load):
        return e.indices
    if isinstance(e, (Binary, Compare, IndexArith)):
        return (e.a, e.b)
    if isinstance(e, Unary):
        return (e.x,)
    if isinstance(e, Cast):
        return (e.x,)
    if isinstance(e, Select):
        return (e.cond, e.a, e.b)
    if isinstance(e, Reduce):
        return (e.body,)
    return ()


def with_children(e: Expr, kids: tuple[Expr, ...]) -> Expr:
    """``e`` with its direct sub-expressions (``children``) replaced by ``kids``."""
    if kids == children(e):
        return e
    if isinstance(e, Load):
        return replace(e, indices=kids)
    if isinstance(e, (Binary, Compare, IndexArith)):
        return replace(e, a=kids[0], b=kids[1])
    if isinstance(e, (Unary, Cast)):
        return replace(e, x=kids[0])
    if isinstance(e, Select):
        return replace(e, cond=kids[0], a=kids[1], b=kids[2])
    if isinstance(e, Reduce):
        return replace(e, body=kids[0])
    raise AssertionError(e)


def inlined(e: Expr, names: Container[str]) -> Expr:
    """``e`` with every load of a stage in ``names`` replaced by that stage's body at the
    load's subscripts (recursively): what a stage computes once its producers are inlined."""
    if isinstance(e, Load) and e.tensor.name in names:
        body = inlined(e.tensor.op.body, names)  # type: ignore[union-attr]
        return subst(body, dict(zip(e.tensor.op.axes, e.indices)))  # type: ignore[union-attr]
    kids = children(e)
    if not kids:
        return e
    return with_children(e, tuple(inlined(c, names) for c in kids))


def subst(e: Expr, mapping: dict) -> Expr:
    """``e`` with the index and reduce variables of ``mapping`` replaced by their values."""
    if isinstance(e, (IndexVar, ReduceVar)) and e in mapping:
        return mapping[e]
    kids = children(e)
    if not kids:
        return e
    return with_children(e, tuple(subst(c, mapping) for c in kids))


def _check(name: str, axes: set[IndexVar], bound: frozenset[ReduceVar], e: Expr,
           seen_rv: set[ReduceVar]) -> None:
    if isinstance(e, IndexVar) and e not in axes:
        raise AlgorithmError(
            f"compute '{name}': index variable '{e.name}' does not belong to this stage "
            f"(its axes are {', '.join(a.name for a in axes)}); use this stage's own variables")
    if isinstance(e, ReduceVar) and e not in bound:
        raise AlgorithmError(
            f"compute '{name}': reduction variable '{e.name}' is used outside a reduction over "
            f"it; wrap the use in reduce_sum/reduce_max/reduce_min(..., {e.name})")
    if isinstance(e, Reduce):
        for rv in e.axes:
            if rv in bound:
                raise AlgorithmError(
                    f"compute '{name}': nested reductions over the same variable '{rv.name}'; "
                    f"give the inner reduction its own reduce_axis()")
        _check(name, axes, bound | frozenset(e.axes), e.body, seen_rv)
        return
    for c in children(e):
        _check(name, axes, bound, c, seen_rv)


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


def check_index_range(tensor: str, axis: int, e: Expr, size: Size) -> None:
    """Raise AlgorithmError when subscript ``e`` of axis ``axis`` is provably out of range."""
    b = index_bounds(e)
    if b is None:
        return
    lo, hi = b
    hi_out = sympy.simplify(sympy.sympify(hi) - sympy.sympify(size))
    lo_out = sympy.sympify(lo)
    if (hi_out.is_number and hi_out >= 0) or (lo_out.is_number and lo_out < 0):
        raise AlgorithmError(
            f"tensor '{tensor}' axis {axis} has size {size} but subscript {e} ranges over "
            f"[{lo}, {hi}]: index provably out of range; keep subscripts within [0, "
            f"{size} - 1], e.g. shrink the stage's shape by the shift")
