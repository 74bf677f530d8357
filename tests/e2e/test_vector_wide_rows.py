"""Wide rows through the ladder: kernels whose rows span many 256-byte repeats (multi-repeat
instructions, masked tails, IR loops over rows or chunks, folded or per-row reductions) equal
numpy through IR execution, race-free, and a sample through the emitted C++; the synced
kernel's statement count does not grow with the row width either."""

from __future__ import annotations

from functools import cache

import pytest

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.lower.ir import Kernel, iter_instrs
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.lower.sync_ir import Sync
from ascendsched.schedule import Schedule
from ascendsched.sim.checker import check_trace
from ascendsched.target import CoreType
from tests.kit.reference import LAYERNORM, RMSNORM, SOFTMAX, assert_matches_reference, row_tiles

WIDE = {
    "layernorm 8x4096 rows 2": lambda: row_tiles(L.layernorm(8, 4096), 2, LAYERNORM),
    # 2 x 128 repeats per dense op, 128 partials per row reduced again
    "layernorm 8x8192 rows 2": lambda: row_tiles(L.layernorm(8, 8192), 2, LAYERNORM),
    "softmax 40x1000 rows 8": lambda: row_tiles(L.softmax(40, 1000), 8, SOFTMAX),  # tails, slot
    "rmsnorm 8x4100 rows 2": lambda: row_tiles(L.rmsnorm(8, 4100), 2, RMSNORM),  # 513-block rows
    "softmax 64x260 rows 32": lambda: row_tiles(L.softmax(64, 260), 32, SOFTMAX),  # folded chunks
    "softmax 64x128 rows 64": lambda: row_tiles(L.softmax(64, 128), 64, SOFTMAX),  # chunk loop
    "softmax 8x16384 default": lambda: schedule_for(L.softmax(8, 16384)),
    "rmsnorm 64x4096 default": lambda: schedule_for(L.rmsnorm(64, 4096)),
    "bias_add 64x4096 default": lambda: schedule_for(L.bias_add(64, 4096)),
}
CPP = ["softmax 40x1000 rows 8", "rmsnorm 8x4100 rows 2", "softmax 64x260 rows 32"]


@cache
def _lowered(case: str) -> tuple[Schedule, Kernel]:
    sched = WIDE[case]()
    return sched, lower(sched)


@pytest.mark.parametrize("case", list(WIDE))
def test_wide_rows_equal_numpy_and_are_race_free(case):
    sched, k = _lowered(case)
    _, res = assert_matches_reference(sched, kernel=k, trace=True)
    report = check_trace(res.trace, k.target)
    assert report.ok and not report.races, f"{case}:\n{report.summary()}"


@pytest.mark.slow  # g++ build and run
@pytest.mark.parametrize("case", CPP)
def test_wide_rows_pass_the_emitted_cpp_rungs(case):
    sched, k = _lowered(case)
    verdicts = check(sched, kernel=k, sanitize=True)
    names = [v.check for v in verdicts]
    assert "g++ build of emitted C++" in names and "C++ trace == IR trace" in names, names
    failed = [str(v) for v in verdicts if not v.ok]
    assert not failed, f"{case}:\n" + "\n".join(failed)


def test_synced_statement_count_does_not_grow_with_the_row_width():
    def size(width: int) -> tuple[int, int]:
        k = lower(row_tiles(L.layernorm(8, width), 2, LAYERNORM))
        instrs = list(iter_instrs(k.program(CoreType.AIV).body))
        return len(instrs), sum(1 for i, _ in instrs if isinstance(i, Sync))

    sizes = {w: size(w) for w in (1024, 2048, 4096)}
    assert len(set(sizes.values())) == 1, sizes
