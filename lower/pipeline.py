"""``lower()``: the flat list of steps from a schedule to a final kernel (Halide's Lower.cpp).

Each step is one call through the :class:`PassLog`, which keeps its result, times it, prints
it on request and dumps it (``NNN_<step>.txt``). The steps, in order (``STEPS``)::

    build                   Schedule -> Kernel (build_loop_nest; build_gemm/build_mixed
                            when a stage is tensorized)
    verify built            the IR contract (lower/verify.py), before any buffer is placed
    lifetimes               first and last use of every buffer copy
    memory plan             byte offsets per scope
    apply memory plan       Kernel with Buffer.offsets
    hoist invariants        loop-invariant Vector instructions in front of their loops, in
                            bytes the plan left them (hoist_invariants.py)
    order vector            each run of Vector instructions in dependence levels, one
                            barrier per level at most (order_vector.py)
    sync template           the kernel the sync steps analyse: a GEMM's tail-free template,
                            a mixed kernel's AIC template beside its own AIV, or the kernel
                            itself (sync_template.py)
    dependences             RAW/WAR/WAW on the planned bytes
    cross-core plan         a mixed kernel's cross-core flag channels (cross_core_sync.py),
                            planned on the kernel itself; intra-core dependences they order
                            leave ``dependences``
    place syncs             Placed: kernel with every needed sync, its happens-before oracle
    remove redundant syncs  Pruned: kernel without implied syncs, the same oracle
    allocate event ids      Kernel whose event ids fit the target's budget (when they run
                            out: placed again with tile classes' channels joined)
    template syncs          the kernel with its template's syncs in every tile class (None
                            when one has no place there: the sync steps then run again on
                            the kernel itself)
    cross-core syncs        the planned cross-core flags in both programs
    verify final            the IR contract again, with the memory plan

Emission (``emit_project``, one layer up) is the step after these: ``ascendsched.api.compile.
compile_kernel`` logs it as ``emit``. ``stop_after`` ends the list early and returns the last
kernel made so far; every result stays in the log (``log.results[step]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ascendsched.algo.algorithm import Algorithm
from ascendsched.errors import CapacityError, InternalCompilerError, ScheduleError
from ascendsched.lower.apply_memory_plan import apply_memory_plan
from ascendsched.lower.build_gemm import build_gemm
from ascendsched.lower.build_loop_nest import build_loop_nest
from ascendsched.lower.build_mixed import build_mixed
from ascendsched.lower.collector import collector_paused
from ascendsched.lower.cross_core_sync import (
    CrossPlan,
    insert_cross_sync,
    leave_to_cross,
    plan_cross_sync,
)
from ascendsched.lower.cube_hints import capacity_hint, mixed_capacity_hint
from ascendsched.lower.hoist_invariants import hoist_invariants
from ascendsched.lower.insert_sync import allocate_ids, place_syncs
from ascendsched.lower.ir import Kernel
from ascendsched.lower.lifetimes import buffer_lifetimes
from ascendsched.lower.order_vector import order_vector
from ascendsched.lower.pass_log import PassLog, kernel_of
from ascendsched.lower.plan_memory import plan_memory
from ascendsched.lower.polyhedral import analyze_dependences
from ascendsched.lower.prepared import kept
from ascendsched.lower.remove_redundant_sync import remove_redundant_sync
from ascendsched.lower.sync_template import (
    apply_template_syncs,
    leave_workspace_to_cross,
    sync_template,
)
from ascendsched.lower.verify import verify
from ascendsched.schedule.schedule import Schedule, Scheduled
from ascendsched.target import Target

T = TypeVar("T")

STEPS = ("build", "verify built", "lifetimes", "memory plan", "apply memory plan",
         "hoist invariants", "order vector", "sync template", "dependences", "cross-core plan",
         "place syncs", "remove redundant syncs", "allocate event ids", "template syncs",
         "cross-core syncs", "verify final")
PLANNED = "order vector"  # the last step before the sync steps: the kernel they synchronise
SYNC_STEPS = ("sync template", "place syncs", "remove redundant syncs", "allocate event ids",
              "template syncs")


class _Stop(Exception):
    """Raised by the step named ``stop_after`` (only inside ``lower``)."""


def lower(sched: Scheduled, target: Target | None = None, *,
          log: PassLog | None = None, stop_after: str | None = None) -> Kernel:
    """Lower a scheduled algorithm to a final kernel: verified, memory planned, synchronised.

    ``stop_after``: a name of ``STEPS``; the kernel as that step leaves it (the step's own
    result, e.g. the memory plan, is ``log.results[stop_after]``)."""
    _check_args(sched, stop_after)
    with collector_paused():
        return _lower(sched, target or sched.target,
                      log if log is not None else PassLog(), stop_after)


def _lower(sched: Scheduled, target: Target, log: PassLog, stop_after: str | None) -> Kernel:
    """``lower``'s steps."""
    made: Kernel | None = None  # the last kernel a step made (what ``stop_after`` returns)

    def step(name: str, result: T) -> T:
        nonlocal made
        made = kernel_of(result) or made
        log(name, result)
        if name == stop_after:
            raise _Stop
        return result

    try:
        # schedule_for's candidate comes with its kernel and memory plan (prepared.py)
        ready = kept(sched, target)
        k = step("build", ready[0] if ready else build(sched, target))
        try:
            try:
                k = step("verify built", verify(k))
            except InternalCompilerError:
                # a tile too big for its buffer is often too big for an instruction's
                # parameters too (64 x 4096 on L0B: Mmad n=4096 > 4095): when the plan
                # cannot fit it, that capacity error is the user's problem to report
                plan_memory(k, buffer_lifetimes(k), target, warn=False)
                raise
            lifetimes = step("lifetimes", ready[1] if ready else buffer_lifetimes(k))
            plan = ready[2] if ready else plan_memory(k, lifetimes, target)
        except CapacityError as e:
            cube = sched.cube
            if cube is not None:
                hint = capacity_hint if cube.vector_epilogue is None else mixed_capacity_hint
                raise hint(cube, e) from None
            raise
        step("memory plan", plan)
        k = step("apply memory plan", apply_memory_plan(k, plan))
        k = step("hoist invariants", hoist_invariants(k))
        k = step("order vector", order_vector(k))
        # A GEMM's sync steps analyse its tail-free template (one class of whole tiles) when
        # every statement of the kernel has its image there; the template's syncs then go
        # into every tile class and peeled K step (sync_template.py)
        tmpl = step("sync template", sync_template(sched, k, target))
        synced, cross = _synchronise(tmpl, target, step, k)
        done = step("template syncs", apply_template_syncs(k, tmpl, synced, sched))
        if done is None:  # a template sync has no place in the kernel: synchronise it alone
            done, cross = _synchronise(k, target, step)
        k = step("cross-core syncs", insert_cross_sync(done, cross))
        return step("verify final", verify(k, planned=True))
    except _Stop:
        assert made is not None
        return made


