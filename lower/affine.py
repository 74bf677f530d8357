"""Quasi-affine index expressions over loop variables (``Affine``) and comparisons (``Cond``).

Kernel IR writes every index with them: a Region's element offset and buffer copy, an event id,
a loop-variable scalar; ``If`` conditions and mmad's ``cmatrixInitVal`` are ``Cond``. Terms are
``c*var``, ``c*(var mod m)`` and ``c*floor(expr/d)``, kept sorted so that equal expressions
compare equal::

    Affine.of("k") * 2048 + Affine.mod("k", 2)        # 2048*k + (k % 2)
    Cond(Affine.of("k"), "<", 3).evaluate({"k": 1})   # True
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ascendsched.errors import InternalCompilerError


@dataclass(frozen=True)
class Affine:
    """Quasi-affine: ``const + sum(c*var) + sum(c*(var mod m)) + sum(c*floor(expr/d))``.

    ``divs`` hold floor divisions of (non-negative) affine expressions by positive constants;
    they let fused and core-bound tile loops recover per-axis tile indices.
    """

    const: int = 0
    terms: tuple[tuple[str, int], ...] = ()  # (var, coeff), sorted by var, coeff != 0
    mods: tuple[tuple[str, int, int], ...] = ()  # (var, modulus, coeff), sorted
    divs: tuple[tuple[Affine, int, int], ...] = ()  # (numerator, divisor, coeff)

    def __hash__(self) -> int:
        got = self.__dict__.get("_hash")  # memoised: indices are dict keys all over lowering
        if got is None:
            got = hash((self.const, self.terms, self.mods, self.divs))
            object.__setattr__(self, "_hash", got)
        return got

    def __getstate__(self) -> dict:
        # without the memos: a str hash differs from process to process (PYTHONHASHSEED)
        return {k: v for k, v in self.__dict__.items() if k not in ("_hash", "_vars")}

    @staticmethod
    def of(value: Affine | int | str) -> Affine:
        if isinstance(value, Affine):
            return value
        if isinstance(value, str):
            return Affine(0, ((value, 1),))
        if isinstance(value, int):
            return Affine(int(value))
        raise InternalCompilerError(f"cannot make an affine expression of {value!r}")

    @staticmethod
    def mod(var: str, modulus: int, coeff: int = 1) -> Affine:
        return Affine(0, (), ((var, modulus, coeff),))

    def floordiv(self, d: int) -> Affine:
        """``floor(self / d)`` (self must be non-negative where evaluated)."""
        if d == 1:
            return self
        if self.is_const:
            return Affine(self.const // d)
        return Affine(0, (), (), ((self, d, 1),))

    def modulo(self, d: int) -> Affine:
        """``self mod d`` as ``self - d*floor(self/d)``; a plain variable keeps a mod term."""
        if d == 1:
            return Affine()
        if self.is_const:
            return Affine(self.const % d)
        if self.const == 0 and not self.mods and not self.divs and self.terms == ((self.terms[0][0], 1),):
            return Affine.mod(self.terms[0][0], d)
        return self - self.floordiv(d) * d

    def mod_form(self) -> tuple[Affine, int] | None:
        """``(x, m)`` when ``self`` is ``x mod m``: a mod term alone, or ``x - m*floor(x/m)``
        as ``modulo`` writes it (the printer spells it so)."""
        if self.const == 0 and not self.terms and not self.divs and len(self.mods) == 1 \
                and self.mods[0][2] == 1:
            v, m, _ = self.mods[0]
            return Affine.of(v), m
        for a, d, c in self.divs:
            if c == -d and self + a.floordiv(d) * d - a == Affine():
                return a, d
        return None

    def __add__(self, other: Affine | int | str) -> Affine:
        o = Affine.of(other)
        terms = dict(self.terms)
        for v, c in o.terms:
            terms[v] = terms.get(v, 0) + c
        mods: dict[tuple[str, int], int] = {(v, m): c for v, m, c in self.mods}
        for v, m, c in o.mods:
            mods[(v, m)] = mods.get((v, m), 0) + c
        divs: dict[tuple[Affine, int], int] = {(a, d): c for a, d, c in self.divs}
        for a, d, c in o.divs:
            divs[(a, d)] = divs.get((a, d), 0) + c
        return Affine(
            self.const + o.const,
            tuple(sorted((v, c) for v, c in terms.items() if c)),
            tuple(sorted((v, m, c) for (v, m), c in mods.items() if c)),
            tuple(sorted(((a, d, c) for (a, d), c in divs.items() if c), key=str)),
        )

    __radd__ = __add__

    def __sub__(self, other: Affine | int | str) -> Affine:
        return self + Affine.of(other) * -1

    def __mul__(self, k: int) -> Affine:
        if not isinstance(k, int):
            raise InternalCompilerError(f"affine expressions scale by integers only, not {k!r}")
        if k == 0:
            return Affine()
        return Affine(
            self.const * k,
            tuple((v, c * k) for v, c in self.terms),
            tuple((v, m, c * k) for v, m, c in self.mods),
            tuple((a, d, c * k) for a, d, c in self.divs),
        )

    __rmul__ = __mul__

    @property
    def is_const(self) -> bool:
        return not self.terms and not self.mods and not self.divs

    def vars(self) -> frozenset[str]:
        got = self.__dict__.get("_vars")  # memoised: the analyses ask it of one index often
        if got is None:
            got = frozenset([v for v, _ in self.terms] + [v for v, _, _ in self.mods])
            for a, _, _ in self.divs:
                got |= a.vars()
            object.__setattr__(self, "_vars", got)
        return got

    def evaluate(self, env: dict[str, int]) -> int:
        try:
            return (
                self.const
                + sum(c * env[v] for v, c in self.terms)
                + sum(c * (env[v] % m) for v, m, c in self.mods)
                + sum(c * (a.evaluate(env) // d) for a, d, c in self.divs)
            )
        except KeyError as e:
            raise InternalCompilerError(f"affine {self} uses unbound variable {e}") from None

    def bounds(self, ranges: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
        """Lowest and highest value over variable ranges (inclusive; an over-estimate where
        terms are not independent)."""
        lo = hi = self.const
        for v, c in self.terms:
            a, b = ranges[v]
            lo, hi = lo + min(c * a, c * b), hi + max(c * a, c * b)
        for v, m, c in self.mods:
            a, b = ranges[v]
            ma, mb = (a, b) if 0 <= a and b < m else (0, m - 1)
            lo, hi = lo + min(c * ma, c * mb), hi + max(c * ma, c * mb)
        for num, d, c in self.divs:
            a, b = num.bounds(ranges)
            qa, qb = a // d, b // d
            lo, hi = lo + min(c * qa, c * qb), hi + max(c * qa, c * qb)
        return lo, hi

    def substitute(self, var: str, value: Affine) -> Affine:
        """``self`` with ``var`` replaced by ``value``, in its terms, mod terms (``value mod
        m``) and floor divisions alike."""
        if var not in self.vars():
            return self
        out = Affine(self.const, tuple((v, c) for v, c in self.terms if v != var),
                     tuple(t for t in self.mods if t[0] != var))
        for a, d, c in self.divs:
            out = out + a.substitute(var, value).floordiv(d) * c
        for v, c in self.terms:
            if v == var:
                out = out + value * c
        for v, m, c in self.mods:
            if v == var:
                out = out + value.modulo(m) * c
        return out

    def rename(self, names: dict[str, str]) -> Affine:
        """The same expression over renamed variables (``names``: old -> new; others kept)."""
        if not names or not (self.vars() & names.keys()):
            return self
        return Affine(
            self.const,
            tuple(sorted((names.get(v, v), c) for v, c in self.terms)),
            tuple(sorted((names.get(v, v), m, c) for v, m, c in self.mods)),
            tuple(sorted(((a.rename(names), d, c) for a, d, c in self.divs), key=str)),
        )

    def __str__(self) -> str:
        rest, folded = self, []
        for a, d, c in self.divs:  # k*x - k*d*floor(x/d), as modulo() writes x mod d
            k = -c // d if c % d == 0 else 0
            if not k or (a, d, c) not in rest.divs:
                continue
            others = Affine(rest.const, rest.terms, rest.mods,
                            tuple(t for t in rest.divs if t != (a, d, c)))
            if _holds(others, a, k):
                rest = others - a * k
                inner = a.mod_form()  # (x mod m) mod d is x mod d when d divides m
                x = inner[0] if inner is not None and inner[1] % d == 0 else a
                folded.append(_scaled(k, f"({_group(str(x))} % {d})"))
        parts = [_scaled(c, v) for v, c in rest.terms]
        for v, m, c in rest.mods:
            parts.append(_scaled(c, f"({v} % {m})"))
        parts += folded
        for a, d, c in rest.divs:
            inner = a.mod_form()
            if inner is not None and inner[1] <= d:
                continue  # floor((x mod m) / d) is 0 for m <= d
            parts.append(_scaled(c, f"({_group(str(a))} / {d})"))
        if rest.const or not parts:
            parts.append(str(rest.const))
        return " + ".join(parts).replace("+ -", "- ")

    def c_expr(self) -> str:
        """The expression as C text (same as ``str``: ``%`` and ``*`` are valid C)."""
        return str(self)


def _holds(e: Affine, part: Affine, k: int) -> bool:
    """Whether ``e`` has every term of ``k*part`` (variables, mods, floor divisions), so that
    ``e - k*part`` only drops terms and changes the constant."""
    terms, mods = dict(e.terms), {(v, m): c for v, m, c in e.mods}
    divs = {(a, d): c for a, d, c in e.divs}
    return bool(part.terms or part.mods or part.divs) \
        and all(terms.get(v) == k * c for v, c in part.terms) \
        and all(mods.get((v, m)) == k * c for v, m, c in part.mods) \
        and all(divs.get((a, d)) == k * c for a, d, c in part.divs)


def _group(text: str) -> str:
    """``text`` as one operand: as it is when it is a name, a number or one parenthesised
    group, else in parentheses."""
    if re.fullmatch(r"\w+", text):
        return text
    if text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, ch in enumerate(text):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0 and i < len(text) - 1:
                break
        else:
            return text
    return f"({text})"


def _scaled(c: int, text: str) -> str:
    """``c*text`` as one writes it: ``text`` for 1, ``-text`` for -1."""
    return text if c == 1 else f"-{text}" if c == -1 else f"{c}*{text}"


@dataclass(frozen=True)
class Cond:
    """``lhs op rhs`` with op in ``< <= == >=`` over affine expressions."""

    lhs: Affine
    op: str
    rhs: int

    def __post_init__(self) -> None:
        if self.op not in ("<", "<=", "==", ">="):
            raise InternalCompilerError(f"unknown comparison {self.op!r}")

    def evaluate(self, env: dict[str, int]) -> bool:
        v = self.lhs.evaluate(env)
        return {"<": v < self.rhs, "<=": v <= self.rhs, "==": v == self.rhs,
                ">=": v >= self.rhs}[self.op]

    def decided(self) -> bool | None:
        """Its value wherever every variable is non-negative (loop indices, ``block_idx``), when
        that alone settles it (``kk + 56 == 0``: False), else None."""
        inf = float("inf")
        lo = hi = float(self.lhs.const)
        for _, c in self.lhs.terms:
            lo, hi = (lo, inf) if c > 0 else (-inf, hi)
        for _, m, c in self.lhs.mods:
            lo, hi = lo + min(0, c * (m - 1)), hi + max(0, c * (m - 1))
        if self.lhs.divs:
            return None
        r = self.rhs
        verdict = {"==": (lo == hi == r, lo > r or hi < r), ">=": (lo >= r, hi < r),
                   "<=": (hi <= r, lo > r), "<": (hi < r, lo >= r)}[self.op]
        return True if verdict[0] else False if verdict[1] else None

    def __str__(self) -> str:
        return f"{self.lhs} {self.op} {self.rhs}"
