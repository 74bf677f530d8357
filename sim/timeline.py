"""Timelines of a timing run: Chrome trace-event JSON (Perfetto, chrome://tracing) and a PNG.

The JSON has one process per core (``block b AIC`` / ``block b AIV``) and one thread (track)
per pipe of that core type; every instruction is a complete event (``ph: X``) named by op and
buffer, and every flag is a flow arrow (``ph: s`` at its set, ``ph: f`` at its wait). Times are
microseconds of the model (``TimingReport`` with ``record=True``). The PNG is a Gantt chart of
the same slices for the first few cores (matplotlib).
"""

from __future__ import annotations

import json
from pathlib import Path

from ascendsched.errors import AscendSchedError
from ascendsched.sim.costs import PIPES
from ascendsched.sim.timing import TimingReport
from ascendsched.sim.timing_engine import Slice
from ascendsched.sim.trace import core_type
from ascendsched.target.model import Pipe

CORE_PIPES = {"AIC": (Pipe.S, Pipe.MTE2, Pipe.MTE1, Pipe.M, Pipe.FIX),
              "AIV": (Pipe.S, Pipe.MTE2, Pipe.V, Pipe.MTE3)}
_COLORS = {Pipe.MTE2: "tab:blue", Pipe.MTE1: "tab:cyan", Pipe.M: "tab:red", Pipe.FIX: "tab:purple",
           Pipe.V: "tab:green", Pipe.MTE3: "tab:orange", Pipe.S: "tab:gray"}


def chrome_trace(report: TimingReport, *, max_slices: int = 400_000) -> dict:
    """The trace-event document of a recorded run (``model_time(..., record=True)``)."""
    if report.slices is None:
        raise AscendSchedError("the timing report has no recorded slices: call "
                               "model_time(kernel, record=True) for a timeline")
    us = 1e6 / report.clock_hz
    keys = sorted(report.slices, key=lambda k: (k[0], k[1]))
    per_core = max(1, max_slices // max(len(keys), 1))
    events: list[dict] = []
    flows: dict[tuple, dict] = {}
    truncated = False
    for pid, (block, core) in enumerate(keys):
        events.append({"ph": "M", "name": "process_name", "pid": pid,
                       "args": {"name": f"block {block} {core}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid,
                       "args": {"sort_index": pid}})
        for pipe in CORE_PIPES.get(str(core_type(core)), PIPES):
            tid = PIPES.index(pipe)
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": str(pipe)}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                           "args": {"sort_index": tid}})
        slices = report.slices[(block, core)]
        if len(slices) > per_core:
            slices, truncated = slices[:per_core], True
        for s in slices:
            ev = {"ph": "X", "name": s.name, "cat": _category(s), "pid": pid, "tid": s.pipe,
                  "ts": s.start * us, "dur": max(s.end - s.start, 0.0) * us}
            events.append(ev)
            if s.flow is not None:
                kind, key, seq = s.flow
                fk = (block, key, seq) if key[0] == "cross" else (block, core, key, seq)
                flows.setdefault(fk, {})[kind] = (pid, s)
    for n, (_, ends) in enumerate(sorted(flows.items(), key=lambda kv: str(kv[0]))):
        if "set" not in ends or "wait" not in ends:
            continue
        (spid, sset), (wpid, swait) = ends["set"], ends["wait"]
        events.append({"ph": "s", "id": n, "name": "flag", "cat": "flag", "pid": spid,
                       "tid": sset.pipe, "ts": sset.end * us})
        events.append({"ph": "f", "bp": "e", "id": n, "name": "flag", "cat": "flag",
                       "pid": wpid, "tid": swait.pipe, "ts": max(swait.end, sset.end) * us})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"kernel": report.kernel, "target": report.target,
                          "modelled": "timing model estimate, not a measurement",
                          "modelled_time_us": report.time_s * 1e6,
                          "truncated": truncated}}


def write_chrome_trace(report: TimingReport, path: str | Path, **kw: int) -> Path:
    p = Path(path)
    p.write_text(json.dumps(chrome_trace(report, **kw)))
    return p


def write_png(report: TimingReport, path: str | Path, *, max_cores: int = 4) -> Path:
    """A Gantt chart of the first ``max_cores`` cores' pipes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if report.slices is None:
        raise AscendSchedError("the timing report has no recorded slices: call "
                               "model_time(kernel, record=True) for a timeline")
    us = 1e6 / report.clock_hz
    keys = sorted(report.slices)[:max_cores]
    rows: list[tuple[str, Pipe, list[Slice]]] = []
    for block, core in keys:
        sl = report.slices[(block, core)]
        for pipe in CORE_PIPES.get(str(core_type(core)), PIPES):
            idx = PIPES.index(pipe)
            rows.append((f"b{block} {core} {pipe}", pipe, [s for s in sl if s.pipe == idx]))
    fig, ax = plt.subplots(figsize=(12, 0.35 * len(rows) + 1.5))
    for y, (_, pipe, sl) in enumerate(rows):
        spans = [(s.start * us, max(s.end - s.start, 1e-3) * us) for s in sl
                 if not s.name.startswith(("set_flag", "wait_flag"))]
        ax.broken_barh(spans, (y - 0.4, 0.8), color=_COLORS.get(pipe, "k"))
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (us, modelled)")
    shown = f"first {len(keys)} of {len(report.slices)} cores" if len(report.slices) > len(
        keys) else f"{len(keys)} cores"
    ax.set_title(f"{report.kernel} on {report.target}: modelled {report.time_s * 1e6:.1f} us "
                 f"({shown}; a model, not a measurement)", fontsize=9)
    fig.tight_layout()
    p = Path(path)
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def _category(s: Slice) -> str:
    head = s.name.split(" ", 1)[0]
    if head in ("set_flag", "wait_flag", "barrier", "cross_set", "cross_wait"):
        return "sync"
    return head
