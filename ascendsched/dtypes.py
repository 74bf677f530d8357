"""Element types shared by every stage, with numpy storage and rounding rules.

bfloat16 has no numpy type: its values are kept in float32 arrays holding exactly
representable bfloat16 numbers (round-to-nearest-even on every store).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ascendsched.errors import AlgorithmError


@dataclass(frozen=True)
class DType:
    name: str
    bytes: int
    is_float: bool
    numpy: str  # numpy dtype used to hold values in the reference and the simulator

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return self.name

    @property
    def np(self) -> np.dtype:
        return np.dtype(self.numpy)


float16 = DType("float16", 2, True, "float16")
bfloat16 = DType("bfloat16", 2, True, "float32")
float32 = DType("float32", 4, True, "float32")
int8 = DType("int8", 1, False, "int8")
int16 = DType("int16", 2, False, "int16")
int32 = DType("int32", 4, False, "int32")
uint8 = DType("uint8", 1, False, "uint8")  # compare masks; not a user tensor type
bool_ = DType("bool", 1, False, "bool")  # result of comparisons; never stored
# Fixpipe per-channel quantisation words (lower/fixpipe_quant.py); not a user tensor type
uint64 = DType("uint64", 8, False, "uint64")

USER_DTYPES = {d.name: d for d in (float16, bfloat16, float32, int8, int32)}
ALL_DTYPES = {d.name: d for d in (float16, bfloat16, float32, int8, int16, int32, uint8, bool_,
                                  uint64)}


def as_dtype(value: DType | str) -> DType:
    """Accept a DType or its name; raise AlgorithmError listing the supported names."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in ALL_DTYPES:
        return ALL_DTYPES[value]
    raise AlgorithmError(
        f"unknown dtype {value!r}; supported tensor dtypes are {', '.join(USER_DTYPES)}"
    )


def round_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bfloat16 (ties to even), returned as float32."""
    f = np.asarray(x, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    out = ((bits + rounding) >> 16 << 16).astype(np.uint32)
    nan = np.isnan(f)
    res = out.view(np.float32).copy()
    res[nan] = np.nan
    return res


def store(dtype: DType, values: np.ndarray | float | int, round_mode: str = "rint", *,
          saturate: bool = False) -> np.ndarray:
    """Convert values to ``dtype``'s storage with the documented rounding.

    Floats round to nearest even. Float -> integer uses ``round_mode`` (rint, trunc, floor,
    ceil, round; NaN becomes 0). Out-of-range integers wrap like a two's-complement store
    (integer arithmetic), or with ``saturate`` clamp to the type's range, as the vector unit's
    ``Cast`` does ("溢出默认按照饱和模式处理", asc-devkit docs/zh/api/SIMD-API/基础API/
    数据结构/precision_conversion.md:30).
    """
    a = np.asarray(values)
    if dtype is bool_:
        return a.astype(bool)
    if dtype.is_float:
        if dtype is bfloat16:
            return round_bf16(a.astype(np.float32))
        return a.astype(dtype.np)
    if a.dtype.kind == "f":
        rounder = {
            "rint": np.rint,
            "trunc": np.trunc,
            "floor": np.floor,
            "ceil": np.ceil,
            "round": lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5),
            "none": np.rint,
        }[round_mode]
        a = rounder(a.astype(np.float64))
        a = np.nan_to_num(a, nan=0.0, posinf=2**62, neginf=-(2**62))
    a = a.astype(np.int64)
    if saturate:
        info = np.iinfo(dtype.np)
        a = np.clip(a, info.min, info.max)
    return a.astype(dtype.np)


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """The 16-bit patterns of bfloat16 values held in float32 storage."""
    return (round_bf16(values).view(np.uint32) >> 16).astype(np.uint16)


def from_bf16_bits(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32)
