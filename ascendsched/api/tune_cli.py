"""``ascendsched tune`` (command line, top layer): search a schedule space and print the best
schedules as Python code.

    ascendsched tune FILE.py:FUNCTION [--space SPEC ...] [--strategy S] [--budget N]
                     [--jobs J] [--seed S] [--top K] [--cache DIR] [--ray ADDRESS] [--out DIR]

FUNCTION returns an Algorithm, a schedule (its algorithm is tuned) or a Space. ``--space``
takes ``FILE.py:FUNCTION`` returning a Space, or ``PARAM=V1,V2`` to keep only those choices
of the default space's parameter (repeatable).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from ascendsched.errors import AscendSchedError


def cache_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("ASCENDSCHED_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "ascendsched"


def add_parser(sub: Any) -> None:
    from ascendsched.autotune.search import STRATEGIES

    t = sub.add_parser("tune", help="search schedules with the timing model; print the best "
                       "as Python code (modelled figures)")
    t.add_argument("target", help="FILE.py:FUNCTION returning an Algorithm, schedule or Space")
    t.add_argument("--space", action="append", default=[],
                   help="FILE.py:FUNCTION returning a Space, or PARAM=V1,V2 (repeatable)")
    t.add_argument("--strategy", default="auto", choices=STRATEGIES,
                   help="auto: exhaustive when the legal points fit the budget, else tpe")
    t.add_argument("--budget", type=int, default=64, help="distinct legal points to evaluate")
    t.add_argument("--jobs", type=int, default=None, help="worker processes (default: cores)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--batch", type=int, default=4, help="trials asked per round (fixed, so "
                   "results do not depend on --jobs)")
    t.add_argument("--top", type=int, default=3, help="schedules to print")
    t.add_argument("--cache", help="cache directory (default $ASCENDSCHED_CACHE_DIR or "
                   "~/.cache/ascendsched): tune.sqlite (evaluations), studies.sqlite (Optuna)")
    t.add_argument("--ray", metavar="ADDRESS", help="run evaluations on this Ray cluster "
                   "(needs ascendsched[ray])")
    t.add_argument("--out", help="write the best schedule's AscendC project to this directory")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.set_defaults(fn=cmd_tune)


def resolve_space(args: argparse.Namespace) -> tuple[Any, str]:
    """The space to search and the code that rebuilds its algorithm in printed schedules."""
    from ascendsched.algo.algorithm import Algorithm
    from ascendsched.api.cli import load
    from ascendsched.autotune.space import Space
    from ascendsched.autotune.spaces import default_space

    obj = load(args.target, accept=(Space,))
    func = args.target.rsplit(":", 1)[1]
    specs = list(args.space)
    space: Space | None = None
    if isinstance(obj, Space):
        space, code = obj, obj.algo_code
    elif isinstance(obj, Algorithm):
        code = f"{func}()"
    elif hasattr(obj, "algo") and hasattr(obj, "directives"):
        obj, code = obj.algo, f"{func}().algo"
    else:
        raise AscendSchedError(f"{args.target} returned {type(obj).__name__}; expected an "
                               "Algorithm, a Schedule, a GemmSchedule or a Space")
    for spec in [s for s in specs if "=" not in s]:
        space = load(spec, accept=(Space,))
        if not isinstance(space, Space):
            raise AscendSchedError(f"--space {spec} returned {type(space).__name__}, not a Space")
        code = space.algo_code if space.algo_code != "algo" else code
    if space is None:
        space = default_space(obj, algo_code=code)
    for spec in [s for s in specs if "=" in s]:
        name, vals = spec.split("=", 1)
        space = space.restrict(name.strip(), tuple(_value(v) for v in vals.split(",")))
    return space, code


def _value(v: str) -> Any:
    v = v.strip()
    try:
        return int(v)
    except ValueError:
        return v


def cmd_tune(args: argparse.Namespace) -> int:
    from ascendsched.autotune.cache import Cache
    from ascendsched.autotune.codegen import figures_comment, schedule_code
    from ascendsched.autotune.executor import make_executor
    from ascendsched.autotune.runner import Evaluator
    from ascendsched.autotune.search import tune

    space, code = resolve_space(args)
    cdir = cache_dir(args.cache)
    ex = make_executor(args.jobs, args.ray)
    ev = Evaluator(Cache(cdir / "tune.sqlite"), ex)
    print(f"space {space.name}: {space.size} points over "
          + ", ".join(f"{p.name} ({len(p.choices)})" for p in space.params))
    t0 = time.perf_counter()
    try:
        res = tune(space, strategy=args.strategy, budget=args.budget, seed=args.seed,
                   evaluator=ev, batch=args.batch, progress=not args.no_progress,
                   storage=cdir / "studies.sqlite")
    finally:
        ev.close()
    wall = time.perf_counter() - t0
    print(summary(res, wall, ex.jobs, cdir))
    ranked = res.ranked
    if not ranked:
        print("no schedule compiled; failures:\n" + "\n".join(
            f"  {t.evaluation.error}" for t in res.failures[:5]))
        return 1
    print(f"\ntop {min(args.top, len(ranked))} schedules (modelled, not measured); paste into "
          f"{args.target.rsplit(':', 1)[0]}:\n")
    for i, t in enumerate(ranked[:args.top], 1):
        print(f"# --- #{i}")
        print(schedule_code(t.schedule, code, func=f"tuned_{i}",
                            comment=figures_comment(t.evaluation, res.speedup(t)),
                            with_imports=i == 1))
    if args.out:
        from ascendsched.api.compile import compile_kernel

        k, proj = compile_kernel(ranked[0].schedule, Path(args.out))
        print(f"wrote {proj.out_dir}: the best schedule's project ({k.block_dim} blocks)")
    return 0


def summary(res: Any, wall: float, jobs: int, cdir: Path) -> str:
    pr = ", ".join(f"{n} {r}" for r, n in res.pruned.items() if n) or "none"
    lines = [f"strategy {res.strategy}, budget {res.budget}, seed {res.seed}: checked "
             f"{res.checked} points, pruned before lowering: {pr}"
             + (f"; {res.legal_total} legal in the space" if res.legal_total is not None else ""),
             f"evaluations: {res.fresh} run, {res.hits} from the cache ({cdir / 'tune.sqlite'})"
             f", {len(res.failures)} failed to compile; {wall:.1f} s wall on {jobs} worker(s)"
             + (f" ({res.fresh / wall / jobs:.2f} evaluations/s per worker; "
                f"{res.fresh_cpu_s / res.fresh:.2f} CPU s per evaluation)" if res.fresh else "")]
    d = res.default
    if d is not None and d.evaluation.ok:
        e = d.evaluation
        lines.append(f"default schedule: modelled {e.time_s * 1e6:.2f} us, {e.of_peak:.1%} of the "
                     f"roofline ({e.limit}), critical pipe {e.critical_pipe}")
    return "\n".join(lines)
