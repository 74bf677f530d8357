"""Schedules of the row-statistic kernels (softmax, RMSNorm, LayerNorm) for the property tests:
their statistics computed per tile of the output, each reduction in chunks."""

from __future__ import annotations

from collections.abc import Callable

from ascendsched.algo.algorithm import Algorithm
from ascendsched.schedule import Schedule
from ascendsched.schedule.chunks import chunk_axis
from ascendsched.schedule.ub_budget import row_statistics

KERNELS = ("layernorm", "rmsnorm", "softmax")  # the library kernels with row statistics


def stats_per_tile(s: Schedule, algo: Algorithm, loop: str, width: Callable[[], int]
                   ) -> Schedule:
    """``s`` with the row statistics of ``algo`` (``row_statistics``) computed at the
    output's tile loop ``loop``, each reduction split into chunks of ``width()`` (asked once
    per reduction), every other stage inlined."""
    out = algo.outputs[0].name
    stats = row_statistics(algo)
    for stage in algo.stages:
        if stage in algo.outputs:
            continue
        if stage.name not in stats:
            s = s.compute_inline(stage.name)
            continue
        s = s.compute_at(stage.name, out, loop)
        k = chunk_axis(s, stage.name)
        if k is not None:
            s = s.split(stage.name, k, width())
    return s
