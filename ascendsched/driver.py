"""Top-level driver: compile a scheduled algorithm to an AscendC project, and check it.

``check`` runs the verification ladder of DESIGN.md and returns one verdict per rung:
IR execution vs numpy, race/deadlock check of the IR trace, the emitted C++ built with g++
against the host runtime and run, its outputs vs numpy, its trace vs the IR trace, and the race
check of the C++ trace.

A kernel larger than the :class:`CheckBudget` (a GEMM 4096^3, a 16384 x 16384 RMSNorm) cannot be
executed here. ``check`` then lowers and emits the full kernel (what ships; the C++ is built with
g++), builds its reduced instance (``schedule/reduce.py``: same tiles, tails, loop structure,
fewer tiles and cores), requires the two kernels to be equal up to sizes
(``lower/compare.py``; a difference is a FAIL), and runs the rest of the ladder on the reduced
instance. Those verdicts name the shape and cores they ran on.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ascendsched.algo.algorithm import Algorithm
from ascendsched.algo.check import children
from ascendsched.algo.evaluate import evaluate
from ascendsched.algo.expr import Expr, Load, Tensor, Unary
from ascendsched.algo.gemm_spec import gemm_error
from ascendsched.dtypes import store
from ascendsched.emit_ascendc.check import build_cpu, run_cpu
from ascendsched.emit_ascendc.project import EmittedProject, emit_project
from ascendsched.errors import AscendSchedError, InputError
from ascendsched.lower.allocate_event_ids import allocate_event_ids
from ascendsched.lower.compare import structural_diff
from ascendsched.lower.ir import For, Instr, Kernel, Stmt, iter_instrs
from ascendsched.lower.pass_log import PassLog
from ascendsched.lower.pipeline import lower
from ascendsched.lower.remove_redundant_sync import channels_of, drop_channels
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.lower.sync_ir import Sync
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.reduce import describe, reduce_instance
from ascendsched.schedule.schedule import Schedule
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel
from ascendsched.sim.trace import Trace, traces_match
from ascendsched.target import DEFAULT_TARGET, Target

# Tolerances of the numeric checks (reductions reassociate; elementwise ops are correctly
# rounded). Outputs computed through an approximate instruction (target.approx_rel_error:
# Rsqrt, Reciprocal) add that instruction's documented error, see ``approx_rtol``.
RTOL = {"float16": 4e-3, "bfloat16": 2e-2, "float32": 2e-5}
ATOL = {"float16": 2e-3, "bfloat16": 2e-2, "float32": 1e-5}


def approx_rtol(algo: Algorithm, name: str, target: Target = DEFAULT_TARGET) -> float:
    """The relative error the approximate vector instructions add to output ``name``: the sum,
    over every occurrence on its expression tree (loads of producers included, once per load),
    of ``target.approx_rel_error[(op, dtype)]``. First order: products, quotients and
    same-sign sums pass a relative error on unchanged (rsqrt halves it); a difference of close
    values can amplify it, which this bound does not cover."""
    memo: dict[str, float] = {}

    from ascendsched.lower.expand_math import expand_math

    def of_tensor(t: Tensor) -> float:
        if t.op is None:
            return 0.0
        if t.name not in memo:  # as lowered: tanh, sigmoid, pow in the instructions they become
            memo[t.name] = of_expr(expand_math(t.op.body, target))
        return memo[t.name]

    def of_expr(e: Expr) -> float:
        own = 0.0
        if isinstance(e, Unary):
            own = target.approx_rel_error.get((e.op, e.dtype.name), 0.0)
        elif isinstance(e, Load):
            own = of_tensor(e.tensor)
        return own + sum(of_expr(c) for c in children(e))

    (out,) = [t for t in algo.outputs if t.name == name]
    return of_tensor(out)


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


def compile_kernel(obj: Schedule | GemmSchedule | Algorithm, out_dir: Path, *,
                   log: PassLog | None = None) -> tuple[Kernel, EmittedProject]:
    """Lower and emit the AscendC project for ``obj`` into ``out_dir``: the steps of
    ``lower/pipeline.py``, then ``emit`` (its text in the log: the kernel's C++)."""
    log = log if log is not None else PassLog()
    k = lower(schedule_for(obj), log=log)
    proj = log("emit", emit_project(k, Path(out_dir)), show=lambda p: p.kernel_source)
    return k, proj


def random_inputs(algo: Algorithm, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for t in algo.inputs:
        shape = tuple(int(s) for s in t.shape)
        if t.dtype.is_float:
            out[t.name] = rng.uniform(-2, 2, shape).astype(np.float32).astype(t.dtype.np)
        else:
            out[t.name] = rng.integers(-100, 100, shape).astype(t.dtype.np)
    return out


def compare(got: np.ndarray, want: np.ndarray, dtype: str, approx: float = 0.0) -> tuple[bool, str]:
    """``got`` vs the reference within the tolerance of ``dtype`` plus ``approx`` (relative,
    from :func:`approx_rtol`)."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    if dtype in RTOL:
        # an approximate instruction's error is relative to its own value, which a later sum
        # or difference may leave larger than the output element (tanh = 1 - 2 * reciprocal
        # near 0): as an absolute term, it is taken relative to the output's largest value
        finite = np.abs(w[np.isfinite(w)])
        scale = float(finite.max()) if finite.size else 0.0
        ok = bool(np.allclose(g, w, rtol=RTOL[dtype] + approx,
                              atol=ATOL[dtype] + approx * scale, equal_nan=True))
    else:
        ok = bool(np.array_equal(g, w))
    with np.errstate(invalid="ignore"):
        diff = np.abs(g - w)
    diff = diff[~np.isnan(diff)]  # NaN == NaN and inf == inf leave NaN here
    err = float(diff.max()) if diff.size else 0.0
    nan = int(np.count_nonzero(np.isnan(g) != np.isnan(w)))
    return ok, f"max abs error {err:.3g}" + (f", {nan} elements NaN in only one of the two"
                                             if nan else "")


def user_inputs(algo: Algorithm, inputs: Mapping[str, object]) -> dict[str, np.ndarray]:
    """``inputs`` checked against ``algo``'s inputs (names, shapes, numbers) and converted to
    their dtypes' storage. Any values are welcome: NaN, inf, rows of zeros."""
    if not isinstance(inputs, Mapping):
        raise InputError(f"inputs must map input names to arrays, e.g. {{'x': x}}, got "
                         f"{type(inputs).__name__}")
    want = {t.name: t for t in algo.inputs}
    missing, extra = sorted(set(want) - set(inputs)), sorted(set(inputs) - set(want))
    if missing or extra:
        raise InputError(
            f"inputs of '{algo.name}' are {', '.join(sorted(want))}; "
            + (f"missing: {', '.join(missing)}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"unknown: {', '.join(map(str, extra))}" if extra else ""))
    out = {}
    for name, t in want.items():
        arr = np.asarray(inputs[name])
        shape = tuple(int(s) for s in t.shape)
        if arr.dtype.kind not in "biuf":
            raise InputError(f"input '{name}' holds {arr.dtype} values; give numbers "
                             f"({t.dtype}{list(shape)})")
        if arr.shape != shape:
            raise InputError(f"input '{name}' has shape {list(arr.shape)} but '{algo.name}' "
                             f"declares {t.dtype}{list(shape)}; reshape it or build the "
                             f"algorithm with that shape")
        if not t.dtype.is_float and arr.dtype.kind == "f" and not (
                np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
            raise InputError(f"input '{name}' is {t.dtype} but holds non-integer values; round "
                             f"them first (np.rint(a).astype('{t.dtype.np}'))")
        out[name] = store(t.dtype, arr)
    return out


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
    ``budget`` (None)."""
    sched = schedule_for(obj)
    given = user_inputs(sched.algo, inputs) if inputs is not None else None
    out: list[Verdict] = []
    t0 = time.perf_counter()
    k = kernel if kernel is not None else lower(sched)
    took = "lowered by the caller" if kernel is not None else \
        f"in {time.perf_counter() - t0:.2f} s"
    out.append(Verdict("lower", True, f"{sum(1 for _ in str(k).splitlines())} IR lines {took}"))
    too_big = budget.exceeded_by(k)
    if given is not None or not (too_big if reduce is None else reduce):
        return out + _ladder(sched, k, work_dir, sanitize, seed, cpp, "", given, cpp_timeout)
    tmp = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix=f"ascendsched_{k.name}_"))
    out.append(_emit_full(k, tmp / "full", sanitize, cpp))
    t0 = time.perf_counter()
    red = reduce_instance(sched)
    kr = k if red.is_full else lower(red.reduced)
    why = f"; full kernel: {too_big}" if too_big else ""
    out.append(Verdict("reduced instance", True, f"{red}, lowered in "
                       f"{time.perf_counter() - t0:.2f} s{why}"))
    diff = structural_diff(k, kr)
    out.append(Verdict("full IR == reduced IR", diff is None, diff or "equal up to loop "
                       "bounds, GM offsets and strides, guard constants and block count"))
    return out + _ladder(red.reduced, kr, tmp / "reduced", sanitize, seed, cpp,
                         describe(red.reduced), None, cpp_timeout)


def _emit_full(k: Kernel, out_dir: Path, sanitize: bool, cpp: bool) -> Verdict:
    """The full kernel's AscendC project, g++-built against the host runtime when ``cpp``
    (too big to run here; its structure is checked against the reduced instance)."""
    t0 = time.perf_counter()
    try:
        proj = emit_project(k, out_dir)
        if not cpp:
            return Verdict("emit full kernel", True, f"{proj.kernel_cpp} ({k.block_dim} blocks)")
        binary = build_cpu(proj, sanitize=sanitize)
    except AscendSchedError as e:
        return Verdict("emit and build full kernel", False, str(e).splitlines()[0])
    return Verdict("g++ build of full kernel", True,
                   f"{binary.name} in {time.perf_counter() - t0:.1f} s ({k.block_dim} blocks)")


def _ladder(sched: Schedule | GemmSchedule, k: Kernel, work_dir: Path | None, sanitize: bool,
            seed: int, cpp: bool, instance: str, given: dict[str, np.ndarray] | None,
            cpp_timeout: float) -> list[Verdict]:
    """The executing rungs on ``k`` (the lowered ``sched``) with the ``given`` inputs (None:
    random ones from ``seed``); ``instance`` goes on each verdict."""
    algo = sched.algo
    out: list[Verdict] = []

    def verdict(check: str, ok: bool, detail: str) -> None:
        out.append(Verdict(check, ok, detail, instance))

    inputs = given if given is not None else random_inputs(algo, seed)
    if isinstance(sched, GemmSchedule):
        # numpy matmul (evaluate() would build the M x N x K product) and a K-scaled bound
        spec = sched.spec

        def against_ref(name: str, got: np.ndarray, dtype: str) -> tuple[bool, str]:
            return gemm_error(spec, inputs, got)
    else:
        ref = evaluate(algo, inputs)

        def against_ref(name: str, got: np.ndarray, dtype: str) -> tuple[bool, str]:
            return compare(got, ref[name], dtype, approx_rtol(algo, name, k.target))
    sim = run_kernel(k, inputs, trace=True)
    for o in algo.outputs:
        ok, msg = against_ref(o.name, sim.outputs[o.name], o.dtype.name)
        verdict(f"IR execution == numpy ({o.name})", ok, msg)
    rep = check_trace(sim.trace, k.target)
    verdict("IR trace race check", rep.ok, rep.summary())
    if not cpp:
        return out
    tmp = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix=f"ascendsched_{k.name}_"))
    try:
        t0 = time.perf_counter()
        proj = emit_project(k, tmp)
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


@dataclass(frozen=True)
class SyncMinimality:
    """Each inserted sync removed in turn: ``needed`` ones make the checker report a race or a
    flag error; ``removable`` lists the others (the target is none)."""

    kernel: str
    needed: int
    removable: tuple[str, ...]

    def __str__(self) -> str:
        return (f"{self.kernel}: {self.needed} syncs, each needed; {len(self.removable)} "
                f"removable" + "".join(f"\n  removable: {r}" for r in self.removable))


def sync_minimality(obj: Schedule | GemmSchedule | Algorithm, seed: int = 0) -> SyncMinimality:
    """Drop each sync channel of the lowered ``obj`` (a set/wait pair with its prologue and
    epilogue, or a barrier) and run the trace checker on the result."""
    sched = schedule_for(obj)
    log = PassLog()
    lower(sched, log=log, stop_after="remove redundant syncs")
    pruned = log.results["remove redundant syncs"].kernel  # each sync still has its channel
    target = pruned.target
    inputs = random_inputs(sched.algo, seed)
    removable: list[str] = []
    chans = channels_of(pruned)
    for ch in chans:
        trial = allocate_event_ids(drop_channels(pruned, frozenset([ch])), target, verify=False)
        rep = check_trace(run_kernel(trial, inputs, trace=True).trace, target)
        if not rep.races and not rep.flag_errors and not rep.deadlocks:
            removable.append(_channel_text(pruned, ch))
    return SyncMinimality(pruned.name, len(chans) - len(removable), tuple(removable))


def _channel_text(k: Kernel, ch: int) -> str:
    for p in k.programs:
        for ins, _ in iter_instrs(p.body):
            if isinstance(ins, Sync) and ins.channel == ch:
                return str(ins)
    return f"channel {ch}"
