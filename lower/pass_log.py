"""``PassLog``: the record of one compilation's steps (Halide's LoweringLogger, TVM's DumpIR).

``log(name, result)`` returns ``result`` unchanged and keeps it under ``name`` with the wall
and CPU time since the previous step. On request it prints the result, or "(unchanged)" when
the step gave back the kernel it was handed (a verifier, a pass with nothing to do), and writes
``NNN_<step>.txt`` to a dump directory. A step's text is made only when printed, dumped or asked
for (``text``), so a silent log costs the timing only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ascendsched.lower.ir import Kernel

T = TypeVar("T")


@dataclass
class PassLog:
    """Records each step: its result, its wall and CPU seconds; optional printing and dumping."""

    verbose: bool = False
    dump_dir: Path | None = None
    steps: list[tuple[str, float, float]] = field(default_factory=list)  # (name, wall, cpu s)
    results: dict[str, Any] = field(default_factory=dict)
    _unchanged: set[str] = field(default_factory=set)
    _shows: dict[str, Callable[[Any], str]] = field(default_factory=dict)
    _last_kernel: Kernel | None = None
    _t0: float = field(default_factory=time.perf_counter)
    _c0: float = field(default_factory=time.process_time)

    def __call__(self, name: str, result: T, *, show: Callable[[T], str] | None = None) -> T:
        """Record step ``name``'s ``result`` and return it. ``show`` renders it for printing
        and dumps (default ``str``)."""
        wall, cpu = time.perf_counter() - self._t0, time.process_time() - self._c0
        self.steps.append((name, wall, cpu))
        self.results[name] = result
        if show is not None:
            self._shows[name] = show
        k = kernel_of(result)
        if k is not None:
            if k is self._last_kernel:
                self._unchanged.add(name)
            self._last_kernel = k
        if self.verbose:
            print(f"--- {name} ({wall * 1e3:.1f} ms)\n{self.text(name)}")
        if self.dump_dir is not None:
            self.dump_dir.mkdir(parents=True, exist_ok=True)
            fname = f"{len(self.steps):03d}_{name.replace(' ', '_')}.txt"
            (self.dump_dir / fname).write_text(self.text(name) + "\n")
        self._t0, self._c0 = time.perf_counter(), time.process_time()
        return result

    def text(self, name: str) -> str:
        """The printed result of step ``name`` ("(unchanged)" when it returned its input)."""
        if name in self._unchanged:
            return "(unchanged)"
        return self._shows.get(name, str)(self.results[name])

    def cpu(self) -> dict[str, float]:
        """CPU seconds per step."""
        return {n: c for n, _, c in self.steps}

    def timings(self) -> str:
        return "\n".join(f"{n:>22}: {t * 1e3:8.1f} ms ({c * 1e3:.1f} ms CPU)"
                         for n, t, c in self.steps)


def kernel_of(result: object) -> Kernel | None:
    """The kernel a step's result is or carries (a sync step's record has ``.kernel``)."""
    if isinstance(result, Kernel):
        return result
    k = getattr(result, "kernel", None)
    return k if isinstance(k, Kernel) else None
