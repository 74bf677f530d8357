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


def layernorm_pieces(rows: int, cols: int, width: int, cores: int = 48) -> Schedule:
    """LayerNorm over rows no tile holds: single rows bound to the cores, pieces of ``width``
    columns inside, the mean and variance once per row in chunks of ``width`` read from GM,
    x and y double buffered (the default before it staged such rows in UB)."""
    from ascendsched.algo import library as L

    return (Schedule(L.layernorm(rows, cols)).split("y", "j", width).split("y", "i", 1)
            .reorder("y", "i_o", "j_o").bind("y", "i_o", min(rows, cores))
            .compute_inline("xf").compute_at("mean", "y", "i_o").split("mean", "k", width)
            .compute_inline("d").compute_at("var", "y", "i_o").split("var", "k2", width)
            .compute_at("r", "y", "i_o").buffer("x", 2).buffer("y", 2))
