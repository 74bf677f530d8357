"""Loop-invariant Vector instructions move out of their loop (Halide's LICM, on the kernel IR).

A tile's expression can hold values that do not change across an inner tile loop: in a
softmax over rows too wide for UB, every column chunk of a row broadcast the row's maximum
(``Brcb``) and computed ``1 / sum`` again (``Duplicate`` + ``Div`` + ``Brcb``), each behind a
``PipeBarrier<PIPE_V>``. An expert computes them once per row, before the chunk loop; so does
this pass, on the memory-planned kernel before any sync is placed.

It runs after the memory plan and keeps it: moving an instruction must not change which
bytes hold what, so what a loop touches is judged by planned bytes (touching a buffer touches
every buffer sharing a byte with it), and the plan the default schedule and the tuner ranked
is the plan that runs. (Moved before planning, a broadcast block living across the chunk loop made the
planner pack LayerNorm 4096 x 12288's UB differently, with the next row's load waiting for the
whole row: modelled 177 -> 278 us.)

An instruction ``I`` at the top level of a loop body moves in front of the loop, with the
others that move, in program order, when:

- it is a Vector instruction whose regions, copies and attributes do not name the loop's
  variable;
- what it reads in bytes it writes (in place) a moving instruction before it wrote whole (an
  update like ``s = s * f`` must run every iteration);
- the bytes it reads are written in the loop by moving instructions only;
- the bytes it writes are written in the loop by moving instructions only, and read in the
  loop only after it (no iteration reads a value an earlier one left).

Those instructions then compute, before the loop, the values every iteration computed, from
the values every iteration read, in bytes nothing else in the loop touches; readers in the
loop read them. A buffer that shares bytes with a moved one is live either before the loop
or after it, never across it (the planner gave them those bytes for lifetimes that do not
overlap, and the moved one's lifetime spanned the loop's iterations). The moving set is the
largest one with these properties (instructions leave it until none violates them). A loop of
one iteration keeps its body. Loops are handled inside out, so an instruction can leave
several loops, each one it does not depend on.
"""

from __future__ import annotations

from dataclasses import replace

from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.ir import (
    VECTOR_OPS,
    Buffer,
    For,
    If,
    Instr,
    Kernel,
    Stmt,
    iter_instrs,
)

HOISTED = "loop-invariant: computed once, before loop"  # comment suffix of a moved instruction


def hoist_invariants(k: Kernel) -> Kernel:
    """``k`` with every loop's invariant Vector instructions in front of that loop."""
    places = _places(k.buffers)
    return k.with_bodies(lambda body: _hoisted(body, places))


def _places(buffers: tuple[Buffer, ...]) -> dict[str, frozenset[str]]:
    """Per buffer, the buffers sharing a planned byte with it (itself included)."""
    spans: dict[str, list[tuple[object, int, int]]] = {}
    for b in buffers:
        size = b.elems * b.dtype.bytes
        spans[b.name] = [(b.scope, o, o + size) for o in (b.offsets or ())]
    out: dict[str, frozenset[str]] = {}
    for name, mine in spans.items():
        out[name] = frozenset([name] + [other for other, theirs in spans.items()
                                        if other != name and any(
                                            s == t and a < d and c < b_
                                            for s, a, b_ in mine for t, c, d in theirs)])
    return out


def _hoisted(body: tuple[Stmt, ...], places: dict[str, frozenset[str]]) -> tuple[Stmt, ...]:
    out: list[Stmt] = []
    changed = False
    for s in body:
        if isinstance(s, For):
            inner = _hoisted(s.body, places)
            moved, kept = _split(s, inner, places) if s.extent > 1 else ((), inner)
            out.extend(moved)
            if moved or inner is not s.body:
                s = For(s.var, s.extent, kept, s.comment)
                changed = True
        elif isinstance(s, If):
            inner = _hoisted(s.body, places)
            if inner is not s.body:
                s = If(s.conds, inner, s.comment)
                changed = True
        out.append(s)
    return tuple(out) if changed else body


def _split(loop: For, body: tuple[Stmt, ...], places: dict[str, frozenset[str]]
           ) -> tuple[tuple[Instr, ...], tuple[Stmt, ...]]:
    """The instructions of ``body`` (the body of ``loop``) that move, and what stays."""
    reads: list[frozenset[str]] = []  # per statement, the buffers it reads
    writes: list[frozenset[str]] = []
    for s in body:
        instrs = [s] if isinstance(s, Instr) else [i for i, _ in iter_instrs(s.body)]
        reads.append(frozenset(r.tensor for i in instrs for r in i.reads))
        writes.append(frozenset(w.tensor for i in instrs for w in i.writes))

    def meet(a: frozenset[str], b: frozenset[str]) -> bool:  # a byte of a is a byte of b
        return any(not places.get(n, frozenset([n])).isdisjoint(b) for n in a)

    moving = {p for p, s in enumerate(body) if _candidate(s, loop.var)}
    changed = True
    while changed and moving:
        changed = False
        order = sorted(moving)
        stay_writes = frozenset().union(*(writes[p] for p in range(len(body))
                                          if p not in moving))
        for p in order:
            if meet(reads[p] | writes[p], stay_writes) or any(
                    meet(writes[p], reads[q]) for q in range(p)) or \
                    not _fed(body, p, order, places):
                moving.discard(p)
                changed = True
                break
    if not moving:
        return (), body
    note = f"{HOISTED} {loop.var}"
    moved = tuple(_noted(body[p], note) for p in sorted(moving))  # type: ignore[arg-type]
    return moved, tuple(s for p, s in enumerate(body) if p not in moving)


def _fed(body: tuple[Stmt, ...], p: int, moving: list[int], places: dict[str, frozenset[str]]
         ) -> bool:
    """Whether each region instruction ``p`` reads in bytes it writes (in place) was written
    whole by a moving instruction before it: else ``p`` reads what the last iteration left
    (an update ``s = s * f``)."""
    i = body[p]
    assert isinstance(i, Instr)
    mine = frozenset(w.tensor for w in i.writes)
    return all(any(r in body[q].writes for q in moving if q < p)  # type: ignore[union-attr]
               for r in i.reads
               if not places.get(r.tensor, frozenset([r.tensor])).isdisjoint(mine))


def _candidate(s: Stmt, var: str) -> bool:
    """A Vector instruction that does not name ``var``."""
    if not isinstance(s, Instr) or s.op not in VECTOR_OPS:
        return False
    if any(var in r.offset.vars() or var in r.copy.vars() for r in s.reads + s.writes):
        return False
    return not any(isinstance(v, Affine) and var in v.vars() or
                   isinstance(v, Cond) and var in v.lhs.vars() for _, v in s.attrs)


def _noted(i: Instr, note: str) -> Instr:
    return replace(i, comment=f"{i.comment} ({note})" if i.comment else note)
