"""``compile_kernel``: a scheduled algorithm -> its lowered kernel and its AscendC project.

The steps of ``lower/pipeline.py``, then emission as one more logged step, ``emit`` (its text
in the log is the kernel's C++)::

    k, proj = compile_kernel(Schedule(algo).split("y", "i", 8), Path("out"))
    proj.kernel_cpp   # out/<kernel>.cpp, beside the tiling header, host launcher and CMake
"""

from __future__ import annotations

from pathlib import Path

from ascendsched.algo.algorithm import Algorithm
from ascendsched.emit_ascendc.project import EmittedProject, emit_project
from ascendsched.lower.ir import Kernel
from ascendsched.lower.pass_log import PassLog
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.schedule import Schedule


def compile_kernel(obj: Schedule | GemmSchedule | Algorithm, out_dir: Path, *,
                   log: PassLog | None = None) -> tuple[Kernel, EmittedProject]:
    """Lower and emit the AscendC project for ``obj`` into ``out_dir``: the steps of
    ``lower/pipeline.py``, then ``emit`` (its text in the log: the kernel's C++). An Algorithm
    gets its default schedule."""
    log = log if log is not None else PassLog()
    k = lower(schedule_for(obj), log=log)
    proj = log("emit", emit_project(k, Path(out_dir)), show=lambda p: p.kernel_source)
    return k, proj
