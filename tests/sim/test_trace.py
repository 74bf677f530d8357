"""The trace: event contents, the JSONL contract, and traces_match."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np

from ascendsched.sim.execute import run_kernel
from ascendsched.sim.trace import Trace, traces_match
from tests.kit.ir import synced_vadd

KEYS = {"block", "core", "seq", "op", "pipe", "reads", "writes", "src", "dst", "id", "flag",
        "label"}


def vadd_trace(**kw: int) -> Trace:
    k = synced_vadd(8192, 2048, **kw)
    x = np.ones(8192, np.float16)
    tr = run_kernel(k, {"x": x, "y": x}, trace=True).trace
    assert tr is not None
    return tr


def test_events_carry_seq_pipes_flags_and_bytes() -> None:
    tr = vadd_trace(copies=2)
    ev = tr.events
    assert [e.seq for e in ev] == list(range(len(ev)))
    s = ev[0]
    assert (s.op, s.pipe, s.src, s.dst, s.event_id) == ("set_flag", "V", "V", "MTE2", 0)
    w = next(e for e in ev if e.op == "wait_flag")
    assert (w.pipe, w.src, w.dst) == ("MTE2", "V", "MTE2")
    load = next(e for e in ev if e.op == "copy_gm_ub" and "k=1" in e.label)
    assert load.writes == (("UB:x_ub:1", 0, 4096),)
    assert load.reads == (("GM:x", 4096, 8192),)
    assert all(e.event_id == 1 for e in ev if e.op.endswith("flag") and "k=1" in e.label)


def test_jsonl_round_trip_and_format() -> None:
    tr = vadd_trace(blocks=2)
    text = tr.to_jsonl()
    lines = text.splitlines()
    assert len(lines) == len(tr)
    first = json.loads(lines[0])
    assert set(first) == KEYS
    assert first["reads"] == [] and first["flag"] is None
    load = json.loads(next(ln for ln in lines if "copy_gm_ub" in ln))
    assert load["writes"] == [["UB:x_ub:0", 0, 4096]]
    assert Trace.from_jsonl(text) == tr


def test_traces_match_ignores_labels_and_interleaving() -> None:
    tr = vadd_trace(blocks=2)
    assert traces_match(tr, tr) == []
    relabelled = Trace(tuple(replace(e, label="x") for e in reversed(tr.events)))
    assert traces_match(tr, relabelled) == []


def test_traces_match_reports_differences() -> None:
    tr = vadd_trace()
    ev = list(tr.events)
    i = next(i for i, e in enumerate(ev) if e.op == "copy_ub_gm")
    bad = ev.copy()
    bad[i] = replace(ev[i], writes=(("GM:z", 0, 4094),))
    diffs = traces_match(tr, Trace(tuple(bad)))
    assert len(diffs) == 1 and "writes" in diffs[0] and f"seq {ev[i].seq}" in diffs[0]
    diffs = traces_match(tr, Trace(tuple(ev[:-1])))
    assert len(diffs) == 1 and "1 more events" in diffs[0]
    bad = ev.copy()
    bad[0] = replace(ev[0], event_id=3)
    assert "event_id 0 != 3" in traces_match(tr, Trace(tuple(bad)))[0]
