"""The GEMM matcher with epilogues (issue 13, Fixpipe slice): which chains after C = A x B the
Cube core applies on the way out, and the exact error for the rest."""

from __future__ import annotations

import pytest

from ascendsched.algo import compute, exp, maximum, placeholder, reduce_axis, reduce_sum, relu
from ascendsched.algo import library as L
from ascendsched.algo.algorithm import algorithm
from ascendsched.algo.gemm_spec import Epilogue, looks_like_gemm, match_gemm
from ascendsched.errors import UnsupportedError

M, N, K = 40, 50, 60


def _gemm(dtype: str = "float16"):
    acc = "int32" if dtype == "int8" else "float32"
    a, b = placeholder("A", (M, K), dtype), placeholder("B", (K, N), dtype)
    k = reduce_axis(K, "k")
    return compute("C", (M, N), lambda i, j: reduce_sum(
        a[i, k].astype(acc) * b[k, j].astype(acc), k, dtype=acc))


def test_two_stage_cast() -> None:
    c = _gemm()
    sp = match_gemm(algorithm("g", compute("D", (M, N), lambda i, j: c[i, j].astype("float16"))))
    assert (sp.c, sp.gemm_stage, str(sp.out_dtype)) == ("D", "C", "float16")
    assert sp.epilogue == Epilogue(stages=("D",))


def test_inlined_forms_keep_working() -> None:
    assert match_gemm(L.gemm(M, N, K)).epilogue == Epilogue()
    sp = match_gemm(L.gemm_epilogue(M, N, K, bias=True, relu=True, stages=False))
    assert sp.epilogue == Epilogue(bias="bias", relu=True) and sp.gemm_stage == sp.c == "C"


@pytest.mark.parametrize("form", ["max(x, 0)", "max(0, x)", "relu(x)"])
def test_relu_then_cast(form: str) -> None:
    c = _gemm()
    f = {"max(x, 0)": lambda v: maximum(v, 0.0), "max(0, x)": lambda v: maximum(0.0, v),
         "relu(x)": relu}[form]
    d = compute("D", (M, N), lambda i, j: f(c[i, j]))
    e = compute("E", (M, N), lambda i, j: d[i, j].astype("float16"))
    sp = match_gemm(algorithm("g", e))
    assert sp.epilogue == Epilogue(relu=True, stages=("D", "E"))


def test_relu_after_the_cast_commutes() -> None:
    c = _gemm()
    d = compute("D", (M, N), lambda i, j: relu(c[i, j].astype("float16")))
    assert match_gemm(algorithm("g", d)).epilogue.relu


def test_bias_relu_and_int8_bias() -> None:
    sp = match_gemm(L.gemm_epilogue(M, N, K, bias=True, relu=True))
    assert sp.epilogue == Epilogue(bias="bias", relu=True, stages=("D", "E", "F"))
    sp = match_gemm(L.gemm_epilogue(M, N, K, "int8", "int32", bias=True))
    assert sp.epilogue.bias == "bias" and str(sp.acc_dtype) == "int32"


def test_dequant() -> None:
    sp = match_gemm(L.gemm_dequant(M, N, K, relu=True))
    assert sp.epilogue == Epilogue(relu=True, scale="scale", stages=("D",))
    assert (str(sp.acc_dtype), str(sp.out_dtype)) == ("int32", "float16")


def test_routes_to_the_cube_path() -> None:
    assert looks_like_gemm(L.gemm_epilogue(M, N, K, bias=True, relu=True))
    c = _gemm()
    assert looks_like_gemm(algorithm("g", compute("D", (M, N), lambda i, j: exp(c[i, j]))))
    assert not looks_like_gemm(L.softmax())


def _raises(out, match: str) -> None:
    with pytest.raises(UnsupportedError, match=match):
        match_gemm(algorithm("g", out))


def test_not_on_the_fixpipe_names_the_stage() -> None:
    c = _gemm()
    _raises(compute("G", (M, N), lambda i, j: exp(c[i, j])),
            r"stage 'G' applies exp\(C\[i, j\]\).*Vector epilogue \(a mixed Cube \+ Vector "
            r"kernel\), which a GemmSchedule picks by itself")
    _raises(compute("G", (M, N), lambda i, j: c[i, j] * 0.5), r"stage 'G' applies .*0\.5")


def test_order_and_dtype_errors() -> None:
    c = _gemm()
    bias = placeholder("bias", (N,), "float32")
    d = compute("D", (M, N), lambda i, j: relu(c[i, j]))
    _raises(compute("E", (M, N), lambda i, j: d[i, j] + bias[j]),
            "the bias table adds bias.j. before anything else")
    b16 = placeholder("bias", (N,), "float16")
    _raises(compute("D", (M, N), lambda i, j: c[i, j].astype("float16") + b16[j]),
            "the bias table adds bias.j. before anything else")
    _raises(compute("D", (M, N), lambda i, j: c[i, j] + b16[j].astype("float32")),
            "adds 'bias' \\(float16\\).*declare 'bias' as float32")
    ci = _gemm("int8")
    s = placeholder("scale", (N,), "float32")
    _raises(compute("D", (M, N), lambda i, j: maximum(ci[i, j].astype("float32") * s[j], 0.0)
                    .astype("float16")), "ReLU to the int32 sum, before the scale")
    _raises(compute("D", (M, N), lambda i, j: ci[i, j].astype("float32") * s[j]),
            "does not then cast to float16")
    _raises(compute("D", (M, N), lambda i, j: (c[i, j] * s[j]).astype("float16")),
            "only when dequantising an int32 accumulator to float16")


def test_intermediate_stage_rules() -> None:
    c = _gemm()
    _raises(compute("D", (N, M), lambda j, i: c[i, j].astype("float16")),
            "reads 'C' at \\[i, j\\], not elementwise at \\[j, i\\]")
    d = compute("D", (M, N), lambda i, j: relu(c[i, j]))
    e = compute("E", (M, N), lambda i, j: (d[i, j] + c[i, j]).astype("float16"))
    _raises(e, r"stage 'E' applies \(D\[i, j\] \+ C\[i, j\]\)")
    with pytest.raises(UnsupportedError, match="2 outputs"):
        match_gemm(algorithm("g", [c, d]))
