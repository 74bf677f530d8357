"""GEMM on the Cube cores, scheduled by hand: 128 x 128 output tiles over 16 Cube cores,
K through L1 in steps of 128 and through L0A/L0B in steps of 64, L1 and L0 double buffered.

    ascendsched explain examples/gemm.py:schedule
    ascendsched check examples/gemm.py:schedule
    ascendsched check examples/gemm.py:algorithm      # the default GEMM schedule
"""

from ascendsched.algo.library import gemm
from ascendsched.schedule.gemm import GemmSchedule


def schedule() -> GemmSchedule:
    algo = gemm(m=500, n=520, k=300)  # no dimension a multiple of the tile: edge tiles, K tail
    return (GemmSchedule(algo)
            .tile(128, 128, 128)     # L1 tile (m, n, k)
            .split_k(64)             # L0A 128 x 64, L0B 64 x 128 per Mmad
            .buffer("l1", 2)         # MTE2 loads the next K step while MTE1 reads this one
            .buffer("l0", 2)         # MTE1 fills one L0A/L0B copy while M uses the other
            .bind(16)                # 20 tiles on 16 Cube cores: a persistent loop of 2
            .swizzle(2, "m"))        # cores running together share A/B tiles


def algorithm():
    """The same algorithm with no schedule: ascendsched picks the default GEMM schedule."""
    return gemm(m=500, n=520, k=300)
