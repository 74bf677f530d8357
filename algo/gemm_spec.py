"""Recognise a GEMM in an Algorithm (the Cube path's entry point); no hardware knowledge here.

An algorithm is a GEMM when its single output stage is (optionally cast from the accumulator)
``sum_k cast(A[.., i, k]) * cast(B[.., k, j])`` over one reduce axis, with A and B placeholders
of one dtype and the accumulator float32 (float16/bfloat16 inputs) or int32 (int8 inputs)::

    C[i, j] = float16(sum[float32](k<K: float32(A[i, k]) * float32(B[k, j])))
    ->  GemmSpec(M, N, K, batch=1, trans_a=False, trans_b=False, float16 -> float32 -> float16)

A given as (K, M) (read ``A[k, i]``) or B given as (N, K) (read ``B[j, k]``) set ``trans_a`` /
``trans_b``; a leading output axis that indexes A (and optionally B) makes it batched. Anything
else raises :class:`UnsupportedError` saying which part did not match. Which dtype combinations
the Cube unit runs is the lowering's business (``lower/build_gemm.py``), not the matcher's.

The elementwise steps after the sum that the Cube core applies on the way out (an
:class:`Epilogue`) are recognised by ``gemm_epilogue.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ascendsched.algo.algorithm import Algorithm
from ascendsched.algo.expr import (
    Binary,
    Cast,
    Expr,
    IndexVar,
    Load,
    Reduce,
    ReduceVar,
)
from ascendsched.algo.gemm_epilogue import (
    Epilogue,
    contracts,
    epilogue_chain,
    fixpipe_epilogue,
    is_matmul_stage,
    reduces,
    same_indices,
    strip_casts,
)
from ascendsched.algo.tensor import Tensor
from ascendsched.dtypes import DType, as_dtype
from ascendsched.errors import UnsupportedError


@dataclass(frozen=True)
class GemmSpec:
    """``C[b] = A[b] x B[b]`` for ``b < batch``; shapes are the logical (M, K) x (K, N)."""

    name: str
    a: str  # GM tensor names
    b: str
    c: str
    m: int
    n: int
    k: int
    batch: int = 1  # 1 and not batched: C is (M, N)
    batched: bool = False  # C is (batch, M, N)
    b_batched: bool = True  # B has a batch axis (False: one B shared by every batch)
    trans_a: bool = False  # A in GM is (K, M)
    trans_b: bool = False  # B in GM is (N, K)
    in_dtype: DType = as_dtype("float16")
    acc_dtype: DType = as_dtype("float32")
    out_dtype: DType = as_dtype("float16")
    epilogue: Epilogue = Epilogue()
    acc_stage: str = ""  # the stage holding the sum (c when there is no epilogue stage)

    def __str__(self) -> str:
        b = f"{self.batch} x " if self.batched else ""
        t = "".join(f" {x}" for x, on in (("A^T", self.trans_a), ("B^T", self.trans_b)) if on)
        e = self.epilogue
        ep = f", epilogue {e}" if (e.bias or e.relu or e.scale) else ""
        return (f"gemm {self.name}: {b}({self.m} x {self.k}) x ({self.k} x {self.n}){t}, "
                f"{self.in_dtype} -> {self.acc_dtype} -> {self.out_dtype}{ep}")

    @property
    def gemm_stage(self) -> str:
        """The stage whose body is the sum (``c`` itself without epilogue stages)."""
        return self.acc_stage or self.c


def is_gemm(algo: Algorithm) -> bool:
    """True when :func:`match_gemm` accepts ``algo``."""
    try:
        match_gemm(algo)
    except UnsupportedError:
        return False
    return True


def looks_like_gemm(algo: Algorithm) -> bool:
    """True when a stage is a sum of products of two input matrices: route the algorithm to
    the Cube path (whose matcher then explains any part it cannot lower, e.g. an epilogue
    stage the Cube core cannot apply)."""
    if len(algo.stages) == 1 and len(algo.inputs) == 2:  # the one-stage form, any ranks
        out = algo.outputs[0]
        assert out.op is not None
        body = strip_casts(out.op.body)
        if isinstance(body, Reduce) and body.op == "sum":
            prod = strip_casts(body.body)
            if isinstance(prod, Binary) and prod.op == "mul" and contracts(prod):
                return True
    return any(is_matmul_stage(t) for t in algo.stages)


def match_gemm(algo: Algorithm) -> GemmSpec:
    """The GEMM ``algo`` computes, or UnsupportedError naming what does not match."""
    where = f"algorithm '{algo.name}'"
    if len(algo.outputs) != 1:
        raise UnsupportedError(
            f"{where}: a Cube GEMM writes one output C = epilogue(A x B); this algorithm has "
            f"{len(algo.outputs)} outputs ({', '.join(o.name for o in algo.outputs)}). Compute "
            f"the other outputs in their own algorithm")
    out = algo.outputs[0]
    if not any(reduces(t) for t in algo.stages):
        raise UnsupportedError(
            f"{where}: output '{out.name}' is not a single-axis sum (reduce_sum over one "
            f"reduce_axis); the Cube path lowers C[i, j] = sum_k A[i, k] * B[k, j]")
    if len(algo.stages) > 1 and not any(is_matmul_stage(t) for t in algo.stages):
        raise UnsupportedError(
            f"{where}: a Cube GEMM is a stage C = sum_k A x B (then optionally elementwise "
            f"epilogue stages); this algorithm has {len(algo.stages)} stages "
            f"({', '.join(t.name for t in algo.stages)}) and none is a sum of products of two "
            f"input matrices. Compute it on the vector path")
    steps, c, body, absorbed = epilogue_chain(algo, out, where)
    assert c.op is not None
    if not isinstance(body, Reduce) or body.op != "sum" or len(body.axes) != 1:
        raise UnsupportedError(
            f"{where}: output '{c.name}' is not a single-axis sum (reduce_sum over one "
            f"reduce_axis); the Cube path lowers C[i, j] = sum_k A[i, k] * B[k, j]")
    acc = body.dtype
    kv = body.axes[0]
    prod = strip_casts(body.body)
    if not isinstance(prod, Binary) or prod.op != "mul":
        raise UnsupportedError(f"{where}: the summand {body.body} is not a product of two "
                               f"loads; write reduce_sum(A[i, k].astype(acc) * B[k, j]"
                               f".astype(acc), k, dtype=acc)")
    la, lb = _load(prod.a, acc, where), _load(prod.b, acc, where)
    axes = c.op.axes
    if len(axes) not in (2, 3):
        raise UnsupportedError(f"{where}: output '{c.name}' has rank {len(axes)}; GEMM outputs "
                               f"are (M, N) or (batch, M, N)")
    batched = len(axes) == 3
    bv, iv, jv = (axes[0], axes[1], axes[2]) if batched else (None, axes[0], axes[1])
    # operand order: A is the one indexed by i
    if _uses(la, iv) and _uses(lb, jv):
        pass
    elif _uses(lb, iv) and _uses(la, jv):
        la, lb = lb, la
    else:
        raise UnsupportedError(f"{where}: cannot tell A (indexed by {iv.name}) from B (indexed "
                               f"by {jv.name}) in {prod}")
    a_t, trans_a, a_b = _operand(la, bv, iv, kv, where, "A")
    b_t, trans_b, b_b = _operand(lb, bv, jv, kv, where, "B", allow_shared=True)
    if not a_b and batched:
        raise UnsupportedError(f"{where}: batched GEMM needs A indexed by the batch axis "
                               f"'{bv.name}' (a shared A is not supported; swap the roles)")
    if a_t is b_t:
        raise UnsupportedError(f"{where}: A and B are the same tensor '{a_t.name}'")
    if a_t.dtype != b_t.dtype:
        raise UnsupportedError(f"{where}: A is {a_t.dtype} but B is {b_t.dtype}; the Cube unit "
                               f"multiplies operands of one dtype: cast one input first")
    sizes = [int(s) for s in c.shape] + [int(kv.extent)]
    if batched:
        batch, m, n, k = sizes
    else:
        (m, n, k), batch = sizes, 1
    epi = fixpipe_epilogue(steps, acc, out.dtype, n, absorbed, where)
    for v in (epi.bias, epi.scale):
        if v is not None and v in (a_t.name, b_t.name):
            raise UnsupportedError(f"{where}: '{v}' is both a GEMM operand and an epilogue "
                                   f"vector; pass the vector as its own input")
    return GemmSpec(algo.name, a_t.name, b_t.name, out.name, m, n, k, batch, batched,
                    b_b or not batched, trans_a, trans_b, a_t.dtype, acc, out.dtype, epi,
                    c.name if absorbed else "")


def gemm_reference(spec: GemmSpec, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The output computed with numpy matmul in float64 (int64 for int8), the epilogue
    applied in the algorithm's order (bias in the accumulator dtype, ReLU, scale after an
    int32 -> float32 cast), then stored as the output dtype. Equal to ``algo.evaluate`` up to
    summation order, in O(MN) memory."""
    from ascendsched.dtypes import store

    exact = spec.in_dtype.name == "int8"
    wide = np.int64 if exact else np.float64
    e = spec.epilogue
    c = _product(spec, inputs, wide)
    if e.bias is not None:
        c = c + store(spec.acc_dtype, np.asarray(inputs[e.bias])).astype(wide)
    # the accumulator as the hardware holds it: int32 wraps, float rounds to float32
    c = store(spec.acc_dtype, c if exact else c.astype(np.float32))
    if e.relu:
        c = np.maximum(c, c.dtype.type(0))
    if e.scale is not None:
        scale = store(as_dtype("float32"), np.asarray(inputs[e.scale]))
        c = c.astype(np.float32) * scale.astype(np.float32)
    return store(spec.out_dtype, c)


