"""``schedule_for``: the schedule to lower for what the user gave (a schedule, or an algorithm
whose first default candidate the memory planner fits)."""

from __future__ import annotations

import math
from collections.abc import Iterator

from ascendsched.algo.algorithm import Algorithm, root_output
from ascendsched.algo.expr import Reduce
from ascendsched.algo.gemm_epilogue import reduces, walk
from ascendsched.algo.gemm_spec import looks_like_gemm
from ascendsched.errors import CapacityError, ScheduleError, UnsupportedError
from ascendsched.lower.collector import collector_paused
from ascendsched.lower.ir import Kernel
from ascendsched.lower.lifetimes import Lifetimes, buffer_lifetimes
from ascendsched.lower.pipeline import build
from ascendsched.lower.plan_memory import plan_as_scheduled, plan_memory
from ascendsched.lower.prepared import keep
from ascendsched.schedule.default import default_schedules
from ascendsched.schedule.schedule import Scheduled
from ascendsched.target import DEFAULT_TARGET, Target
from ascendsched.target.model import Scope


def schedule_for(obj: Scheduled | Algorithm, target: Target = DEFAULT_TARGET
                 ) -> Scheduled:
    """The schedule to lower: ``obj`` itself, or the first default candidate whose buffers
    the memory planner fits with their buffering honoured (``plan_memory``'s first plan); when
    none does, the first that fits at all (its plan warns what it gave up). A GEMM algorithm
    gets a Cube schedule (``schedule/gemm.py``)."""
    if isinstance(obj, Scheduled):
        return obj
    if not isinstance(obj, Algorithm):
        raise ScheduleError(
            f"expected a Schedule, a GemmSchedule or an Algorithm (which gets the default "
            f"schedule), got {type(obj).__name__} {obj!r}")
    with collector_paused():
        return _first_fitting(obj, target)


def _first_fitting(obj: Algorithm, target: Target) -> Scheduled:
    """``schedule_for`` of an algorithm with concrete sizes."""
    for t in obj.tensors:
        if any(not isinstance(d, int) for d in t.shape):
            raise UnsupportedError(
                f"tensor '{t.name}' of '{obj.name}' has symbolic shape {list(t.shape)}; a kernel "
                f"(and its default schedule) needs concrete sizes: build the algorithm with "
                f"integers for this kernel")
    failed: dict[int, CapacityError] = {}  # candidate number -> why it does not fit
    refused: list[ScheduleError] = []  # candidates the builder refuses (its rules, not UB's)
    built: list[tuple[int, Scheduled, Kernel, Lifetimes]] = []
    for n, cand in enumerate(_defaults(obj, target)):
        try:
            k = build(cand, target)
            lifetimes = buffer_lifetimes(k)
        except CapacityError as e:
            failed[n] = e
            continue
        except ScheduleError as e:  # e.g. another output whose rows a row piece cannot store
            refused.append(e)
            continue
        plan = plan_as_scheduled(k, lifetimes, target)
        if plan is not None:
            keep(cand, target, (k, lifetimes, plan))  # lower() takes them, not made twice
            return cand
        built.append((n, cand, k, lifetimes))
    for n, cand, k, lifetimes in built:  # none fits as scheduled: the first that fits at all
        try:
            plan_memory(k, lifetimes, target, warn=False)
        except CapacityError as e:
            failed[n] = e
            continue
        return cand
    if refused and not failed:
        raise refused[0]
    if failed:
        last = failed[max(failed)]  # the last candidate's reason, as when tried in turn
    else:  # the generator offered nothing: every tile it sized is hopelessly over
        facts = (f"Every tile of '{root_output(obj).name}' the default schedule sizes needs far "
                 f"more than the {target.scope(Scope.UB).usable} B of UB {target.name} has "
                 "usable, by its estimate.")
        last = CapacityError(f"no default schedule of '{obj.name}' fits {target.name}: {facts} "
                             "Write a Schedule with a smaller tile", facts)
    reductions = _reduction_stages(obj)
    if not reductions or looks_like_gemm(obj):
        raise last
    out = root_output(obj)
    cols = _row_length(obj)
    raise CapacityError(
        f"no default schedule of '{obj.name}' fits {target.name}: even its smallest tile of "
        f"'{out.name}' (one row of {cols} columns, or a piece of it) does not. {last.facts} "
        f"A smaller tile cannot help: on the Vector cores a reduction's tile holds its whole "
        f"axis, so {', '.join(repr(r) for r in reductions)} "
        f"{'keeps' if len(reductions) == 1 else 'keep'} whole rows of {cols} "
        f"elements in UB, unless the schedule splits the reduction axis into chunks; the "
        f"default does that only when every reduction is a row statistic reading inputs "
        f"alone along its axis (schedule.chunks.chunkable). Ways out: a Schedule that splits "
        f"the reduction, e.g. split('{reductions[0]}', '{_reduce_axis(obj, reductions[0])}', "
        f"{_chunk_hint(obj, target, cols)}) (schedule/chunks.py), "
        f"rows of fewer columns, or fewer or narrower row-wide values in the algorithm",
        last.facts) from None


def _row_length(algo: Algorithm) -> int:
    """The longest row a reduction of ``algo`` reduces (its reduction axes' extent)."""
    return max(math.prod(int(v.extent) for v in e.axes) for st in algo.stages
               if st.op is not None for e in walk(st.op.body) if isinstance(e, Reduce))


def _reduce_axis(algo: Algorithm, stage: str) -> str:
    """The name of the (first) reduce axis of ``stage``."""
    st = algo.tensor(stage)
    return next(e.axes[0].name for e in walk(st.op.body)  # type: ignore[union-attr]
                if isinstance(e, Reduce))


def _chunk_hint(algo: Algorithm, target: Target, cols: int) -> int:
    """A chunk width to suggest: a quarter of the row, at most a quarter of UB in float32
    values, in 32-byte blocks."""
    per = target.block_bytes // 4
    return max(per, min(target.scope(Scope.UB).usable // 4 // 4, cols // 4) // per * per)


def _reduction_stages(algo: Algorithm) -> list[str]:
    """The stages that reduce (on the Vector cores always along the innermost axis)."""
    return [st.name for st in algo.stages if reduces(st)]


def _defaults(algo: Algorithm, target: Target) -> Iterator[Scheduled]:
    """The default candidates; a ScheduleError while making them is the default schedule's
    limit, not a call of the user's: say so and point at writing a Schedule."""
    try:
        yield from default_schedules(algo, target)
    except ScheduleError as e:
        if isinstance(e, CapacityError):
            raise
        root = root_output(algo).name
        raise ScheduleError(
            f"no default schedule for algorithm '{algo.name}' (outputs "
            f"{', '.join(o.name for o in algo.outputs)}): the default schedule generator "
            f"failed with: {e}. Return a Schedule instead, e.g. Schedule(algo).split('{root}', "
            f"..., 8) with compute_at for its producers") from e
