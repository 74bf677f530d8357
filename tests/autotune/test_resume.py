"""A sweep killed (SIGKILL) in the middle resumes from the cache and re-evaluates nothing it had."""

import multiprocessing as mp
import os
import signal

from ascendsched.autotune import Cache, Evaluator, LocalExecutor, tune

KILL_AFTER = 3


def _sweep_then_die(space, db: str, studies: str) -> None:
    def die(key, ev):
        die.n += 1
        if die.n == KILL_AFTER:
            os.kill(os.getpid(), signal.SIGKILL)
    die.n = 0
    ev = Evaluator(Cache(db), LocalExecutor(1), on_fresh=die)
    tune(space, strategy="tpe", budget=10, seed=5, evaluator=ev, progress=False,
         storage=studies, default=False)


def test_killed_sweep_resumes_without_re_evaluating(vadd_space, tmp_path):
    db, studies = str(tmp_path / "tune.sqlite"), str(tmp_path / "studies.sqlite")
    ctx = mp.get_context("fork")
    p = ctx.Process(target=_sweep_then_die, args=(vadd_space, db, studies))
    p.start()
    p.join(120)
    assert p.exitcode == -signal.SIGKILL
    with Cache(db) as c:
        had = c.keys()
    assert len(had) == KILL_AFTER  # each finished evaluation was committed before the kill

    ev = Evaluator(Cache(db), LocalExecutor(1))
    resumed = tune(vadd_space, strategy="tpe", budget=10, seed=5, evaluator=ev, progress=False,
                   storage=studies, default=False)
    assert not had & set(ev.fresh)  # nothing it had was evaluated again
    assert resumed.hits == KILL_AFTER and resumed.fresh == 10 - KILL_AFTER
    ev.close()

    # and the resumed sweep found what an uninterrupted one finds
    clean = tune(vadd_space, strategy="tpe", budget=10, seed=5, progress=False, default=False,
                 evaluator=Evaluator(Cache(), LocalExecutor(1)))
    assert [t.point for t in resumed.trials] == [t.point for t in clean.trials]
    assert [t.evaluation.time_s for t in resumed.trials] == [t.evaluation.time_s for t in clean.trials]
