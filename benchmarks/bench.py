"""``ascendsched bench``: tune every kernel of a suite, then write the Markdown report.

Each kernel's default space is searched (``autotune.tune``, strategy ``auto``) with the default
schedule evaluated alongside; the tuned and default schedules are lowered once more to record a
timeline. The one-tile kernels of ``benchmarks/sync_report.py`` are lowered for the sync and UB
comparison with bishengir. Evaluations go through the cache in ``OUT/cache`` (or ``--cache``),
so rerunning the same command reproduces the report from the cache without lowering again.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascendsched.autotune.search import TuneResult, tune
from ascendsched.benchmarks.suite import SUITES, Case, suite


@dataclass(frozen=True)
class KernelRow:
    case: Case
    result: TuneResult
    timeline: str | None  # PNG path relative to the report, of the tuned schedule
    wall_s: float


@dataclass(frozen=True)
class SyncRow:
    """One-tile kernel (sync_report.py's shapes): ours vs bishengir 1.2.0 (per tile)."""

    kernel: str
    sets: int
    barriers: int
    pipe_all: int
    ub_kb: float
    ref: tuple[int, int, int, int]  # bishengir: pairs, barriers, PIPE_ALL, UB KB


@dataclass(frozen=True)
class BenchData:
    suite: str
    command: str
    rows: tuple[KernelRow, ...]
    sync_rows: tuple[SyncRow, ...]
    model_version: str
    parameters: str
    target: str
    seconds: float
    jobs: int


def add_parser(sub: Any) -> None:
    from ascendsched.autotune.search import STRATEGIES

    b = sub.add_parser("bench", help="tune a benchmark suite and write a Markdown report with "
                       "plots (modelled figures)")
    b.add_argument("--suite", default="llm", choices=sorted(SUITES))
    b.add_argument("--out", required=True, help="report directory (report.md, img/, cache/)")
    b.add_argument("--budget", type=int, default=48, help="distinct legal points per kernel")
    b.add_argument("--strategy", default="auto", choices=STRATEGIES)
    b.add_argument("--jobs", type=int, default=None, help="worker processes (default: cores)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--only", help="only kernels whose label contains this")
    b.add_argument("--cache", help="cache directory (default OUT/cache)")
    b.add_argument("--ray", metavar="ADDRESS", help="evaluate on this Ray cluster")
    b.add_argument("--no-progress", action="store_true")
    b.set_defaults(fn=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    from ascendsched.benchmarks.report import write_report

    out = Path(args.out)
    cases = [c for c in suite(args.suite) if not args.only or args.only in c.label]
    data = run_bench(cases, out, suite_name=args.suite, budget=args.budget,
                     strategy=args.strategy, jobs=args.jobs, seed=args.seed,
                     cache=Path(args.cache) if args.cache else None, ray=args.ray,
                     progress=not args.no_progress,
                     command="ascendsched " + " ".join(sys.argv[1:]))
    path = write_report(data, out)
    print(f"wrote {path} ({len(data.rows)} kernels, {data.seconds:.0f} s)")
    return 0


def run_bench(cases: list[Case], out: Path, *, suite_name: str = "llm", budget: int = 48,
              strategy: str = "auto", jobs: int | None = None, seed: int = 0,
              cache: Path | None = None, ray: str | None = None, progress: bool = True,
              command: str = "", timelines: bool = True) -> BenchData:
    from ascendsched.autotune.cache import Cache
    from ascendsched.autotune.evaluate import model_version
    from ascendsched.autotune.executor import make_executor
    from ascendsched.autotune.runner import Evaluator
    from ascendsched.sim.timing import parameter_line
    from ascendsched.target import DEFAULT_TARGET

    t0 = time.perf_counter()
    cdir = cache or out / "cache"
    (out / "img").mkdir(parents=True, exist_ok=True)
    ex = make_executor(jobs, ray)
    ev = Evaluator(Cache(cdir / "tune.sqlite"), ex)
    rows = []
    try:
        for case in cases:
            t1 = time.perf_counter()
            res = tune(case.space(), strategy=strategy, budget=budget, seed=seed, evaluator=ev,
                       progress=progress, storage=cdir / "studies.sqlite")
            best = res.best
            tl = None
            if timelines and best is not None:
                tl = _timeline(best.schedule, out / "img" / f"timeline_{case.slug}.png")
            rows.append(KernelRow(case, res, tl, time.perf_counter() - t1))
            if progress:
                print(_line(rows[-1]), file=sys.stderr, flush=True)
    finally:
        ev.close()
    return BenchData(suite_name, command, tuple(rows), tuple(sync_rows()), model_version(),
                     parameter_line(DEFAULT_TARGET.costs), DEFAULT_TARGET.name,
                     time.perf_counter() - t0, ex.jobs)


def _line(r: KernelRow) -> str:
    res = r.result
    b, d = res.best, res.default
    if b is None:
        return f"{r.case.label}: no schedule compiled"
    e = b.evaluation
    dd = f", default {d.evaluation.time_s * 1e6:.1f} us" if d and d.evaluation.ok else ""
    return (f"{r.case.label}: tuned {e.time_s * 1e6:.1f} us (modelled, {e.of_peak:.0%} of the "
            f"roofline){dd}, {res.fresh} evaluated, {res.hits} cached, {r.wall_s:.0f} s")


def _timeline(sched: Any, path: Path) -> str:
    from ascendsched.lower.pipeline import lower
    from ascendsched.sim.timeline import write_png
    from ascendsched.sim.timing import model_time

    write_png(model_time(lower(sched), record=True), path)
    return f"img/{path.name}"


def sync_rows() -> list[SyncRow]:
    """sync_report.py's one-tile kernels: executed syncs and UB peak, and bishengir's."""
    from ascendsched.benchmarks.sync_report import BISHENGIR, one_tile
    from ascendsched.lower.pass_log import PassLog
    from ascendsched.lower.pipeline import lower
    from ascendsched.lower.sync_stats import sync_stats
    from ascendsched.target import Scope

    out = []
    for name, ref in BISHENGIR.items():
        log = PassLog()
        k = lower(one_tile(name), log=log)
        st = sync_stats(k)
        out.append(SyncRow(name, int(st["sets"]), int(st["barriers"]), int(st["pipe_all"]),
                           log.results["memory plan"].peak(Scope.UB) / 1024, ref))
    return out