def _product(spec: GemmSpec, inputs: dict[str, np.ndarray], wide: type) -> np.ndarray:
    # inputs as the tensors hold them (e.g. float32 storage of bfloat16 rounded to bfloat16)
    from ascendsched.dtypes import store

    a = store(spec.in_dtype, np.asarray(inputs[spec.a])).astype(wide)
    b = store(spec.in_dtype, np.asarray(inputs[spec.b])).astype(wide)
    if spec.trans_a:
        a = np.swapaxes(a, -1, -2)
    if spec.trans_b:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


# relative rounding of one output element (half an ulp, doubled for slack)
_OUT_ULP = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -22}
# The Fixpipe multiplies by the scale's sign, exponent and top 10 mantissa bits only (asc-devkit
# docs 随路量化.md 表1: M1 is read "以(1, 8, 10)的格式"): up to 2^-10 relative of the result.
SCALE_MANTISSA_BITS = 10


def gemm_error(spec: GemmSpec, inputs: dict[str, np.ndarray], got: np.ndarray
               ) -> tuple[bool, str]:
    """``got`` against the reference: integers exactly; floats within the fp32 accumulation
    bound ``K * 2^-23 * (|A| |B|)`` (the summation order is the hardware's, not numpy's; an
    int32 sum only rounds once, to float32, before a dequantisation scale) times |scale|, plus
    the scale's mantissa truncation and the output's rounding, so long K does not fail a
    correct kernel. (ok, message)."""
    ref = gemm_reference(spec, inputs)
    if not spec.out_dtype.is_float:
        bad = int(np.count_nonzero(np.asarray(got) != ref))
        return bad == 0, f"{bad} of {ref.size} elements differ (integers: exact)"
    e = spec.epilogue
    ref64 = ref.astype(np.float64)
    if spec.in_dtype.name == "int8":
        acc_err = 2.0 ** -24 * np.abs(_product(spec, inputs, np.int64).astype(np.float64))
    else:
        a = np.abs(np.asarray(inputs[spec.a], dtype=np.float64))
        b = np.abs(np.asarray(inputs[spec.b], dtype=np.float64))
        a = np.swapaxes(a, -1, -2) if spec.trans_a else a
        b = np.swapaxes(b, -1, -2) if spec.trans_b else b
        acc_err = spec.k * 2.0 ** -23 * np.matmul(a, b)
        if e.bias is not None:
            acc_err = acc_err + 2.0 ** -23 * np.abs(np.asarray(inputs[e.bias], np.float64))
    rel = _OUT_ULP[spec.out_dtype.name]
    if e.scale is not None:
        acc_err = acc_err * np.abs(np.asarray(inputs[e.scale], dtype=np.float64))
        rel += 2.0 ** -SCALE_MANTISSA_BITS
    bound = acc_err + rel * np.abs(ref64) + 1e-30
    got64 = np.asarray(got, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        err = np.abs(got64 - ref64)
    bad = ~((err <= bound) | (got64 == ref64))  # NaN counts as bad; equal infinities match
    fin = err[np.isfinite(err)]  # an overflow to inf within the bound is no error size
    worst = float(fin.max()) if fin.size else 0.0
    if bad.any():
        at = np.argwhere(bad)[0].tolist()
        return False, (f"{int(bad.sum())} of {bad.size} elements beyond the K-scaled bound, "
                       f"first at {at}: got {got[tuple(at)]}, want {ref[tuple(at)]}")
    return True, f"max abs error {worst:.3g} (within the K-scaled fp32 bound)"


# --------------------------------------------------------------------------- private helpers
def _load(e: Expr, acc: DType, where: str) -> Load:
    """A Load cast to the accumulator (or already in it)."""
    x = e.x if isinstance(e, Cast) else e
    if isinstance(x, Load) and not x.tensor.is_placeholder:
        name = x.tensor.name
        raise UnsupportedError(
            f"{where}: GEMM operand {e} reads '{name}', which this algorithm computes; the Cube "
            f"reads a contraction's operands from GM inputs, so one kernel cannot contract a "
            f"stage it computes (attention's P x V after the softmax is one): compute '{name}' "
            f"in a kernel of its own and pass it to this one as a placeholder")
    if isinstance(x, Cast) or not isinstance(x, Load):
        raise UnsupportedError(
            f"{where}: GEMM operand {e} is not an input read (cast to {acc}); the Cube "
            f"multiplies its inputs as they are: compute {x} in a kernel of its own and pass "
            f"it to this one as a placeholder")
    if e.dtype != acc:
        raise UnsupportedError(
            f"{where}: the product {e} is computed in {e.dtype}, not in the accumulator dtype "
            f"{acc}; the Cube unit multiplies exactly and accumulates in {acc}: write "
            f"{x}.astype('{acc}') * ...")
    return x


def _uses(ld: Load, v: IndexVar) -> bool:
    return any(i is v or i == v for i in ld.indices)


def _operand(ld: Load, bv: IndexVar | None, rv: IndexVar, kv: ReduceVar, where: str, role: str,
             allow_shared: bool = False) -> tuple[Tensor, bool, bool]:
    """(tensor, transposed, has batch axis) of an operand load, checking its subscripts."""
    idx = list(ld.indices)
    has_b = bv is not None and len(idx) == 3
    if has_b:
        if not (idx[0] is bv or idx[0] == bv):
            raise UnsupportedError(f"{where}: {role} = {ld}: the batch axis '{bv.name}' must be "
                                   f"its first subscript")
        idx = idx[1:]
    elif bv is not None and not allow_shared:
        raise UnsupportedError(f"{where}: {role} = {ld} is not indexed by the batch axis")
    if len(idx) != 2:
        raise UnsupportedError(f"{where}: {role} = {ld} must be a matrix (rank 2, or 3 with a "
                               f"batch axis)")
    natural = (rv, kv) if role == "A" else (kv, rv)
    swapped = natural[::-1]
    if same_indices(idx, natural):
        trans = False
    elif same_indices(idx, swapped):
        trans = True
    else:
        raise UnsupportedError(
            f"{where}: {role} = {ld}: subscripts must be plain axes "
            f"[{', '.join(v.name for v in natural)}] or transposed "
            f"[{', '.join(v.name for v in swapped)}] (no offsets or strides)")
    return ld.tensor, trans, has_b
