"""Schedules: how an algorithm is computed (tiling, placement, buffering, cores)."""

from ascendsched.schedule.default import default_schedules
from ascendsched.schedule.printer import format_schedule, print_loop_nest
from ascendsched.schedule.schedule import (
    Bind,
    Buffering,
    ComputeAt,
    ComputeInline,
    Fuse,
    LoopNest,
    Reorder,
    Schedule,
    Split,
)

__all__ = [
    "Bind", "Buffering", "ComputeAt", "ComputeInline", "Fuse", "LoopNest", "Reorder", "Schedule",
    "Split", "default_schedules", "format_schedule", "print_loop_nest",
]
