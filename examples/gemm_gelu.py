"""GEMM + GELU as one mixed Cube + Vector kernel: the Cube core (AIC) of each block computes
C tiles and writes each to a GM workspace slot; the two Vector cores (AIVs) of the block read
the slot, each its half of the tile's rows (AIC:AIV 1:2, GetSubBlockIdx()), apply GELU (tanh
form, computed as x / (1 + exp(-2u))) and store D. The cross-core flags between them (data
ready: Fixpipe -> both AIVs' loads; slot free: both AIVs' loads -> the Fixpipe that reuses
the slot) are derived from the workspace dependences (lower/cross_core_sync.py).

    ascendsched explain examples/gemm_gelu.py:schedule
    ascendsched check examples/gemm_gelu.py:schedule
    ascendsched check examples/gemm_gelu.py:algorithm       # the default GEMM schedule
"""

from ascendsched.algo.algorithm import Algorithm
from ascendsched.algo.library import gemm_gelu
from ascendsched.schedule.gemm import GemmSchedule

M, N, K = 100, 130, 90  # no dimension a multiple of the tile: edge tiles, K tail


def algorithm() -> Algorithm:
    return gemm_gelu(M, N, K)  # D = float16(gelu(sum_k A x B)), algo/library.py


def schedule() -> GemmSchedule:
    return (GemmSchedule(algorithm())
            .tile(64, 64, 64)
            .buffer("l1", 2)
            .bind(2)
            .epilogue_on("vector", rows=16)  # GELU on the 2 AIVs, 16 rows per Vector step each
            .buffer("workspace", 2))         # the Cube fills slot i+1 while the AIVs read slot i
