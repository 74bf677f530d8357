"""Simulation of kernel IR: functional execution, the dynamic trace, the race checker, timing.

``run_kernel`` executes a Kernel with numpy (optionally recording a :class:`Trace`);
``check_trace`` replays a trace under the target's pipe semantics and reports races, deadlocks,
flag and budget errors; ``traces_match`` compares two traces (e.g. IR vs emitted C++);
``model_time`` models a kernel's time on its target (``sim/timing.py``) and
``write_chrome_trace`` / ``write_png`` export its timeline.
"""

from ascendsched.sim.check_report import (
    BudgetError,
    CheckReport,
    Deadlock,
    EventRef,
    FlagError,
    Race,
)
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import SimResult, run_kernel
from ascendsched.sim.timeline import write_chrome_trace, write_png
from ascendsched.sim.timing import TimingReport, model_time
from ascendsched.sim.trace import Trace, TraceEvent, traces_match

__all__ = [
    "BudgetError", "CheckReport", "Deadlock", "EventRef", "FlagError", "Race", "SimResult",
    "TimingReport", "Trace", "TraceEvent", "check_trace", "model_time", "run_kernel",
    "traces_match", "write_chrome_trace", "write_png",
]
