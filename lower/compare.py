"""Structural comparison of two kernels: equal up to the size of the problem they solve.

``structural_diff(full, reduced)`` walks both kernels in step and returns the first difference
that a change of GM shapes and tile counts cannot explain (None when there is none). This is
what makes a check of a reduced instance (``schedule/reduce.py``) stand for the full kernel:
the two emit the same code except for numbers that come from the sizes.

May differ (they follow from the sizes):
- GM tensor shapes and ``block_dim``;
- ``For`` extents;
- a guard on ``block_idx`` alone (the cores that run a GEMM tile class's one trip:
  ``block_idx == 18`` on 19 cores, ``block_idx < 6`` on a reduced instance's 7), in any form;
- the numbers in ``If`` conditions, in condition-valued instruction attributes (mmad's
  ``cmatrixInitVal``, the first K step: ``kk + 28 == 0`` in the K tail step after 7 L1 steps
  of 4 L0 steps) and in GM region offsets: constants, coefficients, divisors and moduli, as
  long as both expressions have the same form (the same loop variables, in the same floor/mod
  nesting);
- GM strides: the strides of GM region dims, and the GM row/matrix strides among the Cube ops'
  parameters (``GM_STRIDE_PARAMS``);
- the numbers in buffer copies and event ids that count a core's tiles across the GEMM tile
  classes (``tile_loops.ClassRun.run``: where a class starts in a core's count follows
  the tile counts), as long as both have the same form; copies and ids without a floor term
  (``kt % 2``) must be equal;
- the numbers in on-chip offsets that name the core or a floor term (a tile's number
  ``t = block_idx + cores*k`` or its coordinates), as long as both have the same form: a
  fused tile loop bound to cores reads a row staged in UB (a ``load_once`` beta) at its
  column tile, ``400*(t mod 5)``, which the IR spells ``400*block_idx + 9600*k -
  2000*floor((block_idx + 24*k)/5)`` on 24 cores and with 7 in place of 24 (and 2800 of
  9600) on the reduced instance's 7; a column tile bound to cores reads the row it computed
  at ``256*block_idx + 2048*k`` on 8 cores. The full kernel's bounds are checked on its own
  IR (``verify``: every element inside its buffer); other on-chip offsets must be equal;
- comments and notes (they quote sizes and the schedule's core count).

Must be equal: the tree of ``For``/``If``/``Instr`` (loop variables included), every op, pipe and
non-GM attribute (Cube tile parameters, vector functions and scalars), the fields of every sync
(pipes, event ids, flag ids and modes; not the sync passes' channels), every region's tensor,
copy and element extents, the strides and (but for the above) offsets of on-chip regions, and
the buffers (scope, dtype, size, copies, planned offsets).
"""

from __future__ import annotations

from collections.abc import Iterator

from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.ir import BLOCK_IDX, Buffer, For, If, Instr, Kernel, Region, Stmt
from ascendsched.lower.sync_ir import CrossSync, EventSync, Sync

# Cube op parameters that are GM strides (lower/cube_ops.py: Nd2NzParams srcDValue and
# srcNdMatrixStride, FixpipeParamsV220 dstStride and dstNdStride), so they follow the GM shapes.
GM_STRIDE_PARAMS: dict[str, frozenset[str]] = {
    "copy_gm_l1": frozenset(["srcDValue", "srcNdMatrixStride"]),
    "fixpipe": frozenset(["dstStride", "dstNdStride"]),
    "fixpipe_quant": frozenset(["dstStride", "dstNdStride"]),
}


def structural_diff(full: Kernel, reduced: Kernel) -> str | None:
    """The first difference between ``full`` and ``reduced`` that is not a size, as a sentence
    naming where it is and both values; None when they differ only in sizes."""
    return next(_kernel_diffs(full, reduced), None)


def affine_form(a: Affine) -> tuple:
    """``a`` without its numbers: which variables it uses, in which floor/mod nesting."""
    return (tuple(v for v, _ in a.terms), tuple(v for v, _, _ in a.mods),
            tuple(sorted(affine_form(n) for n, _, _ in a.divs)))


