"""One evaluation of a schedule: full lowering plus the timing model, as a cacheable record.

``evaluate_schedule`` runs in worker processes; it never raises: a point that fails to compile
(any exception, including an internal compiler error) comes back as an ``error`` record with the
exception's type and message, so a sweep goes on. ``MODEL_VERSION`` fingerprints the source of
every stage an evaluation runs (algo, schedule, lower, sim, target; not the choice of default
schedules, whose text is part of their own key), so a cached figure is reused only by the code
that produced it.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import time
import warnings
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.schedule import Schedule
from ascendsched.target import Scope

AnySchedule = Schedule | GemmSchedule
_STAGES = ("algo", "schedule", "lower", "sim", "target")
_UNUSED = {"schedule/default.py"}  # picks the default schedule, whose text is in its own key
RECORD_VERSION = 2  # bump when Evaluation's fields change (cached records are then unused)


@dataclass(frozen=True)
class Evaluation:
    """Modelled figures of one schedule (all times are the model's, not measurements)."""

    status: str  # "ok" | "error"
    time_s: float = math.inf
    roofline_s: float = 0.0
    limit: str = ""  # what bounds the roofline: Cube peak, Vector peak, HBM bandwidth
    critical_pipe: str = ""
    bound: str = ""  # what bounds the modelled time: pipes, HBM or L2 bandwidth
    lower_cpu_s: float = 0.0
    model_cpu_s: float = 0.0
    passes: tuple[tuple[str, float], ...] = ()  # CPU seconds per lowering pass
    sets: int = 0  # set/wait pairs executed by block 0
    barriers: int = 0  # PipeBarriers (and PIPE_ALL) executed by block 0
    ub_peak: int = 0  # planned bytes per scope's peak (UB for vector, L1 for Cube kernels)
    utilisation: tuple[tuple[str, float], ...] = ()  # "AIC MTE2" -> busy fraction, mean
    error: str = ""
    cube_s: float = 0.0  # the roofline's three bounds (sim/roofline.py) and the work behind them
    vector_s: float = 0.0
    memory_s: float = 0.0
    flops: float = 0.0
    vector_repeats: float = 0.0
    gm_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def ratio(self) -> float:
        """Modelled time over the roofline bound (>= 1; 1 is the roofline)."""
        return self.time_s / self.roofline_s if self.ok and self.roofline_s else math.inf

    @property
    def of_peak(self) -> float:
        """Share of the roofline reached (1 / ratio)."""
        return 1.0 / self.ratio if self.ok and self.ratio else 0.0

    @property
    def of_cube_peak(self) -> float:
        """Cube peak time of the kernel's FLOPs over the modelled time."""
        return self.cube_s / self.time_s if self.ok else 0.0

    @property
    def of_hbm_roofline(self) -> float:
        """Time to move the kernel's GM bytes at HBM bandwidth over the modelled time."""
        return self.memory_s / self.time_s if self.ok else 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> Evaluation:
        d = json.loads(text)
        d["passes"] = tuple(tuple(x) for x in d.get("passes", ()))
        d["utilisation"] = tuple(tuple(x) for x in d.get("utilisation", ()))
        if d.get("time_s") is None:
            d["time_s"] = math.inf
        return Evaluation(**d)


@cache
def model_version() -> str:
    """A fingerprint of the source of every stage an evaluation runs."""
    h = hashlib.sha256(f"record {RECORD_VERSION}".encode())
    for stage in _STAGES:
        mod = importlib.import_module(f"ascendsched.{stage}")
        pkg = Path(mod.__file__ or "").resolve().parent
        for f in sorted(pkg.glob("*.py")):
            if f"{stage}/{f.name}" in _UNUSED:
                continue
            h.update(f"{stage}/{f.name}".encode())
            h.update(f.read_bytes())
    return "src-" + h.hexdigest()[:12]


def cache_key(sched: AnySchedule) -> str:
    """The cache key of ``sched``: (algorithm, schedule, target, model version)."""
    parts = (str(sched.algo), str(sched), sched.target.name, model_version())
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def evaluate_schedule(sched: AnySchedule) -> Evaluation:
    """Lower ``sched`` (every pass) and model its time; an error record on any failure."""
    from ascendsched.lower.pass_log import PassLog
    from ascendsched.lower.pipeline import lower
    from ascendsched.lower.sync_stats import sync_stats
    from ascendsched.sim.timing import model_time

    t0 = time.process_time()
    log = PassLog()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kernel = lower(sched, log=log)
        t1 = time.process_time()
        rep = model_time(kernel)
        t2 = time.process_time()
        rf = rep.roofline
        st = sync_stats(kernel)
        plan = log.results.get("memory plan")
        scope = Scope.L1 if sched.cube is not None else Scope.UB
        util = tuple((f"{ct} {p}", round(v, 4)) for ct in sorted({c.core for c in rep.cores})
                     for p, v in rep.mean_utilisation(ct).items())
        return Evaluation(
            "ok", rep.time_s, rep.roofline.bound_s, rep.roofline.limit, rep.critical_pipe,
            rep.bound, t1 - t0, t2 - t1, tuple((n, round(c, 5)) for n, c in log.cpu().items()),
            int(st["sets"]), int(st["barriers"]) + int(st["pipe_all"]),
            plan.peak(scope) if plan is not None else 0, util, "", rf.cube_s, rf.vector_s,
            rf.memory_s, rf.flops, rf.vector_repeats, rf.gm_bytes)
    except Exception as e:  # noqa: BLE001 -- a failing point is recorded, never fatal
        msg = f"{type(e).__name__}: {e}".splitlines()[0][:500]
        return Evaluation("error", lower_cpu_s=time.process_time() - t0,
                          passes=tuple((n, round(c, 5)) for n, c in log.cpu().items()), error=msg)
