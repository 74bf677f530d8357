"""Default schedules derived from the target, offered largest tile first.

``lower`` takes the first candidate whose buffers fit; the rules:
- reductions and stages with several consumers are computed per tile (``compute_at``), other
  producer stages are inlined;
- the last axis stays whole when a row fits the element budget, else it is split to a multiple
  of 32 bytes; the tile grows over leading rows up to the budget;
- the outermost tile loop is bound to min(tiles, vector cores) cores;
- input and output tiles are double buffered when a core runs more than one tile.
"""

from __future__ import annotations

from collections.abc import Iterator

from ascendsched.algo.algorithm import Algorithm
from ascendsched.algo.expr import Reduce
from ascendsched.algo.gemm_spec import looks_like_gemm
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.gemm_default import default_gemm_schedules
from ascendsched.schedule.schedule import Schedule
from ascendsched.target import DEFAULT_TARGET, Target

ELEMENT_BUDGETS = (16384, 8192, 4096, 2048, 1024, 512, 256, 128, 64, 32, 16)


def default_schedules(algo: Algorithm, target: Target = DEFAULT_TARGET
                      ) -> Iterator[Schedule | GemmSchedule]:
    """Candidate default schedules, from the largest tile to the smallest (a GEMM gets Cube
    schedules: ``schedule/gemm.py``'s ``default_gemm_schedules``)."""
    if looks_like_gemm(algo):
        yield from default_gemm_schedules(algo, target)
        return
    seen: set[str] = set()
    for budget in ELEMENT_BUDGETS:
        for double in (True, False):
            s = _candidate(algo, target, budget, double)
            key = str(s)
            if key not in seen:
                seen.add(key)
                yield s


def _candidate(algo: Algorithm, target: Target, budget: int, double: bool) -> Schedule:
    out = algo.outputs[0]
    s = Schedule(algo, target=target)
    assert out.op is not None
    axes = [a.name for a in out.op.axes]
    shape = [int(x) for x in out.shape]
    elem = max(t.dtype.bytes for t in algo.tensors)
    align = target.block_bytes // min(t.dtype.bytes for t in algo.tensors)
    last = shape[-1]
    split_last = last > budget
    cols = _aligned(min(last, budget), align) if split_last else last
    if split_last:
        s = s.split(out.name, axes[-1], cols)
    padded = -(-cols * elem // target.block_bytes) * target.block_bytes // elem
    if len(axes) > 1:
        rows = max(1, min(shape[0], budget // max(padded, 1)))
        if rows < shape[0]:
            s = s.split(out.name, axes[0], rows)
    loops = s.loop_names(out.name)
    tiles = 1
    if loops:
        nest = s.loop_nest(out.name)
        first_axes = nest.loops[0][1]
        tiles = 1
        for a in first_axes:
            n = shape[axes.index(a)]
            tiles *= -(-n // nest.factors[a])
        cores = min(tiles, target.num_aiv)
        if cores > 1:
            s = s.bind(out.name, loops[0], cores)
        tiles = -(-tiles // max(cores, 1))
    for st in algo.stages:
        if st is out:
            continue
        assert st.op is not None
        if isinstance(st.op.body, Reduce) or len(algo.consumers(st)) > 1:
            s = s.compute_at(st.name, out.name, s.legal_compute_at(out.name)[0])
        else:
            s = s.compute_inline(st.name)
    if double and tiles > 1:
        for t in algo.inputs:
            s = s.buffer(t.name, 2)
        s = s.buffer(out.name, 2)
    return s


def _aligned(n: int, align: int) -> int:
    return max(align, n // align * align)