# --------------------------------------------------------------------------- walkers
def _kernel_diffs(a: Kernel, b: Kernel) -> Iterator[str]:
    if a.name != b.name:
        yield f"kernel name: full {a.name!r}, reduced {b.name!r}"
    if a.target.name != b.target.name:
        yield f"target: full {a.target.name}, reduced {b.target.name}"
    pa = [(t.name, t.dtype.name, t.kind, len(t.shape)) for t in a.params]
    pb = [(t.name, t.dtype.name, t.kind, len(t.shape)) for t in b.params]
    if pa != pb:
        yield f"GM parameters (name, dtype, kind, rank): full {pa}, reduced {pb}"
    if len(a.buffers) != len(b.buffers):
        yield (f"buffers: full has {[x.name for x in a.buffers]}, reduced has "
               f"{[x.name for x in b.buffers]}")
    for x, y in zip(a.buffers, b.buffers):
        if _buffer_key(x) != _buffer_key(y):
            yield f"buffer {x.name}: full {_buffer_text(x)}, reduced {_buffer_text(y)}"
    ca, cb = [p.core for p in a.programs], [p.core for p in b.programs]
    if ca != cb:
        yield f"programs: full {ca}, reduced {cb}"
        return
    gm = frozenset(t.name for t in a.params)
    for p, q in zip(a.programs, b.programs):
        yield from _body_diffs(p.body, q.body, f"program {p.core}", gm)


def _body_diffs(a: tuple[Stmt, ...], b: tuple[Stmt, ...], where: str, gm: frozenset[str]
                ) -> Iterator[str]:
    for n, (x, y) in enumerate(zip(a, b)):
        at = f"{where} > #{n} {_label(x)}"
        if len(a) != len(b) and _kind(x) != _kind(y):  # a statement only one kernel has
            side, extra = ("full", x) if len(a) > len(b) else ("reduced", y)
            yield (f"{where} > #{n}: only the {side} kernel has {_label(extra)} here ({len(a)} "
                   f"vs {len(b)} statements)")
            return
        if type(x) is not type(y):
            yield f"{at}: full has {_label(x)}, reduced has {_label(y)}"
            return
        if isinstance(x, For):
            assert isinstance(y, For)
            if x.var != y.var:
                yield f"{at}: loop variable: full {x.var}, reduced {y.var}"
            yield from _body_diffs(x.body, y.body, at, gm)
        elif isinstance(x, If):
            assert isinstance(y, If)
            yield from _cond_diffs(x.conds, y.conds, at)
            yield from _body_diffs(x.body, y.body, at, gm)
        else:
            assert isinstance(x, Instr) and isinstance(y, Instr)
            yield from _instr_diffs(x, y, at, gm)
    if len(a) != len(b):
        more, side = (a, "full") if len(a) > len(b) else (b, "reduced")
        extra = more[min(len(a), len(b))]
        yield (f"{where} > #{min(len(a), len(b))}: only the {side} kernel has "
               f"{_label(extra)} here ({len(a)} vs {len(b)} statements)")


def _cond_diffs(a: tuple[Cond, ...], b: tuple[Cond, ...], at: str) -> Iterator[str]:
    if a and b and all(c.lhs.vars() <= {BLOCK_IDX} for c in a + b):
        return  # the cores that run a class's one trip (build_gemm): an interval of cores
    fa = [(c.op, affine_form(c.lhs)) for c in a]
    fb = [(c.op, affine_form(c.lhs)) for c in b]
    if fa != fb:
        yield (f"{at}: condition: full `{' and '.join(map(str, a))}`, reduced "
               f"`{' and '.join(map(str, b))}` (different form, not only numbers)")


