"""Vector instructions in dependence levels, so that one PipeBarrier<PIPE_V> serves a level.

The V pipe runs its instructions in order, but an instruction that reads or overwrites bytes
an earlier one writes (or reads) needs a ``PipeBarrier<PIPE_V>`` between them, and every
barrier drains the pipe (its tail, then the next instruction's head). The builder emits an
expression's instructions in the order it walks it, so independent work can sit between two
dependent instructions and split what one barrier could have covered: in an online softmax
chunk, the rescale ``exp(old max - new max)`` and the new max's broadcast are independent,
yet each waited behind the other's barrier.

This pass, on the memory-planned kernel before any sync is placed, reorders each straight run
of Vector instructions (no other pipe's instruction, loop or branch inside it) by level: an
instruction's level is one less than the lowest level of the instructions after it in the
run that depend on it (read what it writes, or write what it reads or writes), the last level
when there is none; within a level the program order stays. Every dependence then goes from a
lower level to a higher one, so the order is a valid one, and the barriers the sync steps
place can only be needed between levels: at most one per level where there was one per
dependent pair in the walk's order. Dependences are judged on planned bytes, conservatively:
two regions may overlap unless both are constant spans of known addresses that do not (or the
same loop-variable offset of spans that do not), so the pass never orders too little.

Levels are as late as possible, which keeps an instruction that reads a load's data where the
walk put it: as early as possible, a cast of LayerNorm's ``beta`` went to the front of its
run, and the V pipe waited for that load before work that did not need it (modelled 2% slower
on 32 000-column rows).
"""

from __future__ import annotations

from dataclasses import replace

from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import VECTOR_OPS, Buffer, For, If, Instr, Kernel, Region, Stmt

Span = tuple[Affine, Affine, int, int]  # (variable offset part, copy, first byte, end byte)


def order_vector(k: Kernel) -> Kernel:
    """``k`` with each run of Vector instructions in dependence levels."""
    spans = _Spans(k.buffer_map)
    return k.with_bodies(lambda body: _ordered(body, spans))


def _ordered(body: tuple[Stmt, ...], spans: _Spans) -> tuple[Stmt, ...]:
    out: list[Stmt] = []
    run: list[Instr] = []
    changed = False

    def flush() -> None:
        nonlocal changed
        if len(run) > 2:
            leveled = _levels(run, spans)
            changed |= leveled != run
            out.extend(leveled)
        else:
            out.extend(run)
        run.clear()

    for s in body:
        if isinstance(s, Instr) and s.op in VECTOR_OPS:
            run.append(s)
            continue
        flush()
        if isinstance(s, (For, If)):
            inner = _ordered(s.body, spans)
            if inner is not s.body:
                s = replace(s, body=inner)
                changed = True
        out.append(s)
    flush()
    return tuple(out) if changed else body


def _levels(run: list[Instr], spans: _Spans) -> list[Instr]:
    """``run`` sorted by dependence level, program order within a level. Levels are as late
    as possible (an instruction joins the level just before its first reader's): one that reads
    a load's data stays where the walk put it, rather than making the V pipe wait for that load
    before the independent work ahead of it."""
    reads = [[spans.of(r) for r in i.reads] for i in run]
    writes = [[spans.of(w) for w in i.writes] for i in run]
    n = len(run)
    after: list[list[int]] = [[] for _ in range(n)]  # per instruction, those depending on it
    for j in range(n):
        for i in range(j):
            if _meet(writes[i], reads[j]) or _meet(reads[i], writes[j]) or \
                    _meet(writes[i], writes[j]):
                after[i].append(j)
    level = [0] * n
    for i in reversed(range(n)):
        level[i] = min((level[j] - 1 for j in after[i]), default=0)
    return [run[p] for p in sorted(range(n), key=lambda p: (level[p], p))]


def _meet(a: list[list[Span] | None], b: list[list[Span] | None]) -> bool:
    return any(_overlap(x, y) for x in a for y in b)


def _overlap(a: list[Span] | None, b: list[Span] | None) -> bool:
    """Whether two regions may share a byte (None: a region of unknown bytes)."""
    if a is None or b is None:
        return True
    return any(va != vb or ca != cb or (lo_a < hi_b and lo_b < hi_a)
               for va, ca, lo_a, hi_a in a for vb, cb, lo_b, hi_b in b)


class _Spans:
    """Each UB region's bytes: per buffer copy it may be in, its offset's variable part, and
    the byte span of its constant part."""

    def __init__(self, buffers: dict[str, Buffer]) -> None:
        self.buffers = buffers

    def of(self, r: Region) -> list[Span] | None:
        b = self.buffers.get(r.tensor)
        if b is None or b.offsets is None:
            return None
        eb = b.dtype.bytes
        first = r.offset.const
        last = first + sum((d.extent - 1) * d.stride for d in r.dims if d.stride > 0)
        if any(d.stride < 0 for d in r.dims):
            return None
        var = replace(r.offset, const=0) * eb  # in bytes: buffers of two dtypes compare
        if r.copy.is_const:
            bases = [(Affine(), b.offsets[r.copy.const])]
        else:  # any copy: spans in each, keyed apart from constant copies
            bases = [(r.copy, o) for o in b.offsets]
        return [(var, copy, base + first * eb, base + (last + 1) * eb) for copy, base in bases]
