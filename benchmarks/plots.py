"""The report's pictures (matplotlib, PNG); every modelled quantity says "modelled" on its axis.

One function per picture, each taking the bench data and a path and returning the path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

MODELLED = "(modelled, not measured)"


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    _plt().close(fig)
    return path


def _ok(rows: Any) -> list:
    return [r for r in rows if r.result.best is not None]


def modelled_vs_roofline(rows: Any, path: Path) -> Path:
    """Per kernel: roofline bound, default and tuned modelled time (us, log scale)."""
    plt = _plt()
    rows = _ok(rows)
    x = np.arange(len(rows))
    roof = [r.result.best.evaluation.roofline_s * 1e6 for r in rows]
    tuned = [r.result.best.evaluation.time_s * 1e6 for r in rows]
    dflt = [r.result.default.evaluation.time_s * 1e6 if r.result.default and
            r.result.default.evaluation.ok else np.nan for r in rows]
    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(rows) + 3), 4.5))
    w = 0.27
    ax.bar(x - w, roof, w, label="roofline bound", color="tab:gray")
    ax.bar(x, dflt, w, label="default schedule (modelled)", color="tab:orange")
    ax.bar(x + w, tuned, w, label="tuned schedule (modelled)", color="tab:blue")
    ax.set_yscale("log")
    ax.set_ylabel("time (us, modelled)")
    ax.set_xticks(x, [r.case.label for r in rows], rotation=35, ha="right", fontsize=8)
    ax.set_title(f"Modelled time vs the roofline bound per kernel {MODELLED}", fontsize=10)
    ax.legend(fontsize=8)
    return _save(fig, path)


def tuned_vs_default(rows: Any, path: Path) -> Path:
    """Speed-up of the tuned schedule over the default, and the share of the roofline each
    reaches."""
    plt = _plt()
    rows = _ok(rows)
    labels = [r.case.label for r in rows]
    sp = [r.result.speedup(r.result.best) for r in rows]
    tuned = [100 * r.result.best.evaluation.of_peak for r in rows]
    dflt = [100 * r.result.default.evaluation.of_peak if r.result.default else np.nan
            for r in rows]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.5))
    y = np.arange(len(rows))
    a1.barh(y, sp, color="tab:blue")
    a1.axvline(1.0, color="k", lw=0.8)
    a1.set_yticks(y, labels, fontsize=8)
    a1.invert_yaxis()
    a1.set_xlabel("tuned / default speed-up (modelled)")
    a1.set_title(f"Tuned vs default {MODELLED}", fontsize=10)
    for i, v in enumerate(sp):
        a1.text(v, i, f" {v:.2f}x", va="center", fontsize=7)
    a2.barh(y - 0.2, dflt, 0.4, label="default", color="tab:orange")
    a2.barh(y + 0.2, tuned, 0.4, label="tuned", color="tab:blue")
    a2.axvline(90, color="tab:red", lw=0.8, ls="--", label="90% target")
    a2.set_yticks(y, labels, fontsize=8)
    a2.invert_yaxis()
    a2.set_xlim(0, 105)
    a2.set_xlabel("% of the roofline bound (modelled)")
    a2.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


def roofline_chart(rows: Any, path: Path, target: Any) -> Path:
    """Two rooflines: Cube kernels (TFLOP/s vs FLOP/byte) and vector kernels (vector repeats
    per ns vs repeats per byte); default and tuned points, HBM slope and the peaks."""
    plt = _plt()
    rows = _ok(rows)
    hbm = target.gm_bytes_per_s
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, cube in zip(axes, (True, False)):
        rs = [r for r in rows if r.case.cube == cube]
        ev0 = [r.result.best.evaluation for r in rs]
        if cube:  # one peak per input dtype (int8 runs twice the fp16 MACs per cycle)
            peaks = sorted({round(e.flops / e.cube_s, -11) for e in ev0 if e.cube_s})
            work, unit, scale = (lambda e: e.flops), "TFLOP/s", 1e-12
        else:
            peaks = [target.num_aiv * target.clock_hz]
            work, unit, scale = (lambda e: e.vector_repeats), "vector repeats / ns", 1e-9
        pts = [(work(e) / e.gm_bytes) for e in ev0 if e.gm_bytes and work(e)]
        lo = min(pts + [1e-2]) / 10
        hi = max(pts + [1e3]) * 10
        xs = np.logspace(np.log10(lo), np.log10(hi), 200)
        for i, peak in enumerate(peaks):
            ax.plot(xs, np.minimum(xs * hbm, peak) * scale, "k-" if i == 0 else "k--", lw=1,
                    label=f"roofline: HBM {hbm / 1e12:.1f} TB/s, peak {peak * scale:.3g} {unit}")
        for r in rs:
            for trial, mk, alpha in ((r.result.default, "o", 0.45), (r.result.best, "*", 1.0)):
                if trial is None or not trial.evaluation.ok or not trial.evaluation.gm_bytes:
                    continue
                e = trial.evaluation
                ax.scatter(work(e) / e.gm_bytes, work(e) / e.time_s * scale, marker=mk,
                           s=60 if mk == "*" else 30, alpha=alpha,
                           label=r.case.label if mk == "*" else None)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(("FLOP" if cube else "vector repeats") + " per GM byte")
        ax.set_ylabel(f"attained {unit} (modelled)")
        ax.set_title(("Cube (GEMM)" if cube else "Vector") + f" roofline {MODELLED}; "
                     "o default, * tuned", fontsize=9)
        ax.legend(fontsize=6, loc="lower right")
    return _save(fig, path)


def utilisation(rows: Any, path: Path) -> Path:
    """Per-pipe busy fraction (mean over cores) of each tuned kernel."""
    plt = _plt()
    rows = _ok(rows)
    pipes = ["MTE2", "MTE1", "M", "FIX", "V", "MTE3", "S"]
    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(rows) + 3), 4.5))
    x = np.arange(len(rows))
    w = 0.8 / len(pipes)
    for i, p in enumerate(pipes):
        vals = []
        for r in rows:
            u = dict(r.result.best.evaluation.utilisation)
            core = "AIC" if r.case.cube else "AIV"
            vals.append(100 * u.get(f"{core} {p}", 0.0))
        ax.bar(x + (i - len(pipes) / 2) * w, vals, w, label=p)
    ax.set_xticks(x, [r.case.label for r in rows], rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("pipe busy % of the kernel time (modelled)")
    ax.set_title(f"Per-pipe utilisation of the tuned schedules, mean over cores {MODELLED}",
                 fontsize=10)
    ax.legend(fontsize=7, ncol=7)
    return _save(fig, path)


def compile_times(rows: Any, path: Path) -> Path:
    """CPU seconds per lowering pass and for the timing model, tuned schedule of each kernel
    (measured on this machine: these are not modelled)."""
    plt = _plt()
    rows = _ok(rows)
    names: list[str] = []
    for r in rows:
        for n, _ in r.result.best.evaluation.passes:
            if n not in names:
                names.append(n)
    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(rows) + 3), 4.5))
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for n in names + ["timing model"]:
        vals = np.array([r.result.best.evaluation.model_cpu_s if n == "timing model" else
                         dict(r.result.best.evaluation.passes).get(n, 0.0) for r in rows])
        ax.bar(x, vals, 0.6, bottom=bottom, label=n)
        bottom += vals
    ax.set_xticks(x, [r.case.label for r in rows], rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("CPU s per evaluation (measured on the build machine)")
    ax.set_title("Compile (lowering) and model time per evaluation, tuned schedule", fontsize=10)
    ax.legend(fontsize=7)
    return _save(fig, path)


def syncs(rows: Any, sync_rows: Any, path: Path) -> Path:
    """Left: syncs executed by block 0 (set/wait pairs, barriers), default vs tuned.
    Right: one-tile kernels, ours vs bishengir 1.2.0: pairs, barriers, UB KB."""
    plt = _plt()
    rows = _ok(rows)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.8))
    x = np.arange(len(rows))
    for off, key, lab in ((-0.3, "default", "default"), (0.0, "best", "tuned")):
        trials = [getattr(r.result, key) for r in rows]
        sets = [t.evaluation.sets if t and t.evaluation.ok else 0 for t in trials]
        bars = [t.evaluation.barriers if t and t.evaluation.ok else 0 for t in trials]
        a1.bar(x + off, sets, 0.3, label=f"set/wait pairs, {lab}")
        a1.bar(x + off + 0.15, bars, 0.15, label=f"barriers, {lab}")
    a1.set_yscale("symlog")
    a1.set_xticks(x, [r.case.label for r in rows], rotation=35, ha="right", fontsize=7)
    a1.set_ylabel("executed by block 0")
    a1.set_title("Syncs per kernel (from the IR)", fontsize=10)
    a1.legend(fontsize=6)
    k = np.arange(len(sync_rows))
    cols = [("set/wait", lambda s: s.sets, lambda s: s.ref[0]),
            ("barriers", lambda s: s.barriers, lambda s: s.ref[1]),
            ("UB KB", lambda s: s.ub_kb, lambda s: s.ref[3])]
    w = 0.13
    colors = ("tab:blue", "tab:green", "tab:purple")
    for i, (lab, ours, ref) in enumerate(cols):
        a2.bar(k + (2 * i - 2.5) * w, [ours(s) for s in sync_rows], w, label=f"{lab} ours",
               color=colors[i])
        a2.bar(k + (2 * i - 1.5) * w, [ref(s) for s in sync_rows], w, label=f"{lab} bishengir",
               hatch="//", color=colors[i], alpha=0.4)
    a2.set_xticks(k, [s.kernel for s in sync_rows], fontsize=8)
    a2.set_title("One tile vs bishengir 1.2.0 (benchmarks/sync_report.py)", fontsize=10)
    a2.legend(fontsize=6, ncol=3)
    return _save(fig, path)


def convergence(rows: Any, path: Path) -> Path:
    """Best modelled time so far over the points searched, relative to the default."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in _ok(rows):
        d = r.result.default
        h = np.array(r.result.history)
        if d is None or not d.evaluation.ok or not len(h):
            continue
        ax.plot(np.arange(1, len(h) + 1), d.evaluation.time_s / h, label=r.case.label)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xlabel("distinct legal points searched")
    ax.set_ylabel("speed-up over default, best so far (modelled)")
    ax.set_title(f"Search progress {MODELLED}", fontsize=10)
    ax.legend(fontsize=6)
    return _save(fig, path)
