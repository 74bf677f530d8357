"""The GEMM ceiling: a CATLASS 128 x 256 tile needs more L2 -> L1 bandwidth than the model gives."""

from ascendsched.algo import library as L
from ascendsched.autotune.evaluate import evaluate_schedule
from ascendsched.benchmarks.gemm_ceiling import core_l1_rate, needed_rate, ping_pong


def test_a_catlass_tile_is_mte2_bound_below_the_rate_ratio():
    s = ping_pong(L.gemm(4096, 4096, 4096), 128, 256, 128, 64)
    # (128 + 256) x 128 x 2 B per 8 x 16 x 8 fractals: 96 B per Mmad cycle
    assert needed_rate(s) == 96.0
    share = core_l1_rate() / needed_rate(s)
    assert 0.8 < share < 0.9  # 83.8 B/cyc with 24 cores reading (target/costs.py)
    e = evaluate_schedule(s)
    assert e.ok and e.critical_pipe == "MTE2"
    assert 0.75 < e.of_cube_peak < share  # below the bandwidth ratio: heads, waves, launch
