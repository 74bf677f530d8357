"""Kernel IR -> AscendC C++ project, and the CPU runtime that checks the emitted text."""

from ascendsched.emit_ascendc.check import CpuRun, KernelAbort, build_cpu, run_cpu
from ascendsched.emit_ascendc.project import EmittedProject, emit_project

__all__ = ["CpuRun", "EmittedProject", "KernelAbort", "build_cpu", "emit_project", "run_cpu"]
