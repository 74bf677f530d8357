"""Whether a later tile class's AIV run is the first class's on fewer rows: conditions 2
and 4 of ``class_mirror`` (whose docstring says why copying the first class's syncs is then
exact), checked statement by statement and region by region.

``RunMatcher`` walks a mirror's run beside the first class's: the same statements, attributes
and conditions; loops as long, or shorter where the conditions allow, or unrolled into the
one instruction they hold (``covers``: it touches no element the loop's trips do not); on-chip
regions at the same offsets within the first class's (``within``), its buffers one to one
with the first class's and no larger; GM regions the AIV program writes moved by one amount
per tensor and run (those it only reads, the workspace, the bias, take part in none of its
dependences: an N edge reads its workspace slot at rows of its own width).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import BLOCK_IDX, SUB_BLOCK_IDX, Dim, For, If, Instr, Kernel, Region, Stmt
from ascendsched.lower.sync_ir import Sync

CORE_VARS = frozenset((BLOCK_IDX, SUB_BLOCK_IDX))
MIN_TRIPS = 3  # trips a mirror's shortened loop keeps at least (condition 2)
_MAX_ELEMENTS = 1 << 16  # elements compared one by one at most (``covers``)


def sub_block_runs(body: tuple[Stmt, ...]) -> bool:
    """Whether ``body`` is runs of its own, one per sub-block: ifs on ``sub_block_idx ==``
    distinct values."""
    seen = set()
    for s in body:
        if not (isinstance(s, If) and len(s.conds) == 1 and s.conds[0].op == "=="
                and s.conds[0].lhs == Affine.of(SUB_BLOCK_IDX)) or s.conds[0].rhs in seen:
            return False
        seen.add(s.conds[0].rhs)
    return bool(seen)


def least_trips(kernel: Kernel, first_buffers: set[str]) -> int:
    """The fewest trips a loop of the first class is analysed or mirrored with: at least
    ``MIN_TRIPS`` and one more than any of its buffers' copies (condition 2)."""
    return max([MIN_TRIPS] + [kernel.buffer_map[b].copies + 1
                              for b in first_buffers if b in kernel.buffer_map])


class RunMatcher:
    """Matches a mirror's run to the first class's (``class_mirror``, conditions 2 and 4)."""

    def __init__(self, kernel: Kernel, first_buffers: set[str], sequential: bool = False,
                 written: frozenset[str] | None = None) -> None:
        self.kernel = kernel
        self.first_buffers = first_buffers
        # the GM tensors the AIV program writes (None: every one); those it only reads
        # take part in none of its dependences, so their regions may differ
        self.written = frozenset(kernel.param_map) if written is None else written
        self.sequential = sequential  # condition 1': a shorter loop must hold no sync
        self.min_trips = least_trips(kernel, first_buffers)
        self.names: dict[str, str] = {}  # mirror buffer -> first class's
        self.taken: set[str] = set()
        self.moves: dict[str, Affine] = {}  # GM tensor -> its offset's move
        self.groups: list[set[str]] = []  # the buffers of each run matched
        self.loop_vars: set[str] = set()
        self.unrolled: tuple[str, int] | None = None  # (var, trips): a loop the mirror unrolls

    def runs(self, first: tuple[Stmt, ...], mine: tuple[Stmt, ...]) -> bool:
        """Whether each run of ``mine`` mirrors the first class's run on the same core: one
        body per sub-block against the first class's body for that sub-block, or against
        its one body that every sub-block runs (its rows at ``sub_block_idx * h``)."""
        if sub_block_runs(first):
            if not sub_block_runs(mine) or len(first) != len(mine):
                return False
            return all(a.conds == b.conds and self.run(a.body, b.body)  # type: ignore[union-attr]
                       for a, b in zip(first, mine))
        if sub_block_runs(mine):
            return all(self.run(first, b.body) for b in mine)  # type: ignore[union-attr]
        return self.run(first, mine)

    def run(self, first: tuple[Stmt, ...], mine: tuple[Stmt, ...]) -> bool:
        """One run against the first class's: its buffers one to one with the first
        class's, its GM offsets moved by one amount per tensor (runs on other cores may
        take the same buffers and other moves)."""
        self.taken, self.moves = set(), {}
        self.groups.append(set())
        return self.body(first, mine, top=True)

    def body(self, first: tuple[Stmt, ...], mine: tuple[Stmt, ...], top: bool) -> bool:
        if len(first) != len(mine):
            return False
        for n, (a, b) in enumerate(zip(first, mine)):
            last = top and n == len(first) - 1
            if isinstance(a, Sync) or isinstance(b, Sync):
                return False
            if isinstance(a, For) and not isinstance(b, For):
                # a loop the mirror runs once, as its one statement (at var 0): a shorter
                # loop with no sync once synchronised (``class_mirror._copy`` checks; condition 4)
                if not (len(a.body) == 1 and isinstance(a.body[0], Instr)
                        and isinstance(b, Instr)):
                    return False
                self.loop_vars.add(a.var)
                self.unrolled = (a.var, a.extent)
                ok = self.instr(a.body[0], b)
                self.unrolled = None
                if not ok:
                    return False
            elif isinstance(a, For):
                # shorter: the run's last loop (condition 2) or a loop with no sync once
                # synchronised (``class_mirror._copy`` checks; condition 4)
                if not (isinstance(b, For) and a.var == b.var and (
                        b.extent == a.extent or (self.min_trips if last else 1)
                        <= b.extent < a.extent)):
                    return False
                if b.extent < a.extent and self.sequential and len(a.body) > 1:
                    return False  # statements in a loop mostly need a sync between them
                self.loop_vars.add(a.var)
                if not self.body(a.body, b.body, top=False):
                    return False
            elif isinstance(a, If):
                if not (isinstance(b, If) and a.conds == b.conds) or any(
                        c.lhs.vars() & CORE_VARS for c in a.conds):
                    return False
                if not self.body(a.body, b.body, top=False):
                    return False
            elif not (isinstance(b, Instr) and self.instr(a, b)):
                return False
        return True

    def instr(self, a: Instr, b: Instr) -> bool:
        if (type(a) is not type(b) or a.op != b.op or a.pipe != b.pipe or a.attrs != b.attrs
                or len(a.writes) != len(b.writes) or len(a.reads) != len(b.reads)):
            return False
        return all(self.region(ra, rb) for ra, rb in zip(a.writes + a.reads,
                                                          b.writes + b.reads))

    def region(self, a: Region, b: Region) -> bool:
        gm = self.kernel.param_map
        if a.tensor in gm and a.tensor == b.tensor and a.tensor not in self.written:
            return True  # GM the AIV program only reads: in no dependence of it
        if self.unrolled is not None:  # b against a's regions over every trip of its loop
            var, trips = self.unrolled
            first = a.offset.substitute(var, Affine())
            step = a.offset.substitute(var, Affine.of(1)) - first
            if var in a.copy.vars() or not _linear_in(a.offset, var) or not step.is_const \
                    or not covers(b.dims, a.dims, step.const, trips):
                return False
            a = replace(a, offset=first, dims=b.dims)
        if a.copy != b.copy or not within(b.dims, a.dims):
            return False
        if a.tensor in gm or b.tensor in gm:
            if a.tensor != b.tensor:
                return False
            move = b.offset - a.offset
            return not move.vars() & self.loop_vars and \
                self.moves.setdefault(a.tensor, move) == move
        if a.offset != b.offset or (a.offset.vars() | a.copy.vars()) & CORE_VARS:
            return False
        got = self.names.get(b.tensor)
        if got is not None:
            return got == a.tensor
        if a.tensor in self.taken or b.tensor in self.first_buffers:
            return False
        x, y = self.kernel.buffer_map[a.tensor], self.kernel.buffer_map[b.tensor]
        if (x.scope, x.dtype, x.copies, x.offsets) != (y.scope, y.dtype, y.copies, y.offsets) \
                or y.elems > x.elems:
            return False
        self.names[b.tensor] = a.tensor
        self.taken.add(a.tensor)
        self.groups[-1].add(b.tensor)
        return True


