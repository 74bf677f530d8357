"""Simulation of kernel IR: functional execution, the dynamic trace, the race checker.

``run_kernel`` executes a Kernel with numpy (optionally recording a :class:`Trace`);
``check_trace`` replays a trace under the target's pipe semantics and reports races, deadlocks,
flag and budget errors; ``traces_match`` compares two traces (e.g. IR vs emitted C++).
"""

from ascendsched.sim.checker import (
    BudgetError,
    CheckReport,
    Deadlock,
    EventRef,
    FlagError,
    Race,
    check_trace,
)
from ascendsched.sim.execute import SimResult, run_kernel
from ascendsched.sim.trace import Trace, TraceEvent, traces_match

__all__ = [
    "BudgetError", "CheckReport", "Deadlock", "EventRef", "FlagError", "Race", "SimResult",
    "Trace", "TraceEvent", "check_trace", "run_kernel", "traces_match",
]
