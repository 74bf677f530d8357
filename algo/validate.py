"""Checks of the plain values the algorithm builders take: names, sizes and shapes.

Names become C++ identifiers in the emitted kernel and its host driver (``x`` -> ``x_gm``,
``x_ub``, the kernel function is the algorithm's name), so they must be identifiers that are
not C++ keywords nor names the emitted code declares itself.
"""

from __future__ import annotations

import keyword
from collections.abc import Sequence
from typing import Union

import sympy

from ascendsched.errors import AlgorithmError

Size = Union[int, sympy.Expr]

CPP_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char16_t char32_t
class compl const constexpr const_cast continue decltype default delete do double dynamic_cast
else enum explicit export extern false float for friend goto if inline int long mutable namespace
new noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast return short signed sizeof static static_assert static_cast struct switch
template this thread_local throw true try typedef typeid typename union unsigned using virtual
void volatile wchar_t while xor xor_eq half bfloat16_t int8_t int16_t int32_t int64_t uint8_t
uint16_t uint32_t uint64_t
""".split())
# declared by the emitted kernel (emit_ascendc/kernel_printer.py) and its CPU/ACL host drivers
EMITTED_NAMES = frozenset("""
main argc argv workspace tiling tilingData blockDim block block_idx pipe ubuf in_dir out_dir
host read_file write_file std AscendC ascendsched_rt
""".split())


def check_name(kind: str, name: object) -> str:
    """``name`` if it can name a ``kind`` (tensor, stage, reduction axis, algorithm)."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) \
            or not name.isascii():
        raise AlgorithmError(
            f"{kind} name {name!r} is not a valid name: names become C++ identifiers in the "
            f"emitted kernel; use letters, digits and '_' (not starting with a digit), e.g. "
            f"'{_suggest(name)}'")
    if name in CPP_KEYWORDS or name in EMITTED_NAMES or name.startswith("__"):
        raise AlgorithmError(
            f"{kind} name '{name}' clashes with a C++ keyword or a name the emitted kernel "
            f"declares; rename it, e.g. '{name}_t'")
    return name


def _suggest(name: object) -> str:
    text = "".join(c if c.isalnum() and c.isascii() else "_" for c in str(name)) or "t"
    return text if not text[0].isdigit() else f"t{text}"


def check_size(name: str, s: Size) -> Size:
    """An axis size: a positive int or a sympy expression (a symbolic size)."""
    if isinstance(s, bool) or not isinstance(s, (int, sympy.Expr)):
        raise AlgorithmError(
            f"'{name}': size {s!r} must be an int or a sympy expression (e.g. 1024 or "
            f"sympy.Symbol('M'))")
    if isinstance(s, int) and s < 1:
        raise AlgorithmError(f"'{name}': size {s} must be >= 1")
    if isinstance(s, sympy.Expr) and s.is_number:
        return int(s)
    return s


def check_shape(name: str, shape: Sequence[Size]) -> tuple[Size, ...]:
    """A shape: a tuple of sizes (a single size is a rank-1 shape)."""
    if isinstance(shape, (int, sympy.Expr)):
        shape = (shape,)
    if isinstance(shape, str) or not isinstance(shape, Sequence):
        raise AlgorithmError(
            f"tensor '{name}': shape {shape!r} must be a tuple of sizes, e.g. (64, 1024)")
    t = tuple(check_size(name, s) for s in shape)
    if not t:
        raise AlgorithmError(f"tensor '{name}': rank-0 tensors are not supported; use shape (1,)")
    return t
