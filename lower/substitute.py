"""Substituting expressions for variables in instructions and statement trees.

Every index of the kernel IR is an ``Affine`` (region offsets and copies, attrs, ``If``
conditions, sync ids): ``map_affines`` rewrites each of an instruction's, ``substitute`` every
one of a tree's. Used to read a program over another variable (the AIV program of a mixed
kernel over its Vector core number, ``instances.py``) and to give one tile's statements their
trip's values (``build_gemm``'s running tile counter, ``sync_template.py``)::

    substitute(body, {"t": Affine.of("t0") + 3})   # every t becomes t0 + 3
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields, replace

from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.ir import If, Instr, Region, Stmt, StmtMutator


def map_affines(ins: Instr, fn: Callable[[Affine], Affine]) -> Instr:
    """``ins`` with ``fn`` applied to every index in it: region offsets and copies, Affine
    and Cond attrs, and Affine fields of its type (a sync's id); ``ins`` itself when nothing
    changed."""
    def region(r: Region) -> Region:
        off, cp = fn(r.offset), fn(r.copy)
        return r if off == r.offset and cp == r.copy else replace(r, offset=off, copy=cp)

    def attr(v: object) -> object:
        if isinstance(v, Affine):
            return fn(v)
        if isinstance(v, Cond):
            return mapped_cond(v, fn)
        return v

    changes: dict[str, object] = {}
    writes, reads = tuple(map(region, ins.writes)), tuple(map(region, ins.reads))
    if writes != ins.writes:
        changes["writes"] = writes
    if reads != ins.reads:
        changes["reads"] = reads
    attrs = tuple((k, attr(v)) for k, v in ins.attrs)
    if attrs != ins.attrs:
        changes["attrs"] = attrs
    for f in fields(ins):
        v = getattr(ins, f.name)
        if isinstance(v, Affine) and f.init:
            new = fn(v)
            if new != v:
                changes[f.name] = new
    return replace(ins, **changes) if changes else ins


def mapped_cond(c: Cond, fn: Callable[[Affine], Affine]) -> Cond:
    """``c`` with ``fn`` applied to its left side."""
    return Cond(fn(c.lhs), c.op, c.rhs)


def substituted(values: Mapping[str, Affine]) -> Callable[[Affine], Affine]:
    """The function replacing each variable of ``values`` by its value (in order)."""
    def fn(e: Affine) -> Affine:
        for var, value in values.items():
            e = e.substitute(var, value)
        return e
    return fn


def substitute(body: tuple[Stmt, ...], values: Mapping[str, Affine]) -> tuple[Stmt, ...]:
    """``body`` with the variables of ``values`` replaced in every instruction and condition
    (loops over them are not renamed: substitute the variables of enclosing loops only)."""
    if not values:
        return body
    return _Subst(substituted(values)).visit_body(body)


class _Subst(StmtMutator):
    """``substitute``'s rewrite: ``fn`` applied to every affine of instructions and guards."""

    def __init__(self, fn: Callable[[Affine], Affine]) -> None:
        self.fn = fn

    def visit_Instr(self, s: Instr) -> tuple[Stmt, ...]:
        return (map_affines(s, self.fn),)

    def visit_If(self, s: If) -> tuple[Stmt, ...]:
        body = self.visit_body(s.body)
        conds = tuple(mapped_cond(c, self.fn) for c in s.conds)
        if body is s.body and conds == s.conds:
            return (s,)
        return (If(conds, body, s.comment),)
