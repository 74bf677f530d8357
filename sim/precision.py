"""What the 910B vector unit computes where it is not correctly rounded: the one place both the
simulator and the tolerance of the numeric checks read (the CPU runtime mirrors it bit for bit,
emit_ascendc/runtime/kernel_operator.h, ``detail::approx`` and ``detail::tree_sum``).

- ``Rsqrt`` / ``Reciprocal`` (``approx_unary``): the exact result (float64) times ``1 + d``,
  where ``d`` is a relative error in ``[-e, e]`` (``e = target.approx_rel_error[(fn, dtype)]``,
  see target/ascend910b.py for the documented facts and the assumption) drawn from a hash of
  the source element's bits: deterministic, the same in the simulator and the CPU runtime, and
  spread over the whole range. The product is rounded to float32, then to the result dtype.
- ``WholeReduceSum`` (``tree_sum``): each repeat is summed as a binary tree of adjacent pairs,
  every partial sum rounded to the operand dtype (asc-devkit docs ReduceRepeat.md:270,
  ReduceDataBlock.md:183-191: "以二叉树累加的方式", data1 + data2, data3 + data4, ...). Lanes
  beyond the mask count as 0, which keeps every partial sum exact.
"""

from __future__ import annotations

import numpy as np

from ascendsched.dtypes import DType
from ascendsched.target.model import Target


def hash32(bits: np.ndarray) -> np.ndarray:
    """lowbias32 (C. Wellons): a well-mixed 32-bit integer hash, cheap to repeat in C++."""
    x = np.asarray(bits, dtype=np.uint32).copy()
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


def relative_error(src: np.ndarray, bound: float) -> np.ndarray:
    """The modelled relative error of each result, in [-bound, bound], from its source bits."""
    a = np.ascontiguousarray(src)
    bits = a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint32).astype(np.uint32)
    u = (hash32(bits) >> np.uint32(8)).astype(np.float64) / float(1 << 24)  # [0, 1), 24 bits
    return (2.0 * u - 1.0) * bound


_EXACT = {
    "rsqrt": lambda v: 1.0 / np.sqrt(v),
    "reciprocal": lambda v: 1.0 / v,
}


def approx_unary(fn: str, src: np.ndarray, dtype: DType, target: Target) -> np.ndarray | None:
    """``fn`` of ``src`` (values of ``dtype``) as the target's vector unit gives it, or None
    when ``fn`` is correctly rounded on ``target``."""
    bound = target.approx_rel_error.get((fn, dtype.name))
    if bound is None:
        return None
    with np.errstate(all="ignore"):
        exact = _EXACT[fn](np.asarray(src, dtype=np.float64))
        y = exact * (1.0 + relative_error(np.asarray(src, dtype=dtype.np), bound))
        return y.astype(np.float32).astype(dtype.np)


def tree_sum(v: np.ndarray) -> np.ndarray:
    """Row sums of ``v`` (rows, lanes) as a binary tree of adjacent pairs, each partial sum in
    ``v``'s dtype (numpy rounds per add). Returns shape (rows, 1)."""
    rows, n = v.shape
    width = 1
    while width < n:
        width *= 2
    acc = np.zeros((rows, width), dtype=v.dtype)
    acc[:, :n] = v
    with np.errstate(all="ignore"):
        while acc.shape[1] > 1:
            acc = acc[:, 0::2] + acc[:, 1::2]
    return acc
