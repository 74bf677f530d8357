"""Split a GEMM followed by elementwise steps into its Cube part and its Vector part.

The Cube part is the contraction alone: a one-stage GEMM algorithm whose output is the
accumulator (``match_gemm`` then sees no epilogue). The Vector part is the rest, with the sum
replaced by a placeholder of the accumulator (the GM workspace the Cube writes)::

    C[i, j] = sum[float32](k: A[i, k] * B[k, j]);  D[i, j] = gelu(C[i, j]) * s[i]
    ->  cube:   C_acc[i, j] = sum[float32](k: A[i, k] * B[k, j])
        vector: C_ws (M, N) float32;  C[i, j] = C_ws[i, j];  D[i, j] = gelu(C[i, j]) * s[i]

The Vector part works on whole rows of the output: every stage has the output's shape
(elementwise) or its rows' (a reduction along each row, e.g. softmax's max and sum) and reads
tensors only at plain axes (a reduce variable in the last subscript), so one output tile needs
exactly the same tile of the workspace, and of every 2-D input, and the tile's rows (columns)
of a row (column) vector (after a batched GEMM, each of those per batch or shared by the
batches); with a row reduction a tile must hold whole rows (``rowwise``).
``VectorEpilogue.tile_algorithm`` is that part at the size of one tile (``resize.py``), and
``inputs`` says which output axis each input dimension follows. No hardware knowledge here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ascendsched.algo.algorithm import Algorithm, upstream
from ascendsched.algo.check import children, with_children
from ascendsched.algo.expr import (
    Expr,
    Load,
    Reduce,
    ReduceVar,
)
from ascendsched.algo.gemm_epilogue import is_matmul_stage, walk
from ascendsched.algo.resize import resize
from ascendsched.algo.tensor import ComputeOp, Tensor
from ascendsched.errors import UnsupportedError


@dataclass(frozen=True)
class EpilogueInput:
    """An input of the Vector part; ``axes[d]`` is the output axis its dimension ``d`` follows
    (rows i, columns j: 0, 1; after a batched GEMM batch, i, j: 0, 1, 2)."""

    name: str
    axes: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class VectorEpilogue:
    """The Vector part of a GEMM algorithm (module docstring). ``workspace`` names the
    placeholder of the accumulator; ``algo`` is the part at full size."""

    algo: Algorithm
    workspace: str
    output: str
    inputs: tuple[EpilogueInput, ...]
    rowwise: tuple[str, ...] = ()  # stages that reduce along rows: a tile must hold whole rows

    @property
    def rank(self) -> int:
        """2, or 3 after a batched GEMM (axis 0 the batch)."""
        return len(self.algo.outputs[0].shape)

    def tile_algorithm(self, rows: int, cols: int) -> Algorithm:
        """The Vector part for one ``rows x cols`` output tile of one batch (same names, tile
        sizes; a batch axis of size 1)."""
        r = self.rank
        sizes = {(self.output, r - 2): rows, (self.output, r - 1): cols}
        if r == 3:
            sizes[(self.output, 0)] = 1
        return resize(self.algo, sizes)

    def __str__(self) -> str:
        args = [self.workspace] + [i.name for i in self.inputs if i.name != self.workspace]
        return f"vector epilogue {self.output} = f({', '.join(args)})"


@dataclass(frozen=True, eq=False)
class GemmSplit:
    """``cube``: the contraction as its own algorithm; ``epilogue``: the rest. ``after``: the
    stage of the original algorithm the Cube part ends with when it keeps steps after the
    sum (``split_after``), else None."""

    cube: Algorithm
    epilogue: VectorEpilogue
    after: str | None = None

    @cached_property
    def acc_name(self) -> str:
        return self.cube.outputs[0].name


def split_vector_epilogue(algo: Algorithm, after: str | None = None) -> GemmSplit:
    """The Cube and Vector parts of ``algo`` (module docstring), or UnsupportedError naming the
    stage or subscript that keeps the Vector part from being elementwise. ``after``: a stage
    between the sum and the output whose steps stay on the Cube core with the sum (the Mmad
    bias table, the Fixpipe): the Cube part is the algorithm up to it, the workspace holds it
    and the Vector part is the rest (``split_after``)."""
    if after is not None:
        return split_after(algo, after)
    where = f"algorithm '{algo.name}'"
    if len(algo.outputs) != 1:
        raise UnsupportedError(f"{where}: a GEMM with a Vector epilogue writes one output; "
                               f"this one has {len(algo.outputs)}")
    out = algo.outputs[0]
    mm = [t for t in algo.stages if is_matmul_stage(t)]
    if len(mm) != 1:
        raise UnsupportedError(f"{where}: a GEMM with a Vector epilogue has one stage "
                               f"C = sum_k A x B; found {len(mm)}")
    c = mm[0]
    assert c.op is not None
    sums = [e for e in walk(c.op.body) if isinstance(e, Reduce)]
    if len(sums) != 1:
        raise UnsupportedError(f"{where}: stage '{c.name}' holds {len(sums)} reductions; the "
                               f"GEMM stage holds one sum over k")
    acc = sums[0]
    if len(c.shape) not in (2, 3):
        raise UnsupportedError(f"{where}: GEMM stage '{c.name}' has rank {len(c.shape)}; "
                               f"GEMM outputs are (M, N) or (batch, M, N)")
    if tuple(out.shape) != tuple(c.shape):
        raise UnsupportedError(
            f"{where}: output '{out.name}' has shape {list(out.shape)}, not the GEMM's "
            f"{list(c.shape)}; a Vector epilogue computes the GEMM result's shape (elementwise, "
            f"or through row reductions such as softmax)")
    names = {t.name for t in algo.tensors}
    cube_name = c.name if c.op.body is acc else _fresh(f"{c.name}_acc", names)
    ws = _fresh(f"{c.name}_ws", names | {cube_name})
    cube_out = Tensor(cube_name, c.shape, acc.dtype, ComputeOp(c.op.axes, acc))
    cube = Algorithm(algo.name, (cube_out,))
    ws_t = Tensor(ws, c.shape, acc.dtype)
    skip = upstream(c)  # stages only the sum reads (drop out with it)
    new = _rest(algo, skip, lambda t: lambda e: Load(ws_t, t.op.axes, acc.dtype)  # type: ignore[union-attr]
                if e is acc else None)
    vec = Algorithm(algo.name, (new[out.name],))
    rowwise = _check_rowwise(vec, where, cube_name)
    return GemmSplit(cube, VectorEpilogue(vec, ws, out.name, _inputs(vec, len(out.shape)),
                                          rowwise))


def _inputs(vec: Algorithm, rank: int) -> tuple[EpilogueInput, ...]:
    """Which output axis each dimension of each input of the Vector part follows."""
    inputs = []
    for t in vec.inputs:
        for st in vec.stages:
            for ld in (e for e in walk(st.op.body) if isinstance(e, Load)):  # type: ignore[union-attr]
                if ld.tensor is t:
                    sa = st.op.axes  # type: ignore[union-attr]
                    # a stage's axis follows the output axis of its position (a row vector's
                    # axes are the output's leading ones); a reduce variable runs along j
                    follows = tuple(rank - 1 if isinstance(ix, ReduceVar) else
                                    next(n for n, a in enumerate(sa) if a is ix)
                                    for ix in ld.indices)
        inputs.append(EpilogueInput(t.name, follows))
    return tuple(inputs)


def split_after(algo: Algorithm, after: str) -> GemmSplit:
    """``split_vector_epilogue`` with the stages up to ``after`` on the Cube core::

        C = sum_k A*B;  D = C + bias[j];  E = gelu(D)  (after='D')
        ->  cube:   C, D = C + bias[j]  (output D, float32)
            vector: D_ws (M, N) float32;  E = gelu(D_ws)

    ``after`` must follow the sum, have its shape and dtype (the accumulator's: the workspace
    holds it unconverted) and be the only Cube-side stage the Vector part reads."""
    where = f"algorithm '{algo.name}'"
    whole = split_vector_epilogue(algo)  # the checks of the plain split, and its sum stage
    p = algo.tensor(after)
    c = next(t for t in algo.stages if is_matmul_stage(t))
    out = algo.outputs[0]
    acc = whole.cube.outputs[0].dtype
    if p is out or p.op is None or c is not p and c not in upstream(p) or \
            tuple(p.shape) != tuple(c.shape) or p.dtype != acc:
        raise UnsupportedError(
            f"{where}: the steps up to '{after}' cannot stay with the sum on the Cube core: "
            f"'{after}' must be a stage between the sum '{c.name}' and the output "
            f"'{out.name}' with the sum's shape {list(c.shape)} and dtype {acc}")
    names = {t.name for t in algo.tensors}
    ws_t = Tensor(_fresh(f"{p.name}_ws", names), p.shape, p.dtype)
    skip = upstream(p) | {p}
    for t in algo.stages:
        for ld in (e for e in walk(t.op.body) if isinstance(e, Load)):  # type: ignore[union-attr]
            if t not in skip and ld.tensor in skip and ld.tensor is not p and \
                    ld.tensor.op is not None:
                raise UnsupportedError(
                    f"{where}: stage '{t.name}' reads '{ld.tensor.name}', which the Cube core "
                    f"computes before '{after}'; only '{after}' reaches the Vector cores "
                    f"(through the workspace)")
    new = _rest(algo, skip, lambda t: lambda e: Load(ws_t, e.indices, e.dtype)
                if isinstance(e, Load) and e.tensor is p else None)
    vec = Algorithm(algo.name, (new[out.name],))
    rowwise = _check_rowwise(vec, where, p.name)
    return GemmSplit(Algorithm(algo.name, (p,)),
                     VectorEpilogue(vec, ws_t.name, out.name, _inputs(vec, len(out.shape)),
                                    rowwise), after)


# --------------------------------------------------------------------------- private helpers
def _rest(algo: Algorithm, cube: set[Tensor], mapper) -> dict[str, Tensor]:  # noqa: ANN001
    """The tensors of ``algo`` outside ``cube`` (the Cube part), producers first, each stage's
    body with ``mapper(stage)`` applied (``_map``: the workspace in place of the Cube's
    result); inputs as they are."""
    new: dict[str, Tensor] = {}
    for t in algo.tensors:
        if t.op is None:
            new[t.name] = t
        elif t not in cube:
            new[t.name] = Tensor(t.name, t.shape, t.dtype,
                                 ComputeOp(t.op.axes, _map(t.op.body, mapper(t), new)))
    return new


def _fresh(name: str, taken: set[str]) -> str:
    n, k = name, 1
    while n in taken:
        k += 1
        n = f"{name}{k}"
    return n


def _map(e: Expr, fn, new: dict[str, Tensor]) -> Expr:  # noqa: ANN001 -- Expr -> Expr | None
    """``e`` with ``fn(x)`` in place of every node it maps, and loads retargeted to ``new``."""
    got = fn(e)
    if got is not None:
        return got
    if isinstance(e, Load):
        t = new.get(e.tensor.name, e.tensor)
        return Load(t, tuple(_map(i, fn, new) for i in e.indices), e.dtype)
    kids = children(e)
    if not kids:
        return e
    return with_children(e, tuple(_map(x, fn, new) for x in kids))


def _check_rowwise(vec: Algorithm, where: str, cube: str) -> tuple[str, ...]:
    """Check that every stage of the Vector part computes the output's shape elementwise, or
    a row vector (the output's shape without its last axis) reducing along whole rows, and
    reads tensors only at its own axes (a reduce variable in the last subscript, over a whole
    row). Returns the reducing stages."""
    out = vec.outputs[0]
    n = int(out.shape[-1])
    rowwise: list[str] = []
    for st in vec.stages:
        assert st.op is not None
        axes = st.op.axes
        row = tuple(st.shape) == tuple(out.shape[:-1])
        if tuple(st.shape) != tuple(out.shape) and not row:
            raise UnsupportedError(
                f"{where}: stage '{st.name}' after the GEMM has shape {list(st.shape)}, neither "
                f"the output's {list(out.shape)} nor its rows' {list(out.shape[:-1])}; a Vector "
                f"epilogue works on whole rows of the GEMM result")
        for e in walk(st.op.body):
            if isinstance(e, Reduce):
                if not row or len(e.axes) != 1 or int(e.axes[0].extent) != n:
                    raise UnsupportedError(
                        f"{where}: stage '{st.name}' reduces ({e}) after the GEMM; a Vector "
                        f"epilogue reduces only whole rows: a stage of shape "
                        f"{list(out.shape[:-1])} reducing one axis of extent {n}")
                rowwise.append(st.name)
            if not isinstance(e, Load):
                continue
            plain = [next((k for k, a in enumerate(axes) if a is ix), None) for ix in e.indices]
            last = e.indices[-1] if e.indices else None
            if isinstance(last, ReduceVar) and int(last.extent) == n and int(e.tensor.shape[-1]) == n:
                plain[-1] = len(axes)  # the row being reduced
            ok = None not in plain and len(set(plain)) == len(plain) and (
                e.tensor.is_placeholder or plain == list(range(len(e.indices))))
            if not ok:
                raise UnsupportedError(
                    f"{where}: stage '{st.name}' reads {e.tensor.name}"
                    f"[{', '.join(map(str, e.indices))}]; after the GEMM '{cube}' a Vector "
                    f"epilogue reads tensors only at the output's own axes "
                    f"({', '.join(a.name for a in axes)}): a matrix [i, j], a row vector [i] "
                    f"or a column vector [j] (a whole row through a reduce variable in the "
                    f"last subscript)")
    return tuple(dict.fromkeys(rowwise))
