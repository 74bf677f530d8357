"""Readable text of expressions and algorithms: ``y[i, j] = exp(x[i, j] - m[i])``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ascendsched.algo.algorithm import Algorithm
    from ascendsched.algo.expr import Expr

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def format_expr(e: Expr) -> str:
    from ascendsched.algo import expr as x

    if isinstance(e, x.Const):
        return repr(e.value)
    if isinstance(e, (x.IndexVar, x.ReduceVar)):
        return e.name
    if isinstance(e, x.IndexArith):
        return f"{format_expr(e.a)} {_INFIX[e.op]} {format_expr(e.b)}"
    if isinstance(e, x.Load):
        return f"{e.tensor.name}[{', '.join(format_expr(i) for i in e.indices)}]"
    if isinstance(e, x.Binary):
        if e.op in _INFIX:
            return f"({format_expr(e.a)} {_INFIX[e.op]} {format_expr(e.b)})"
        return f"{e.op}({format_expr(e.a)}, {format_expr(e.b)})"
    if isinstance(e, x.Unary):
        return f"-{format_expr(e.x)}" if e.op == "neg" else f"{e.op}({format_expr(e.x)})"
    if isinstance(e, x.Compare):
        return f"({format_expr(e.a)} {_CMP[e.op]} {format_expr(e.b)})"
    if isinstance(e, x.Select):
        return f"where({format_expr(e.cond)}, {format_expr(e.a)}, {format_expr(e.b)})"
    if isinstance(e, x.Cast):
        rm = "" if e.round_mode == "rint" else f", {e.round_mode}"
        return f"{e.dtype}({format_expr(e.x)}{rm})"
    if isinstance(e, x.Reduce):
        axes = ", ".join(f"{a.name}<{a.extent}" for a in e.axes)
        return f"{e.op}[{e.dtype}]({axes}: {format_expr(e.body)})"
    return repr(e)


def format_algorithm(a: Algorithm) -> str:
    lines = [f"algorithm {a.name}:"]
    for t in a.inputs:
        lines.append(f"  input {t.name}: {t.dtype}{list(t.shape)}")
    for t in a.stages:
        assert t.op is not None
        idx = ", ".join(v.name for v in t.op.axes)
        out = " (output)" if t in a.outputs else ""
        lines.append(f"  {t.name}[{idx}]: {t.dtype}{list(t.shape)} = {format_expr(t.op.body)}{out}")
    return "\n".join(lines)
