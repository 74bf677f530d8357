"""The timing model on a mixed kernel (GEMM + Vector epilogue, two cross-core channels): a core
that consumes one flag and sets another between two looks at it has progressed (the model once
called that a deadlock), and the Cube and Vector cores overlap across tiles."""

from __future__ import annotations

from ascendsched.algo.library import gemm_row_scale
from ascendsched.lower.pipeline import lower
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.sim.timing import model_time

SYNC = ("wait_flag", "set_flag", "cross_wait", "cross_set", "barrier")


def _busy(slices) -> list[tuple[float, float]]:  # noqa: ANN001
    out: list[list[float]] = []
    for a, b in sorted((s.start, s.end) for s in slices if s.name.split()[0] not in SYNC):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def test_cube_and_vector_overlap_across_tiles() -> None:
    k = lower(GemmSchedule(gemm_row_scale(128, 256, 64)).tile(32, 64, 64).buffer("l1", 2))
    r = model_time(k, record=True)
    aic, aiv = _busy(r.slices[(0, "AIC")]), _busy(r.slices[(0, "AIV")])
    both = sum(max(0.0, min(b, d) - max(a, c)) for a, b in aic for c, d in aiv)
    shorter = min(sum(b - a for a, b in aic), sum(b - a for a, b in aiv))
    assert both > 0.5 * shorter  # 16 tiles on one block: most of one core's work overlaps
