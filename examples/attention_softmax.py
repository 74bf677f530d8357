"""Attention scores and their row softmax as one mixed Cube + Vector kernel, with rows wider
than a Cube tile: P = softmax(Q x Kt) over 3000 keys. A tile of whole rows would need
16 x 3008 x 4 B of L0C (more than its 128 KB), so the tiles are narrower than the rows and
each core takes *row blocks* (``CubePlan.row_blocks``): its Cube core (AIC) runs a block's
tiles one after the other into one GM workspace slot; its two Vector cores (AIVs) run the
softmax over the whole block, each half of its rows, while the Cube core computes the next
block (two slots). The cross-core flags are derived, one pair per block.

    ascendsched explain examples/attention_softmax.py:schedule
    ascendsched check examples/attention_softmax.py:schedule
    ascendsched check examples/attention_softmax.py:algorithm   # the default (row blocks too)
"""

from ascendsched.algo.algorithm import Algorithm
from ascendsched.algo.library import gemm_softmax
from ascendsched.schedule.gemm import GemmSchedule

M, N, K = 100, 3000, 90  # no dimension a multiple of the tile: an M-edge block, an N tail, K tail


def algorithm() -> Algorithm:
    return gemm_softmax(M, N, K)  # P = float16(softmax_j(sum_k Q x Kt)), algo/library.py


def schedule() -> GemmSchedule:
    return (GemmSchedule(algorithm())
            .tile(32, 256, 32)      # row blocks of 32 rows: 11 tiles of 256 columns + 184
            .buffer("l0c", 2)       # the next tile's Mmads while the Fixpipe drains this one
            .bind(2)                # 4 blocks (the last of 4 rows) on 2 Cube cores
            .buffer("workspace", 2))  # the Cube fills block i+1's slot while the AIVs read i's