def within(small: tuple[Dim, ...], big: tuple[Dim, ...]) -> bool:
    """Whether a region of dims ``small`` holds no element one of ``big`` at the same offset
    does not: the same strides (where ``small`` steps at all), no extent larger."""
    return len(small) == len(big) and all(
        (s.stride == b.stride or s.extent == 1) and s.extent <= b.extent
        for s, b in zip(small, big))


def covers(small: tuple[Dim, ...], big: tuple[Dim, ...], step: int, trips: int) -> bool:
    """Whether a region of dims ``small`` holds no element outside those of dims ``big``
    at offsets ``0, step, .., (trips - 1) * step`` (a loop the mirror unrolls): by their
    sizes where both are dense runs of elements, else element by element (small regions
    only; a large one that is not dense is refused)."""
    ss, sb = dense(small), dense(big)
    if ss is not None and sb is not None and 0 <= step <= sb:
        return ss <= (sb if step == 0 else (trips - 1) * step + sb)
    if math.prod(d.extent for d in small) * trips > _MAX_ELEMENTS:
        return False

    def elements(dims: tuple[Dim, ...]) -> np.ndarray:
        out = np.zeros(1, dtype=np.int64)
        for d in dims:
            out = (out[:, None] + np.arange(d.extent, dtype=np.int64) * d.stride).ravel()
        return np.unique(out)

    covered = np.unique((elements(big)[None, :] + np.arange(trips)[:, None] * step).ravel())
    return bool(np.isin(elements(small), covered, assume_unique=True).all())


def dense(dims: tuple[Dim, ...]) -> int | None:
    """The number of elements of a region of ``dims`` when they are ``0 .. n - 1`` (each
    dim's stride the product of the extents below it; a repeated dim, stride 0, adds
    none), else None."""
    size = 1
    for d in sorted((d for d in dims if d.stride and d.extent > 1), key=lambda d: d.stride):
        if d.stride != size:
            return None
        size *= d.extent
    return size


def _linear_in(expr: Affine, var: str) -> bool:
    """Whether ``var`` enters ``expr`` in a plain term only (not in a mod or a division), so
    the trips of its loop sit at one step apart."""
    return var not in {v for v, _, _ in expr.mods} and not any(
        var in num.vars() for num, _, _ in expr.divs)
