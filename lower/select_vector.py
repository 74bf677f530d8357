"""Vector instruction selection: one stage body, an expression over its tile, -> V instructions.

``_ExprGen`` walks the body: a load becomes a view of its input's UB tile (a ``Val``), constants
fold (or become the scalar of Adds, Muls, Maxs, Mins), and every other node computes into the
stage's tile or a temporary UB buffer. Elementwise ops become instructions in
``vector_instrs.py``, reductions in ``select_reduce.py``, comparisons and casts of indices in
``index_values.py``; a cast the target has no single instruction for goes through the target's
exact chain of intermediate dtypes (``cast_steps``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ascendsched.algo.expr import (
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    IndexArith,
    IndexVar,
    Load,
    Reduce,
    ReduceVar,
    Select,
    Unary,
    _is_index,
)
from ascendsched.algo.gemm_epilogue import walk
from ascendsched.dtypes import DType, as_dtype, store
from ascendsched.errors import UnsupportedError
from ascendsched.lower.affine import Affine
from ascendsched.lower.bounds import Axis
from ascendsched.lower.index_values import index_value
from ascendsched.lower.select_fma import _MulAdds
from ascendsched.lower.select_reduce import _Reductions
from ascendsched.lower.tile_memory import Layout
from ascendsched.lower.vector_instrs import Val, _VectorInstrs
from ascendsched.target import Target

if TYPE_CHECKING:
    from ascendsched.lower.build_loop_nest import _Builder, _Version


class _ExprGen(_VectorInstrs, _Reductions, _MulAdds):
    """Vector instructions for one stage body over its box (plus reduction axes)."""

    # a chunked reduction (lower/chunked_reduce.py): the reduce axis's chunk in this body,
    # and a reduction already computed chunk by chunk (the value stands for the node)
    chunk: tuple[ReduceVar, Axis] | None = None
    known: tuple[Reduce, Val] | None = None

    def __init__(self, b: _Builder, v: _Version, stage: str, dom: list[Axis],
                 env: dict, layouts: dict[str, Layout]) -> None:
        self.b, self.v, self.stage, self.dom, self.env, self.layouts = b, v, stage, dom, env, layouts
        self.t = b.t
        # common subexpressions: nodes met more than once in the body being walked (an inlined
        # stage read twice: LayerNorm's d * d with d = x - mean) and their values, computed once
        self.repeated: frozenset[Expr] = frozenset()
        self.common: dict[Expr, Val] = {}

    # ---- values
    def emit_into(self, e: Expr, dst: Val) -> None:
        self.repeated = repeated(e)
        val = self.value(e, dst)
        if val is not dst:
            self.move(val, dst)

    def value(self, e: Expr, dst: Val | None = None) -> Val:
        if isinstance(e, Const):
            return Val("", Affine(), e.dtype, Affine(), (0,) * len(self.dom), const=e.value)
        if isinstance(e, Load):
            return self.load(e)
        if self.known is not None and e is self.known[0]:
            return self.known[1]
        if dst is None and e in self.common:
            return self.common[e]
        if dst is None and self.v is not self.b.once:
            key = self.b.invariant_axes(e, self.dom, self.env)
            if key is not None:
                return self._hoist(e, key)
        val = self._node(e, dst)
        if dst is None and e in self.repeated and val.const is None:
            self.common[e] = val  # kept intact: no fused op overwrites it (select_fma.py)
        return val

    def _hoist(self, e: Expr, key: tuple) -> Val:
        """``e``, a value of load_once inputs alone (``float32(gamma[j])``), computed once per
        core before the tile loops (into the builder's ``once`` version) and read by every
        tile, instead of recomputed per tile. A stage's root is never hoisted: computed
        once it would still need a copy into the stage's tile per tile."""
        if key not in self.b.once_vals:
            gen = _ExprGen(self.b, self.b.once, self.stage, self.dom, self.env, self.layouts)
            self.b.once_vals[key] = gen.value(e)
        return self.b.once_vals[key]

    def _node(self, e: Expr, dst: Val | None) -> Val:
        if isinstance(e, Binary):
            return self.binary(e, dst)
        if isinstance(e, Unary):
            return self.unary(e, dst)
        if isinstance(e, Cast):
            return self.cast(e, dst)
        if isinstance(e, Select):
            return self.select(e, dst)
        if isinstance(e, Reduce):
            return self.reduce(e, dst)
        raise UnsupportedError(f"stage '{self.stage}': cannot lower {e} on the vector path")

    def load(self, e: Load) -> Val:
        lay = self.layouts[e.tensor.name]
        strides = [0] * len(self.dom)
        off = Affine()
        last_axis = -1
        for k, ix in enumerate(e.indices):
            a, shift = self._axis_of(ix)
            start = (self.dom[a].start if a is not None else Affine()) + shift
            off = off + (start - lay.box[k].start) * lay.strides[k]
            if a is not None:
                if a <= last_axis:
                    raise self._out_of_order(e, k)
                last_axis = a
                strides[a] = lay.strides[k]
        return Val(lay.buf, lay.copy, lay.dtype, off, tuple(strides))

    def _out_of_order(self, e: Load, k: int) -> UnsupportedError:
        """The error for a load whose subscript ``k`` walks an axis before an earlier one's:
        a reduction over a leading dimension, or a transposed read."""
        red = [ix for ix in e.indices[:k + 1] if isinstance(ix, ReduceVar)]
        if red and not isinstance(e.indices[-1], ReduceVar):
            v = red[0]
            dim = list(e.indices).index(v)
            return UnsupportedError(
                f"stage '{self.stage}': {e} reduces over '{v.name}', dimension {dim} of "
                f"'{e.tensor.name}' (of {len(e.indices)}), while another read of the same "
                f"reduction has '{v.name}' after the axes this one subscripts after it: a "
                f"reduction reads every input in one order of its axes (rows, as softmax, or "
                f"columns, as a column sum, not both): store one of them transposed")
        return UnsupportedError(
            f"stage '{self.stage}': {e} reads '{e.tensor.name}' transposed; the vector path "
            f"needs subscripts in the stage's axis order: transpose '{e.tensor.name}' in its own "
            f"kernel (a GEMM with B transposed reads it so) or store it transposed")

    def _axis_of(self, ix: Expr) -> tuple[int | None, int]:
        if isinstance(ix, (IndexVar, ReduceVar)):
            return self.env[ix], 0
        if isinstance(ix, Const):
            return None, int(ix.value)
        assert isinstance(ix, IndexArith) and isinstance(ix.b, Const) or isinstance(ix.a, Const)
        if isinstance(ix.b, Const):  # type: ignore[union-attr]
            a, s = self._axis_of(ix.a)  # type: ignore[union-attr]
            return a, s + (ix.b.value if ix.op == "add" else -ix.b.value)  # type: ignore
        a, s = self._axis_of(ix.b)  # type: ignore[union-attr]
        return a, s + int(ix.a.value)  # type: ignore[union-attr]

    def temp(self, axes: tuple[int, ...], dtype: DType, what: str) -> Val:
        """A fresh dense UB buffer over domain axes ``axes``."""
        self.v.temps += 1
        name = f"{self.stage}_t{self.v.temps}{self.v.suffix}"
        box = tuple(self.dom[a] for a in axes) or (Axis("one", Affine(), 1),)
        per_block = self.t.elems_per_block(dtype.bytes)
        pitch = -(-box[-1].extent // per_block) * per_block
        lay = Layout(name, Affine(), dtype, box, pitch)
        self.b._alloc(name, dtype, lay.elems + 8, 1, tuple(x.extent for x in box),
                      f"temporary of {self.stage}{self.v.note}: {what}")
        strides = [0] * len(self.dom)
        for a, s in zip(axes, lay.strides):
            strides[a] = s
        return Val(name, Affine(), dtype, Affine(), tuple(strides))

    def _dst(self, dst: Val | None, axes: tuple[int, ...], dtype: DType, what: str) -> Val:
        if dst is not None and dst.dtype == dtype and dst.varying() == axes:
            return dst
        return self.temp(axes, dtype, what)

    # ---- nodes
    def binary(self, e: Binary, dst: Val | None) -> Val:
        fused = self.mul_add(e, dst)  # p * q + c as one instruction (select_fma.py)
        if fused is not None:
            return fused
        return self.binary_vals(e.op, self.value(e.a), self.value(e.b), e.dtype, str(e),
                                str(e.b), dst)

    def binary_vals(self, op: str, a: Val, b: Val, dtype: DType, what: str, what_b: str,
                    dst: Val | None) -> Val:
        """``op(a, b)`` of evaluated operands (``what``: the expression, for comments)."""
        if a.const is not None and b.const is not None:
            return Val("", Affine(), dtype, Affine(), a.strides,
                       const=_fold(op, a.const, b.const, dtype))
        if b.const is not None or (a.const is not None and op in ("add", "mul", "max", "min")):
            x, c = (a, b.const) if b.const is not None else (b, a.const)
            if op in ("add", "sub", "mul", "max", "min"):
                c = -c if op == "sub" else c
                fn = {"add": "adds", "sub": "adds", "mul": "muls", "max": "maxs", "min": "mins"}[op]
                out = self._dst(dst, x.varying(), dtype, what)
                self.vec("vec_scalar", out, (x,), fn, (("fn", fn), ("scalar", c)))
                return out
        if a.const is not None and op == "sub":  # c - x = (-x) + c
            neg = self.temp(b.varying(), dtype, f"-{what_b}")
            self.vec("vec_scalar", neg, (b,), "muls", (("fn", "muls"), ("scalar", -1)))
            out = self._dst(dst, b.varying(), dtype, what)
            self.vec("vec_scalar", out, (neg,), "adds", (("fn", "adds"), ("scalar", a.const)))
            return out
        if op == "div" and _row_divisor(a, b, dtype):
            b, op = self._reciprocal(b, what_b), "mul"
        a, b = self.materialize_const(a, b), self.materialize_const(b, a)
        axes = tuple(sorted(set(a.varying()) | set(b.varying())))
        out = self._dst(dst, axes, dtype, what)
        self.vec("vec_binary", out, (a, b), op, (("fn", op),))
        return out

    def _reciprocal(self, b: Val, what: str) -> Val:
        """``1 / b`` for a divisor holding one value per row: Div of a Duplicate'd 1 by ``b``,
        over the rows only (exact; the 910B ``Reciprocal`` is an approximation, docs
        Reciprocal.md:202). The caller then multiplies the rows by it: a Div repeat costs 4
        cycles where a Mul costs 1 (target/costs.py ``vec_slopes``), so a row of n repeats
        costs ~n instead of ~4n. AscendC's own flash-softmax update divides the per-row values
        once and multiplies the row by the Brcb'd result (mirror-cann/asc-devkit @fa9586e2,
        impl/adv_api/detail/activation/softmax/softmax_flash_base_impl/
        softmax_flash_basic_block_impl.h: ``Div(tmpBuffer3, tmpBuffer3, inSumTmp)`` then
        ``Mul(tmpBuffer0[...], tmpBuffer0[...], tmpBuffer3, ..., {1, 1, 0, ...})``)."""
        axes = b.varying()
        one = self.temp(axes, b.dtype, f"1, the dividend of 1 / {what}")
        self.vec_dup(one, 1.0)
        inv = self.temp(axes, b.dtype, f"1 / {what}")
        self.vec("vec_binary", inv, (one, b), "div", (("fn", "div"),))
        return inv

    def unary(self, e: Unary, dst: Val | None) -> Val:
        x = self.value(e.x)
        if x.const is not None:
            return Val("", Affine(), e.dtype, Affine(), x.strides,
                       const=_fold1(e.op, x.const, e.dtype))
        out = self._dst(dst, x.varying(), e.dtype, str(e))
        if e.op == "neg":
            self.vec("vec_scalar", out, (x,), "muls", (("fn", "muls"), ("scalar", -1)))
        else:
            fn = {"log": "ln"}.get(e.op, e.op)
            self.vec("vec_unary", out, (x,), fn, (("fn", fn),))
        return out

    def cast(self, e: Cast, dst: Val | None) -> Val:
        """One ``Cast`` per step of :func:`cast_steps` (a pair the 910B table lacks goes
        through the target's exact chain of intermediate dtypes)."""
        if _is_index(e.x) and not isinstance(e.x, Const):  # i.astype('float32')
            return index_value(self, e.x, None, e.dtype)
        x = self.value(e.x)
        if x.const is not None:
            return Val("", Affine(), e.dtype, Affine(), x.strides,
                       const=store(e.dtype, x.const, e.round_mode, saturate=True).item())
        steps = cast_steps(x.dtype, e.dtype, e.round_mode, self.t, f"stage '{self.stage}': {e}")
        cur = x
        for n, (to, mode) in enumerate(steps):
            out = self._dst(dst, x.varying(), to, str(e)) if n == len(steps) - 1 else \
                self.temp(x.varying(), to, f"{e} via {to}")
            self.vec("vec_cast", out, (cur,), "cast", (("round", mode),))
            cur = out
        return cur

    def select(self, e: Select, dst: Val | None) -> Val:
        cond = e.cond
        assert isinstance(cond, Compare)
        if _is_index(cond.a) and _is_index(cond.b):  # j <= i: (j - i) <= 0 on index values
            ca = index_value(self, cond.a, cond.b, e.dtype)
            cb = Val("", Affine(), e.dtype, Affine(), (0,) * len(self.dom), const=0)
        else:
            ca, cb = self.value(cond.a), self.value(cond.b)
        a, b = self.value(e.a), self.value(e.b)
        axes = tuple(sorted(set().union(*(v.varying() for v in (ca, cb, a, b)))))
        ops = [self.full(v, axes, str(x)) for v, x in ((ca, cond.a), (cb, cond.b), (a, e.a),
                                                        (b, e.b))]
        out = self._dst(dst, axes, e.dtype, str(e))
        self.vec("vec_select", out, tuple(ops), cond.op, (("fn", cond.op),))
        return out

    def reduce(self, e: Reduce, dst: Val | None,
               shared: tuple[dict[Expr, Val], frozenset[Expr]] | None = None) -> Val:
        """``e`` into ``dst`` (or a temporary). ``shared``: values of nodes of its body
        computed by another reduction over the same chunk, and the nodes both bodies hold
        (an online max and sum both cast the chunk: once)."""
        if len(e.axes) != 1:
            raise UnsupportedError(
                f"stage '{self.stage}': {e} reduces {len(e.axes)} axes at once; the vector path "
                f"reduces one (innermost) axis: nest reductions, one axis each")
        rv = e.axes[0]
        ax = self.chunk[1] if self.chunk is not None and self.chunk[0] == rv else \
            Axis(rv.name, Affine(), int(rv.extent))
        # the reduce axis's place among the domain axes: last for a row reduction; before
        # the axes a load subscripts after it for a column one (sum_k x[k, j])
        k = self._reduce_place(e, rv)
        env = {v: (i if i < k else i + 1) for v, i in self.env.items()}
        sub = _ExprGen(self.b, self.v, self.stage, self.dom[:k] + [ax] + self.dom[k:],
                       {**env, rv: k}, self.layouts)
        sub.repeated = repeated(e.body)
        if shared is not None:
            sub.common, sub.repeated = shared[0], sub.repeated | shared[1]
        body = sub.value(e.body)
        if body.const is not None or body.strides[k] == 0:
            raise UnsupportedError(
                f"stage '{self.stage}': the body of {e} does not depend on '{rv.name}'; "
                f"multiply by the extent instead of reducing")
        fn = {"sum": "sum", "max": "rmax", "min": "rmin"}[e.op]
        if e.dtype.name not in self.t.vector_dtypes[fn]:
            raise UnsupportedError(
                f"stage '{self.stage}': {e.op}-reduction in {e.dtype} is not supported by the "
                f"{self.t.name} vector unit; accumulate in float32 (reduce_{e.op}(..., "
                f"dtype='float32'))")
        if k < len(self.dom):  # a column reduction: rows combined elementwise
            axes = tuple(a - (a > k) for a in body.varying() if a != k)
            out = self._dst(dst, axes, e.dtype, str(e))
            sub.emit_column_reduce(e.op, out, body, k)
            return out
        body = sub.plain(body, str(e.body))
        axes = tuple(a for a in body.varying() if a != k)
        out = self._dst(dst, axes, e.dtype, str(e))
        sub.emit_reduce(e.op, out, body, axes)
        return out

    def _reduce_place(self, e: Reduce, rv: ReduceVar) -> int:
        """Where the reduce axis ``rv`` goes among the domain axes so that every load reads
        its subscripts in axis order: after every domain axis a load subscripts before it,
        before every one a load subscripts after it (the last place when nothing follows it,
        a row reduction). A transposed read has no such place; its load says so."""
        after, before = -1, len(self.dom)
        for ld in (x for x in walk(e.body) if isinstance(x, Load)):
            seen = False
            for ix in ld.indices:
                if rv in _vars(ix):
                    seen = True
                    continue
                for v in _vars(ix):
                    if v in self.env:
                        if seen:
                            before = min(before, self.env[v])
                        else:
                            after = max(after, self.env[v])
        return before if after < before else len(self.dom)

    # ---- helpers over Vals
    def materialize_const(self, x: Val, other: Val) -> Val:
        if x.const is None:
            return x
        out = self.temp(other.varying(), x.dtype, f"constant {x.const}")
        self.vec_dup(out, x.const)
        return out

    def full(self, x: Val, axes: tuple[int, ...], what: str) -> Val:
        """``x`` as a dense buffer over ``axes`` (for ops without broadcast operands)."""
        if x.const is not None:
            out = self.temp(axes, x.dtype, what)
            self.vec_dup(out, x.const)
            return out
        if x.varying() == axes and not x.block:
            return x
        out = self.temp(axes, x.dtype, what)
        self.move(x, out)
        return out

    def plain(self, x: Val, what: str) -> Val:
        """``x`` with stride 1 along its innermost varying axis."""
        ax = x.varying()
        if ax and x.strides[ax[-1]] == 1 and not x.block:
            return x
        out = self.temp(ax, x.dtype, what)
        self.move(x, out)
        return out

    def move(self, src: Val, dst: Val) -> None:
        if src.const is not None:
            self.vec_dup(dst, src.const)
        else:
            self.vec("vec_unary", dst, (src,), "copy", (("fn", "copy"),))

    def vec_dup(self, dst: Val, value: float | int) -> None:
        self.vec("vec_dup", dst, (), "dup", (("value", value),))


# --------------------------------------------------------------------------- helpers
def _vars(ix: Expr) -> list[Expr]:
    """The index and reduce variables of subscript ``ix``."""
    return [v for v in walk(ix) if isinstance(v, (IndexVar, ReduceVar))]


def repeated(*roots: Expr) -> frozenset[Expr]:
    """The computed nodes (not loads, constants or reductions, whose bodies are walked on
    their own) that occur more than once in ``roots``: each is computed once and its value
    read again. Without it ``sum(d * d)`` with ``d = float32(x) - mean`` inlined casts and
    subtracts twice per chunk (LayerNorm over 32 000-column rows: 2 of its 9 V passes)."""
    seen: set[Expr] = set()
    again: set[Expr] = set()
    stack = list(roots)
    while stack:
        x = stack.pop()
        if not isinstance(x, (Binary, Unary, Cast, Select, Compare)):
            continue
        if x in seen:
            again.add(x)
            continue  # its subtree was counted with its first occurrence
        seen.add(x)
        stack.extend(c for c in (getattr(x, f, None) for f in ("a", "b", "x", "cond"))
                     if isinstance(c, Expr))
    return frozenset(again)


def cast_steps(src: DType, dst: DType, round_mode: str, target: Target, where: str
               ) -> list[tuple[DType, str]]:
    """The ``Cast`` calls converting ``src`` to ``dst``: ``[(to dtype, round mode), ...]``.

    A pair of ``target.vector_casts`` is one call; a pair of ``target.cast_chains`` goes
    through its intermediate dtypes (exact: the chain's value is the direct conversion's).
    Round modes: the first float -> int step of a float source takes ``round_mode``; other
    float -> int steps see integers (``rint``); int -> int steps ``none`` (saturating); widening float -> float
    ``none``, narrowing ``rint``; int -> float ``none`` where the table allows it (CAST_NONE is
    CAST_RINT when the conversion loses precision, docs Cast.md), else ``rint``.
    """
    pair = (src.name, dst.name)
    if pair in target.vector_casts:
        path = [src.name, dst.name]
    elif pair in target.cast_chains:
        path = [src.name, *target.cast_chains[pair], dst.name]
    else:
        direct = ", ".join(f"{a}->{b}" for a, b in sorted(target.vector_casts))
        chained = ", ".join(f"{a}->{b}" for a, b in sorted(target.cast_chains))
        raise UnsupportedError(
            f"{where}: cast {src} -> {dst} is neither a vector Cast on {target.name} nor an "
            f"exact chain of them; cast to an intermediate type explicitly if its double "
            f"rounding is acceptable (Cast pairs: {direct}; chained: {chained})")
    steps: list[tuple[DType, str]] = []
    rounded = not src.is_float  # integral values: no later step has anything to round
    for a, b in zip(path, path[1:]):
        da, db = as_dtype(a), as_dtype(b)
        modes = target.vector_casts[(a, b)]
        if da.is_float and not db.is_float:
            mode = "rint" if rounded else round_mode
            rounded = True
        elif not db.is_float:
            mode = "none"
        elif da.is_float and da == db:  # rounding to an integral value (expand_math's round)
            mode = round_mode if round_mode in modes else "rint"
        elif da.is_float:
            mode = "none" if db.bytes > da.bytes else "rint"
        else:
            mode = "none" if "none" in modes else "rint"
        if mode not in modes:
            raise UnsupportedError(
                f"{where}: Cast {a} -> {b} on {target.name} takes round modes "
                f"{', '.join(sorted(modes))}, not {mode!r}; use one of them")
        steps.append((db, mode))
    return steps


def _row_divisor(a: Val, b: Val, dtype: DType) -> bool:
    """``a / b`` where ``b`` holds one value per row of ``a`` (it does not vary along ``a``'s
    innermost axis, e.g. ``e[i, j] / s[i]``): worth one reciprocal per row and a multiply.
    float32 only: there the two roundings stay within the fp32 tolerances; a float16 row
    would see 1 / b rounded to 11 bits."""
    if dtype.name != "float32" or a.const is not None or b.const is not None:
        return False
    av, bv = a.varying(), b.varying()
    return bool(av) and av[-1] not in bv and set(bv) < set(av)


def _fold(op: str, a: float | int, b: float | int, dt: DType) -> float | int:
    f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
         "max": np.maximum, "min": np.minimum}[op]
    return store(dt, f(store(dt, a), store(dt, b))).item()


def _fold1(op: str, x: float | int, dt: DType) -> float | int:
    f = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v),
         "abs": np.abs, "relu": lambda v: np.maximum(v, 0), "neg": np.negative,
         "reciprocal": lambda v: 1 / v}[op]
    return store(dt, f(store(dt, x))).item()
