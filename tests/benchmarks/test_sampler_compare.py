"""The sampler comparison: guided runs stay within their budget and never beat exhaustive."""

from ascendsched.algo import library as L
from ascendsched.autotune import Cache, Evaluator, LocalExecutor, vector_space
from ascendsched.autotune.search import SAMPLERS
from ascendsched.benchmarks.sampler_compare import compare, comparison_space


def test_guided_searches_are_bounded_by_exhaustive(tmp_path):
    space = vector_space(L.vadd(65536), tile=(2048, 4096, 8192, 16384), cores=(4, 8),
                         copies_y=(1,))
    ev = Evaluator(Cache(tmp_path / "t.sqlite"), LocalExecutor(1))
    exh, budget, runs = compare(space, ev, seeds=2, fraction=0.25)
    legal = exh.legal_total
    assert budget == legal // 4 and set(runs) == set(SAMPLERS)
    best = exh.best.evaluation.time_s
    for results in runs.values():
        assert len(results) == 2
        for r in results:
            assert len(r.trials) <= budget and r.fresh == 0  # exhaustive filled the cache
            assert r.best.evaluation.time_s >= best
            assert r.history == tuple(sorted(r.history, reverse=True))  # best so far
    ev.close()


def test_the_comparison_space_is_large_enough():
    sp = comparison_space()
    assert sp.size == 1296  # >= 500 legal points once pruned (744 on the 910B model)
