"""How kernel IR is spelled in C++: C types, affine expressions, scalar literals, identifiers,
the kernel function's name, comments, and the 2-D view of a Region that the op templates print.
"""

from __future__ import annotations

import math
import re

from ascendsched.dtypes import DType
from ascendsched.emit_ascendc.cce_names import CCE_BUILTINS, CPP_KEYWORDS
from ascendsched.lower.affine import Affine
from ascendsched.lower.ir import Region

_C_TYPES = {
    "float16": "half", "float32": "float", "bfloat16": "bfloat16_t", "int8": "int8_t",
    "int16": "int16_t", "int32": "int32_t", "uint8": "uint8_t", "uint64": "uint64_t",
}


def _ctype(d: DType) -> str:
    return _C_TYPES[d.name]


def _cexpr(a: Affine) -> str:
    text = a.c_expr()
    if re.fullmatch(r"\(\w+ % \d+\)", text):
        return text[1:-1]  # drop the redundant parentheses of a lone (var % m)
    return text


def _dims2(r: Region) -> tuple[int, int, int, int]:
    """(rows, row_stride, cols, col_stride) of a region (1-D regions are one row; a DMA or
    vector region has one or two dims: verified)."""
    if len(r.dims) == 2:
        (rows, rs), (cols, cs) = r.dims
        return rows, rs, cols, cs
    (cols, cs), = r.dims
    return 1, cols * max(cs, 1), cols, cs


def _scalar(value: float | int | Affine, d: DType) -> str:
    ct = _ctype(d)
    if isinstance(value, Affine):  # a value of the loop variables (an index, lower/index_values)
        if value.is_const:
            value = value.const
        else:
            inner = f"static_cast<float>({_cexpr(value)})" if d.is_float else _cexpr(value)
            return f"static_cast<{ct}>({inner})" if ct != "float" else inner
    if d.is_float:
        v = float(value)
        if math.isnan(v):
            lit = "std::numeric_limits<float>::quiet_NaN()"
        elif math.isinf(v):
            lit = ("" if v > 0 else "-") + "std::numeric_limits<float>::infinity()"
        else:
            lit = repr(v) + "f"
        return lit if ct == "float" else f"static_cast<{ct}>({lit})"
    return f"static_cast<{ct}>({int(value)})"


def _ident(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", s)


def sync_comment(reasons: str) -> str:
    """A sync's comment in the emitted code: the first dependence that needed it and how many
    more (the IR keeps the whole list, ``;``-separated)."""
    parts = [r for r in (x.strip() for x in reasons.split("; ")) if r]
    if len(parts) <= 1:
        return reasons.strip()
    return f"{parts[0]} (+{len(parts) - 1} more)"


def _comment(text: str) -> str:
    text = " ".join(str(text).split())
    return f"  // {text}" if text else ""


def c_name(kernel_name: str) -> str:
    """The C name of the emitted kernel function: ``kernel_name``, or ``<name>_kernel`` when the
    name would clash with a CCE builtin of the global namespace (``vadd``: the intrinsic the
    910B ``Add`` is built on, emit_ascendc/cce_names.py) or a C++ keyword. The project's file
    names keep the kernel name; the launcher and the CPU driver call the C name."""
    name = kernel_name
    while name in CCE_BUILTINS or name in CPP_KEYWORDS:
        name += "_kernel"
    return name
