"""Random GEMM shapes (1..96 per dim), tiles, dtypes and buffering through the hand-built cube
IR: the simulator equals numpy bit-exactly (small-integer inputs make every sum exact), and a
few of them, synced by the lowering passes, check race-free."""

from __future__ import annotations

import numpy as np
import pytest

from ascendsched import dtypes as dt
from ascendsched.lower.insert_sync import insert_sync
from ascendsched.lower.polyhedral import analyze_dependences
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel
from ascendsched.target import ASCEND_910B
from tests.kit.cube import GemmCase, gemm_kernel, inputs, reference
from tests.kit.ir import planned

DTYPES = [(dt.float16, dt.float32), (dt.float16, dt.float16), (dt.bfloat16, dt.float32),
          (dt.bfloat16, dt.bfloat16), (dt.int8, dt.int32)]


def _case(seed: int) -> GemmCase:
    rng = np.random.default_rng(seed)
    a_dt, out = DTYPES[seed % len(DTYPES)]
    c0 = 32 if a_dt is dt.int8 else 16
    m, n, k = (int(x) for x in rng.integers(1, 97, 3))
    tk0 = c0 * int(rng.integers(1, 3))
    trans = a_dt is not dt.int8 or seed % 3 == 0
    return GemmCase(
        m, n, k, tm=16 * int(rng.integers(1, 4)), tn=16 * int(rng.integers(1, 4)),
        tk=tk0 * int(rng.integers(1, 3)), tk0=tk0, dtype=a_dt, out=out,
        blocks=int(rng.integers(1, 4)), l1_copies=int(rng.integers(1, 3)),
        l0_copies=int(rng.integers(1, 3)), c_copies=int(rng.integers(1, 3)),
        trans_a=trans and bool(rng.integers(0, 2)), trans_b=trans and bool(rng.integers(0, 2)),
        name=f"random{seed}")


@pytest.mark.parametrize("seed", range(30))
def test_random_gemm_equals_numpy(seed: int) -> None:
    c = _case(seed)
    ins = inputs(c, seed)
    out = run_kernel(planned(gemm_kernel(c)), ins).outputs["c"]
    np.testing.assert_array_equal(out.astype(np.float64),
                                  reference(c, ins).astype(np.float64), err_msg=str(c))


# Seed 1 draws a 3-block case with tails in M, N and K whose sync placement takes several
# seconds: like the property tests (tests/property/test_gemm_property.py) it runs in the slow tier.
@pytest.mark.parametrize("seed", [pytest.param(1, marks=pytest.mark.slow), 4, 6])
def test_random_gemm_synced_is_race_free(seed: int) -> None:
    c = _case(seed)
    p = planned(gemm_kernel(c))
    s = insert_sync(p, analyze_dependences(p), ASCEND_910B)
    ins = inputs(c, seed)
    res = run_kernel(s, ins, trace=True)
    np.testing.assert_array_equal(res.outputs["c"].astype(np.float64),
                                  reference(c, ins).astype(np.float64))
    report = check_trace(res.trace, ASCEND_910B)
    assert report.ok, f"{c}\n{report}"
