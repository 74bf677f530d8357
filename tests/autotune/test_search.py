"""Search: exhaustive finds the space's minimum; guided searches are deterministic per seed and
independent of the executor; a compile failure is recorded and the sweep goes on."""

import math

import pytest

from ascendsched.autotune import Cache, Evaluator, LocalExecutor, tune
from ascendsched.autotune.evaluate import cache_key, evaluate_schedule
from ascendsched.errors import InternalCompilerError


def test_exhaustive_evaluates_every_legal_point_once(vadd_space, evaluator):
    res = tune(vadd_space, strategy="exhaustive", evaluator=evaluator, progress=False)
    legal = vadd_space.prune().legal
    assert [t.point for t in res.trials] == [c.point for c in legal]
    assert res.fresh + res.hits == len(legal) + 1  # + the default (maybe one of the points)
    assert len(legal) <= res.fresh <= len(legal) + 1
    times = [evaluate_schedule(c.schedule).time_s for c in legal]
    assert min(t.evaluation.time_s for t in res.trials) == min(times)
    assert res.best.evaluation.time_s <= min(times)  # the default competes too
    assert res.speedup(res.best) >= 1.0
    assert res.legal_total == len(legal) and res.checked == vadd_space.size


def test_auto_is_exhaustive_when_the_legal_points_fit_the_budget(vadd_space, evaluator):
    res = tune(vadd_space, budget=1000, evaluator=evaluator, progress=False, default=False)
    assert res.strategy == "exhaustive"
    res = tune(vadd_space, budget=4, evaluator=evaluator, progress=False, default=False)
    assert res.strategy == "tpe" and len(res.trials) == 4


@pytest.mark.parametrize("sampler", ["tpe", "cmaes", "random"])
def test_guided_search_is_deterministic_per_seed(vadd_space, tmp_path, sampler):
    runs = []
    for jobs in (1, 2):
        ev = Evaluator(Cache(tmp_path / f"{sampler}{jobs}.sqlite"), LocalExecutor(jobs))
        runs.append(tune(vadd_space, strategy=sampler, budget=8, seed=3, evaluator=ev,
                         progress=False, default=False))
        ev.close()
    a, b = runs
    assert [t.point for t in a.trials] == [t.point for t in b.trials]
    assert len(a.trials) == 8 and a.best.point == b.best.point
    assert a.fresh == b.fresh == 8  # fresh caches: every distinct legal point lowered once


def test_guided_search_never_lowers_an_illegal_point(gemm_small_space, evaluator):
    res = tune(gemm_small_space, strategy="random", budget=6, seed=1, evaluator=evaluator,
               progress=False, default=False)
    assert all(gemm_small_space.check(t.point).legal for t in res.trials)
    assert sum(res.pruned.values()) + len(res.trials) <= res.checked + len(res.trials)
    assert res.fresh == len(res.trials)


def test_a_compile_failure_is_recorded_and_the_sweep_goes_on(vadd_space, evaluator,
                                                             monkeypatch):
    import ascendsched.lower.pipeline as drv

    real = drv.lower
    bad = {"cores=8"}

    def flaky(sched, *a, **kw):
        if kw.get("stop_after") is None and any(b in str(sched) for b in bad):
            raise InternalCompilerError("injected failure")
        return real(sched, *a, **kw)

    monkeypatch.setattr(drv, "lower", flaky)
    res = tune(vadd_space, strategy="exhaustive", evaluator=evaluator, progress=False,
               default=False)
    fails = res.failures
    assert fails and all("cores=8" in str(t.schedule) for t in fails)
    assert all("InternalCompilerError: injected failure" == t.evaluation.error for t in fails)
    assert math.isinf(fails[0].evaluation.time_s)
    assert res.best is not None and "cores=8" not in str(res.best.schedule)
    # the failure is cached: a rerun does not retry it
    assert evaluator.cache.get(cache_key(fails[0].schedule)).status == "error"
    again = tune(vadd_space, strategy="exhaustive", evaluator=evaluator, progress=False,
                 default=False)
    assert again.fresh == 0 and len(again.failures) == len(fails)


def test_a_guided_search_evaluates_the_seeds_first(evaluator):
    from ascendsched.autotune import library_space

    sp = library_space("gemm", 1024, 1024, 1024)
    seeds = [p for p in sp.seed_points() if sp.check(p).legal]
    assert len(seeds) >= 3
    res = tune(sp, strategy="tpe", budget=len(seeds) + 1, seed=0, evaluator=evaluator,
               progress=False)
    assert [t.point for t in res.trials[:len(seeds)]] == seeds
    # the default schedule is the first seed, so tuning is never slower than it
    assert str(res.trials[0].schedule) == str(res.default.schedule)
    assert res.best.evaluation.time_s <= res.default.evaluation.time_s
    cold = tune(sp, strategy="tpe", budget=2, seed=0, evaluator=evaluator, progress=False,
                default=False, warm_start=False)
    assert [t.point for t in cold.trials] != seeds[:2]
