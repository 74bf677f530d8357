"""Chunked reductions: a ``split`` of a Vector stage's reduce axis.

A Vector stage reduces whole rows per tile unless its reduce axis is split: then the row is
read in chunks of the split's factor, each chunk loaded into UB, reduced, and combined into a
running result (``lower/chunked_reduce.py``), so a row longer than UB (a 32 000-column
log-softmax over a Llama vocabulary) still has a kernel::

    s = (Schedule(log_softmax(4096, 32000))
         .split("y", "i", 1).split("y", "j", 4000)   # tiles: one row, 4000-column pieces
         .compute_at("mx", "y", "i_o").split("mx", "k", 4000)   # row max over 8 chunks
         .compute_at("se", "y", "i_o").split("se", "k", 4000))  # sum of exp over 8 chunks

The split's loops are chunk loops inside the stage's computation, not tile loops of the kernel:
they are not in the stage's ``loop_nest``. A contraction's reduce axis (a stage the Cube can
tensorize) keeps its meaning there: its splits are the L1/L0 K steps. ``chunkable`` tells the
default schedule and the tuner's spaces when every reduction of an algorithm can be chunked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ascendsched.algo.algorithm import Algorithm, root_output
from ascendsched.algo.expr import Load, Reduce, ReduceVar
from ascendsched.algo.gemm_epilogue import is_matmul_stage, reduces, walk
from ascendsched.algo.tensor import Tensor

if TYPE_CHECKING:
    from ascendsched.schedule.schedule import Schedule, Split


def chunk_var(s: Schedule, stage: str) -> ReduceVar | None:
    """The reduce axis whose split chunks ``stage``'s reduction (None: the stage has no single
    reduce axis, or is a contraction, whose reduce splits are Cube K steps)."""
    from ascendsched.schedule.cube_directives import reduce_var_of

    kv = reduce_var_of(s, stage)
    return None if kv is None or is_matmul_stage(s.algo.tensor(stage)) else kv


def chunk_axis(s: Schedule, stage: str) -> str | None:
    """The name of :func:`chunk_var`."""
    kv = chunk_var(s, stage)
    return kv.name if kv is not None else None


def chunk_split(s: Schedule, stage: str) -> Split | None:
    """The split that chunks ``stage``'s reduction, if the schedule has one."""
    from ascendsched.schedule.schedule import Split

    k = chunk_axis(s, stage)
    if k is None:
        return None
    return next((d for d in s.directives
                 if isinstance(d, Split) and d.stage == stage and d.axis == k), None)


def stat_rank(algo: Algorithm) -> int | None:
    """The rank of the row statistics of ``algo``, the stages that reduce (``mx[i]`` of a
    softmax ``y[i, j]``: 1; ``lse[p, i]`` or ``y[p, i] = sum_k x[p, i, k]``: 2, the root
    output's own); None when they differ or there are none."""
    ranks = {len(st.shape) for st in algo.stages if reduces(st)}
    return ranks.pop() if len(ranks) == 1 else None


def chunkable(algo: Algorithm) -> bool:
    """Whether every reduction stage of ``algo`` is a row statistic (``stat_rank``; the root
    output may be one) that reads, along its reduce axis, inputs alone once every other
    non-output stage is inlined."""
    out = root_output(algo)
    rank = stat_rank(algo)
    if rank is None or rank not in (len(out.shape), len(out.shape) - 1):
        return False
    per_row = {st.name for st in algo.stages if st not in algo.outputs and len(st.shape) == rank}
    stages = [st for st in algo.stages if reduces(st)]
    chunked = per_row | ({out.name} if len(out.shape) == rank else set())
    if not stages or any(st.name not in chunked or along_columns(st) for st in stages):
        return False
    return all(_reads_inputs_alone(algo, st, per_row) for st in stages)


def _reads_inputs_alone(algo: Algorithm, st: Tensor, per_row: set[str]) -> bool:
    """Whether ``st`` holds one reduction of one axis that reads, along that axis, inputs
    alone once every stage but the outputs and ``per_row`` is inlined."""
    reds = [e for e in walk(st.op.body) if isinstance(e, Reduce)]  # type: ignore[union-attr]
    if len(reds) != 1 or len(reds[0].axes) != 1:
        return False
    todo, seen = [reds[0].body], set()
    while todo:
        for ld in (e for e in walk(todo.pop()) if isinstance(e, Load)):
            t = ld.tensor
            if t.is_placeholder or t.name in seen:
                continue
            if t.name in per_row or t in algo.outputs:
                if reads_along(ld, reds[0].axes[0]):
                    return False
                continue
            seen.add(t.name)
            todo.append(t.op.body)  # type: ignore[union-attr]
    return True


def along_columns(st: Tensor) -> bool:
    """Whether stage ``st`` reduces over an axis a load subscripts before one of the
    stage's own axes (a column statistic ``mean[j] = sum_k x[k, j]``), not a row one."""
    assert st.op is not None
    own = set(st.op.axes)
    for red in (e for e in walk(st.op.body) if isinstance(e, Reduce)):
        rv = red.axes[0]
        for ld in (e for e in walk(red.body) if isinstance(e, Load)):
            subs = [set(walk(ix)) for ix in ld.indices]
            k = next((n for n, vs in enumerate(subs) if rv in vs), None)
            if k is not None and any(vs & own for vs in subs[k + 1:]):
                return True
    return False


def reads_along(ld: Load, rv: ReduceVar) -> bool:
    """Whether a subscript of ``ld`` moves with reduce axis ``rv``."""
    return any(x == rv for e in ld.indices for x in walk(e))


def dividing_width(n: int, w: int, gran: int) -> int | None:
    """The widest multiple of ``gran`` in ``(w / 2, w]`` that divides a row of ``n`` (None:
    none does). Pieces or chunks of that width leave no tail, whose second version of every
    statement, and loads waiting for the piece loop's work, cost more than the narrower
    width (log-softmax 4096 x 32 000 models 512.1 us in 8 000-column pieces, 663.4 us in
    8 800-column ones)."""
    return next((d for d in range(w // gran * gran, w // 2, -gran) if d and n % d == 0), None)


def column_reduction(algo: Algorithm) -> bool:
    """Whether the root output of ``algo`` is the one reduction, over an axis its inputs
    subscript before the output's own (a column sum ``y[j] = sum_k x[k, j]``, a sum over the
    middle axis ``y[b, j] = sum_k x[b, k, j]``), reading inputs alone along it: its rows are
    combined elementwise (``lower/select_reduce.py`` ``emit_column_reduce``), its tiles want
    many columns, and its reduce axis splits into chunks of rows."""
    out = root_output(algo)
    stages = [st for st in algo.stages if reduces(st)]
    return stages == [out] and along_columns(out) and _reads_inputs_alone(algo, out, set())


def column_stats(algo: Algorithm) -> bool:
    """Whether every reduction of ``algo`` is a column statistic of a 2-D root output
    (``mean[j] = sum_k x[k, j]`` of ``z[i, j] = x[i, j] - mean[j]``), one value per column,
    reading inputs alone along its axis: computed once per strip of columns, in chunks of
    rows, before that strip's rows (``schedule/default_chunked.py`` ``column_pieces``)."""
    out = root_output(algo)
    stages = [st for st in algo.stages if reduces(st)]
    names = {st.name for st in stages}
    return (len(out.shape) == 2 and bool(stages) and out not in stages
            and all(tuple(st.shape) == (out.shape[-1],) and along_columns(st)
                    and _reads_inputs_alone(algo, st, names) for st in stages))
