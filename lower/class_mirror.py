"""A mixed kernel's later tile classes whose AIV bodies mirror its first class's.

``build_mixed`` gives each tile class its own AIV loop, the Vector epilogue lowered at that
class's tile size. Where a later class's epilogue is the first class's with fewer rows (the
LM head 4096 x 32000 x 4096 in row blocks of 176 rows on 24 cores: 23 blocks of 88 rows per
Vector core, the M edge block 24 rows per Vector core), its body is the first class's with its
last loop shorter or its tiles fewer rows, its own buffers and other GM offsets, and the sync
steps would analyse the same code twice (0.68 s against 0.35 s for one class).
``class_mirror`` finds that correspondence; the memory planner gives each mirror buffer its
counterpart's offsets (``plan_memory``), the sync steps analyse the first class alone
(``sync_template``) and ``mirrored_syncs`` copies its syncs into the mirrors.

Why the copies are exact. The conditions, each checked here:

1. The AIV program is one loop of one trip per tile class, and on every block at most one
   class's guard holds (isl: the guards are pairwise disjoint), so each Vector core runs at
   most one class body once: every pair of AIV instances one core orders lies in one *run*
   of one class body (a sub-block ``If`` of the body is a run of its own: the sub-blocks are
   different cores).
2. A mirror's run is the first class's run on the same Vector core (where the first class
   runs one body on both Vector cores of a block, its rows placed by ``sub_block_idx``, and
   the mirror one per core, as an odd edge of 5 rows and 4 does, each of those is a run
   against that body) with: the same statements, attributes and conditions; its own buffers
   one to one, each of the counterpart's scope, dtype and copies, no larger and, once
   planned, at its offsets (the runs of one mirror on different cores may share a
   counterpart: they never run on one core); each on-chip region within its image's (the
   same offset and strides, no extent larger: 7 rows of a 16-row tile), none reading
   ``block_idx`` or ``sub_block_idx``; GM regions the same way, their offsets moved by one
   amount per tensor and run that names no loop of the body; loops as long as the first
   class's but for the run's last statement, a loop that may run fewer trips, at least
   ``MIN_TRIPS`` and one more than any buffer's copies (so every dependence the first
   class's loop carries, at most a buffer's copies apart, exists in the mirror too and it
   needs the syncs it copies: with 2 trips a double buffer's copy is never reused and its
   own analysis places no flag for it; ``tests/property/test_class_mirror_property.py``
   checks that its own analysis places exactly the copied syncs), and other loops that may
   run fewer trips if they hold no sync (4).
3. Inside the shortened last loop every body sets and waits the same flags with the same
   event ids (each trip leaves each flag as it found it).
4. Any other shorter loop holds no sync once the first class is synchronised; a loop of the
   first class the mirror runs once may stand there as its one statement, unrolled (at the
   loop's first value: an M edge of 28 rows makes one instruction of 112 repeats where 64
   rows take two of 128).

Take two instances ``a < b`` of a mirror's run on one core and their images ``a0``, ``b0`` in
a run of the first class (same statements, same loop indices: a shorter loop's trips are the
first ones of the full loop). They touch a subset of the images' on-chip bytes (2) and of
their GM elements moved by one amount per tensor (which cancels), so a dependence between
``a`` and ``b`` is one between ``a0`` and ``b0``. The syncs from ``a`` to ``b`` are those
from ``a0`` to ``b0`` in the same order (the trips before ``b``'s exist in both; the trips a
shorter inner loop leaves out hold none, 4), so every chain of flags and barriers that orders
``a0`` before ``b0`` orders ``a`` before ``b``. (A sync the first class needs may be one a
mirror of fewer rows would not: copying can over-synchronise a mirror, never under.) A run of
the mirror is the first class's run with a stretch of whole trips cut out, in which every
(flag, event id) has as many sets as waits (3); an alternating sequence of sets and waits
stays alternating when an even stretch is cut, and no set follows the cut on that core (1),
so no set can fire before the previous wait of its id (no double set) and the ids stay
within the first class's budget. The cross-core flags are planned on the kernel itself, as
before.

1'. Where condition 1 fails (the first class's loop runs several tiles per core, or a core
    runs several classes: GEMM + bias + GELU 5000 x 4096 x 4096 on 24 cores runs 24 interior
    tiles per core, then 2 of the last strip, then the M edge), a core's runs follow each
    other, and copying is exact when every later class mirrors the first (2, 4; 3 does not
    apply: a shorter loop holds no sync, the last too) and every GM tensor the AIV program
    writes is an output it never reads (its runs, which store different tiles of it, then
    meet in no GM element: ``polyhedral.in_other_tile_class``). Each run touches the bytes
    of the first class's run (no on-chip offset, copy, condition or event id names the class
    loop: each equals a mirror's), so the first class's trips are all alike, and the sync
    steps analyse its run, unguarded, in a loop of as many trips as all those class loops
    have (``ClassMirror.trips``, at least ``MIN_TRIPS`` and one more than any copies). Every
    class loop, the first's too, takes that loop's body syncs, the syncs before and after it
    go before the first class loop and after the last. A core then runs the analysed loop's
    first m trips, each run one trip (its image, as above), but with stretches of inner trips
    that hold no sync cut out. In a loop of alike trips, a chain ordering two instances of
    trips i <= j < m uses only syncs between them in program order, whose pairing of sets to
    waits counts the same sets and waits before it in m trips as in all, so the syncs of the
    longer loop order the shorter one's pairs; after the last trip come only the trailing
    waits, which find each flag as the full loop leaves it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, replace
from functools import cached_property

import islpy as isl
import numpy as np

from ascendsched.errors import NotAffineError
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.instances import domain_text, loop_dims
from ascendsched.lower.ir import (
    BLOCK_IDX,
    SUB_BLOCK_IDX,
    Dim,
    For,
    If,
    Instr,
    Kernel,
    Region,
    Stmt,
    copied,
    iter_instrs,
)
from ascendsched.lower.sync_ir import EventSync, SetFlag, Sync, WaitFlag
from ascendsched.target import CoreType

_CORE_VARS = frozenset((BLOCK_IDX, SUB_BLOCK_IDX))
MIN_TRIPS = 3  # trips a mirror's shortened loop keeps at least (condition 2)
_MAX_ELEMENTS = 1 << 16  # elements compared one by one at most (``_covers``)


@dataclass(frozen=True)
class ClassMirror:
    """The AIV class loops (indices into the AIV program's body) that mirror the first one,
    their buffers (mirror buffer -> the first class's) and the buffers of each run, the first
    class's and the mirrors'. ``trips`` 0: no two runs on one Vector core (condition 1);
    else the runs of a core follow each other (condition 1'), the first class's loop analysed
    with ``trips`` trips, and ``keys`` names each run's class loop and sub-block (None: every
    sub-block)."""

    first: int
    mirrors: tuple[int, ...]
    buffers: tuple[tuple[str, str], ...]
    runs: tuple[frozenset[str], ...] = ()
    trips: int = 0
    keys: tuple[tuple[int, object], ...] = ()

    @property
    def buffer_map(self) -> dict[str, str]:
        return dict(self.buffers)

    @cached_property
    def _run_of(self) -> dict[str, int]:
        return {b: n for n, r in enumerate(self.runs) for b in r}

    def apart(self, a: str, b: str) -> bool:
        """Whether on-chip buffers ``a`` and ``b`` belong to runs that never run on one
        Vector core (so they may share bytes at no cost): any two runs under condition 1,
        the bodies of two sub-blocks of one class under 1'."""
        ra, rb = self._run_of.get(a), self._run_of.get(b)
        if ra is None or rb is None or ra == rb:
            return False
        if not self.trips:
            return True
        (ca, sa), (cb, sb) = self.keys[ra], self.keys[rb]
        return ca == cb and sa is not None and sb is not None and sa != sb


def class_mirror(kernel: Kernel) -> ClassMirror | None:
    """The mirrors of ``kernel``'s first AIV tile class (module docstring, conditions 1 and
    2, or 1' and 2), or None when no later class mirrors it. On a planned kernel the buffers'
    offsets must agree too; syncs in the AIV program refuse (the correspondence is of
    unsynchronised bodies)."""
    aic, aiv = kernel.program(CoreType.AIC), kernel.program(CoreType.AIV)
    if aic is None or aiv is None or len(aiv.body) < 2:
        return None
    runs: list[tuple[For, tuple[Cond, ...], tuple[Stmt, ...]]] = []
    for s in aiv.body:
        if not isinstance(s, For):
            return None
        if len(s.body) == 1 and isinstance(s.body[0], If):
            runs.append((s, s.body[0].conds, s.body[0].body))
        else:
            runs.append((s, (), s.body))
    # condition 1, else 1': the first class's loop runs more than once or a core runs
    # several classes, each of them then a mirror
    sequential = any(r[0].extent != 1 for r in runs) or not _disjoint(kernel, runs)
    if sequential and not _gm_written_unread(kernel, aiv.body):
        return None
    first = runs[0][2]
    own = _buffers(first)
    mirrors: list[int] = []
    pairs: dict[str, str] = {}
    groups = [frozenset(_buffers(b.body)) for b in first] if _sub_block_runs(first) else \
        [frozenset(own)]  # type: ignore[union-attr]
    keys = _keys(0, first)
    min_trips = MIN_TRIPS
    for n, (_, _, body) in enumerate(runs[1:], start=1):
        m = _Matcher(kernel, own, sequential)
        min_trips = m.min_trips
        if m.runs(first, body) and not set(m.names) & set(pairs):
            mirrors.append(n)
            pairs.update(m.names)
            groups += [frozenset(g) for g in m.groups]
            keys += _keys(n, body)
        elif sequential:
            return None  # a class that is no mirror between a core's runs
    if not mirrors:
        return None
    onchip = set(kernel.buffer_map)
    trips = max(sum(runs[n][0].extent for n in [0, *mirrors]), min_trips) if sequential \
        else 0
    return ClassMirror(0, tuple(mirrors), tuple(sorted(pairs.items())),
                       tuple(g & onchip for g in groups), trips, tuple(keys))


def without_mirrors(body: tuple[Stmt, ...], mirror: ClassMirror) -> tuple[Stmt, ...]:
    """The AIV program ``body`` without the mirror classes' loops (what the sync steps
    analyse); under condition 1' the first class's run alone, unguarded, in a loop of
    ``mirror.trips`` trips (every core's runs are a prefix of its trips)."""
    if mirror.trips:
        loop = body[mirror.first]
        assert isinstance(loop, For)
        return (replace(loop, extent=mirror.trips, body=_guarded(loop)[1]),)
    return tuple(s for n, s in enumerate(body) if n not in mirror.mirrors)


def mirrored_syncs(kernel_body: tuple[Stmt, ...], synced: tuple[Stmt, ...],
                   mirror: ClassMirror) -> tuple[Stmt, ...] | None:
    """The kernel's AIV program (``kernel_body``, unsynchronised) with the syncs of
    ``synced`` (``without_mirrors`` of it after the sync steps): the first class's and every
    class the mirror leaves out as synced, each mirror with the first class's syncs at the
    same places (buffer names in their comments renamed); under condition 1' the syncs before
    and after the analysed loop before the first class and after the last, every class loop
    (the first too) with the loop body's. None where that is not exact: a sync outside a
    class's run, or a shortened loop whose bodies do not each set and wait the same flags
    (module docstring, condition 3)."""
    if mirror.trips:
        at = [n for n, s in enumerate(synced) if not isinstance(s, Sync)]
        if len(at) != 1 or not isinstance(synced[at[0]], For):
            return None
        loop = synced[at[0]]
        assert isinstance(loop, For)
        first: tuple[Stmt, ...] | None = loop.body
        var = loop.var
        pre, post = synced[:at[0]], synced[at[0] + 1:]
        by_index: dict[int, Stmt] = {}
    else:
        kept = [n for n in range(len(kernel_body)) if n not in mirror.mirrors]
        if len(synced) != len(kept) or any(isinstance(s, Sync) for s in synced):
            return None
        by_index = dict(zip(kept, synced))
        first = _run(by_index[mirror.first])
        var = kernel_body[mirror.first].var  # type: ignore[union-attr]
        pre = post = ()
    if first is None:
        return None
    one_body = not _sub_block_runs(_run(kernel_body[mirror.first]) or ())
    out: list[Stmt] = list(pre)
    for n, s in enumerate(kernel_body):
        if n in by_index:
            out.append(by_index[n])
            continue
        assert isinstance(s, For)
        guard, body = _guarded(s)
        names = _renames(mirror, body) if n != mirror.first else {}
        if n != mirror.first and one_body and _sub_block_runs(body):
            # a copy of the first class's run per sub-block
            parts = [_copy(first, b.body, _renames(mirror, b.body), var,  # type: ignore[union-attr]
                           alone=not mirror.trips) for b in body]
            got = None if None in parts else tuple(
                replace(b, body=p) for b, p in zip(body, parts))  # type: ignore[arg-type]
        else:
            got = _copy(first, body, names, var, alone=not mirror.trips)
        if got is None:
            return None
        inner = (replace(guard, body=got),) if guard is not None else got
        out.append(replace(s, body=inner))
    return tuple(out) + tuple(post)


# --------------------------------------------------------------------------- helpers
def _disjoint(kernel: Kernel, runs: list[tuple[For, tuple[Cond, ...], tuple[Stmt, ...]]]
              ) -> bool:
    """Whether no block runs two classes (their guards never hold together)."""
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            loops = (runs[i][0], runs[j][0])
            if loops[0].var == loops[1].var:
                return False
            try:
                text = domain_text(kernel, loops, runs[i][1] + runs[j][1])
            except NotAffineError:
                return False  # a guard on more than the block and its class loop
            if not isl.Set(f"{{ [{loop_dims(loops)}] : {text} }}").is_empty():
                return False
    return True


def _gm_written_unread(kernel: Kernel, body: tuple[Stmt, ...]) -> bool:
    """Whether every GM tensor ``body`` writes is an output it never reads (condition 1':
    runs of one core then meet in no GM element, the tile classes partitioning the output,
    ``polyhedral.in_other_tile_class``)."""
    gm = kernel.param_map
    written = {r.tensor for i, _ in iter_instrs(body) for r in i.writes if r.tensor in gm}
    read = {r.tensor for i, _ in iter_instrs(body) for r in i.reads if r.tensor in gm}
    return not written & read and all(gm[t].kind == "output" for t in written)


def _keys(n: int, body: tuple[Stmt, ...]) -> list[tuple[int, object]]:
    """(class loop, sub-block) of each run of class loop ``n`` whose run is ``body``: one
    per sub-block body, else one for every sub-block (None)."""
    if _sub_block_runs(body):
        return [(n, b.conds[0].rhs) for b in body]  # type: ignore[union-attr]
    return [(n, None)]


def _guarded(loop: For) -> tuple[If | None, tuple[Stmt, ...]]:
    """A class loop's guard (None: unguarded) and the run inside it."""
    if len(loop.body) == 1 and isinstance(loop.body[0], If):
        return loop.body[0], loop.body[0].body
    return None, loop.body


def _buffers(body: tuple[Stmt, ...]) -> set[str]:
    """The tensors (on-chip buffers and GM) ``body``'s instructions touch."""
    return {r.tensor for i, _ in iter_instrs(body) for r in i.writes + i.reads}


def _renames(mirror: ClassMirror, body: tuple[Stmt, ...]) -> dict[str, str]:
    """The first class's buffer -> ``body``'s counterpart (one run's: the runs of one mirror
    on different sub-blocks may share a counterpart)."""
    mine = _buffers(body)
    return {first: m for m, first in mirror.buffers if m in mine}


def _run(stmt: Stmt) -> tuple[Stmt, ...] | None:
    """The run of a synced class loop: the body inside its guard; None when a sync sits
    beside the guard."""
    if not isinstance(stmt, For):
        return None
    if len(stmt.body) == 1 and isinstance(stmt.body[0], If):
        return stmt.body[0].body
    return None if any(isinstance(s, Sync) for s in stmt.body) else stmt.body


def _sub_block_runs(body: tuple[Stmt, ...]) -> bool:
    """Whether ``body`` is runs of its own, one per sub-block: ifs on ``sub_block_idx ==``
    distinct values."""
    seen = set()
    for s in body:
        if not (isinstance(s, If) and len(s.conds) == 1 and s.conds[0].op == "=="
                and s.conds[0].lhs == Affine.of(SUB_BLOCK_IDX)) or s.conds[0].rhs in seen:
            return False
        seen.add(s.conds[0].rhs)
    return bool(seen)


class _Matcher:
    """Matches a mirror's run to the first class's (module docstring, condition 2)."""

    def __init__(self, kernel: Kernel, first_buffers: set[str], sequential: bool = False
                 ) -> None:
        self.kernel = kernel
        self.first_buffers = first_buffers
        self.sequential = sequential  # condition 1': a shorter loop must hold no sync
        self.min_trips = max([MIN_TRIPS] + [kernel.buffer_map[b].copies + 1
                                             for b in first_buffers if b in kernel.buffer_map])
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
        if _sub_block_runs(first):
            if not _sub_block_runs(mine) or len(first) != len(mine):
                return False
            return all(a.conds == b.conds and self.run(a.body, b.body)  # type: ignore[union-attr]
                       for a, b in zip(first, mine))
        if _sub_block_runs(mine):
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
                # loop with no sync once synchronised (``_copy`` checks; condition 4)
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
                # synchronised (``_copy`` checks; condition 4)
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
                        c.lhs.vars() & _CORE_VARS for c in a.conds):
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
        if self.unrolled is not None:  # b against a's regions over every trip of its loop
            var, trips = self.unrolled
            first = a.offset.substitute(var, Affine())
            step = a.offset.substitute(var, Affine.of(1)) - first
            if var in a.copy.vars() or not step.is_const or not _covers(
                    b.dims, a.dims, step.const, trips):
                return False
            a = replace(a, offset=first, dims=b.dims)
        if a.copy != b.copy or not _within(b.dims, a.dims):
            return False
        gm = self.kernel.param_map
        if a.tensor in gm or b.tensor in gm:
            if a.tensor != b.tensor:
                return False
            move = b.offset - a.offset
            return not move.vars() & self.loop_vars and \
                self.moves.setdefault(a.tensor, move) == move
        if a.offset != b.offset or (a.offset.vars() | a.copy.vars()) & _CORE_VARS:
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


def _copy(first: tuple[Stmt, ...], mine: tuple[Stmt, ...], names: dict[str, str],
          class_var: str, top: bool = True, alone: bool = True) -> tuple[Stmt, ...] | None:
    """``mine`` (a mirror's unsynchronised run or body; ``top``: a run) with the syncs of
    ``first`` (the first class's, synced) at the same places; None where condition 3 or 4
    fails or an event id follows the first class's loop (``class_var``, not the mirror's).
    ``alone``: no run follows this one on its core (condition 1), else (1') every shorter
    loop, the last too, must hold no sync."""
    out: list[Stmt] = []
    rest = iter(mine)
    last = max((n for n, a in enumerate(first) if not isinstance(a, Sync)), default=-1)
    for n, a in enumerate(first):
        if isinstance(a, Sync):
            if isinstance(a, EventSync) and class_var in a.event_id.vars():
                return None
            out += copied((replace(a, comment=_renamed(a.comment, names)),))
            continue
        b = next(rest, None)
        if isinstance(a, For) and isinstance(b, Instr):  # a loop the mirror runs once
            if _has_sync(a.body):
                return None
            out.append(b)
            continue
        if b is None or type(a) is not type(b) or isinstance(a, For) and a.var != b.var \
                or isinstance(a, If) and a.conds != b.conds:  # type: ignore[union-attr]
            return None
        if isinstance(a, For | If):
            assert isinstance(b, For | If)
            if isinstance(a, For) and b.extent < a.extent and not (  # type: ignore[union-attr]
                    _balanced(a.body) if alone and top and n == last
                    else not _has_sync(a.body)):
                return None
            got = _copy(a.body, b.body, names, class_var, top=False)
            if got is None:
                return None
            b = replace(b, body=got)
        out.append(b)
    return tuple(out) if next(rest, None) is None else None


def _has_sync(body: tuple[Stmt, ...]) -> bool:
    return any(isinstance(i, Sync) for i, _ in iter_instrs(body))


def _within(small: tuple[Dim, ...], big: tuple[Dim, ...]) -> bool:
    """Whether a region of dims ``small`` holds no element one of ``big`` at the same offset
    does not: the same strides (where ``small`` steps at all), no extent larger."""
    return len(small) == len(big) and all(
        (s.stride == b.stride or s.extent == 1) and s.extent <= b.extent
        for s, b in zip(small, big))


def _covers(small: tuple[Dim, ...], big: tuple[Dim, ...], step: int, trips: int) -> bool:
    """Whether a region of dims ``small`` holds no element outside those of dims ``big``
    at offsets ``0, step, .., (trips - 1) * step`` (a loop the mirror unrolls): by their
    sizes where both are dense runs of elements, else element by element (small regions
    only; a large one that is not dense is refused)."""
    ss, sb = _dense(small), _dense(big)
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


def _dense(dims: tuple[Dim, ...]) -> int | None:
    """The number of elements of a region of ``dims`` when they are ``0 .. n - 1`` (each
    dim's stride the product of the extents below it; a repeated dim, stride 0, adds
    none), else None."""
    size = 1
    for d in sorted((d for d in dims if d.stride and d.extent > 1), key=lambda d: d.stride):
        if d.stride != size:
            return None
        size *= d.extent
    return size


def _balanced(body: tuple[Stmt, ...]) -> bool:
    """Whether every body in ``body`` (it included) sets and waits the same flags with the
    same event ids (condition 3)."""
    sets = Counter((s.pipe, s.dst, s.event_id) for s in body if isinstance(s, SetFlag))
    waits = Counter((s.src, s.pipe, s.event_id) for s in body if isinstance(s, WaitFlag))
    return sets == waits and all(_balanced(s.body) for s in body if isinstance(s, For | If))


def _renamed(comment: str, names: dict[str, str]) -> str:
    """``comment`` with the first class's buffer names as the mirror's."""
    if not names or not comment:
        return comment
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names, key=len,
                                                                 reverse=True))) + r")\b")
    return pattern.sub(lambda m: names[m.group(1)], comment)
