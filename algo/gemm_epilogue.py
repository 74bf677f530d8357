"""Recognise the elementwise steps after a GEMM's sum that the Cube core applies on the way
out (the Mmad bias table, the Fixpipe); ``gemm_spec.match_gemm`` asks it. No hardware numbers.

Epilogue: elementwise steps applied to the accumulator on its way out, inlined in the GEMM
stage or written as further stages that each read the previous one at ``[.., i, j]``, become an
:class:`Epilogue` when the Cube core can apply them without the Vector cores (the intermediate
stages are then never stored)::

    C[i, j] = sum[float32](k<K: ...);  D[i, j] = C[i, j] + bias[j];  E[i, j] = float16(max(D, 0))
    ->  GemmSpec(..., c='E', acc_stage='C', epilogue=Epilogue(bias='bias', relu=True, ...))

In hardware order: ``bias[j]`` added in the accumulator dtype (the Mmad bias table, first K
step), ReLU, a per-column ``scale[j]`` after an int32 -> float32 cast (Fixpipe dequantisation),
and the cast to the output dtype (Fixpipe ``quantPre``). A ReLU after that cast is accepted too:
round-to-nearest-even is monotone and keeps 0, so it commutes with the cast. Whether the target
runs the combination (dtypes, modes) is again the lowering's question; a step outside this
repertoire (exp, GELU, a scalar multiple, ...) raises UnsupportedError naming the stage; a
``GemmSchedule`` then runs the steps after the sum on the Vector cores instead (a mixed kernel,
``gemm_vector_epilogue.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ascendsched.algo.algorithm import Algorithm
from ascendsched.algo.expr import Binary, Cast, Const, Expr, IndexVar, Load, Reduce, Unary
from ascendsched.algo.tensor import Tensor
from ascendsched.dtypes import DType
from ascendsched.errors import InternalCompilerError, UnsupportedError


@dataclass(frozen=True)
class Epilogue:
    """What is applied to the accumulator between the Mmad and GM, in this order: ``bias[j]``
    (a placeholder of the accumulator dtype, added by Mmad from the bias table), ReLU, a
    per-column ``scale[j]`` (float32 placeholder, after int32 -> float32), the output cast.
    ``stages``: the stages after the GEMM stage that this epilogue absorbs (the last is the
    output); none of them, nor the GEMM stage, is stored to GM except that output."""

    bias: str | None = None
    relu: bool = False
    scale: str | None = None
    stages: tuple[str, ...] = ()

    def __str__(self) -> str:
        steps = ([f"+ {self.bias}[j]"] if self.bias else []) + (["relu"] if self.relu else []) \
            + ([f"* {self.scale}[j]"] if self.scale else [])
        return ", ".join(steps) or "none"


def strip_casts(e: Expr) -> Expr:
    while isinstance(e, Cast):
        e = e.x
    return e



def same_indices(idx: list[Expr], want: tuple[Expr, ...]) -> bool:
    return all(a is b or a == b for a, b in zip(idx, want, strict=True))


# --------------------------------------------------------------------------- epilogue chain
@dataclass(frozen=True)
class _Step:
    """One elementwise step on the way from the sum to the output, innermost first."""

    kind: str  # cast | relu | bias | scale
    stage: str  # the stage it is written in
    dtype: DType  # its result dtype
    vector: Tensor | None = None  # bias / scale
    text: str = ""


def is_matmul_stage(t: Tensor) -> bool:
    """A stage of rank >= 2 holding (anywhere in its body) a sum over one axis of a product of
    two loads of input matrices (rank >= 2)."""
    assert t.op is not None
    if len(t.shape) < 2:
        return False
    for body in walk(t.op.body):
        if not (isinstance(body, Reduce) and body.op == "sum"):
            continue
        prod = strip_casts(body.body)
        if (isinstance(prod, Binary) and prod.op == "mul"
                and all(isinstance(strip_casts(x), Load) and strip_casts(x).tensor.is_placeholder
                        and strip_casts(x).tensor.ndim >= 2 for x in (prod.a, prod.b))
                and contracts(prod)):
            return True
    return False


def contracts(prod: Binary) -> bool:
    """Whether a product's two operands each carry an index the other lacks, as A[i, k] and
    B[k, j] do: a contraction for the Cube. ``x[i, k] * w[i, k]`` (a row dot product) is an
    elementwise product then a row sum, for the Vector cores."""
    a, b = ({v.name for v in walk(strip_casts(x)) if isinstance(v, IndexVar)}
            for x in (prod.a, prod.b))
    return bool(a - b) and bool(b - a)


def epilogue_chain(algo: Algorithm, out: Tensor, where: str
           ) -> tuple[list[_Step], Tensor, Expr, tuple[str, ...]]:
    """Walk from the output's body down to the sum: (steps innermost first, the stage holding
    the sum, the sum, the stages after it). Each further stage must be read elementwise at the
    reader's own axes and by nothing else."""
    steps: list[_Step] = []
    after: list[str] = []
    t = out
    assert t.op is not None
    e = t.op.body
    while True:
        assert t.op is not None
        axes = t.op.axes
        if isinstance(e, Reduce):
            return steps[::-1], t, e, tuple(after[::-1])
        if isinstance(e, Load) and not e.tensor.is_placeholder:
            p = e.tensor
            if not same_indices(list(e.indices), list(axes)):
                raise UnsupportedError(
                    f"{where}: stage '{t.name}' reads '{p.name}' at [{', '.join(map(str, e.indices))}]"
                    f", not elementwise at [{', '.join(a.name for a in axes)}]; a Cube GEMM "
                    f"epilogue only applies elementwise steps to C[.., i, j]")
            readers = [s.name for s in algo.consumers(p)]
            if readers != [t.name]:
                raise UnsupportedError(
                    f"{where}: stage '{p.name}' is read by {', '.join(readers)}; the stages "
                    f"between the GEMM and the output must each feed only the next one "
                    f"(their values are never stored)")
            after.append(t.name)
            t, e = p, p.op.body  # type: ignore[union-attr]
            continue
        jv = axes[-1]
        if isinstance(e, Cast):
            steps.append(_Step("cast", t.name, e.dtype, text=str(e)))
            e = e.x
        elif isinstance(e, Unary) and e.op == "relu":
            steps.append(_Step("relu", t.name, e.dtype, text=str(e)))
            e = e.x
        elif isinstance(e, Binary) and e.op == "max" and _zero(e.a) != _zero(e.b):
            steps.append(_Step("relu", t.name, e.dtype, text=str(e)))
            e = e.b if _zero(e.a) else e.a
        elif isinstance(e, Binary) and e.op in ("add", "mul") and (
                (vec := _column_vector(e.a, jv)) is not None
                or (vec := _column_vector(e.b, jv)) is not None):
            other = e.b if _column_vector(e.a, jv) is not None else e.a
            steps.append(_Step("bias" if e.op == "add" else "scale", t.name, e.dtype, vec,
                               str(e)))
            e = other
        else:
            raise _not_on_fixpipe(where, t.name, e)


