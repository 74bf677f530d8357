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
4. Any other shorter loop holds no sync once the first class is synchronised. A loop of the
   first class holding one instruction may stand in the mirror as one instruction touching
   no element outside those the loop's trips touch (an M edge of 44 rows: one instruction
   of 176 repeats where 64 rows take two of 128, ``mirror_match.covers``); the loop holds
   no sync, so every trip of it sits between the same syncs, and a dependence of that one
   instruction is one of some trip (its image).

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

import re
from collections import Counter
from dataclasses import dataclass, replace
from functools import cached_property

import islpy as isl

from ascendsched.errors import NotAffineError
from ascendsched.lower.affine import Cond
from ascendsched.lower.instances import domain_text, loop_dims
from ascendsched.lower.ir import (
    For,
    If,
    Instr,
    Kernel,
    Stmt,
    copied,
    iter_instrs,
)
from ascendsched.lower.mirror_match import RunMatcher, least_trips, sub_block_runs
from ascendsched.lower.sync_ir import EventSync, SetFlag, Sync, WaitFlag
from ascendsched.target import CoreType


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
    written = _gm_touched(kernel, aiv.body, "writes")
    mirrors: list[int] = []
    pairs: dict[str, str] = {}
    groups = [frozenset(_buffers(b.body)) for b in first] if sub_block_runs(first) else \
        [frozenset(own)]  # type: ignore[union-attr]
    keys = _keys(0, first)
    for n, (_, _, body) in enumerate(runs[1:], start=1):
        m = RunMatcher(kernel, own, sequential, written)
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
    trips = max(sum(runs[n][0].extent for n in [0, *mirrors]), least_trips(kernel, own)) \
        if sequential else 0
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
    one_body = not sub_block_runs(_run(kernel_body[mirror.first]) or ())
    out: list[Stmt] = list(pre)
    for n, s in enumerate(kernel_body):
        if n in by_index:
            out.append(by_index[n])
            continue
        assert isinstance(s, For)
        guard, body = _guarded(s)
        names = _renames(mirror, body) if n != mirror.first else {}
        if n != mirror.first and one_body and sub_block_runs(body):
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
    written = _gm_touched(kernel, body, "writes")
    return not written & _gm_touched(kernel, body, "reads") and all(
        kernel.param_map[t].kind == "output" for t in written)


def _gm_touched(kernel: Kernel, body: tuple[Stmt, ...], side: str) -> frozenset[str]:
    """The GM tensors ``body``'s instructions write (``side`` "writes") or read ("reads")."""
    gm = kernel.param_map
    return frozenset(r.tensor for i, _ in iter_instrs(body) for r in getattr(i, side)
                     if r.tensor in gm)


def _keys(n: int, body: tuple[Stmt, ...]) -> list[tuple[int, object]]:
    """(class loop, sub-block) of each run of class loop ``n`` whose run is ``body``: one
    per sub-block body, else one for every sub-block (None)."""
    if sub_block_runs(body):
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
