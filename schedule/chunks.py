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
    if not stages or any(st.name not in chunked for st in stages):
        return False
    for st in stages:
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
