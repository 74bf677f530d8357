"""Evaluate the timing model on the calibration entries (kernels lowered once, then cached).

``prepare()`` lowers every entry (pickled under ``$ASCENDSCHED_CACHE`` or
``benchmarks/calibration/.cache``, keyed by the entry and a hash of the lowering's source) and
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


def _source_hash() -> str:
    """Hash of the code a cached kernel and its traffic depend on (algo/, schedule/, lower/,
    the target record, sim/gm_traffic.py): a change there invalidates the cache."""
    import ascendsched.algo as algo_pkg
    import ascendsched.lower as lower_pkg
    import ascendsched.schedule as schedule_pkg
    import ascendsched.sim.gm_traffic as traffic_mod
    import ascendsched.target.ascend910b as target_mod
    import ascendsched.target.model as model_mod

    files: list[Path] = []
    for pkg in (algo_pkg, lower_pkg, schedule_pkg):
        files += sorted(Path(pkg.__file__).parent.glob("*.py"))
    files += [Path(m.__file__) for m in (traffic_mod, target_mod, model_mod)]
    h = hashlib.sha1()
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()


def prepare(entries: list[Entry], costs: CostModel) -> list[Prepared]:
    CACHE.mkdir(parents=True, exist_ok=True)
    src = _source_hash()
    out = []
    for e in entries:
        tag = hashlib.sha1((src + e.key + e.differs + str(e.l2_bypass)).encode()).hexdigest()[:12]
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
    return value(p, report(p, costs), costs)


def mte2_us(r: TimingReport) -> float:
    """Mean over cores of the modelled MTE2 busy time (msprof's aic/aiv_mte2_time), us."""
    i = PIPE_INDEX[Pipe.MTE2]
    return sum(c.busy[i] for c in r.cores) / len(r.cores) / r.clock_hz * 1e6


def serial_us(r: TimingReport, pipes: tuple[str, ...]) -> float:
    """The busiest core's summed busy time of ``pipes`` (run one after the other), us."""
    idx = [PIPE_INDEX[Pipe(x)] for x in pipes]
    return max(sum(c.busy[i] for i in idx) for c in r.cores) / r.clock_hz * 1e6


def value(p: Prepared, r: TimingReport, costs: CostModel) -> float:
    """The model's value in the entry's metric (us, or cycles of the vector instruction)."""
    if p.entry.serial:
        t = serial_us(r, p.entry.serial)
        return t + (r.launch_s * 1e6 if p.entry.metric == "task" else 0.0)
    if p.entry.metric == "task":
        return r.time_s * 1e6
    if p.entry.metric == "aicore":
        return r.mean_core_time_s * 1e6
    return r.critical_core().busy[PIPE_INDEX[Pipe.V]] + costs.vec_tail
