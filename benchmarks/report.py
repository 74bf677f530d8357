"""The benchmark report: ``report.md`` with its PNG plots in ``img/``, from a BenchData.

Every modelled figure is labelled modelled; compile times are measured on the machine that ran
the command. The report names the command, the model version and the cost parameters, so the
numbers can be reproduced from the command and the cache.
"""

from __future__ import annotations

from pathlib import Path

from ascendsched.autotune.codegen import figures_comment, library_imports, schedule_code
from ascendsched.benchmarks import plots
from ascendsched.benchmarks.bench import BenchData, KernelRow

TARGET_SHARE = 0.90  # issue 14: tuned GEMM >= 90% of Cube peak, vector >= 90% of HBM roofline


def write_report(data: BenchData, out: Path) -> Path:
    from ascendsched.target import DEFAULT_TARGET

    img = out / "img"
    img.mkdir(parents=True, exist_ok=True)
    rows = list(data.rows)
    pics = [
        ("Modelled time against the roofline", plots.modelled_vs_roofline(
            rows, img / "modelled_vs_roofline.png")),
        ("Tuned against default", plots.tuned_vs_default(rows, img / "tuned_vs_default.png")),
        ("Roofline chart", plots.roofline_chart(rows, img / "roofline.png", DEFAULT_TARGET)),
        ("Per-pipe utilisation", plots.utilisation(rows, img / "utilisation.png")),
        ("Search progress", plots.convergence(rows, img / "search.png")),
        ("Compile times", plots.compile_times(rows, img / "compile_times.png")),
        ("Sync counts and UB use", plots.syncs(rows, data.sync_rows, img / "syncs.png")),
    ]
    md = [f"# ascendsched benchmark report: suite `{data.suite}` on {data.target}", "",
          "**All times, ratios, utilisations and speed-ups below are modelled** (the timing "
          "model of `sim/timing.py`, calibrated against published 910B measurements in "
          "`benchmarks/calibration/`), **not measured on hardware**. Compile times are CPU "
          "seconds measured on the machine that ran the command.", "",
          f"- command: `{data.command}`",
          f"- model version: `{data.model_version}` (cache key component; the evaluation cache "
          f"is in the report's `cache/` unless `--cache` was given)",
          f"- cost parameters: {data.parameters}",
          f"- {len(rows)} kernels in {data.seconds:.0f} s on {data.jobs} worker(s)", "",
          "## Summary (modelled)", "", *summary_table(rows), "", *targets(rows), ""]
    md += ["## Evaluation cost (measured CPU time of lowering + timing model)", "",
           *cost_table(rows), ""]
    for title, p in pics:
        md += [f"## {title}", "", f"![{title}](img/{p.name})", ""]
    md += ["## Timelines of the tuned schedules (modelled)", "",
           "Gantt charts of the first cores' pipes (`sim/timeline.py`); a Perfetto trace of any "
           "schedule: `ascendsched time FILE.py:FUNCTION --timeline out.json`.", ""]
    for r in rows:
        if r.timeline:
            md += [f"### {r.case.label}", "", f"![timeline {r.case.label}]({r.timeline})", ""]
    md += ["## Syncs and UB of one tile against bishengir 1.2.0", "",
           "| kernel | set/wait | barriers | PIPE_ALL | UB peak KB | bishengir set/wait, "
           "barriers, PIPE_ALL, UB KB |", "| --- | --- | --- | --- | --- | --- |"]
    for s in data.sync_rows:
        md.append(f"| {s.kernel} | {s.sets} | {s.barriers} | {s.pipe_all} | {s.ub_kb:.1f} | "
                  f"{s.ref[0]}, {s.ref[1]}, {s.ref[2]}, {s.ref[3]} |")
    md += ["", "## Tuned schedules", "",
           "Paste one into a file to reuse it; each comment carries its modelled figures.", ""]
    for r in rows:
        b = r.result.best
        if b is None:
            md += [f"### {r.case.label}", "", "no schedule compiled", ""]
            continue
        code = f"{r.case.kernel}({', '.join(map(str, r.case.args))})"
        md += [f"### {r.case.label}", "", "```python",
               schedule_code(b.schedule, code, imports=library_imports(code),
                             comment=figures_comment(b.evaluation, r.result.speedup(b))).rstrip(),
               "```", ""]
    path = out / "report.md"
    path.write_text("\n".join(md) + "\n")
    return path


