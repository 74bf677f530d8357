"""``lower()``: the flat list of passes from a schedule to a final kernel (Halide's Lower.cpp).

Every step goes through a :class:`PassLog`, which keeps each result's text, times the step,
prints it on request ("(unchanged)" when a pass returned its input) and writes
``NNN_<step>.txt`` to a dump directory.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ascendsched.algo.algorithm import Algorithm, root_output
from ascendsched.errors import CapacityError, ScheduleError, UnsupportedError
from ascendsched.lower.apply_memory_plan import apply_memory_plan
from ascendsched.lower.build_gemm import build_gemm, capacity_hint
from ascendsched.lower.build_loop_nest import build_loop_nest
from ascendsched.lower.ir import Kernel
from ascendsched.lower.lifetimes import buffer_lifetimes
from ascendsched.lower.plan_memory import plan_memory
from ascendsched.schedule.default import default_schedules
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.schedule import Schedule
from ascendsched.target import DEFAULT_TARGET, Target

T = TypeVar("T")


@dataclass
class PassLog:
    """Records each lowering step: its result, its wall and CPU time; optional printing and
    dumping. A step's text is made only when printed, dumped or asked for (``text``)."""

    verbose: bool = False
    dump_dir: Path | None = None
    steps: list[tuple[str, float, float]] = field(default_factory=list)  # (name, wall, cpu s)
    results: dict[str, Any] = field(default_factory=dict)
    _unchanged: set[str] = field(default_factory=set)
    _last: Any = None
    _t0: float = field(default_factory=time.perf_counter)
    _c0: float = field(default_factory=time.process_time)

    def __call__(self, name: str, result: T) -> T:
        wall, cpu = time.perf_counter() - self._t0, time.process_time() - self._c0
        self.steps.append((name, wall, cpu))
        self.results[name] = result
        if result is self._last:
            self._unchanged.add(name)
        if self.verbose:
            print(f"--- {name} ({wall * 1e3:.1f} ms)\n{self.text(name)}")
        if self.dump_dir is not None:
            self.dump_dir.mkdir(parents=True, exist_ok=True)
            fname = f"{len(self.steps):03d}_{name.replace(' ', '_')}.txt"
            (self.dump_dir / fname).write_text(self.text(name) + "\n")
        self._last = result
        self._t0, self._c0 = time.perf_counter(), time.process_time()
        return result

    def text(self, name: str) -> str:
        """The printed result of step ``name`` ("(unchanged)" when it returned its input)."""
        return "(unchanged)" if name in self._unchanged else str(self.results[name])

    def cpu(self) -> dict[str, float]:
        """CPU seconds per step."""
        return {n: c for n, _, c in self.steps}

    def timings(self) -> str:
        return "\n".join(f"{n:>20}: {t * 1e3:8.1f} ms ({c * 1e3:.1f} ms CPU)"
                         for n, t, c in self.steps)


def lower(sched: Schedule | GemmSchedule, target: Target | None = None, *,
          log: PassLog | None = None, sync: bool = True) -> Kernel:
    """Lower a scheduled algorithm to a final kernel: planned memory, inserted syncs."""
    if isinstance(sched, Algorithm):
        raise ScheduleError(
            f"lower() takes a Schedule; algorithm '{sched.name}' has none yet: "
            f"lower(schedule_for(algo)) for the default one, or lower(Schedule(algo).split(...))")
    if not isinstance(sched, (Schedule, GemmSchedule)):
        raise ScheduleError(f"lower() takes a Schedule or GemmSchedule, got "
                            f"{type(sched).__name__} {sched!r}")
    target = target or sched.target
    log = log if log is not None else PassLog()
    if isinstance(sched, GemmSchedule):  # the Cube path
        k = log("build gemm", build_gemm(sched, target))
    else:
        k = log("build loop nest", build_loop_nest(sched, target))
    lifetimes = log("lifetimes", buffer_lifetimes(k))
    try:
        plan = log("memory plan", plan_memory(k, lifetimes, target))
    except CapacityError as e:
        if isinstance(sched, GemmSchedule):
            raise capacity_hint(sched, e) from None
        raise
    k = log("apply memory plan", apply_memory_plan(k, plan))
    if not sync:
        return k
    # Ordering restriction: dependences are computed on the *planned* byte ranges, so a buffer
    # placed in space another buffer left dead gets the WAR dependence that reuse creates.
    from ascendsched.lower.insert_sync import insert_sync
    from ascendsched.lower.polyhedral import analyze_dependences

    deps = log("dependences", analyze_dependences(k))
    return log("insert sync", insert_sync(k, deps, target))


def schedule_for(obj: Schedule | GemmSchedule | Algorithm, target: Target = DEFAULT_TARGET
                 ) -> Schedule | GemmSchedule:
    """The schedule to lower: ``obj`` itself, or the first default candidate whose buffers
    the memory planner fits with their buffering honoured (``plan_memory``'s first plan); when
    none does, the first that fits at all (its plan warns what it gave up). A GEMM algorithm
    gets a Cube schedule (``schedule/gemm.py``)."""
    if isinstance(obj, (Schedule, GemmSchedule)):
        return obj
    if not isinstance(obj, Algorithm):
        raise ScheduleError(
            f"expected a Schedule, a GemmSchedule or an Algorithm (which gets the default "
            f"schedule), got {type(obj).__name__} {obj!r}")
    for t in obj.tensors:
        if any(not isinstance(d, int) for d in t.shape):
            raise UnsupportedError(
                f"tensor '{t.name}' of '{obj.name}' has symbolic shape {list(t.shape)}; a kernel "
                f"(and its default schedule) needs concrete sizes: build the algorithm with "
                f"integers for this kernel")
    last: CapacityError | None = None
    fallback: Schedule | GemmSchedule | None = None
    for cand in _defaults(obj, target):
        try:
            k = build_gemm(cand, target) if isinstance(cand, GemmSchedule) else \
                build_loop_nest(cand, target)
            plan = plan_memory(k, buffer_lifetimes(k), target, warn=False)
        except CapacityError as e:
            last = e
            continue
        if not plan.compromises:
            return cand
        fallback = fallback or cand
    if fallback is not None:
        return fallback
    assert last is not None
    raise last


def _defaults(algo: Algorithm, target: Target) -> Iterator[Schedule | GemmSchedule]:
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
