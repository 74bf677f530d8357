"""The Python protocols an expression refuses, each with the ascendsched spelling.

While an algorithm is built an expression stands for every element at once: it has no truth
value, length or items, and numpy cannot compute on it. Answering would silently pick one
branch for all elements (``x if x > 0 else 0`` built ``x``), so each protocol raises an
:class:`AlgorithmError` that names what to write instead (``where``, ``maximum``, ``eq``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

from ascendsched.errors import AlgorithmError


class Guarded:
    """Mixin of :class:`~ascendsched.algo.expr.Expr`: the refused protocols."""

    # Python asks these for a truth value or a number; an expression has neither while the
    # algorithm is being built, and answering would pick one branch for every element.
    def __bool__(self) -> NoReturn:
        raise AlgorithmError(
            f"the expression {self} has no truth value while the algorithm is built: Python's "
            f"`a if cond else b`, `and`/`or`/`not`, chained comparisons (a < b < c) and the "
            f"builtins max()/min() would evaluate it once and silently pick one branch for every "
            f"element. Use where(cond, a, b) instead of `a if cond else b`, "
            f"maximum(a, b)/minimum(a, b) instead of max()/min(), and nested where() to "
            f"combine conditions")

    def __floordiv__(self, o: object) -> NoReturn:
        raise no_operator("//", self, o, "subscripts are affine (i + c, c * i, i - c); for "
                          "values use (a / b).astype('int32', 'floor') or where()")

    __rfloordiv__ = __floordiv__

    def __mod__(self, o: object) -> NoReturn:
        raise no_operator("%", self, o, "subscripts are affine (i + c, c * i, i - c); a "
                          "modulo has no vector instruction: precompute it into an input")

    __rmod__ = __mod__

    def __and__(self, o: object) -> NoReturn:
        raise no_operator("&", self, o, "combine conditions with nested where(): "
                          "where(c1, where(c2, a, b), b)")

    __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __and__

    def __invert__(self) -> NoReturn:
        raise no_operator("~", self, None, "swap the branches of where() instead of "
                          "negating its condition")

    def __len__(self) -> NoReturn:
        raise AlgorithmError(f"the expression {self} is a single element and has no length")

    def __getitem__(self, idx: object) -> NoReturn:
        raise AlgorithmError(
            f"the expression {self} is an element, not a tensor: subscript the tensor itself "
            f"(x[i, j]), not an element of it")

    def __iter__(self) -> NoReturn:
        raise AlgorithmError(
            f"the expression {self} is a single element, not a sequence; index the tensor "
            f"(x[i, j]) or reduce it (reduce_sum(x[i, k], k))")

    def __array_ufunc__(self, ufunc: object, method: str, *inputs: object,
                        **kwargs: object) -> Guarded:
        """numpy scalars mix with expressions (``np.float32(2) * x[i]``); other numpy
        functions on expressions raise, naming the ascendsched function to use."""
        name = getattr(ufunc, "__name__", str(ufunc))
        ops = {"add": "__add__", "subtract": "__sub__", "multiply": "__mul__",
               "true_divide": "__truediv__", "power": "__pow__"}
        if method == "__call__" and name in ops and len(inputs) == 2 and not kwargs:
            a, b = (x.item() if hasattr(x, "item") and not isinstance(x, Guarded) else x
                    for x in inputs)
            if isinstance(a, Guarded):
                return getattr(a, ops[name])(b)
            return getattr(b, "__r" + ops[name][2:])(a)  # type: ignore[union-attr]
        alt = {"maximum": "maximum", "minimum": "minimum", "absolute": "abs_ (or abs())",
               "rint": "round_ (or round())", "clip": "clip"}.get(name, name)
        raise AlgorithmError(
            f"numpy's {name}() cannot take the expression {self}: it is evaluated while the "
            f"algorithm is built. Use ascendsched.algo.{alt} inside compute()")


def no_operator(op: str, a: object, b: object, fix: str) -> AlgorithmError:
    """The error for operator ``op`` on expressions ``a`` (and ``b``), with ``fix``."""
    what = f"{op}{a}" if b is None else f"{a} {op} {b}"
    return AlgorithmError(f"operator {op} is not supported on expressions ({what}); {fix}")


def expr_node(cls: type) -> type:
    """A frozen dataclass expression node whose ``==`` against a number raises.

    ``==`` between expressions compares them structurally (the compiler relies on it), so
    ``x[i] == 0`` would be a plain ``False`` and ``if x[i] == 0`` would silently take one
    branch: use ``eq``/``ne`` to build an elementwise comparison.
    """
    cls = dataclass(frozen=True)(cls)
    structural = cls.__eq__

    def __eq__(self: object, other: object) -> bool:  # noqa: N807
        if isinstance(other, (bool, int, float)) or type(other).__module__ == "numpy":
            raise AlgorithmError(
                f"{self} == {other!r}: == between an expression and a number is not an "
                f"elementwise comparison; use eq({self}, {other!r}) (or ne() for !=) inside "
                f"where(), e.g. where(eq(x[i], 0), a, b)")
        return structural(self, other)

    cls.__eq__ = __eq__  # type: ignore[method-assign]
    return cls