def _synchronise(k: Kernel, target: Target, step: Callable[[str, T], T],
                 kernel: Kernel | None = None) -> tuple[Kernel, CrossPlan]:
    """The sync steps on ``k``: the kernel with every flag and barrier its dependences need,
    and the cross-core flags still to insert. ``kernel``: the kernel ``k`` is the sync
    template of (a mixed kernel's cross-core flags are planned on the kernel itself)."""
    kernel = kernel or k
    # Ordering restriction: dependences are computed on the *planned* byte ranges, so a
    # buffer placed in space another buffer left dead gets the WAR dependence that reuse
    # creates.
    deps = step("dependences", analyze_dependences(k))
    # Ordering restriction: the cross-core channels are planned before the intra-core
    # syncs, which then leave alone the dependences a chain of channels orders; the flags
    # themselves go in last, so no intra-core pass sees (or prunes) them.
    cross = step("cross-core plan", plan_cross_sync(kernel, target))
    deps = leave_to_cross(deps, cross, k) if kernel is k else \
        leave_workspace_to_cross(deps, cross, kernel)
    placed = step("place syncs", place_syncs(k, deps, target))
    # The oracle built by placement answers every later question on these statements:
    # pruning and allocation reuse it instead of rebuilding it.
    pruned = step("remove redundant syncs", remove_redundant_sync(
        placed.kernel, deps, target, settled_by=placed.settled_by, oracle=placed.oracle))
    # Ordering restriction: when the ids run out, allocation redoes placement and pruning
    # with the tile classes' channels joined at the top of the program (allocate_ids)
    return step("allocate event ids", allocate_ids(k, deps, target, pruned)), cross


def build(sched: Scheduled, target: Target) -> Kernel:
    """The loop nest of a schedule: with a tensorized stage, ``build_gemm`` for the Cube
    (``build_mixed`` when stages run on the Vector cores too), else ``build_loop_nest``."""
    cube = sched.cube
    if cube is None:
        assert isinstance(sched, Schedule)  # GemmSchedule always has a Cube plan
        return build_loop_nest(sched, target)
    if cube.vector_epilogue is not None:
        return build_mixed(cube, target)
    return build_gemm(cube, target)


def _check_args(sched: object, stop_after: str | None) -> None:
    if isinstance(sched, Algorithm):
        raise ScheduleError(
            f"lower() takes a Schedule; algorithm '{sched.name}' has none yet: "
            f"lower(schedule_for(algo)) for the default one, or lower(Schedule(algo).split(...))")
    if not isinstance(sched, Scheduled):
        raise ScheduleError(f"lower() takes a Schedule or GemmSchedule, got "
                            f"{type(sched).__name__} {sched!r}")
    if stop_after is not None and stop_after not in STEPS:
        raise InternalCompilerError(f"lower(stop_after={stop_after!r}): no such step; the "
                                    f"steps are {', '.join(STEPS)}")
