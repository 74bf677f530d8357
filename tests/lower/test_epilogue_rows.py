"""The rows of one step of a mixed kernel's Vector epilogue (``build_mixed.epilogue_schedule``,
``schedule/epilogue_steps.py``): the bisection finds the most rows whose UB tiles fit, the same
answer as trying every row count from the tile's down, for every library epilogue over tile
widths that do and do not fill UB."""

from __future__ import annotations

import pytest

from ascendsched.algo.library import (
    batched_gemm_row_scale,
    gemm_gelu,
    gemm_residual,
    gemm_row_scale,
    gemm_softmax,
)
from ascendsched.lower.build_mixed import epilogue_schedule
from ascendsched.schedule.epilogue_steps import even_steps, most_rows
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.ub_budget import TileShape, tile_bytes
from ascendsched.target import Scope

KERNELS = {"gemm_gelu": gemm_gelu(256, 1024, 64), "gemm_row_scale": gemm_row_scale(256, 1024, 64),
           "gemm_residual": gemm_residual(256, 1024, 64),
           "gemm_softmax": gemm_softmax(256, 1024, 64),
           "batched_gemm_row_scale": batched_gemm_row_scale(2, 256, 1024, 64)}


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize(("rows", "cols"), [(128, 256), (128, 1024), (200, 1000), (7, 64)])
def test_bisection_finds_the_most_rows_that_fit(name: str, rows: int, cols: int) -> None:
    sched = GemmSchedule(KERNELS[name]).epilogue_on("vector")
    epi = sched.vector_epilogue
    assert epi is not None
    algo = epi.tile_algorithm(rows, cols)
    usable = sched.target.scope(Scope.UB).usable

    def fits(r: int, copies: int = 2) -> bool:
        return tile_bytes(algo, TileShape(r, cols), copies, sched.target) <= usable

    linear = next((r for r in range(rows, 0, -1) if fits(r, 2 if r < rows else 1)), 0)
    got = rows if fits(rows, 1) else most_rows(fits, rows - 1)
    assert got == linear > 0
    split = epilogue_schedule(sched, epi, rows, cols, sched.target)
    # a step of fewer rows than the tile is a split of the row axis by exactly that count
    assert (f"split({algo.outputs[0].name!r}" in str(split)) == (linear < rows)


@pytest.mark.parametrize(("rows", "most", "want"), [
    (64, 36, 32), (64, 64, 64), (128, 45, 43), (100, 30, 25), (7, 3, 3), (1, 1, 1)])
def test_steps_are_even(rows: int, most: int, want: int) -> None:
    # as few steps as the room allows, as even as they can be: no needless tail step
    got = even_steps(rows, most)
    assert got == want <= most
    assert -(-rows // got) == -(-rows // most)


def test_default_epilogue_step_has_no_tail_when_rows_divide() -> None:
    # gemm_gelu with 96-row steps' worth of rows and room for 45 per step: three steps of 32
    sched = GemmSchedule(gemm_gelu(256, 256, 64)).epilogue_on("vector")
    epi = sched.vector_epilogue
    assert epi is not None
    algo = epi.tile_algorithm(96, 256)
    usable = sched.target.scope(Scope.UB).usable

    def fits(r: int, copies: int = 2) -> bool:
        return tile_bytes(algo, TileShape(r, 256), copies, sched.target) <= usable

    most = most_rows(fits, 95)
    assert not fits(96, 1) and 32 <= most < 48 and 96 % most  # the most that fit: a tail...
    text = str(epilogue_schedule(sched, epi, 96, 256, sched.target))
    assert f"split('D', 'i', {even_steps(96, most)}," in text  # ...the even split: none
    assert even_steps(96, most) == 32
