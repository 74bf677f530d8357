"""Ray executor: same cache semantics and the same best as the local executor for a seed."""

import pytest

from ascendsched.autotune import Cache, Evaluator, LocalExecutor, RayExecutor, tune

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    # a small object store: the sweep passes schedules and results, not arrays
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=100 * 2**20)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_ray_gives_the_local_best_for_the_same_seed(vadd_space, tmp_path, local_ray):
    local = tune(vadd_space, strategy="tpe", budget=8, seed=2, progress=False, default=False,
                 evaluator=Evaluator(Cache(tmp_path / "local.sqlite"), LocalExecutor(2)))
    ev = Evaluator(Cache(tmp_path / "ray.sqlite"), RayExecutor())
    remote = tune(vadd_space, strategy="tpe", budget=8, seed=2, progress=False, default=False,
                  evaluator=ev)
    assert [t.point for t in remote.trials] == [t.point for t in local.trials]
    assert remote.best.point == local.best.point
    assert remote.best.evaluation.time_s == local.best.evaluation.time_s
    assert remote.fresh == 8
    again = tune(vadd_space, strategy="tpe", budget=8, seed=2, progress=False, default=False,
                 evaluator=ev)
    assert again.fresh == 0 and again.hits == 8  # the cache answers, as locally
