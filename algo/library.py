"""The kernel library: algorithms used by tests, examples and benchmarks.

Each function returns an :class:`Algorithm`. Reductions and normalisations compute in float32
from float16 inputs (the 910B vector unit reduces float32 best) and store float16.
"""

from __future__ import annotations

from ascendsched.algo.algorithm import Algorithm, algorithm
from ascendsched.algo.expr import (
    compute,
    exp,
    placeholder,
    reduce_axis,
    reduce_max,
    reduce_sum,
    relu,
    rsqrt,
)


def vadd(n: int = 8192, dtype: str = "float16") -> Algorithm:
    """z[i] = x[i] + y[i]."""
    x = placeholder("x", (n,), dtype)
    y = placeholder("y", (n,), dtype)
    return algorithm("vadd", compute("z", (n,), lambda i: x[i] + y[i]))


def fused_mul_add_relu(n: int = 8192, dtype: str = "float16") -> Algorithm:
    """d[i] = relu(a[i] * b[i] + c[i])."""
    a = placeholder("a", (n,), dtype)
    b = placeholder("b", (n,), dtype)
    c = placeholder("c", (n,), dtype)
    return algorithm("mul_add_relu", compute("d", (n,), lambda i: relu(a[i] * b[i] + c[i])))


def bias_add(m: int = 64, n: int = 1024, dtype: str = "float16") -> Algorithm:
    """y[i, j] = x[i, j] + bias[j] (bias broadcast over rows)."""
    x = placeholder("x", (m, n), dtype)
    bias = placeholder("bias", (n,), dtype)
    return algorithm("bias_add", compute("y", (m, n), lambda i, j: x[i, j] + bias[j]))


def softmax(m: int = 8, n: int = 1024) -> Algorithm:
    """Row softmax of float16 x, computed in float32: y = exp(x - max) / sum(exp(x - max))."""
    x = placeholder("x", (m, n), "float16")
    xf = compute("xf", (m, n), lambda i, j: x[i, j].astype("float32"))
    k = reduce_axis(n, "k")
    mx = compute("mx", (m,), lambda i: reduce_max(xf[i, k], k))
    e = compute("e", (m, n), lambda i, j: exp(xf[i, j] - mx[i]))
    k2 = reduce_axis(n, "k2")
    s = compute("s", (m,), lambda i: reduce_sum(e[i, k2], k2))
    y = compute("y", (m, n), lambda i, j: (e[i, j] / s[i]).astype("float16"))
    return algorithm("softmax", y)


def rmsnorm(m: int = 8, n: int = 1024, eps: float = 1e-6) -> Algorithm:
    """y = x * rsqrt(mean(x^2) + eps) * gamma, per row, in float32, stored as float16."""
    x = placeholder("x", (m, n), "float16")
    gamma = placeholder("gamma", (n,), "float16")
    xf = compute("xf", (m, n), lambda i, j: x[i, j].astype("float32"))
    k = reduce_axis(n, "k")
    ss = compute("ss", (m,), lambda i: reduce_sum(xf[i, k] * xf[i, k], k))
    r = compute("r", (m,), lambda i: rsqrt(ss[i] * (1.0 / n) + eps))
    y = compute("y", (m, n), lambda i, j:
                (xf[i, j] * r[i] * gamma[j].astype("float32")).astype("float16"))
    return algorithm("rmsnorm", y)


def layernorm(m: int = 8, n: int = 1024, eps: float = 1e-5) -> Algorithm:
    """y = (x - mean) * rsqrt(var + eps) * gamma + beta, per row, in float32 -> float16."""
    x = placeholder("x", (m, n), "float16")
    gamma = placeholder("gamma", (n,), "float16")
    beta = placeholder("beta", (n,), "float16")
    xf = compute("xf", (m, n), lambda i, j: x[i, j].astype("float32"))
    k = reduce_axis(n, "k")
    mean = compute("mean", (m,), lambda i: reduce_sum(xf[i, k], k) * (1.0 / n))
    d = compute("d", (m, n), lambda i, j: xf[i, j] - mean[i])
    k2 = reduce_axis(n, "k2")
    var = compute("var", (m,), lambda i: reduce_sum(d[i, k2] * d[i, k2], k2) * (1.0 / n))
    r = compute("r", (m,), lambda i: rsqrt(var[i] + eps))
    y = compute("y", (m, n), lambda i, j: (d[i, j] * r[i] * gamma[j].astype("float32")
                                           + beta[j].astype("float32")).astype("float16"))
    return algorithm("layernorm", y)


def gemm(m: int = 256, n: int = 256, k: int = 256, dtype: str = "float16",
         out_dtype: str = "float16") -> Algorithm:
    """C[i, j] = sum_k A[i, k] * B[k, j], accumulated in float32 (the Cube path, later)."""
    a = placeholder("A", (m, k), dtype)
    b = placeholder("B", (k, n), dtype)
    kk = reduce_axis(k, "k")
    acc = "int32" if dtype == "int8" else "float32"
    c = compute("C", (m, n), lambda i, j: reduce_sum(
        a[i, kk].astype(acc) * b[kk, j].astype(acc), kk, dtype=acc).astype(out_dtype)
        if out_dtype != acc else reduce_sum(a[i, kk].astype(acc) * b[kk, j].astype(acc), kk,
                                            dtype=acc))
    return algorithm("gemm", c)


VECTOR_KERNELS = {
    "vadd": vadd,
    "mul_add_relu": fused_mul_add_relu,
    "bias_add": bias_add,
    "softmax": softmax,
    "rmsnorm": rmsnorm,
    "layernorm": layernorm,
}
