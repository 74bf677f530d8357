"""The kernel library: algorithms used by tests, examples and benchmarks.

Each function returns an :class:`Algorithm`. Reductions and normalisations compute in float32
from float16 inputs (the 910B vector unit reduces float32 best) and store float16.
"""

from __future__ import annotations

from ascendsched.algo.algorithm import Algorithm, algorithm
from ascendsched.algo.ops import exp, maximum, reduce_max, reduce_sum, relu, rsqrt
from ascendsched.algo.tensor import compute, placeholder, reduce_axis


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


def column_sum(m: int = 64, n: int = 1024, dtype: str = "float16") -> Algorithm:
    """y[j] = sum_i x[i, j] in float32 (a bias gradient ``db = sum_i dy[i, j]``): a column
    reduction, whose rows the Vector cores combine elementwise."""
    x = placeholder("x", (m, n), dtype)
    k = reduce_axis(m, "k")
    return algorithm("column_sum", compute("y", (n,), lambda j: reduce_sum(
        x[k, j].astype("float32"), k)))


def gemm(m: int = 256, n: int = 256, k: int = 256, dtype: str = "float16",
         out_dtype: str = "float16", *, trans_a: bool = False, trans_b: bool = False
         ) -> Algorithm:
    """C[i, j] = sum_k A[i, k] * B[k, j], accumulated in float32 (int32 for int8 inputs).

    ``trans_a``: A is given as (K, M) in GM and read as A[k, i]; ``trans_b``: B is given as
    (N, K) and read as B[j, k]. int8 inputs take ``out_dtype="int32"``.
    """
    a = placeholder("A", (k, m) if trans_a else (m, k), dtype)
    b = placeholder("B", (n, k) if trans_b else (k, n), dtype)
    kk = reduce_axis(k, "k")
    acc = "int32" if dtype == "int8" else "float32"

    def body(i, j):
        av = a[kk, i] if trans_a else a[i, kk]
        bv = b[j, kk] if trans_b else b[kk, j]
        s = reduce_sum(av.astype(acc) * bv.astype(acc), kk, dtype=acc)
        return s if out_dtype == acc else s.astype(out_dtype)

    return algorithm("gemm", compute("C", (m, n), body))


def batched_gemm(batch: int = 4, m: int = 128, n: int = 128, k: int = 128,
                 dtype: str = "float16", out_dtype: str = "float16", *, trans_a: bool = False,
                 trans_b: bool = False, shared_b: bool = False) -> Algorithm:
    """C[b, i, j] = sum_k A[b, i, k] * B[b, k, j] (float32/int32 accumulation).

    ``trans_a``/``trans_b`` as in :func:`gemm` (per batch); ``shared_b``: one B for every batch.
    """
    a = placeholder("A", (batch, k, m) if trans_a else (batch, m, k), dtype)
    bshape = (n, k) if trans_b else (k, n)
    b = placeholder("B", bshape if shared_b else (batch,) + bshape, dtype)
    kk = reduce_axis(k, "k")
    acc = "int32" if dtype == "int8" else "float32"

    def body(p, i, j):
        av = a[p, kk, i] if trans_a else a[p, i, kk]
        bidx = (j, kk) if trans_b else (kk, j)
        bv = b[bidx] if shared_b else b[(p,) + bidx]
        s = reduce_sum(av.astype(acc) * bv.astype(acc), kk, dtype=acc)
        return s if out_dtype == acc else s.astype(out_dtype)

    return algorithm("batched_gemm", compute("C", (batch, m, n), body))


def gemm_int8(m: int = 256, n: int = 256, k: int = 256) -> Algorithm:
    """int8 x int8 -> int32 GEMM (exact integer accumulation)."""
    return gemm(m, n, k, "int8", "int32")


