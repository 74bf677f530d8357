"""Run a schedule through lowering and the simulator and compare with the numpy reference."""

from __future__ import annotations

import numpy as np

from ascendsched.algo import evaluate
from ascendsched.api.numerics import ATOL, RTOL, approx_rtol, int_atol, random_inputs
from ascendsched.lower.pipeline import lower
from ascendsched.sim.execute import run_kernel


def assert_matches_reference(sched, *, seed: int = 0, kernel=None, trace: bool = False):
    """Lower, simulate, compare every output; return (kernel, sim result)."""
    algo = sched.algo
    k = kernel if kernel is not None else lower(sched)
    ins = random_inputs(algo, seed)
    ref = evaluate(algo, ins)
    res = run_kernel(k, ins, trace=trace)
    for o in algo.outputs:
        got, want = res.outputs[o.name], ref[o.name]
        if o.dtype.is_float:
            rtol = RTOL[o.dtype.name] + approx_rtol(algo, o.name, k.target)
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=rtol, atol=ATOL[o.dtype.name],
                                       err_msg=f"{algo.name}\n{sched}")
        else:  # exact, or one rounding step where approximate instructions feed it
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=0,
                                       atol=int_atol(want, approx_rtol(algo, o.name, k.target)),
                                       err_msg=f"{algo.name}\n{sched}")
    return k, res


def readme_softmax(copies: int = 2):
    """The README's softmax: 64 x 1024, 8-row tiles on 4 cores, one pass over GM per tile,
    ``x`` and ``y`` with ``copies`` copies (``examples/softmax.py`` is copies=2)."""
    from ascendsched.algo.library import softmax
    from ascendsched.schedule import Schedule

    s = Schedule(softmax(m=64, n=1024)).split("y", "i", 8).bind("y", "i_o", cores=4)
    for stage in ("xf", "mx", "e", "s"):
        s = s.compute_at(stage, "y", "i_o")
    return s.buffer("x", copies=copies).buffer("y", copies=copies)


# the per-row stages of the library's row kernels, computed inside the output's row tile
LAYERNORM = ("xf", "mean", "d", "var", "r")
SOFTMAX = ("xf", "mx", "e", "s")
RMSNORM = ("xf", "ss", "r")


def row_tiles(algo, n: int, stages: tuple[str, ...]):  # noqa: ANN201 -- a Schedule
    """Tiles of ``n`` whole rows of the output ``y``, every stage computed in its tile."""
    from ascendsched.schedule import Schedule

    s = Schedule(algo).split("y", "i", n)
    for st in stages:
        s = s.compute_at(st, "y", "i_o")
    return s
