"""Index expressions as vector data, for comparisons of indices and index casts.

``where(j <= i, s[i, j], -inf)`` (a causal mask) compares subscript variables. The vector unit
compares data, so each index becomes a float row: an iota ``0 .. n-1`` along its axis, built in
UB with the instructions the kernel already uses (no scalar-pipe writes), scaled by its
coefficient, summed over the axes (per-row values broadcast with Brcb), plus the tile's start,
which is a value of the loop variables (a ``vec_scalar`` with an Affine scalar)::

    iota over 8 fp32 lanes: Duplicate(7, mask 8), Duplicate(6, mask 7), ..., Duplicate(0, mask 1)
    doubling:               t[8:16] = t[0:8] + 8; t[16:32] = t[0:16] + 16; ...
    j - i over the tile:    (iota_j + j0) - (iota_i + i0)  ->  iota_j - brcb(iota_i) + (j0 - i0)

A comparison of two index expressions is lowered as ``(a - b) op 0``. Values must be exact in
the float type: |index| <= 2**24 in float32, 2048 in float16.

Hardware facts (asc-devkit docs/zh/api/SIMD-API/基础API/Memory矢量计算/): Duplicate writes the
leading ``mask`` lanes of a repeat in continuous mask mode (SIMD计算说明/掩码.md:16); Adds takes
its scalar at run time (基础算术/Adds.md: ``const T& scalarValue``). CreateVecIndex would make
the iota in one call, but on dav-c220 it writes the first block from the scalar unit with its
own S->V event (impl/basic_api/dav_c220/kernel_operator_vec_createvecindex_impl.h,
CreateVecIndexOneBlk), which the kernel's planned flags would not see.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ascendsched.algo.expr import Const, Expr, IndexArith, IndexVar, ReduceVar
from ascendsched.dtypes import DType, float16, float32
from ascendsched.errors import UnsupportedError
from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import Dim, Region

if TYPE_CHECKING:
    from ascendsched.lower.select_vector import _ExprGen
    from ascendsched.lower.vector_instrs import Val

_EXACT = {float32.name: 2**24, float16.name: 2048}


def index_value(gen: _ExprGen, e: Expr, minus: Expr | None, dtype: DType) -> Val:
    """The values of index expression ``e`` (``e - minus`` when given) over ``gen``'s domain,
    as ``dtype`` data."""
    what = str(e) if minus is None else f"{e} - ({minus})"
    if dtype.name not in _EXACT:
        raise UnsupportedError(
            f"stage '{gen.stage}': the index values of {what} are computed as float16 or "
            f"float32 data, not {dtype}; compare or cast them in float32")
    coeffs, const, bound = _linear(gen, e, 1)
    if minus is not None:
        c2, k2, b2 = _linear(gen, minus, -1)
        for a, c in c2.items():
            coeffs[a] = coeffs.get(a, 0) + c
        const, bound = const + k2, bound + b2
    if bound > _EXACT[dtype.name]:
        raise UnsupportedError(
            f"stage '{gen.stage}': the index values of {what} reach {bound}, which {dtype} does "
            f"not hold exactly (up to {_EXACT[dtype.name]}); compute them in float32")
    start = Affine(const)
    acc: Val | None = None
    for a, c in sorted(coeffs.items()):
        if c == 0:
            continue
        start = start + gen.dom[a].start * c
        term = _iota(gen, a, dtype)
        if c != 1:
            scaled = gen.temp((a,), dtype, f"{c} * {gen.dom[a].name}")
            gen.vec("vec_scalar", scaled, (term,), "muls", (("fn", "muls"), ("scalar", c)))
            term = scaled
        if acc is None:
            acc = term
        else:
            axes = tuple(sorted(set(acc.varying()) | set(term.varying())))
            out = gen.temp(axes, dtype, f"index values of {what}")
            gen.vec("vec_binary", out, (acc, term), "add", (("fn", "add"),))
            acc = out
    if acc is None:  # no variable left: a constant of the loop variables
        acc = gen.temp((), dtype, f"index value {what}")
        gen.vec_dup(acc, 0)
    if start != Affine():
        out = gen.temp(acc.varying(), dtype, f"index values of {what}")
        scalar = start.const if start.is_const else start
        gen.vec("vec_scalar", out, (acc,), "adds", (("fn", "adds"), ("scalar", scalar)))
        acc = out
    return acc


def _linear(gen: _ExprGen, e: Expr, sign: int) -> tuple[dict[int, int], int, int]:
    """``sign * e`` as (domain axis -> coefficient, constant, bound on |value|)."""
    if isinstance(e, Const):
        return {}, sign * int(e.value), abs(int(e.value))
    if isinstance(e, (IndexVar, ReduceVar)):
        a = gen.env[e]
        return {a: sign}, 0, int(e.extent)
    if isinstance(e, IndexArith):
        if e.op in ("add", "sub"):
            ca, ka, ba = _linear(gen, e.a, sign)
            cb, kb, bb = _linear(gen, e.b, sign if e.op == "add" else -sign)
            for a, c in cb.items():
                ca[a] = ca.get(a, 0) + c
            return ca, ka + kb, ba + bb
        if e.op == "mul" and (isinstance(e.a, Const) or isinstance(e.b, Const)):
            k, x = (e.a, e.b) if isinstance(e.a, Const) else (e.b, e.a)
            cx, kx, bx = _linear(gen, x, sign * int(k.value))
            return cx, kx, bx * abs(int(k.value))
    raise UnsupportedError(
        f"stage '{gen.stage}': the index expression {e} is not affine (sums of index variables "
        f"times integers); only affine index values can be compared or cast")


def _iota(gen: _ExprGen, a: int, dtype: DType) -> Val:
    """A dense row ``0, 1, ..., n-1`` along domain axis ``a``."""
    n = gen.dom[a].extent
    out = gen.temp((a,), dtype, f"0 .. {n - 1} along {gen.dom[a].name}")
    per = gen.t.elems_per_block(dtype.bytes)
    epr = gen.t.repeat_bytes // dtype.bytes
    first = min(per, n)
    what = f"{gen.stage}: index values along {gen.dom[a].name}"
    for v in range(first - 1, -1, -1):  # lane k ends with the value of the last dup over it
        region = Region(out.buf, out.offset, (Dim(1, epr), Dim(v + 1, 1)), out.copy)
        gen.v.instrs.extend(gen._instr("vec_dup", [region], (("value", v),), what))
    have = first
    while have < n:
        cnt = min(have, n - have)
        dst = replace(out, offset=out.offset + have)
        gen.v.instrs.extend(gen._cover("vec_scalar", [(dst, epr, 1), (out, epr, 1)], 1, cnt,
                                       (("fn", "adds"), ("scalar", have)), what))
        have += cnt
    return out
