"""The dynamic trace of a kernel run: one event per executed instruction instance.

The JSONL form is a contract shared with the C++ host runtime of ``emit_ascendc``: one JSON
object per line with keys ``block, core, seq, op, pipe, reads, writes, src, dst, id, flag,
label``; ``reads``/``writes`` are ``[[space, lo, hi], ...]`` byte intervals (sorted, coalesced,
half-open), absent values are ``null``. ``label`` is free text and ignored by comparisons.

Spaces: ``GM:<tensor>`` (byte offsets inside that tensor); for memory-planned kernels the scope
name (``UB``, ``L1``, ``L0A``, ``L0B``, ``L0C``) with physical byte addresses; for unplanned
kernels ``<scope>:<buffer>:<copy>`` with byte offsets inside that buffer copy.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ascendsched.target.model import CoreType

Interval = tuple[str, int, int]  # (space, lo, hi), bytes [lo, hi)



def merge_intervals(space: str, lo: np.ndarray, hi: np.ndarray) -> list[Interval]:
    """Sorted, coalesced union of the byte intervals [lo, hi) of one space."""
    lo, hi = np.asarray(lo).ravel(), np.asarray(hi).ravel()
    if lo.size == 0:
        return []
    if not (lo[1:] >= lo[:-1]).all():
        order = np.argsort(lo, kind="stable")
        lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    start = np.ones(lo.size, dtype=bool)
    start[1:] = lo[1:] > reach[:-1]
    idx = np.flatnonzero(start)
    ends = np.append(idx[1:], lo.size) - 1
    return [(space, int(a), int(b)) for a, b in zip(lo[idx], reach[ends], strict=True)]


def core_type(core: str) -> CoreType:
    """The core type of a trace stream's ``core`` (``AIV0``/``AIV1`` are AIVs)."""
    return CoreType.AIC if core == "AIC" else CoreType.AIV


_KEYS = ("block", "core", "seq", "op", "pipe", "reads", "writes", "src", "dst", "id", "flag",
         "label")


@dataclass(frozen=True)
class TraceEvent:
    """One executed instruction instance of one block's core program."""

    block: int
    core: str  # "AIV" | "AIC", or "AIV0" | "AIV1": the two AIVs of a 1:2 kernel's block
    seq: int  # index in this block+core's dynamic program order (syncs included)
    op: str
    pipe: str
    reads: tuple[Interval, ...] = ()
    writes: tuple[Interval, ...] = ()
    src: str | None = None  # set_flag / wait_flag: source pipe
    dst: str | None = None  # set_flag / wait_flag: destination pipe
    event_id: int | None = None
    flag_id: int | None = None
    label: str = ""

    def to_json(self) -> dict:
        return {
            "block": self.block, "core": self.core, "seq": self.seq, "op": self.op,
            "pipe": self.pipe, "reads": [list(i) for i in self.reads],
            "writes": [list(i) for i in self.writes], "src": self.src, "dst": self.dst,
            "id": self.event_id, "flag": self.flag_id, "label": self.label,
        }

    @staticmethod
    def from_json(d: dict) -> TraceEvent:
        missing = [k for k in _KEYS if k not in d]
        if missing:
            raise ValueError(f"trace event {d!r} lacks keys {missing}")

        def ivs(v: list | None) -> tuple[Interval, ...]:
            return tuple((str(s), int(lo), int(hi)) for s, lo, hi in (v or ()))

        return TraceEvent(
            block=int(d["block"]), core=str(d["core"]), seq=int(d["seq"]), op=str(d["op"]),
            pipe=str(d["pipe"]), reads=ivs(d["reads"]), writes=ivs(d["writes"]),
            src=d["src"], dst=d["dst"],
            event_id=None if d["id"] is None else int(d["id"]),
            flag_id=None if d["flag"] is None else int(d["flag"]),
            label=str(d["label"] or ""),
        )

    def key(self) -> tuple:
        """Everything compared by :func:`traces_match` (all fields but ``label``)."""
        return (self.block, self.core, self.seq, self.op, self.pipe, self.reads, self.writes,
                self.src, self.dst, self.event_id, self.flag_id)

    def __str__(self) -> str:
        parts = [f"b{self.block} {self.core} #{self.seq} [{self.pipe}] {self.op}"]
        if self.src is not None or self.dst is not None:
            parts.append(f"{self.src}->{self.dst}")
        if self.event_id is not None:
            parts.append(f"id={self.event_id}")
        if self.flag_id is not None:
            parts.append(f"flag={self.flag_id}")
        if self.writes:
            parts.append("W " + " ".join(f"{s}[{lo},{hi})" for s, lo, hi in self.writes))
        if self.reads:
            parts.append("R " + " ".join(f"{s}[{lo},{hi})" for s, lo, hi in self.reads))
        if self.label:
            parts.append(f"# {self.label}")
        return "  ".join(parts)


