"""Run a schedule through lowering and the simulator and compare with the numpy reference."""

from __future__ import annotations

import numpy as np

from ascendsched.algo import evaluate
from ascendsched.lower.driver import lower
from ascendsched.sim.execute import run_kernel

# Documented tolerances: elementwise chains are bit-exact against the reference (same ops in the
# same dtypes); reductions reassociate, so float results get a relative tolerance by dtype.
RTOL = {"float16": 4e-3, "bfloat16": 2e-2, "float32": 2e-5}
ATOL = {"float16": 2e-3, "bfloat16": 2e-2, "float32": 1e-5}


def random_inputs(algo, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for t in algo.inputs:
        if t.dtype.is_float:
            out[t.name] = rng.uniform(-2, 2, t.shape).astype(np.float32)
        else:
            lo, hi = (-100, 100) if t.dtype.name == "int8" else (-1000, 1000)
            out[t.name] = rng.integers(lo, hi, t.shape).astype(t.dtype.np)
    return out


def assert_matches_reference(sched, *, seed: int = 0, sync: bool = True, kernel=None,
                             trace: bool = False):
    """Lower, simulate, compare every output; return (kernel, sim result)."""
    algo = sched.algo
    k = kernel if kernel is not None else lower(sched, sync=sync)
    ins = random_inputs(algo, seed)
    ref = evaluate(algo, ins)
    res = run_kernel(k, ins, trace=trace)
    for o in algo.outputs:
        got, want = res.outputs[o.name], ref[o.name]
        if o.dtype.is_float:
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=RTOL[o.dtype.name], atol=ATOL[o.dtype.name],
                                       err_msg=f"{algo.name}\n{sched}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{algo.name}\n{sched}")
    return k, res
