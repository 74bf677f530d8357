"""The rows of one step of a mixed kernel's Vector epilogue, by the UB estimate
(``ub_budget.tile_bytes``): what ``lower/build_mixed.epilogue_schedule`` splits a tile's rows
by, and what ``CubePlan.loop_nest_text`` (explain) says it does. One rule for both."""

from __future__ import annotations

from collections.abc import Callable

from ascendsched.algo.algorithm import Algorithm
from ascendsched.schedule.ub_budget import TileShape, tile_bytes
from ascendsched.target import Target
from ascendsched.target.model import Scope


def step_fits(algo: Algorithm, r: int, cols: int, copies: int, target: Target) -> bool:
    """Whether a step of ``r`` rows of ``cols`` columns of the epilogue ``algo`` (a tile
    algorithm, ``VectorEpilogue.tile_algorithm``) fits UB with ``copies`` copies."""
    return tile_bytes(algo, TileShape(r, cols), copies, target) <= target.scope(Scope.UB).usable


def default_step_rows(algo: Algorithm, rows: int, cols: int, target: Target) -> int:
    """Rows per step of a ``rows x cols`` tile of the epilogue ``algo``: all of them in one
    step when they fit, else the most that fit double buffered, evened out over the steps that
    takes (``even_steps``); 0 when not even one row fits so."""
    if step_fits(algo, rows, cols, 1, target):
        return rows
    r = most_rows(lambda r: step_fits(algo, r, cols, 2, target), rows - 1)
    return even_steps(rows, r) if r else 0


def most_rows(fits: Callable[[int], bool], most: int) -> int:
    """The largest ``r`` in ``1..most`` with ``fits(r)`` (0: none), by bisection: a step's UB
    bytes grow with its rows (every tile, temporary, partial and row broadcast is sized by
    them), so ``fits`` holds up to some ``r`` and not above; the default search had sized the
    epilogue's step once per candidate row count, up to 128 times per schedule."""
    lo, hi = 0, most  # fits(lo) (or lo == 0), and the answer is at most hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def even_steps(rows: int, most: int) -> int:
    """Rows per step for ``rows`` rows taken at most ``most`` at a time, in as few steps and
    as evenly as that allows: 64 rows with room for 36 are two steps of 32, not 36 and a tail
    step of 28 (a tail step is a second copy of the step's code to compile and run)."""
    steps = -(-rows // most)
    return -(-rows // steps)
