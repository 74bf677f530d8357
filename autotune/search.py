"""Search strategies over a space: exhaustive, or an Optuna sampler (TPE, CMA-ES, random).

``tune(space, ...)`` returns every distinct legal point it looked at with its evaluation, the
default schedule's evaluation, and the counts (points checked and pruned, evaluations run and
answered by the cache). The budget is the number of distinct legal points a search may look at
(whether the cache or a fresh evaluation answers); pruned points and repeats are free.

Guided searches ask Optuna for ``batch`` trials at a time, evaluate them together, and tell
the study in trial order, so the result depends only on the space, the sampler and the seed,
not on the executor or the number of workers. A sampler that stops proposing new points (CMA-ES
converged) ends the search early. Illegal points are told as PRUNED (TPE ranks them
below every completed trial) and never lowered; a failed compile is PRUNED with its error as a
user attribute. Studies live in Optuna's RDB storage (SQLite by default); a rerun replays its
study from the start, and the evaluation cache answers every point it had already finished.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ascendsched.autotune.evaluate import AnySchedule, Evaluation, model_version
from ascendsched.autotune.executor import ordered_map
from ascendsched.autotune.runner import Evaluator, progress_bar
from ascendsched.autotune.space import RULES, Point, Space, plan_check
from ascendsched.errors import AscendSchedError

SAMPLERS = ("tpe", "cmaes", "random")
STRATEGIES = ("auto", "exhaustive") + SAMPLERS
PRUNE_ALL_LIMIT = 4096  # "auto" enumerates spaces up to this many points to count legal ones
STALL_ASKS = 200  # a sampler that proposes no new legal point in this many asks has converged


@dataclass(frozen=True)
class Trial:
    point: Point
    schedule: AnySchedule
    evaluation: Evaluation


@dataclass(frozen=True)
class TuneResult:
    space: str
    strategy: str
    seed: int
    budget: int
    trials: tuple[Trial, ...]  # distinct legal points in the order the search reached them
    default: Trial | None
    checked: int  # points whose legality was checked
    pruned: Mapping[str, int]
    fresh: int  # evaluations run (cache misses)
    hits: int  # evaluations the cache answered
    seconds: float
    legal_total: int | None = None  # legal points of the whole space, when enumerated
    fresh_cpu_s: float = 0.0  # CPU seconds (lowering + model) of the fresh evaluations
    history: tuple[float, ...] = field(default=(), repr=False)  # best time after each trial

    @property
    def ranked(self) -> list[Trial]:
        """Compiled schedules, fastest first: the points searched and the default schedule
        (``point == ()``), so tuning never returns a schedule slower than the default."""
        cands = [t for t in self.trials if t.evaluation.ok]
        if self.default is not None and self.default.evaluation.ok and all(
                str(t.schedule) != str(self.default.schedule) for t in cands):
            cands.append(self.default)
        return sorted(cands, key=lambda t: (t.evaluation.time_s, str(t.schedule)))

    @property
    def best(self) -> Trial | None:
        r = self.ranked
        return r[0] if r else None

    @property
    def failures(self) -> list[Trial]:
        return [t for t in self.trials if not t.evaluation.ok]

    def speedup(self, t: Trial) -> float:
        """Default schedule's modelled time over ``t``'s (nan without a default)."""
        if self.default is None or not self.default.evaluation.ok:
            return math.nan
        return self.default.evaluation.time_s / t.evaluation.time_s


def tune(space: Space, *, strategy: str = "auto", budget: int = 64, seed: int = 0,
         evaluator: Evaluator | None = None, batch: int = 4, progress: bool = True,
         storage: str | Path | None = None, default: bool = True,
         warm_start: bool = True) -> TuneResult:
    """Search ``space`` for the fastest modelled schedule (see the module docstring).

    ``storage``: Optuna RDB URL or SQLite file for the studies (default: in memory).
    ``warm_start``: a guided search evaluates the space's seeds first (``Space.seeds``); off,
    the sampler alone proposes every point (to compare samplers)."""
    if strategy not in STRATEGIES:
        raise AscendSchedError(f"unknown strategy {strategy!r}; one of {', '.join(STRATEGIES)}")
    if budget < 1 or batch < 1:
        raise AscendSchedError(f"budget ({budget}) and batch ({batch}) must be >= 1")
    ev = evaluator or Evaluator()
    fresh0, hits0, cpu0 = len(ev.fresh), ev.hits, ev.fresh_cpu_s
    t0 = time.perf_counter()
    legal_total = None
    if strategy == "auto":
        strategy = "tpe"
        if space.size <= max(budget, PRUNE_ALL_LIMIT):
            rep = space.prune(_mapper(ev))
            legal_total = len(rep.legal)
            if legal_total <= budget:
                strategy = "exhaustive"
    if strategy == "exhaustive":
        rep = space.prune(_mapper(ev))
        legal_total = len(rep.legal)
        bar = progress_bar(legal_total, f"tune {space.name} exhaustive", progress)
        evs = ev.run([c.schedule for c in rep.legal], bar)  # type: ignore[misc]
        bar.close()
        trials = [Trial(c.point, c.schedule, e) for c, e in zip(rep.legal, evs)]  # type: ignore
        checked, pruned = rep.total, dict(rep.pruned)
    else:
        trials, checked, pruned = _guided(space, strategy, budget, seed, ev, batch, progress,
                                          storage, warm_start)
    dflt = _default_trial(space, ev) if default else None
    hist, best = [], math.inf
    for t in trials:
        if t.evaluation.ok:
            best = min(best, t.evaluation.time_s)
        hist.append(best)
    return TuneResult(space.name, strategy, seed, budget, tuple(trials), dflt, checked, pruned,
                      len(ev.fresh) - fresh0, ev.hits - hits0, time.perf_counter() - t0,
                      legal_total, fresh_cpu_s=ev.fresh_cpu_s - cpu0, history=tuple(hist))


def _mapper(ev: Evaluator):  # noqa: ANN202 -- a Mapper
    """map() through the evaluator's executor; planner checks go in chunks of 32."""
    def mapper(fn: Any, items: list[Any]) -> list[Any]:
        if fn is plan_check and len(items) > 32:
            parts = ordered_map(ev.executor, _plan_many, _chunks(items, 32))
            return [v for part in parts for v in part]
        return ordered_map(ev.executor, fn, items)
    return mapper


