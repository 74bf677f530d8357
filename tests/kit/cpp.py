"""Emit kernels as AscendC projects and build them with g++ against the CPU runtime, two at a
time (about 5 s per build with sanitizers): the shared body of the g++ tests' ``built`` fixtures.

A *text mutant* is a project whose emitted kernel text has one string replaced, for the faults
the IR cannot express (a wrong DataCopy length, a dropped WaitFlag in the text).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from ascendsched.emit_ascendc import EmittedProject, build_cpu, emit_project
from ascendsched.lower.ir import Kernel


@dataclass(frozen=True)
class Built:
    kernel: Kernel
    project: EmittedProject
    binary: Path


def build_projects(kernels: dict[str, Kernel], root: Path,
                   mutants: dict[str, tuple[str, str, str]] | None = None, *,
                   unverified: frozenset[str] = frozenset()) -> dict[str, Built]:
    """Emit every kernel under ``root / name``, add the text mutants (name -> (kernel name, old
    text, new text): the first ``old`` of that kernel's emitted text becomes ``new``), build
    all with g++; one ``Built`` per name. ``unverified``: kernels that break the IR contract on
    purpose, emitted without the verifier (``emit_project(verify=False)``)."""
    projects = {n: emit_project(k, root / n, verify=n not in unverified)
                for n, k in kernels.items()}
    kernels = dict(kernels)
    for name, (base, old, new) in (mutants or {}).items():
        src = projects[base].kernel_source
        assert old in src, f"{old!r} not in the emitted text of {base}"
        bad = src.replace(old, new, 1)
        mut = emit_project(kernels[base], root / name)
        mut.kernel_cpp.write_text(bad)
        projects[name] = replace(mut, kernel_source=bad)
        kernels[name] = kernels[base]
    with ThreadPoolExecutor(max_workers=2) as pool:
        binaries = dict(zip(projects, pool.map(build_cpu, projects.values()), strict=True))
    return {n: Built(kernels[n], projects[n], binaries[n]) for n in projects}
