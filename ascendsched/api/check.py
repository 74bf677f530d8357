"""``check``: the verification ladder of DESIGN.md on the CPU, one verdict per rung.

The rungs: IR execution vs numpy, race/deadlock check of the IR trace, the emitted C++ built
with g++ against the host runtime and run, its outputs vs numpy, its trace vs the IR trace, and
the race check of the C++ trace. Inputs and tolerances come from ``numerics.py``.

A kernel larger than the :class:`CheckBudget` (a GEMM 4096^3, a 16384 x 16384 RMSNorm) cannot be
executed here. ``check`` then lowers and emits the full kernel (what ships; the C++ is built with
g++), builds its reduced instance (``schedule/reduce.py``: same tiles, tails, loop structure,
fewer tiles and cores), requires the two kernels to be equal up to sizes
(``lower/compare.py``; a difference is a FAIL), and runs the rest of the ladder on the reduced
instance. Those verdicts name the shape and cores they ran on.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ascendsched.algo.algorithm import Algorithm
from ascendsched.algo.evaluate import evaluate
from ascendsched.algo.gemm_spec import gemm_error
from ascendsched.api.numerics import (
    approx_rtol,
    compare,
    random_inputs,
    summation_atol,
    user_inputs,
    vector_epilogue_error,
)
from ascendsched.emit_ascendc.check import build_cpu, run_cpu
from ascendsched.emit_ascendc.project import emit_project
from ascendsched.errors import AscendSchedError
from ascendsched.lower.compare import structural_diff
from ascendsched.lower.ir import For, Instr, Kernel, Stmt
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.reduce import describe, reduce_instance
from ascendsched.schedule.schedule import Schedule
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel
from ascendsched.sim.trace import Trace, traces_match


@dataclass(frozen=True)
class Verdict:
    """One rung of the ladder; ``instance`` names the reduced shape it ran on ("": the full
    kernel itself)."""

    check: str
    ok: bool
    detail: str
    instance: str = ""

    def __str__(self) -> str:
        on = f"  [on {self.instance}]" if self.instance else ""
        return f"{'PASS' if self.ok else 'FAIL'}  {self.check:<28} {self.detail}{on}"


@dataclass(frozen=True)
class CheckBudget:
    """The largest kernel ``check`` executes at full size; a larger one is checked through its
    reduced instance.

    ``instrs``: dynamic instructions over all blocks, estimated from the IR with every loop at
    its extent and every guard taken. The IR simulator with its trace runs about 5000 to 10000
    instructions a second here (GEMM 1024^3, 15 k instructions: 2.9 s; RMSNorm 256 x 4096,
    54 k: 6.2 s), the trace checker and the C++ run add as much again, so 20 k keeps a full
    check within seconds; every library kernel and hand schedule of the tests is below 3 k.
    ``gm_bytes``: the GM tensors' bytes; numpy reference, simulator and C++ run each hold them.
    """

    instrs: int = 20_000
    gm_bytes: int = 64 << 20

    def exceeded_by(self, k: Kernel) -> str | None:
        """Why ``k`` is too big to execute here, or None."""
        n, gm = estimated_instrs(k), sum(t.nbytes for t in k.params)
        if n > self.instrs:
            return f"about {n:,} dynamic instructions > {self.instrs:,}"
        if gm > self.gm_bytes:
            return f"{gm / 2**20:.0f} MiB of GM tensors > {self.gm_bytes / 2**20:.0f} MiB"
        return None


DEFAULT_BUDGET = CheckBudget()


def estimated_instrs(k: Kernel) -> int:
    """Dynamic instructions of ``k`` over all blocks with every loop at its extent and every
    ``If`` taken (an upper bound)."""

    def count(body: tuple[Stmt, ...]) -> int:
        n = 0
        for s in body:
            if isinstance(s, Instr):
                n += 1
            else:
                n += count(s.body) * (s.extent if isinstance(s, For) else 1)
        return n

    return k.block_dim * sum(count(p.body) for p in k.programs)


def check(obj: Schedule | GemmSchedule | Algorithm, *, work_dir: Path | None = None, sanitize: bool = True,
          seed: int = 0, cpp: bool = True, kernel: Kernel | None = None,
          inputs: Mapping[str, object] | None = None, cpp_timeout: float = 300.0,
          reduce: bool | None = None, budget: CheckBudget = DEFAULT_BUDGET) -> list[Verdict]:
    """Run every rung of the verification ladder; one Verdict per check.

    ``kernel``: the already lowered kernel of ``obj`` (skips lowering again). ``inputs``: the
    input arrays by name (default: uniform random in [-2, 2] from ``seed``; given inputs are
    for the full shape, so the ladder then runs at full size). ``cpp_timeout``: seconds the
    emitted C++ may run (a :class:`KernelTimeoutError` verdict past it). ``reduce``: check
    through the reduced instance (True), at full size (False), or when the kernel exceeds
    ``budget`` (None). ``work_dir``: where the emitted projects go (default: a temporary
    directory, removed when the checks are done)."""
    with contextlib.ExitStack() as stack:
        work_dir = Path(work_dir) if work_dir is not None else Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="ascendsched_check_")))
        sched = schedule_for(obj)
        given = user_inputs(sched.algo, inputs) if inputs is not None else None
        out: list[Verdict] = []
        t0 = time.perf_counter()
        k = kernel if kernel is not None else lower(sched)
        took = "lowered by the caller" if kernel is not None else \
            f"in {time.perf_counter() - t0:.2f} s"
        lines = sum(1 for _ in str(k).splitlines())
        out.append(Verdict("lower", True, f"{lines} IR lines {took}"))
        too_big = budget.exceeded_by(k)
        if given is not None or not (too_big if reduce is None else reduce):
            return out + _ladder(sched, k, work_dir, sanitize, seed, cpp, "", given, cpp_timeout)
        out.append(_emit_full(k, work_dir / "full", sanitize, cpp))
        t0 = time.perf_counter()
        red = reduce_instance(sched)
        kr = k if red.is_full else lower(red.reduced)
        why = f"; full kernel: {too_big}" if too_big else ""
        out.append(Verdict("reduced instance", True, f"{red}, lowered in "
                           f"{time.perf_counter() - t0:.2f} s{why}"))
        diff = structural_diff(k, kr)
        out.append(Verdict("full IR == reduced IR", diff is None, diff or "equal up to loop "
                           "bounds, GM offsets and strides, guard constants and block count"))
        return out + _ladder(red.reduced, kr, work_dir / "reduced", sanitize, seed, cpp,
                             describe(red.reduced), None, cpp_timeout)


def _emit_full(k: Kernel, out_dir: Path, sanitize: bool, cpp: bool) -> Verdict:
    """The full kernel's AscendC project, g++-built against the host runtime when ``cpp``
    (too big to run here; its structure is checked against the reduced instance)."""
    t0 = time.perf_counter()
    try:
        proj = emit_project(k, out_dir)
        if not cpp:
            return Verdict("emit full kernel", True,
                           f"{proj.kernel_cpp.name} ({k.block_dim} blocks)")
        binary = build_cpu(proj, sanitize=sanitize)
    except AscendSchedError as e:
        return Verdict("emit and build full kernel", False, str(e).splitlines()[0])
    return Verdict("g++ build of full kernel", True,
                   f"{binary.name} in {time.perf_counter() - t0:.1f} s ({k.block_dim} blocks)")


def _ladder(sched: Schedule | GemmSchedule, k: Kernel, work_dir: Path, sanitize: bool,
            seed: int, cpp: bool, instance: str, given: dict[str, np.ndarray] | None,
            cpp_timeout: float) -> list[Verdict]:
    """The executing rungs on ``k`` (the lowered ``sched``) with the ``given`` inputs (None:
    random ones from ``seed``); ``instance`` goes on each verdict."""
    algo = sched.algo
    out: list[Verdict] = []

    def verdict(check: str, ok: bool, detail: str) -> None:
        out.append(Verdict(check, ok, detail, instance))

    inputs = given if given is not None else random_inputs(algo, seed)
    cube = sched.cube
    if cube is not None and cube.vector_epilogue is not None:
        spec, epi = cube.spec, cube.vector_epilogue

        def against_ref(name: str, got: np.ndarray, dtype: str) -> tuple[bool, str]:
            return vector_epilogue_error(spec, epi, inputs, got, k.target)
    elif cube is not None:
        # numpy matmul (evaluate() would build the M x N x K product) and a K-scaled bound
        spec = cube.spec

        def against_ref(name: str, got: np.ndarray, dtype: str) -> tuple[bool, str]:
            return gemm_error(spec, inputs, got)
    else:
        ref = evaluate(algo, inputs)
        sums = {o.name: summation_atol(algo, o.name, inputs) for o in algo.outputs}

        def against_ref(name: str, got: np.ndarray, dtype: str) -> tuple[bool, str]:
            return compare(got, ref[name], dtype, approx_rtol(algo, name, k.target),
                           sums[name])
    sim = run_kernel(k, inputs, trace=True)
    for o in algo.outputs:
        ok, msg = against_ref(o.name, sim.outputs[o.name], o.dtype.name)
        verdict(f"IR execution == numpy ({o.name})", ok, msg)
    rep = check_trace(sim.trace, k.target)
    verdict("IR trace race check", rep.ok, rep.summary())
    if not cpp:
        return out
    try:
        t0 = time.perf_counter()
        proj = emit_project(k, work_dir)
        binary = build_cpu(proj, sanitize=sanitize)
        verdict("g++ build of emitted C++", True,
                f"{binary.name} in {time.perf_counter() - t0:.1f} s")
        run = run_cpu(binary, k, inputs, timeout=cpp_timeout)
    except AscendSchedError as e:
        verdict("emitted C++ build and run", False, str(e).splitlines()[0])
        return out
    for o in algo.outputs:
        ok, msg = against_ref(o.name, run.outputs[o.name], o.dtype.name)
        verdict(f"C++ run == numpy ({o.name})", ok, msg)
    cpp_trace = Trace.from_jsonl(run.trace_jsonl)
    diffs = traces_match(sim.trace, cpp_trace)
    verdict("C++ trace == IR trace", not diffs,
            f"{len(cpp_trace.events)} events" if not diffs else diffs[0])
    rep = check_trace(cpp_trace, k.target)
    verdict("C++ trace race check", rep.ok, rep.summary())
    return out
