"""``check`` of a general ``Schedule`` with a tensorized stage too big to execute: it runs the
ladder on the reduced instance the equivalent ``GemmSchedule`` reduces to and names it."""

import pytest

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import Schedule
from ascendsched.schedule.reduce import describe, reduce_instance
from tests.kit.general_cube import general_spelling

RUNGS = ("IR execution == numpy", "IR trace race check", "g++ build of emitted C++",
         "C++ run == numpy", "C++ trace == IR trace", "C++ trace race check")


def _assert_reduced_ladder(vs, instance: str, cpp: bool) -> None:
    """Every rung passed; the full kernel was emitted, reduced and compared, and each rung
    after that ran on ``instance`` (tests/e2e/test_check_reduced.py checks the same)."""
    bad = [str(v) for v in vs if not v.ok]
    assert not bad, "\n".join(bad)
    names = [v.check for v in vs]
    assert names[:4] == ["lower", "g++ build of full kernel" if cpp else "emit full kernel",
                         "reduced instance", "full IR == reduced IR"]
    want = RUNGS if cpp else RUNGS[:2]
    assert [next(r for r in want if v.check.startswith(r)) for v in vs[4:]] == list(want)
    assert {v.instance for v in vs[4:]} == {instance}
    assert all(f"[on {instance}]" in str(v) for v in vs[4:])


@pytest.mark.parametrize("algo,instance", [
    (lambda: L.gemm(2048, 2048, 2048), "gemm 512 x 512 x 512 on 3 cores"),
    (lambda: L.gemm_gelu(2048, 2048, 1000), "gemm 512 x 512 x 488 on 3 cores"),
], ids=["gemm 2048^3", "gemm_gelu 2048x2048x1000"])
def test_general_spelling_is_checked_through_the_gemm_schedules_reduced_instance(algo, instance):
    g = schedule_for(algo())
    vs = check(general_spelling(g), cpp=False)
    _assert_reduced_ladder(vs, instance, cpp=False)
    assert describe(reduce_instance(g).reduced) == instance
    assert "dynamic instructions > 20,000" in vs[2].detail


@pytest.mark.slow
def test_general_spelling_with_tails_everywhere_is_checked_through_its_reduced_instance(
        tmp_path):
    """M 4100 % 128, N 4000 % 256 and K 4000 % 128 tails, written as general directives."""
    s = (Schedule(L.gemm(4100, 4000, 4000)).tile("C", ("i", "j"), (128, 256))
         .split("C", "k", 128).split("C", "k_i", 64).tensorize("C", "k_i_i", "mmad")
         .cache_read("A", "L1", at=("C", "k_o"), copies=2)
         .cache_read("B", "L1", at=("C", "k_o"), copies=2)
         .cache_read("A", "L0A", at=("C", "k_i_o"), copies=2)
         .cache_read("B", "L0B", at=("C", "k_i_o"), copies=2)
         .fuse("C", "i_o", "j_o").bind("C", "i_o_j_o", 24).swizzle("C", "i_o_j_o", 4, "i"))
    vs = check(s, work_dir=tmp_path)
    _assert_reduced_ladder(vs, "gemm 1028 x 928 x 416 on 6 cores", cpp=True)
    assert vs[2].detail.startswith("gemm 4100 x 4000 x 4000 on 24 cores -> reduced gemm 1028 "
                                   "x 928 x 416 on 6 cores")
    assert (tmp_path / "full").is_dir() and (tmp_path / "reduced").is_dir()
