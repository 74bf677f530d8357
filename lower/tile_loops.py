"""Persistent loops over classes of equal tiles: how a root stage's tiles reach the cores.

Both builders cut the output into tiles, number them in execution order and run tile ``T`` on
core ``T % cores``. The tiles fall into *classes* of equal size (a GEMM's interior, M edge, N
edge and corner, a swizzle's last strip; the full rows of a bound Vector loop and its peeled
tail), each one loop of straight-line code with static sizes. A class of ``count`` tiles
numbered from ``base`` runs on each core as::

    for var in 0..iters:                     # iters = ceil(count / cores)
      if first + cores*var < count:          # only when the last trip misses tiles
        <tile first + cores*var of the class>

with ``first`` the core's first tile of the class. A class of one trip is its body unless the
caller keeps every loop, and its guard names the cores that have a tile (``block_idx == 18``).
``ClassRun`` also gives the core's running tile number at each trip (its tiles counted across
the classes in order), which numbers the buffer copies, so a core's copies alternate across
the class loops as in one loop.

Used by ``build_gemm`` (and ``build_mixed``) for the Cube's tile classes, by
``build_loop_nest`` for its bound loop (and the tail it peels after a bound loop over one
axis), and by the sync steps (``sync_transplant.py``) to find each class's loop in a built
kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.ir import BLOCK_IDX, For, If, Stmt


@dataclass(frozen=True)
class ClassRun:
    """How one tile class's persistent loop runs: its variable (None: one trip, no loop),
    trips, tiles, whether a guard skips the last trip's missing tiles, this core's first tile
    of the class (``first + cores * var``) and the core's running tile number at each trip."""

    var: str | None
    iters: int
    count: int
    guarded: bool
    first: Affine
    run: Affine

    def tile(self, cores: int) -> Affine:
        """The number of the tile a trip runs, within the class (a loop of one trip, kept
        or not, runs trip 0)."""
        trip = Affine.of(self.var) if self.var is not None and self.iters > 1 else Affine()
        return self.first + trip * cores


def class_run(count: int, base: int, cores: int, tiles: int, var: str, *,
              every_loop: bool = False) -> ClassRun:
    """The loop over ``var`` of a class of ``count`` tiles numbered from ``base``, among
    ``tiles`` tiles on ``cores`` cores. ``every_loop``: a class of one trip keeps its loop."""
    # this core's first tile of the class: T in [0, cores) with (base + T) % cores == core
    shift = (cores - base % cores) % cores
    blk = Affine.of(BLOCK_IDX) if cores > 1 else Affine()
    first = (blk + shift).modulo(cores) if shift else blk
    iters = -(-count // cores)
    tt = Affine.of(var) if iters > 1 else Affine()
    # the core's running tile number: (T - core) / cores for T = base + first + cores*tt
    if -(-tiles // cores) == 1:
        run = Affine()  # one tile per core in all
    else:
        run = tt + (base + shift) // cores
        if shift:  # cores from cores - shift on took their first tile one trip later
            run = run - (blk + shift).floordiv(cores)
    return ClassRun(var if iters > 1 or every_loop else None, iters, count,
                    iters * cores > count, first, run)


def class_guard(run: ClassRun, cores: int) -> tuple[Cond, ...]:
    """The conditions under which a trip of ``run`` has a tile (none: every trip has one).
    A class of one trip names the cores that have a tile (``cores_with_a_tile``)."""
    if not run.guarded:
        return ()
    idx = run.tile(cores)
    whole = (Cond(idx, "<", run.count),)
    return (cores_with_a_tile(idx, run.count - 1, cores) or whole) if run.iters == 1 else whole


def class_loop(run: ClassRun, cores: int, body: Sequence[Stmt], loop_comment: str,
               guard_comment: str) -> list[Stmt]:
    """The statements of a class's loop around ``body`` (one tile, ``run.tile(cores)``):
    the guard of the last trip's missing tiles, then the loop unless it was dropped."""
    conds = class_guard(run, cores)
    out = [If(conds, tuple(body), guard_comment)] if conds else list(body)
    if run.var is None:
        return out
    return [For(run.var, run.iters, tuple(out), loop_comment)]


def cores_with_a_tile(idx: Affine, last: int, cores: int) -> tuple[Cond, ...]:
    """The guard ``idx <= last`` of a one-trip class loop, whose tile number ``idx`` is a
    function of ``block_idx`` alone, as the interval of cores it holds on: ``block_idx == 18``
    rather than ``block_idx - 19*((block_idx + 1) / 19) + 1 <= 0``, which says the same over
    the cores there are. Empty when those cores are no interval."""
    ok = [b for b in range(cores) if idx.evaluate({BLOCK_IDX: b}) <= last]
    if not ok or ok != list(range(ok[0], ok[-1] + 1)) or len(ok) == cores:
        return ()
    blk = Affine.of(BLOCK_IDX)
    if ok[0] == ok[-1]:
        return (Cond(blk, "==", ok[0]),)
    return ((Cond(blk, ">=", ok[0]),) if ok[0] > 0 else ()) + \
        ((Cond(blk, "<", ok[-1] + 1),) if ok[-1] < cores - 1 else ())
