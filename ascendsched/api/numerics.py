"""The ladder's numbers: its inputs (random, or the user's checked) and its tolerances.

``check`` (``check.py``) and the tests compare every executed output with the numpy reference
through :func:`compare`: within ``RTOL``/``ATOL`` of the output's dtype, plus the documented
error of the approximate vector instructions on its expression tree (:func:`approx_rtol`) and,
for an output that is a sum, the rounding of a sum taken in another order
(:func:`summation_atol`); integer outputs must be equal. NaN equals NaN, inf equals inf of the same sign.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from ascendsched.algo.algorithm import Algorithm, algorithm
from ascendsched.algo.check import children
from ascendsched.algo.evaluate import evaluate
from ascendsched.algo.expr import Expr, Load, Reduce, Unary
from ascendsched.algo.gemm_epilogue import strip_casts
from ascendsched.algo.gemm_spec import GemmSpec
from ascendsched.algo.gemm_vector_epilogue import VectorEpilogue
from ascendsched.algo.ops import abs_
from ascendsched.algo.tensor import Tensor
from ascendsched.dtypes import store
from ascendsched.errors import InputError
from ascendsched.target import DEFAULT_TARGET, Target

# Tolerances of the numeric checks (reductions reassociate; elementwise ops are correctly
# rounded). Outputs computed through an approximate instruction (target.approx_rel_error:
# Rsqrt, Reciprocal) add that instruction's documented error, see ``approx_rtol``.
RTOL = {"float16": 4e-3, "bfloat16": 2e-2, "float32": 2e-5}
ATOL = {"float16": 2e-3, "bfloat16": 2e-2, "float32": 1e-5}


def approx_rtol(algo: Algorithm, name: str, target: Target = DEFAULT_TARGET) -> float:
    """The relative error the approximate vector instructions add to output ``name``: the sum,
    over every occurrence on its expression tree (loads of producers included, once per load),
    of ``target.approx_rel_error[(op, dtype)]``. First order: products, quotients and
    same-sign sums pass a relative error on unchanged (rsqrt halves it); a difference of close
    values can amplify it, which this bound does not cover."""
    memo: dict[str, float] = {}

    from ascendsched.lower.expand_math import expand_math

    def of_tensor(t: Tensor) -> float:
        if t.op is None:
            return 0.0
        if t.name not in memo:  # as lowered: tanh, sigmoid, pow in the instructions they become
            memo[t.name] = of_expr(expand_math(t.op.body, target))
        return memo[t.name]

    def of_expr(e: Expr) -> float:
        own = 0.0
        if isinstance(e, Unary):
            own = target.approx_rel_error.get((e.op, e.dtype.name), 0.0)
        elif isinstance(e, Load):
            own = of_tensor(e.tensor)
        return own + sum(of_expr(c) for c in children(e))

    (out,) = [t for t in algo.outputs if t.name == name]
    return of_tensor(out)


def summation_atol(algo: Algorithm, name: str, inputs: Mapping[str, np.ndarray]
                   ) -> np.ndarray | float:
    """Per element, how far a sum computed in another order may be from the reference's
    (which accumulates float32 sums in float64 and rounds once), for an output that is (a
    cast of) a sum: ``(log2(n) + 1) u sum |terms|`` with ``u`` the unit roundoff of the sum's
    dtype (the kernel adds in a tree, as the hardware's reductions do, and rounds each term).
    A sum of 4 096 products whose terms add to ~5 000 in magnitude may cancel to near 0:
    the error is then far above the output's own rtol. 0 for other outputs."""
    (out,) = [t for t in algo.outputs if t.name == name]
    red = strip_casts(out.op.body) if out.op is not None else None
    if not (isinstance(red, Reduce) and red.op == "sum" and red.dtype.is_float):
        return 0.0
    n = math.prod(int(v.extent) for v in red.axes)
    mag = replace(out, op=replace(out.op, body=Reduce("sum", abs_(red.body), red.axes,
                                                      red.dtype)))  # type: ignore[arg-type]
    terms = evaluate(algorithm("magnitude", mag), inputs)[name].astype(np.float64)
    unit = float(np.finfo(red.dtype.np).eps) / 2 if red.dtype.name != "bfloat16" else 2.0 ** -8
    return (math.ceil(math.log2(max(n, 2))) + 1) * unit * np.abs(terms)


def random_inputs(algo: Algorithm, seed: int = 0) -> dict[str, np.ndarray]:
    """One array per input of ``algo``, from ``seed``: uniform in [-2, 2] for floating-point
    inputs (rounded to their dtype), integers in [-100, 100) otherwise."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in algo.inputs:
        shape = tuple(int(s) for s in t.shape)
        if t.dtype.is_float:
            out[t.name] = rng.uniform(-2, 2, shape).astype(np.float32).astype(t.dtype.np)
        else:
            out[t.name] = rng.integers(-100, 100, shape).astype(t.dtype.np)
    return out


def int_atol(want: np.ndarray, approx: float) -> int:
    """How far an integer output may be from the reference when approximate instructions
    (relative error ``approx``, :func:`approx_rtol`) compute the value it rounds: 0 without
    them, else the integer steps that error spans at the output's largest value, plus one (a
    value near a rounding boundary: RMSNorm's rsqrt scaled to int8 rounds 0.5 either way)."""
    if not approx or not want.size:
        return 0
    return int(approx * float(np.abs(want.astype(np.float64)).max())) + 1


def compare(got: np.ndarray, want: np.ndarray, dtype: str, approx: float = 0.0,
            sums: np.ndarray | float = 0.0) -> tuple[bool, str]:
    """``got`` vs the reference within the tolerance of ``dtype`` plus ``approx`` (relative,
    from :func:`approx_rtol`) and ``sums`` (absolute, per element, from
    :func:`summation_atol`); an integer output exactly, or within :func:`int_atol` where
    approximate instructions compute the value it rounds."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    if dtype in RTOL:
        # an approximate instruction's error is relative to its own value, which a later sum
        # or difference may leave larger than the output element (tanh = 1 - 2 * reciprocal
        # near 0): as an absolute term, it is taken relative to the output's largest value
        finite = np.abs(w[np.isfinite(w)])
        scale = float(finite.max()) if finite.size else 0.0
        ok = bool(np.allclose(g, w, rtol=RTOL[dtype] + approx,
                              atol=ATOL[dtype] + approx * scale + sums, equal_nan=True))
    else:
        ok = bool(np.all(np.abs(g - w) <= int_atol(w, approx)))
    with np.errstate(invalid="ignore"):
        diff = np.abs(g - w)
    diff = diff[~np.isnan(diff)]  # NaN == NaN and inf == inf leave NaN here
    err = float(diff.max()) if diff.size else 0.0
    nan = int(np.count_nonzero(np.isnan(g) != np.isnan(w)))
    return ok, f"max abs error {err:.3g}" + (f", {nan} elements NaN in only one of the two"
                                             if nan else "")


def user_inputs(algo: Algorithm, inputs: Mapping[str, object]) -> dict[str, np.ndarray]:
    """``inputs`` checked against ``algo``'s inputs (names, shapes, numbers) and converted to
    their dtypes' storage. Any values are welcome: NaN, inf, rows of zeros."""
    if not isinstance(inputs, Mapping):
        raise InputError(f"inputs must map input names to arrays, e.g. {{'x': x}}, got "
                         f"{type(inputs).__name__}")
    want = {t.name: t for t in algo.inputs}
    missing, extra = sorted(set(want) - set(inputs)), sorted(set(inputs) - set(want))
    if missing or extra:
        raise InputError(
            f"inputs of '{algo.name}' are {', '.join(sorted(want))}; "
            + (f"missing: {', '.join(missing)}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"unknown: {', '.join(map(str, extra))}" if extra else ""))
    out = {}
    for name, t in want.items():
        arr = np.asarray(inputs[name])
        shape = tuple(int(s) for s in t.shape)
        if arr.dtype.kind not in "biuf":
            raise InputError(f"input '{name}' holds {arr.dtype} values; give numbers "
                             f"({t.dtype}{list(shape)})")
        if arr.shape != shape:
            raise InputError(f"input '{name}' has shape {list(arr.shape)} but '{algo.name}' "
                             f"declares {t.dtype}{list(shape)}; reshape it or build the "
                             f"algorithm with that shape")
        if not t.dtype.is_float and arr.dtype.kind == "f" and not (
                np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
            raise InputError(f"input '{name}' is {t.dtype} but holds non-integer values; round "
                             f"them first (np.rint(a).astype('{t.dtype.np}'))")
        out[name] = store(t.dtype, arr)
    return out


def vector_epilogue_error(spec: GemmSpec, epi: VectorEpilogue, inputs: Mapping[str, np.ndarray],
                          got: np.ndarray, target: Target = DEFAULT_TARGET) -> tuple[bool, str]:
    """``got`` (a GEMM's Vector epilogue output) against the reference: the accumulator from
    numpy matmul (``gemm_reference``), the epilogue evaluated on it. The accumulator's error
    bound ``K * 2^-23 * |A| |B|`` (hardware summation order) is carried through the epilogue
    by evaluating it at the accumulator plus and minus that bound; on top, the output dtype's
    tolerance and the approximate instructions' error, as :func:`compare`."""
    from ascendsched.algo.evaluate import evaluate
    from ascendsched.algo.gemm_spec import gemm_reference

    acc = gemm_reference(spec, dict(inputs))
    a = np.abs(np.asarray(inputs[spec.a], np.float64))
    b = np.abs(np.asarray(inputs[spec.b], np.float64))
    bound = spec.k * 2.0 ** -23 * (np.swapaxes(a, -1, -2) if spec.trans_a else a) @ (
        np.swapaxes(b, -1, -2) if spec.trans_b else b)
    rest = {t.name: inputs[t.name] for t in epi.algo.inputs if t.name != epi.workspace}

    def at(c: np.ndarray) -> np.ndarray:
        v = evaluate(epi.algo, {**rest, epi.workspace: store(spec.acc_dtype, c)})[epi.output]
        return v.astype(np.float64)

    ref = at(acc.astype(np.float64))
    if not spec.acc_dtype.is_float:
        return compare(got, ref, epi.algo.outputs[0].dtype.name)
    with np.errstate(invalid="ignore", over="ignore"):
        sens = np.maximum(np.abs(at(acc + bound) - ref), np.abs(at(acc - bound) - ref))
    dtype = epi.algo.outputs[0].dtype.name
    approx = approx_rtol(epi.algo, epi.output, target)
    finite = np.abs(ref[np.isfinite(ref)])
    scale = float(finite.max()) if finite.size else 0.0
    g = np.asarray(got, np.float64)
    with np.errstate(invalid="ignore"):
        err = np.abs(g - ref)
        ok = err <= np.nan_to_num(sens) + ATOL[dtype] + approx * scale \
            + (RTOL[dtype] + approx) * np.abs(ref)
    ok |= np.isnan(g) & np.isnan(ref)
    worst = float(np.nanmax(err)) if err.size else 0.0
    if not ok.all():
        at_ = np.argwhere(~ok)[0].tolist()
        return False, (f"{int((~ok).sum())} of {ok.size} elements beyond the bound, first at "
                       f"{at_}: got {g[tuple(at_)]}, want {ref[tuple(at_)]}")
    return True, f"max abs error {worst:.3g} (accumulator bound carried through the epilogue)"