def gemm_epilogue(m: int = 256, n: int = 256, k: int = 256, dtype: str = "float16",
                  out_dtype: str = "float16", *, bias: bool = False, relu: bool = False,
                  stages: bool = True) -> Algorithm:
    """C = A x B accumulated in float32 (int32 for int8), then ``+ bias[j]`` (a vector of the
    accumulator dtype), ``max(x, 0)`` and the cast to ``out_dtype``. ``stages``: each step is
    its own stage (C, D = C + bias, E = max(D, 0), F = cast(E)); otherwise all in one stage.
    The Cube core applies all of it on the way out (algo/gemm_spec.py ``Epilogue``)."""
    acc = "int32" if dtype == "int8" else "float32"
    a = placeholder("A", (m, k), dtype)
    b = placeholder("B", (k, n), dtype)
    bv = placeholder("bias", (n,), acc) if bias else None
    kk = reduce_axis(k, "k")

    def mm(i, j):
        return reduce_sum(a[i, kk].astype(acc) * b[kk, j].astype(acc), kk, dtype=acc)

    def steps(x, j):
        out = []
        if bv is not None:
            out.append(lambda v: v + bv[j])
        if relu:
            out.append(lambda v: maximum(v, 0))
        if out_dtype != acc:
            out.append(lambda v: v.astype(out_dtype))
        return out

    if not stages:
        def body(i, j):
            v = mm(i, j)
            for f in steps(v, j):
                v = f(v)
            return v

        return algorithm("gemm_epilogue", compute("C", (m, n), body))
    def stage(name: str, prev, n_step: int):  # noqa: ANN001, ANN202
        return compute(name, (m, n), lambda i, j: steps(None, j)[n_step](prev[i, j]))

    t = compute("C", (m, n), mm)
    for n_step, name in zip(range(len(steps(None, None))), "DEFG"):
        t = stage(name, t, n_step)
    return algorithm("gemm_epilogue", t)


def gemm_dequant(m: int = 256, n: int = 256, k: int = 256, *, relu: bool = False
                 ) -> Algorithm:
    """int8 GEMM dequantised per output column: C = A x B (int32), then
    D[i, j] = float16(float32(relu?(C[i, j])) * scale[j]) with a float32 scale vector (the
    910B Fixpipe's VDEQF16 mode)."""
    a = placeholder("A", (m, k), "int8")
    b = placeholder("B", (k, n), "int8")
    scale = placeholder("scale", (n,), "float32")
    kk = reduce_axis(k, "k")
    c = compute("C", (m, n), lambda i, j: reduce_sum(
        a[i, kk].astype("int32") * b[kk, j].astype("int32"), kk, dtype="int32"))

    def deq(i, j):
        v = maximum(c[i, j], 0) if relu else c[i, j]
        return (v.astype("float32") * scale[j]).astype("float16")

    return algorithm("gemm_dequant", compute("D", (m, n), deq))


def _gemm_acc(m: int, n: int, k: int, dtype: str = "float16"):  # noqa: ANN202 -- Tensor
    a = placeholder("A", (m, k), dtype)
    b = placeholder("B", (k, n), dtype)
    kk = reduce_axis(k, "k")
    return compute("C", (m, n), lambda i, j: reduce_sum(
        a[i, kk].astype("float32") * b[kk, j].astype("float32"), kk))


def gelu_tanh(x):  # noqa: ANN001, ANN201 -- Expr
    """GELU, tanh form: 0.5 x (1 + tanh(u)) with u = sqrt(2 / pi) (x + 0.044715 x^3), written
    as x / (1 + exp(-2u)) (the same value: 1 + tanh(u) = 2 / (1 + exp(-2u))), which takes 9
    vector instructions per step instead of the tanh form's 15 (tanh expands to
    1 - 2 / (exp(2u) + 1)). For x << 0, exp(-2u) overflows to inf and x / inf is -0, GELU's
    limit."""
    return x / (1.0 + exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)))


def gemm_gelu(m: int = 256, n: int = 256, k: int = 256, dtype: str = "float16") -> Algorithm:
    """C = A x B (float32 accumulation), D = float16(gelu(C)): GELU needs the Vector cores
    (a mixed Cube + Vector kernel, ``GemmSchedule`` picks it)."""
    c = _gemm_acc(m, n, k, dtype)
    return algorithm("gemm_gelu", compute("D", (m, n), lambda i, j:
                                          gelu_tanh(c[i, j]).astype(dtype)))


def gemm_row_scale(m: int = 256, n: int = 256, k: int = 256, dtype: str = "float16"
                   ) -> Algorithm:
    """C = A x B (float32), D[i, j] = float16(C[i, j] * s[i]) with a float32 row scale s:
    the Fixpipe scales only columns, so this runs on the Vector cores."""
    c = _gemm_acc(m, n, k, dtype)
    s = placeholder("s", (m,), "float32")
    return algorithm("gemm_row_scale", compute("D", (m, n), lambda i, j:
                                               (c[i, j] * s[i]).astype(dtype)))