def summary_table(rows: list[KernelRow]) -> list[str]:
    out = ["| kernel | roofline limit | roofline us | default us | tuned us | tuned % of "
           "roofline | tuned/default | critical pipe | search | points evaluated (cached) | "
           "illegal points pruned before lowering (+ duplicates) |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        res, b, d = r.result, r.result.best, r.result.default
        if b is None:
            out.append(f"| {r.case.label} | | | | no schedule compiled | | | | | | |")
            continue
        e = b.evaluation
        dt = f"{d.evaluation.time_s * 1e6:.1f}" if d and d.evaluation.ok else "-"
        dup = res.pruned.get("duplicate", 0)
        pr = sum(res.pruned.values()) - dup
        out.append(f"| {r.case.label} | {e.limit} | {e.roofline_s * 1e6:.1f} | {dt} | "
                   f"{e.time_s * 1e6:.1f} | {e.of_peak:.1%} | {res.speedup(b):.2f}x | "
                   f"{e.critical_pipe} | {res.strategy} | {res.fresh + res.hits} "
                   f"({res.hits}) | {pr} (+{dup}) of {res.checked} checked |")
    return out


def cost_table(rows: list[KernelRow]) -> list[str]:
    """Mean CPU seconds per evaluation over the points each search evaluated, and the split
    between the lowering passes and the timing model (recorded when each point was evaluated,
    so the table is the same when the report is rebuilt from the cache)."""
    from ascendsched.lower.pipeline import SYNC_STEPS

    out = ["| kernel | evaluations | CPU s per evaluation | evaluations/s per core | "
           "dependences | insert sync | other passes | timing model |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        evs = [t.evaluation for t in r.result.trials if t.evaluation.ok]
        if not evs:
            continue
        n = len(evs)
        total = sum(e.lower_cpu_s + e.model_cpu_s for e in evs) / n
        dep = sum(dict(e.passes).get("dependences", 0.0) for e in evs) / n
        syn = sum(dict(e.passes).get(step, 0.0) for e in evs for step in SYNC_STEPS) / n
        mod = sum(e.model_cpu_s for e in evs) / n
        other = max(total - dep - syn - mod, 0.0)
        out.append(f"| {r.case.label} | {n} | {total:.3f} | {1 / total:.1f} | "
                   f"{dep / total:.0%} | {syn / total:.0%} | {other / total:.0%} | "
                   f"{mod / total:.0%} |")
    return out


def _l2_mib() -> float:
    from ascendsched.target import DEFAULT_TARGET

    assert DEFAULT_TARGET.costs is not None
    return DEFAULT_TARGET.costs.l2_bytes / 2**20


def targets(rows: list[KernelRow]) -> list[str]:
    """The issue's targets: GEMM fp16 share of Cube peak, vector kernels' share of HBM."""
    out = ["Against the targets (tuned, modelled; GEMMs: share of the Cube peak, vector "
           "kernels: share of the HBM roofline). A share above 100% is the model's write-back "
           f"L2 ({_l2_mib():.0f} MiB) keeping outputs that fit in it off HBM during the "
           "kernel, while the roofline counts every GM byte at HBM bandwidth.", ""]
    for r in rows:
        b = r.result.best
        if b is None:
            continue
        e = b.evaluation
        d = r.result.default
        de = e if d is None else d.evaluation
        if r.case.mixed:  # no issue target: its share of whichever roofline bounds it
            out.append(f"- {r.case.label} (mixed Cube + Vector kernel): {e.of_peak:.1%} of "
                       f"its roofline, the {e.limit} (default {de.of_peak:.1%}; critical "
                       f"pipe {e.critical_pipe}, bound by {e.bound}; the roofline counts the "
                       "inputs and outputs, not the workspace the product passes through)")
            continue
        share, what = (e.of_cube_peak, "Cube peak") if r.case.cube else (
            e.of_hbm_roofline, "HBM roofline")
        mark = "meets" if share >= TARGET_SHARE else "misses"
        ds = de.of_cube_peak if r.case.cube else de.of_hbm_roofline
        out.append(f"- {r.case.label}: {share:.1%} of the {what} ({mark} "
                   f"{TARGET_SHARE:.0%}; default {ds:.1%}; critical pipe {e.critical_pipe}, "
                   f"bound by {e.bound})")
    return out
