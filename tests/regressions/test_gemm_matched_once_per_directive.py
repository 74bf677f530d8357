"""The default GEMM schedule search matched the GEMM thousands of times.

What broke: every ``GemmSchedule`` directive returns a new frozen schedule, and its
``__post_init__`` asked for ``spec``, which ran ``match_gemm`` on the algorithm again. The
default schedule generator builds about 350 candidates of up to 9 directives each.
How it showed: ``schedule_for(gemm(4096, 4096, 4096))`` took 0.20 s of CPU, more than lowering
the chosen schedule, with 3109 calls of ``match_gemm`` (cProfile).
Fixed by: ``GemmSchedule.spec`` keeps the match per algorithm (a weak-key cache, now in
``schedule/cube_plan.py``).
Speed is measured in ``benchmarks/compile_scaling.py``; this test counts the matches.
"""

from __future__ import annotations

import pytest

from ascendsched.algo import library as L
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import cube_plan as gemm_schedule


def test_the_default_search_matches_each_algorithm_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = gemm_schedule.match_gemm
    monkeypatch.setattr(gemm_schedule, "match_gemm", lambda algo: calls.append(algo) or real(algo))
    algo = L.gemm(1024, 1024, 1024)
    sched = schedule_for(algo)
    assert sched.algo is algo and len(sched.directives) >= 4
    assert calls == [algo]