def _instr_diffs(a: Instr, b: Instr, at: str, gm: frozenset[str]) -> Iterator[str]:
    if (a.op, a.pipe) != (b.op, b.pipe):
        yield f"{at}: op or pipe: full `[{a.pipe}] {a.op}`, reduced `[{b.pipe}] {b.op}`"
        return
    if isinstance(a, Sync):
        for (k, u), (_, v) in zip(_sync_fields(a), _sync_fields(b)):
            if u != v and not (k == "event_id" and _same_count(u, v)):
                yield f"{at}: {k}: full {u}, reduced {v}"
        return
    if [k for k, _ in a.attrs] != [k for k, _ in b.attrs]:
        yield f"{at}: attributes: full {[k for k, _ in a.attrs]}, reduced {[k for k, _ in b.attrs]}"
        return
    free = GM_STRIDE_PARAMS.get(a.op, frozenset())
    for (k, u), (_, v) in zip(a.attrs, b.attrs):
        if isinstance(u, Cond) and isinstance(v, Cond):
            yield from _cond_diffs((u,), (v,), f"{at}: {k}")
        elif k not in free and u != v:
            yield f"{at}: {k}: full {u}, reduced {v}"
    for kind, ra, rb in (("writes", a.writes, b.writes), ("reads", a.reads, b.reads)):
        if len(ra) != len(rb):
            yield f"{at}: {len(ra)} {kind} in full, {len(rb)} in reduced"
            continue
        for x, y in zip(ra, rb):
            why = _region_diff(x, y, gm)
            if why:
                yield f"{at}: {kind} {x} vs {y}: {why}"


def _region_diff(a: Region, b: Region, gm: frozenset[str]) -> str | None:
    if a.tensor != b.tensor:
        return "different tensors"
    if a.copy != b.copy and not _same_count(a.copy, b.copy):
        return f"copy {a.copy} vs {b.copy}"
    if [d.extent for d in a.dims] != [d.extent for d in b.dims]:
        return "element extents differ"
    if a.tensor not in gm:
        if a.offset != b.offset and not _tile_numbered(a.offset, b.offset):
            return f"on-chip offset {a.offset} vs {b.offset}"
        if a.dims != b.dims:
            return "on-chip strides differ"
    elif affine_form(a.offset) != affine_form(b.offset):
        return "GM offsets have different forms (not only different numbers)"
    return None


def _same_count(a: object, b: object) -> bool:
    """Whether two copy, id or on-chip offset expressions count tiles alike: both with floor
    terms (the running tile number's, or a fused tile index's) and of the same form."""
    return (isinstance(a, Affine) and isinstance(b, Affine) and bool(a.divs) and bool(b.divs)
            and affine_form(a) == affine_form(b))


def _tile_numbered(a: Affine, b: Affine) -> bool:
    """Whether two on-chip offsets locate a tile's part of a buffer by the tile's number alike:
    both name the core or a floor term (the number ``block_idx + cores*k`` and its
    coordinates, whose coefficients follow the core and tile counts), in the same form."""
    return (affine_form(a) == affine_form(b) and (bool(a.divs) or BLOCK_IDX in a.vars())
            and (bool(b.divs) or BLOCK_IDX in b.vars()))


# --------------------------------------------------------------------------- text
def _buffer_key(b: Buffer) -> tuple:
    return (b.name, b.scope, b.dtype.name, b.elems, b.copies, b.shape, b.offsets)


def _buffer_text(b: Buffer) -> str:
    return f"{b.scope} {b.dtype}[{b.elems}] x{b.copies} at {b.offsets}"


def _sync_fields(s: Sync) -> tuple[tuple[str, object], ...]:
    """What the emitted call of a sync depends on besides its pipe."""
    if isinstance(s, EventSync):
        return (("src", s.src), ("dst", s.dst), ("event_id", s.event_id))
    if isinstance(s, CrossSync):
        return (("flag_id", s.flag_id), ("mode", s.mode))
    return ()


def _kind(s: Stmt) -> tuple:
    if isinstance(s, For):
        return ("for", s.var)
    if isinstance(s, If):
        return ("if", len(s.conds))
    return (s.op, s.pipe)


def _label(s: Stmt) -> str:
    if isinstance(s, For):
        return f"for {s.var}"
    if isinstance(s, If):
        return f"if {' and '.join(map(str, s.conds))}"
    return str(s).split("   # ")[0] if isinstance(s, Sync) else f"[{s.pipe}] {s.op}"
