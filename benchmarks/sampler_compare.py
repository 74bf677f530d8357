"""Compare search strategies on one space where exhaustive search is affordable.

The space: GEMM 4096^3 fp16 over L1 tile (tm, tn, tk), L0 K step, L0/L0C copies and swizzle
width on 24 Cube cores with L1 double buffered (about 700 legal points). Exhaustive search gives
the best; each sampler (TPE, CMA-ES, random) then runs with a budget of 10% of the legal points
for 5 seeds. Reported per sampler: the gap of its best to the exhaustive best per seed, the
mean, the worst, the seed-to-seed spread, the seeds within 3%, and the points it needed to get
within 3%. All times are modelled. Every evaluation goes through the cache, so the guided runs
cost no lowering once the exhaustive run has filled it. Run::

    python -m ascendsched.benchmarks.sampler_compare [--jobs J] [--cache DIR] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

from ascendsched.autotune.cache import Cache
from ascendsched.autotune.executor import make_executor
from ascendsched.autotune.runner import Evaluator
from ascendsched.autotune.search import SAMPLERS, TuneResult, tune
from ascendsched.autotune.space import Space
from ascendsched.autotune.spaces import library_space

WITHIN = 0.03


def comparison_space() -> Space:
    sp = library_space("gemm", 4096, 4096, 4096)
    for k, v in (("cores", (24,)), ("l1", (2,)), ("swizzle_w", (1, 2, 4)),
                 ("swizzle_dir", ("m",))):
        sp = sp.restrict(k, v)
    return sp


def compare(space: Space, ev: Evaluator, *, seeds: int = 5, fraction: float = 0.10,
            storage: str | Path | None = None
            ) -> tuple[TuneResult, int, dict[str, list[TuneResult]]]:
    """The exhaustive result, the guided budget, and each sampler's result per seed."""
    exh = tune(space, strategy="exhaustive", evaluator=ev, default=False)
    legal = exh.legal_total or len(exh.trials)
    budget = max(1, math.floor(fraction * legal))
    runs = {s: [tune(space, strategy=s, budget=budget, seed=seed, evaluator=ev,
                     progress=False, default=False, storage=storage, warm_start=False)
                for seed in range(seeds)]
            for s in SAMPLERS}
    return exh, budget, runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "ascendsched"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--fraction", type=float, default=0.10, help="budget / legal points")
    ap.add_argument("--out", help="also write the Markdown table here")
    args = ap.parse_args(argv)
    cdir = Path(args.cache)
    space = comparison_space()
    ev = Evaluator(Cache(cdir / "tune.sqlite"), make_executor(args.jobs))
    t0 = time.perf_counter()
    exh, budget, runs = compare(space, ev, seeds=args.seeds, fraction=args.fraction,
                                storage=cdir / "studies.sqlite")
    legal = exh.legal_total or len(exh.trials)
    best = exh.best
    assert best is not None
    b0 = best.evaluation.time_s
    lines = [f"# Sampler comparison on {space.name} (modelled times)", "",
             f"Space: {space.size} points over "
             + ", ".join(f"{p.name} {list(p.choices)}" for p in space.params if len(p.choices))
             + f"; {legal} legal, {exh.checked - legal} pruned before lowering "
             + f"({', '.join(f'{n} {r}' for r, n in exh.pruned.items() if n)}).",
             f"Exhaustive: {len(exh.trials)} evaluations ({exh.fresh} run now, {exh.hits} from "
             f"the cache, {exh.fresh_cpu_s:.0f} CPU s), best {b0 * 1e6:.2f} us, "
             f"{best.evaluation.of_cube_peak:.1%} of the Cube peak:",
             "", "```", str(best.schedule), "```", "",
             f"Guided budget: {budget} distinct legal points ({budget / legal:.1%} of the "
             f"exhaustive evaluations), seeds 0..{args.seeds - 1}, batch 4.", "",
             "| sampler | gap to exhaustive best per seed | mean | worst | spread (max-min) | "
             f"seeds within {WITHIN:.0%} | points to reach {WITHIN:.0%} (median) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for sampler, results in runs.items():
        gaps, reach = [], []
        for r in results:
            gaps.append(r.best.evaluation.time_s / b0 - 1 if r.best else math.inf)
            hit = next((i + 1 for i, h in enumerate(r.history) if h <= b0 * (1 + WITHIN)), None)
            if hit is not None:
                reach.append(hit)
        ok = sum(g <= WITHIN for g in gaps)
        med = f"{statistics.median(reach):.0f}" if reach else "-"
        lines.append(f"| {sampler} | {', '.join(f'{g:+.1%}' for g in gaps)} | "
                     f"{statistics.mean(gaps):+.1%} | {max(gaps):+.1%} | "
                     f"{max(gaps) - min(gaps):.1%} | {ok}/{len(gaps)} | {med} |")
    lines += ["", f"Ran in {time.perf_counter() - t0:.0f} s; all figures modelled."]
    ev.close()
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