def _plan_many(scheds: list[AnySchedule]) -> list[tuple[str | None, str]]:
    return [plan_check(s) for s in scheds]


def _chunks(items: list[Any], n: int) -> list[list[Any]]:
    return [items[i:i + n] for i in range(0, len(items), n)]


def _default_trial(space: Space, ev: Evaluator) -> Trial | None:
    from ascendsched.lower.schedule_for import schedule_for

    try:
        sched = schedule_for(space.algo, space.target)
    except AscendSchedError:
        return None
    return Trial((), sched, ev.run([sched])[0])


# ----------------------------------------------------------------------------- guided search
def make_sampler(name: str, seed: int, budget: int) -> Any:
    import optuna

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

    startup = max(4, min(16, budget // 5))
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True,
                                          constant_liar=True)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(  # with_margin: CMA-ES for integer parameters
            seed=seed, n_startup_trials=startup, warn_independent_sampling=False, with_margin=True,
            independent_sampler=optuna.samplers.RandomSampler(seed=seed))
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise AscendSchedError(f"unknown sampler {name!r}; one of {', '.join(SAMPLERS)}")


def _storage(storage: str | Path | None) -> Any:
    import optuna

    if storage is None:
        return optuna.storages.InMemoryStorage()
    url = str(storage)
    if "://" not in url:
        Path(url).parent.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{Path(url).resolve()}"
    return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}})


def _suggest(trial: Any, space: Space) -> Point:
    vals = []
    for p in space.params:
        if len(p.choices) == 1:
            vals.append(p.choices[0])
        elif p.ordinal:
            vals.append(p.choices[trial.suggest_int(p.name, 0, len(p.choices) - 1)])
        else:
            labels = [str(c) for c in p.choices]
            vals.append(p.choices[labels.index(trial.suggest_categorical(p.name, labels))])
    return tuple(vals)


def _params(space: Space, point: Point) -> dict[str, Any]:
    """The Optuna parameters ``_suggest`` reads back as ``point`` (choice index or label)."""
    out: dict[str, Any] = {}
    for p, v in zip(space.params, point):
        if len(p.choices) == 1:
            continue
        i = [repr(c) for c in p.choices].index(repr(v))
        out[p.name] = i if p.ordinal else str(p.choices[i])
    return out


def _guided(space: Space, sampler: str, budget: int, seed: int, ev: Evaluator, batch: int,
            progress: bool, storage: str | Path | None, warm_start: bool = True
            ) -> tuple[list[Trial], int, dict[str, int]]:
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    store = _storage(storage)
    name = f"{space.name}|{space.size}|{sampler}|seed={seed}|budget={budget}|{model_version()}"
    try:  # a rerun replays the study from the start; the evaluation cache makes it cheap
        optuna.delete_study(study_name=name, storage=store)
    except KeyError:
        pass
    study = optuna.create_study(study_name=name, storage=store, direction="minimize",
                                sampler=make_sampler(sampler, seed, budget))
    if warm_start:  # the seeds come first, as ordinary trials the sampler learns from
        for pt in space.seed_points()[:budget]:
            study.enqueue_trial(_params(space, pt))
    seen: dict[Point, Trial] = {}
    order: list[Point] = []
    checked: set[Point] = set()
    pruned = dict.fromkeys(RULES, 0)
    asked_total, max_asks, stalled = 0, 20 * budget + 200, 0
    bar = progress_bar(budget, f"tune {space.name} {sampler}", progress)
    while len(seen) < budget and asked_total < max_asks and stalled < STALL_ASKS:
        asked: list[tuple[Any, Point]] = []
        new: list[Point] = []
        asks0 = asked_total
        while len(asked) < batch and len(seen) + len(new) < budget and asked_total < max_asks:
            ot = study.ask()
            asked_total += 1
            pt = _suggest(ot, space)
            c = space.check(pt)
            if pt not in checked:
                checked.add(pt)
                if c.rule is not None:
                    pruned[c.rule] += 1
            if c.rule == "duplicate":
                assert c.same_as is not None
                pt = c.same_as
            elif not c.legal:
                ot.set_user_attr("pruned", f"{c.rule}: {c.message.splitlines()[0][:200]}")
                study.tell(ot, state=TrialState.PRUNED)
                continue
            asked.append((ot, pt))
            if pt not in seen and pt not in new:
                new.append(pt)
        stalled = 0 if new else stalled + asked_total - asks0
        evs = ev.run([space.check(p).schedule for p in new], bar)  # type: ignore[misc]
        for p, e in zip(new, evs):
            seen[p] = Trial(p, space.check(p).schedule, e)  # type: ignore[arg-type]
            order.append(p)
        for ot, p in asked:
            e = seen[p].evaluation
            if e.ok:
                study.tell(ot, e.time_s)
            else:
                ot.set_user_attr("error", e.error[:200])
                study.tell(ot, state=TrialState.PRUNED)
        if seen:
            best = min((t.evaluation.time_s for t in seen.values()), default=math.inf)
            bar.set_postfix_str(f"best {best * 1e6:.1f} us (modelled)")
    bar.close()
    return [seen[p] for p in order], len(checked), pruned