def _not_on_fixpipe(where: str, stage: str, e: object, why: str = "") -> UnsupportedError:
    return UnsupportedError(
        f"{where}: stage '{stage}' applies {e} to the GEMM result"
        + (f" ({why})" if why else "")
        + "; the Cube core's Fixpipe applies only a dtype cast, ReLU (max(x, 0)) and a "
        "per-column int32 -> float16 dequantisation scale[j], and the Mmad bias table adds "
        "bias[j]: anything else needs a Vector epilogue (a mixed Cube + Vector kernel), which "
        "a GemmSchedule picks by itself (or with .epilogue_on('vector'))")


def reduces(t: Tensor) -> bool:
    """Whether stage ``t``'s body reduces (anywhere in it)."""
    return t.op is not None and any(isinstance(e, Reduce) for e in walk(t.op.body))


def walk(e: Expr) -> list[Expr]:
    """Every node of ``e`` (``e`` first)."""
    from ascendsched.algo.check import children

    out, todo = [], [e]
    while todo:
        x = todo.pop()
        out.append(x)
        todo.extend(children(x))
    return out


def _zero(e: Expr) -> bool:
    return isinstance(e, Const) and e.value == 0


def _column_vector(e: Expr, jv: IndexVar) -> Tensor | None:
    """The input tensor of ``v[j]`` (or a cast of it), indexed by the output's column axis."""
    x = e.x if isinstance(e, Cast) else e
    if (isinstance(x, Load) and x.tensor.is_placeholder and len(x.indices) == 1
            and (x.indices[0] is jv or x.indices[0] == jv)):
        return x.tensor
    return None


