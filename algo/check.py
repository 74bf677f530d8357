"""Well-formedness checks of a stage body, run by ``compute`` (loopy's check.py style)."""

from __future__ import annotations

from ascendsched.algo.expr import (
    Binary,
    Cast,
    Compare,
    Expr,
    IndexArith,
    IndexVar,
    Load,
    Reduce,
    ReduceVar,
    Select,
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
                    f"compute '{name}': nested reductions over the same variable '{rv.name}'")
        _check(name, axes, bound | frozenset(e.axes), e.body, seen_rv)
        return
    for c in children(e):
        _check(name, axes, bound, c, seen_rv)