def gemm_residual(m: int = 256, n: int = 256, k: int = 256, dtype: str = "float16"
                  ) -> Algorithm:
    """C = A x B (float32), D = float16(C + R) with R an (M, N) float16 residual: the
    Vector cores add it."""
    c = _gemm_acc(m, n, k, dtype)
    r = placeholder("R", (m, n), dtype)
    return algorithm("gemm_residual", compute("D", (m, n), lambda i, j:
                                              (c[i, j] + r[i, j].astype("float32"))
                                              .astype(dtype)))


def gemm_softmax(m: int = 128, n: int = 256, k: int = 128, dtype: str = "float16"
                 ) -> Algorithm:
    """Attention scores and their row softmax ("minicv"): S = Q x K^T-like product Q (M, K) x
    Kt (K, N) in float32, P = float16(exp(S - max_j S) / sum_j exp(S - max_j S)). The
    softmax runs on the Vector cores, in the same kernel, over tiles of whole rows or row
    blocks of narrower tiles (``CubePlan.row_blocks``)."""
    q = placeholder("Q", (m, k), dtype)
    kt = placeholder("Kt", (k, n), dtype)
    kk = reduce_axis(k, "k")
    s = compute("S", (m, n), lambda i, j: reduce_sum(
        q[i, kk].astype("float32") * kt[kk, j].astype("float32"), kk))
    k1 = reduce_axis(n, "k1")
    mx = compute("mx", (m,), lambda i: reduce_max(s[i, k1], k1))
    e = compute("e", (m, n), lambda i, j: exp(s[i, j] - mx[i]))
    k2 = reduce_axis(n, "k2")
    sm = compute("sm", (m,), lambda i: reduce_sum(e[i, k2], k2))
    return algorithm("gemm_softmax", compute("P", (m, n), lambda i, j:
                                             (e[i, j] / sm[i]).astype(dtype)))


def batched_gemm_row_scale(batch: int = 4, m: int = 128, n: int = 128, k: int = 128,
                           dtype: str = "float16", *, shared_b: bool = False) -> Algorithm:
    """C[b] = A[b] x B[b] (float32; ``shared_b``: one B), D[b, i, j] = float16(C[b, i, j] *
    s[b, i]) with a float32 scale per batch and row: a Vector epilogue after a batched GEMM."""
    a = placeholder("A", (batch, m, k), dtype)
    b = placeholder("B", (k, n) if shared_b else (batch, k, n), dtype)
    s = placeholder("s", (batch, m), "float32")
    kk = reduce_axis(k, "k")
    c = compute("C", (batch, m, n), lambda p, i, j: reduce_sum(
        a[p, i, kk].astype("float32")
        * (b[kk, j] if shared_b else b[p, kk, j]).astype("float32"), kk))
    return algorithm("batched_gemm_row_scale", compute(
        "D", (batch, m, n), lambda p, i, j: (c[p, i, j] * s[p, i]).astype(dtype)))


VECTOR_KERNELS = {
    "vadd": vadd,
    "mul_add_relu": fused_mul_add_relu,
    "bias_add": bias_add,
    "softmax": softmax,
    "rmsnorm": rmsnorm,
    "layernorm": layernorm,
    "column_sum": column_sum,
}

GEMM_KERNELS = {
    "gemm": gemm,
    "batched_gemm": batched_gemm,
    "gemm_int8": gemm_int8,
}


def gemm_bias_gelu(m: int = 256, n: int = 256, k: int = 256, dtype: str = "float16"
                   ) -> Algorithm:
    """A feed-forward layer with a bias (GPT-2, BERT): C = A x B (float32), D = C + bias[j],
    E = float16(gelu(D)). The bias can stay on the Cube core (the Mmad bias table), GELU
    needs the Vector cores: by default the bias is added by Mmad and the Vector cores apply
    GELU to the workspace (``cube_plan._cube_prefix``)."""
    c = _gemm_acc(m, n, k, dtype)
    bias = placeholder("bias", (n,), "float32")
    d = compute("D", (m, n), lambda i, j: c[i, j] + bias[j])
    return algorithm("gemm_bias_gelu", compute("E", (m, n), lambda i, j:
                                               gelu_tanh(d[i, j]).astype(dtype)))