@dataclass(frozen=True)
class Trace:
    """All events of a run, in the order they were recorded."""

    events: tuple[TraceEvent, ...]

    def to_jsonl(self) -> str:
        return "".join(json.dumps(e.to_json()) + "\n" for e in self.events)

    @staticmethod
    def from_jsonl(text: str) -> Trace:
        events = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                events.append(TraceEvent.from_json(json.loads(line)))
            except (ValueError, TypeError) as e:
                raise ValueError(f"trace line {n}: {e}") from None
        return Trace(tuple(events))

    def streams(self) -> dict[tuple[int, str], list[TraceEvent]]:
        """Events grouped by (block, core), each list sorted by ``seq``."""
        out: dict[tuple[int, str], list[TraceEvent]] = defaultdict(list)
        for e in self.events:
            out[(e.block, e.core)].append(e)
        for v in out.values():
            v.sort(key=lambda e: e.seq)
        return dict(sorted(out.items()))

    def __len__(self) -> int:
        return len(self.events)

    def __str__(self) -> str:
        return "\n".join(map(str, self.events))


def traces_match(a: Trace, b: Trace, *, max_diffs: int = 50) -> list[str]:
    """Differences between two traces, ignoring ``label`` and the interleaving of streams.

    Events are compared per (block, core) in ``seq`` order. Empty list = the traces match.
    """
    diffs: list[str] = []
    sa, sb = a.streams(), b.streams()
    for key in sorted(set(sa) | set(sb)):
        ea, eb = sa.get(key, []), sb.get(key, [])
        name = f"block {key[0]} {key[1]}"
        if not ea or not eb:
            diffs.append(f"{name}: only in {'first' if ea else 'second'} trace "
                         f"({len(ea) or len(eb)} events)")
            continue
        for x, y in zip(ea, eb, strict=False):
            if x.key() != y.key():
                diffs.append(f"{name} seq {x.seq}/{y.seq}: {_field_diff(x, y)}\n"
                             f"    first:  {x}\n    second: {y}")
        if len(ea) != len(eb):
            longer, which = (ea, "first") if len(ea) > len(eb) else (eb, "second")
            extra = longer[min(len(ea), len(eb))]
            diffs.append(f"{name}: {which} trace has {abs(len(ea) - len(eb))} more events, "
                         f"starting with {extra}")
    if len(diffs) > max_diffs:
        n = len(diffs) - max_diffs
        diffs = diffs[:max_diffs] + [f"... and {n} more differences"]
    return diffs


def _field_diff(x: TraceEvent, y: TraceEvent) -> str:
    names = ("block", "core", "seq", "op", "pipe", "reads", "writes", "src", "dst", "event_id",
             "flag_id")
    return ", ".join(f"{n} {getattr(x, n)!r} != {getattr(y, n)!r}"
                     for n in names if getattr(x, n) != getattr(y, n))