def fixpipe_epilogue(steps: list[_Step], acc: DType, out: DType, n: int, stages: tuple[str, ...],
              where: str) -> Epilogue:
    """The Fixpipe/bias-table epilogue of ``steps`` (innermost first), or UnsupportedError
    naming the first step out of the hardware order bias, relu, int32 -> float32 cast and
    scale, output cast (a relu may also follow the output cast)."""
    bias: str | None = None
    scale: str | None = None
    relu = False
    cur = acc
    cast_done = False  # the output cast (or the int32 -> float32 cast of a dequantisation)
    for i, st in enumerate(steps):
        nxt = steps[i + 1] if i + 1 < len(steps) else None
        if st.kind == "bias":
            v = st.vector
            assert v is not None
            if relu or cast_done or scale:
                raise _not_on_fixpipe(where, st.stage, _Expr(st.text),
                                      "the bias table adds bias[j] before anything else: "
                                      "write it on the sum, C[i, j] + bias[j], in the "
                                      f"accumulator dtype {acc}")
            if bias is not None:
                raise _not_on_fixpipe(where, st.stage, _Expr(st.text), "one bias vector only")
            if st.dtype != acc or v.dtype != acc:
                raise UnsupportedError(
                    f"{where}: stage '{st.stage}' adds '{v.name}' ({v.dtype}) in {st.dtype}; "
                    f"the Mmad bias table adds a {acc} bias to the {acc} accumulator: declare "
                    f"'{v.name}' as {acc} and add it before any cast")
            _check_vector(where, st.stage, v, n, "bias")
            bias = v.name
        elif st.kind == "relu":
            if relu:
                continue  # relu(relu(x)) == relu(x)
            if scale is not None and not cast_done:
                raise _not_on_fixpipe(where, st.stage, _Expr(st.text),
                                      "the dequantising Fixpipe applies ReLU to the int32 sum, "
                                      "before the scale: write relu(C) * scale[j] (equal to "
                                      "relu(C * scale[j]) only for scale >= 0)")
            relu = True
        elif st.kind == "scale":
            v = st.vector
            assert v is not None
            if acc.name != "int32" or cur.name != "float32" or scale is not None:
                raise UnsupportedError(
                    f"{where}: stage '{st.stage}' multiplies by '{v.name}'[j] ({st.text}); the "
                    f"910B Fixpipe scales per column only when dequantising an int32 "
                    f"accumulator to float16 (quantPre VDEQF16): write "
                    f"(C.astype('float32') * {v.name}[j]).astype('float16') with C an int32 "
                    f"GEMM and {v.name} float32")
            if v.dtype.name != "float32":
                raise UnsupportedError(f"{where}: the dequantisation scale '{v.name}' is "
                                       f"{v.dtype}; declare it float32")
            if nxt is None or (nxt.kind != "relu" and (nxt.kind != "cast"
                                                        or nxt.dtype.name != "float16")):
                raise UnsupportedError(
                    f"{where}: stage '{st.stage}' scales the int32 GEMM by '{v.name}'[j] but "
                    f"does not then cast to float16; the 910B Fixpipe dequantises int32 to "
                    f"float16 only (VDEQF16): end with .astype('float16')")
            _check_vector(where, st.stage, v, n, "scale")
            scale = v.name
            cast_done = False  # the float16 cast that must follow is the output cast
        elif st.kind == "cast":
            if cur.name == "int32" and st.dtype.name == "float32" and nxt is not None and (
                    nxt.kind == "scale" or (nxt.kind == "relu" and i + 2 < len(steps)
                                            and steps[i + 2].kind == "scale")):
                cur = st.dtype  # int32 -> float32 feeding the dequantisation scale
                continue
            if cast_done:
                raise _not_on_fixpipe(where, st.stage, _Expr(st.text),
                                      f"the Fixpipe converts the accumulator once, here it "
                                      f"would convert {cur} again to {st.dtype}")
            cur, cast_done = st.dtype, True
    if cur != out:
        raise InternalCompilerError(f"{where}: epilogue ends in {cur}, output is {out}")
    return Epilogue(bias, relu, scale, stages)


def _check_vector(where: str, stage: str, v: Tensor, n: int, role: str) -> None:
    if v.ndim != 1 or int(v.shape[0]) != n:
        raise UnsupportedError(f"{where}: the {role} '{v.name}' read by stage '{stage}' has "
                               f"shape {list(v.shape)}; a per-column {role} is a vector of "
                               f"the output's {n} columns")


class _Expr:
    """An expression's text, for error messages built after the walk."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text
