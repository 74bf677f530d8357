"""Timelines of a timing run: Chrome trace-event JSON (Perfetto, chrome://tracing) and a PNG.

The JSON has one process per core (``block b AIC`` / ``block b AIV``) and one thread (track)
per pipe of that core type; every instruction is a complete event (``ph: X``) named by op and
buffer, and every flag is a flow arrow (``ph: s`` at its set, ``ph: f`` at its wait). Times are
microseconds of the model (``TimingReport`` with ``record=True``). The PNG is a Gantt chart of
the same slices for the first few cores (matplotlib). ``op_breakdown`` sums the slices of one
core per pipe and op (count, cycles): where a pipe's time goes, e.g. how much of the V pipe
is vector work and how much the drains of ``PipeBarrier<PIPE_V>`` before the next head.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
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
                flows.setdefault(fk, {}).setdefault(kind, []).append((pid, s))
    # One arrow per set the wait consumed: a cross-core flag of a 1:2 mixed kernel pairs the
    # AIC's n-th set with the n-th wait of each AIV, and the n-th set of both AIVs with the
    # AIC's n-th wait (sim/timing_engine.py CrossCounters), so its groups hold 1 set and 2
    # waits or 2 sets and 1 wait.
    n = 0
    for _, ends in sorted(flows.items(), key=lambda kv: str(kv[0])):
        for spid, sset in ends.get("set", ()):
            for wpid, swait in ends.get("wait", ()):
                events.append({"ph": "s", "id": n, "name": "flag", "cat": "flag", "pid": spid,
                               "tid": sset.pipe, "ts": sset.end * us})
                events.append({"ph": "f", "bp": "e", "id": n, "name": "flag", "cat": "flag",
                               "pid": wpid, "tid": swait.pipe,
                               "ts": max(swait.end, sset.end) * us})
                n += 1
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


@dataclass(frozen=True)
class OpTotal:
    """One (pipe, op) of a core's recorded run: instances and the cycles its slices span.

    A vector op's cycles include its head when the stream was interrupted; a barrier's, the
    drain (vector tail) it waited for; a wait_flag's, the time its pipe stood still. A
    set_flag's slice runs until the flag fires and does not hold its pipe (``overlaps``), so
    it is not part of the pipe's time."""

    pipe: str
    op: str
    count: int
    cycles: float
    overlaps: bool = False


def op_breakdown(report: TimingReport, block: int | None = None, core: str = "AIV"
                 ) -> tuple[OpTotal, ...]:
    """Per pipe and op, the recorded slices of ``block``'s ``core`` (default: the block that
    finished last), largest first within each pipe. Ops are named as in the timeline (op,
    function, destination buffer), so every instruction of the program keeps its row."""
    if report.slices is None:
        raise AscendSchedError("the timing report has no recorded slices: call "
                               "model_time(kernel, record=True) for an op breakdown")
    if block is None:
        ends = [c for c in report.cores if c.core == core]
        if not ends:
            raise AscendSchedError(f"kernel {report.kernel} has no {core} program")
        block = max(ends, key=lambda c: c.end).block
    slices = report.slices.get((block, core))
    if slices is None:
        raise AscendSchedError(f"no recorded {core} slices for block {block}")
    acc: dict[tuple[int, str], list[float]] = {}
    for s in slices:
        a = acc.setdefault((s.pipe, s.name), [0, 0.0])
        a[0] += 1
        a[1] += s.end - s.start
    rows = [OpTotal(str(PIPES[p]), name, int(n), cyc, name.startswith("set_flag"))
            for (p, name), (n, cyc) in acc.items()]
    return tuple(sorted(rows, key=lambda r: (PIPES.index(_pipe(r.pipe)), -r.cycles)))


def format_breakdown(rows: tuple[OpTotal, ...], per: int = 1) -> str:
    """``op_breakdown`` as a table; ``per`` divides counts and cycles (e.g. tiles per core)."""
    lines = [f"  {'pipe':5} {'op':44} {'count':>9} {'cycles':>11}"]
    for pipe in dict.fromkeys(r.pipe for r in rows):
        mine = [r for r in rows if r.pipe == pipe]
        for r in mine:
            note = "  (overlaps later work)" if r.overlaps else ""
            lines.append(f"  {r.pipe:5} {r.op:44} {r.count / per:9.1f} {r.cycles / per:11.1f}"
                         f"{note}")
        total = sum(r.cycles for r in mine if not r.overlaps)
        lines.append(f"  {pipe:5} {'total':44} {'':>9} {total / per:11.1f}")
    return "\n".join(lines)


def _pipe(name: str) -> Pipe:
    return next(p for p in PIPES if str(p) == name)


def _category(s: Slice) -> str:
    head = s.name.split(" ", 1)[0]
    if head in ("set_flag", "wait_flag", "barrier", "cross_set", "cross_wait"):
        return "sync"
    return head
