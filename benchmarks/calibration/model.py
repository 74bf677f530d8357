"""Evaluate the timing model on the calibration entries (kernels lowered once, then cached).

``prepare()`` lowers every entry (pickled under ``$ASCENDSCHED_CACHE`` or
``benchmarks/calibration/.cache``, keyed by the entry and the source of its build) and
computes its GM traffic, which depends on no fitted parameter; ``predict(entry, costs)`` is
then cheap enough to run inside the least-squares fit.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

from entries import Entry  # noqa: I001 (run as a script from this folder)

from ascendsched.lower.ir import Kernel
from ascendsched.sim.costs import PIPE_INDEX
from ascendsched.sim.gm_traffic import GmTraffic, gm_traffic
from ascendsched.sim.timing import TimingReport, model_time
from ascendsched.target.costs import CostModel
from ascendsched.target.model import Pipe

CACHE = Path(os.environ.get("ASCENDSCHED_CACHE", Path(__file__).parent / ".cache"))


@dataclass(frozen=True)
class Prepared:
    entry: Entry
    kernel: Kernel
    traffic: GmTraffic


def prepare(entries: list[Entry], costs: CostModel) -> list[Prepared]:
    CACHE.mkdir(parents=True, exist_ok=True)
    out = []
    for e in entries:
        tag = hashlib.sha1((e.key + e.differs + str(e.l2_bypass)).encode()).hexdigest()[:12]
        path = CACHE / f"{tag}.pkl"
        if path.exists():
            kernel, traffic = pickle.loads(path.read_bytes())
        else:
            kernel = e.build()
            traffic = gm_traffic(kernel, costs.l2_bytes, bypass=e.l2_bypass)
            path.write_bytes(pickle.dumps((kernel, traffic)))
        out.append(Prepared(e, kernel, traffic))
    return out


def report(p: Prepared, costs: CostModel) -> TimingReport:
    return model_time(p.kernel, costs=costs, traffic=p.traffic, l2_bypass=p.entry.l2_bypass)


def predict(p: Prepared, costs: CostModel) -> float:
    """The model's value in the entry's metric (us, or cycles of the vector instruction)."""
    r = report(p, costs)
    if p.entry.metric == "task":
        return r.time_s * 1e6
    if p.entry.metric == "aicore":
        return r.mean_core_time_s * 1e6
    v = PIPE_INDEX[Pipe.V]
    return r.critical_core().busy[v] + costs.vec_tail


def mte2_us(r: TimingReport) -> float:
    """Mean over cores of the modelled MTE2 busy time (msprof's aic/aiv_mte2_time), us."""
    i = PIPE_INDEX[Pipe.MTE2]
    return sum(c.busy[i] for c in r.cores) / len(r.cores) / r.clock_hz * 1e6


def value(p: Prepared, r: TimingReport, costs: CostModel) -> float:
    """The model's value in the entry's metric (us, or cycles of the vector instruction)."""
    if p.entry.metric == "task":
        return r.time_s * 1e6
    if p.entry.metric == "aicore":
        return r.mean_core_time_s * 1e6
    return r.critical_core().busy[PIPE_INDEX[Pipe.V]] + costs.vec_tail
