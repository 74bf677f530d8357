"""A linear layer on the Cube cores: C = A x B, then + bias[j], ReLU and the cast to float16,
written as separate stages. The Cube core applies the whole epilogue on the way out (the bias
from the Mmad bias table on each tile's first K step, ReLU and the cast in the Fixpipe), so
the intermediate stages D, E are never stored.

    ascendsched explain examples/gemm_bias_relu.py:schedule
    ascendsched check examples/gemm_bias_relu.py:schedule
    ascendsched check examples/gemm_bias_relu.py:algorithm      # the default GEMM schedule
"""

from ascendsched.algo import compute, maximum, placeholder, reduce_axis, reduce_sum
from ascendsched.algo.algorithm import Algorithm
from ascendsched.algo.algorithm import algorithm as make_algorithm
from ascendsched.schedule.gemm import GemmSchedule

M, N, K = 300, 200, 170  # no dimension a multiple of the tile: edge tiles, K tail


def algorithm() -> Algorithm:
    a = placeholder("A", (M, K), "float16")
    b = placeholder("B", (K, N), "float16")
    bias = placeholder("bias", (N,), "float32")  # the bias table holds the fp32 accumulator's type
    k = reduce_axis(K, "k")
    c = compute("C", (M, N), lambda i, j: reduce_sum(
        a[i, k].astype("float32") * b[k, j].astype("float32"), k, dtype="float32"))
    d = compute("D", (M, N), lambda i, j: c[i, j] + bias[j])
    e = compute("E", (M, N), lambda i, j: maximum(d[i, j], 0.0))
    y = compute("Y", (M, N), lambda i, j: e[i, j].astype("float16"))
    return make_algorithm("linear_relu", y)


def schedule() -> GemmSchedule:
    return (GemmSchedule(algorithm())
            .tile(128, 128, 64)      # a tile's 128 bias values fit the 1 KB bias table
            .split_k(32)
            .buffer("l1", 2)
            .buffer("l0", 2)
            .bind(6))
