"""The built kernel, lifetimes and memory plan of a schedule, kept from ``schedule_for`` for
the ``lower`` of the schedule it returns.

``schedule_for`` builds and memory-plans each default candidate it tries; the one it returns
is then lowered, which would build and plan it again (a tenth of a LayerNorm's compile). The
result is kept here, keyed by the schedule object and the target, for the last few schedules
(a weak reference: a schedule nobody holds is not kept alive). The kernel IR is frozen, so
handing the same objects to ``lower`` is the same as making them again.
"""

from __future__ import annotations

import weakref

from ascendsched.lower.ir import Kernel
from ascendsched.lower.lifetimes import Lifetimes
from ascendsched.lower.plan_memory import MemoryPlan
from ascendsched.schedule.schedule import Scheduled
from ascendsched.target import Target

Prepared = tuple[Kernel, Lifetimes, MemoryPlan]
_KEEP = 4  # schedules kept (schedule_for's result is lowered next, or not at all)
_kept: dict[int, tuple[weakref.ref, Target, Prepared]] = {}


def keep(sched: Scheduled, target: Target, prepared: Prepared) -> None:
    """Remember ``sched``'s kernel, lifetimes and plan on ``target``."""
    _kept[id(sched)] = (weakref.ref(sched), target, prepared)
    while len(_kept) > _KEEP:
        del _kept[next(iter(_kept))]


def kept(sched: Scheduled, target: Target) -> Prepared | None:
    """What ``keep`` remembered for this very schedule object on this target, or None."""
    got = _kept.get(id(sched))
    if got is None or got[0]() is not sched or got[1] is not target:
        return None
    return got[2]
