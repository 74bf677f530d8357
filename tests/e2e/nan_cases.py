"""Kernels whose max/min see NaN: elementwise maximum/minimum/relu/clip/maximum with a scalar,
and row max/min reductions, with NaN in chosen places (the first lane of a row, a middle lane,
the last lane, a whole row). numpy propagates NaN through all of them; the IR simulator and
the host runtime must too (emit_ascendc/runtime/kernel_operator.h, nan_max)."""

from __future__ import annotations

import numpy as np

from ascendsched.algo import (
    algorithm,
    clip,
    compute,
    maximum,
    minimum,
    placeholder,
    reduce_axis,
    reduce_max,
    reduce_min,
    relu,
)
from ascendsched.schedule import Schedule

ROWS, COLS = 16, 320  # 5 fp32 repeats a row: a pairwise max of chunks, a masked tail-free fold


def elementwise(dtype: str = "float32") -> Schedule:
    x = placeholder("x", (ROWS, COLS), dtype)
    y = placeholder("y", (ROWS, COLS), dtype)
    o = compute("o", (ROWS, COLS), lambda i, j: maximum(x[i, j], y[i, j])
                + minimum(x[i, j], y[i, j]) + relu(x[i, j]) + clip(y[i, j], -1.0, 1.0)
                + maximum(x[i, j], 0.5))
    return Schedule(algorithm("nan_elementwise", o)).split("o", "i", 4).bind("o", "i_o", 2)


def row_extremes(dtype: str = "float32") -> Schedule:
    x = placeholder("x", (ROWS, COLS), dtype)
    k, k2 = reduce_axis(COLS, "k"), reduce_axis(COLS, "k2")
    mx = compute("mx", (ROWS,), lambda i: reduce_max(x[i, k], k))
    mn = compute("mn", (ROWS,), lambda i: reduce_min(x[i, k2], k2))
    o = compute("o", (ROWS,), lambda i: mx[i] - mn[i])
    s = Schedule(algorithm("nan_rows", o)).split("o", "i", 8).bind("o", "i_o", 2)
    return s.compute_at("mx", "o", "i_o").compute_at("mn", "o", "i_o")


def nan_inputs(names: tuple[str, ...], dtype: str = "float32") -> dict[str, np.ndarray]:
    """Uniform(-2, 2) with NaN at the first, a middle and the last lane of some rows (a lane
    where the old ``x > y ? x : y`` dropped it), and one row of NaN only."""
    rng = np.random.default_rng(0)
    out = {}
    for n, name in enumerate(names):
        a = rng.uniform(-2, 2, (ROWS, COLS)).astype(dtype)
        a[1 + n, 0] = a[3 + n, COLS // 2 + 1] = a[5 + n, COLS - 1] = np.nan
        a[9 + n::4, 7 + n::13] = np.nan
        a[12 + n] = np.nan
        out[name] = a
    return out
