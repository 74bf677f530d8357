"""The Fixpipe's per-channel quantisation words: how the host encodes a float32 scale and what
the Fixpipe multiplies by. One place for the simulator, the CPU check and the emitter.

Format (asc-devkit docs/zh/api/SIMD-API/基础API/矩阵计算（ISASI）/矩阵搬出关键特性说明/随路量化.md
表1, NPU arch 2201): each quant word is a ``uint64``; bits 0..31 hold a float32 of which the
hardware uses sign, exponent and the top 10 mantissa bits ("硬件以(1, 8, 10)的格式 ... 13~22位为
尾数位"), so the low 13 bits are ignored; for (V)DEQF16 the offset (37..45) and sign (46) bits
are unused. The host conversion is the framework's (hicann/ops-nn
quant/trans_quant_param/docs/aclnnTransQuantParam.md, torch_npu ``npu_trans_quant_param``):
``word = (bits(scale) & 0xFFFFE000) | (1 << 46)``, i.e. the scale truncated to 10 mantissa
bits. The kernel's GM tensor holds these words, zero-padded to whole 128 B (the Fixpipe copies
its L1 quant tensor to the Fixpipe buffer in 128 B units: impl/basic_api/dav_c220/
kernel_operator_fixpipe_v2_impl.h ``CopyDeqTensorToFbuf``), so every tile's copy is whole.

VDEQF16 (随路量化与随路ReLU场景组合.md 表1 and examples/.../fixpipe_l0c2gm/scripts/
gen_data_s322f16.py ``deqf16``): the int32 is converted to float32 (mode control bit 0) and
multiplied by M1 when >= 0, else by M2 (M2 = M1 without ReLU, 0 with ReLU: so relu(C) * M1),
then stored as float16. The rounding of the int32 -> float32 conversion, the product and the
float16 store is not documented: we assume round-to-nearest-even for each (numpy's float32
multiply, then ``astype(float16)``), and IEEE overflow to inf (the saturation mode of CTRL[48]
is left at its default and not modelled).
"""

from __future__ import annotations

import numpy as np

from ascendsched.errors import InternalCompilerError
from ascendsched.target.model import Target

# Bits of a quant word the Fixpipe reads as M1 (float32 with the low 13 mantissa bits cleared)
M1_MASK = 0xFFFFE000
# aclnnTransQuantParam sets bit 46 (the sign flag, unused by (V)DEQF16); we do the same
SIGN_BIT = 1 << 46
WORD_BYTES = 8  # a quant word is a uint64


def padded_words(n: int, target: Target) -> int:
    """Quant words of the kernel's GM tensor for ``n`` columns: whole units of the L1 ->
    Fixpipe-buffer copy (``fixpipe_quant_unit_bytes``, 128 B = 16 words on 910B)."""
    per = target.fixpipe_quant_unit_bytes // WORD_BYTES
    return -(-n // per) * per


def quant_words(scale: np.ndarray, elems: int) -> np.ndarray:
    """float32 ``scale[n]`` -> ``elems`` uint64 quant words (aclnnTransQuantParam), zero
    words past ``n``."""
    s = np.ascontiguousarray(np.asarray(scale, dtype=np.float32).reshape(-1))
    if s.size > elems:
        raise InternalCompilerError(f"quant_words: {s.size} scales do not fit {elems} words")
    out = np.zeros(elems, dtype=np.uint64)
    bits = s.view(np.uint32).astype(np.uint64)
    out[:s.size] = (bits & np.uint64(M1_MASK)) | np.uint64(SIGN_BIT)
    return out


def m1(words: np.ndarray) -> np.ndarray:
    """The float32 factor M1 the Fixpipe multiplies by (bits 0..31, low 13 cleared)."""
    w = np.asarray(words, dtype=np.uint64)
    return (w & np.uint64(M1_MASK)).astype(np.uint32).view(np.float32)


def vdeqf16(acc: np.ndarray, words: np.ndarray, relu: bool) -> np.ndarray:
    """VDEQF16 of int32 values ``acc`` (..., n) with per-column quant ``words`` (n,): float16
    of float32(acc) * M1, negative inputs times 0 under ReLU (module docstring)."""
    x = np.asarray(acc).astype(np.float32)
    if relu:
        x = np.where(x < 0, np.float32(0), x)
    with np.errstate(over="ignore", invalid="ignore"):
        return (x * m1(words)).astype(np.float32).astype(np.float16)


def _fixpipe_quant(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return quant_words(a, shape[0])


# name -> (user array, kernel tensor shape) -> the kernel tensor's values
HOST_CONVERSIONS = {"fixpipe_quant": _fixpipe_quant}
