"""``check`` on kernels too big to execute: the full kernel is lowered, emitted and built, its
reduced instance is compared with it and runs the rest of the ladder, and every verdict that
executed something names the reduced shape and cores."""

import pytest

from ascendsched.algo import library as L
from ascendsched.api.check import CheckBudget, check
from ascendsched.api.cli import main
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import Schedule
from ascendsched.schedule.reduce import Reduction

RUNG_NAMES = ("IR execution == numpy", "IR trace race check", "g++ build of emitted C++",
              "C++ run == numpy", "C++ trace == IR trace", "C++ trace race check")


def _assert_reduced_ladder(vs, instance: str, cpp: bool = True) -> None:
    bad = [str(v) for v in vs if not v.ok]
    assert not bad, "\n".join(bad)
    names = [v.check for v in vs]
    assert names[:2] == ["lower", "g++ build of full kernel" if cpp else "emit full kernel"]
    assert names[2:4] == ["reduced instance", "full IR == reduced IR"]
    ran = vs[4:]
    want = RUNG_NAMES if cpp else RUNG_NAMES[:2]
    assert [next(r for r in want if v.check.startswith(r)) for v in ran] == list(want)
    assert {v.instance for v in ran} == {instance}
    assert all(f"[on {instance}]" in str(v) for v in ran)


@pytest.mark.slow
def test_gemm_4096_cubed_is_checked_through_its_reduced_instance(tmp_path):
    vs = check(schedule_for(L.gemm(4096, 4096, 4096)), work_dir=tmp_path)
    _assert_reduced_ladder(vs, "gemm 512 x 512 x 512 on 3 cores")
    assert "dynamic instructions > 20,000" in vs[2].detail
    assert (tmp_path / "full").is_dir() and (tmp_path / "reduced").is_dir()


@pytest.mark.slow
def test_rmsnorm_16384_square_is_checked_through_its_reduced_instance(tmp_path):
    vs = check(L.rmsnorm(16384, 16384), work_dir=tmp_path)
    _assert_reduced_ladder(vs, "y[7, 16384] on 2 cores")
    assert "MiB of GM tensors" in vs[2].detail or "dynamic instructions" in vs[2].detail


def test_small_kernel_runs_at_full_size_unless_asked():
    s = Schedule(L.vadd(2048 * 8 + 1808)).split("z", "i", 2048).bind("z", "i_o", 2) \
        .buffer("x").buffer("y").buffer("z")
    full = check(s, cpp=False)
    assert [v.check for v in full][1:] == ["IR execution == numpy (z)", "IR trace race check"]
    assert all(v.ok and not v.instance for v in full)
    forced = check(s, cpp=False, reduce=True)
    _assert_reduced_ladder(forced, "z[18192] on 2 cores", cpp=False)
    assert "no smaller instance keeps its structure" in forced[2].detail  # 8 + tail is minimal
    tiny = check(s, cpp=False, budget=CheckBudget(instrs=10))
    _assert_reduced_ladder(tiny, "z[18192] on 2 cores", cpp=False)


def test_a_reduced_instance_of_other_structure_fails_the_check(monkeypatch):
    """A reduction that changed the tile (a bug in schedule/reduce.py) must not pass."""
    s = Schedule(L.vadd(2048 * 40)).split("z", "i", 2048).bind("z", "i_o", 4)
    wrong = Schedule(L.vadd(1024 * 12)).split("z", "i", 1024).bind("z", "i_o", 2)
    monkeypatch.setattr("ascendsched.api.check.reduce_instance", lambda sched: Reduction(s, wrong))
    vs = check(s, cpp=False, reduce=True)
    cmp = next(v for v in vs if v.check == "full IR == reduced IR")
    assert not cmp.ok and cmp.detail.startswith("buffer x_ub: full UB float16[2048]")
    assert "FAIL" in str(cmp)


def test_cli_says_which_reduced_shape_it_ran(tmp_path, capsys):
    f = tmp_path / "big.py"
    f.write_text("from ascendsched.algo.library import vadd\n"
                 "def algorithm():\n    return vadd(4096 * 4096)\n")
    assert main(["check", f"{f}:algorithm", "--ir-only"]) == 0
    out = capsys.readouterr().out
    import re

    from ascendsched.schedule.reduce import describe, reduce_instance
    shape = describe(reduce_instance(schedule_for(L.vadd(4096 * 4096))).reduced)
    n, cores = map(int, re.fullmatch(r"z\[(\d+)\] on (\d+) cores", shape).groups())
    assert n < 4096 * 4096 and cores >= 2
    assert f"-> reduced {shape}" in out
    assert f"[on {shape}]" in out
    assert f"executed on the reduced instance {shape}" in out
    with pytest.raises(SystemExit):  # argparse: --full and --reduced exclude each other
        main(["check", f"{f}:algorithm", "--full", "--reduced"])


def test_cli_full_flag_checks_at_full_size(tmp_path, capsys):
    f = tmp_path / "small.py"
    f.write_text("from ascendsched.algo.library import vadd\n"
                 "def algorithm():\n    return vadd(4096)\n")
    assert main(["check", f"{f}:algorithm", "--ir-only", "--full"]) == 0
    assert "reduced" not in capsys.readouterr().out


def test_check_without_a_work_dir_leaves_nothing_behind(tmp_path, monkeypatch):
    """The emitted projects go to a temporary directory that is removed afterwards (each run
    used to leave its project and binary in the system temp directory)."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    s = Schedule(L.vadd(2048 * 8 + 1808)).split("z", "i", 2048).bind("z", "i_o", 2)
    vs = check(s, cpp=False, reduce=True)
    assert vs[1].check == "emit full kernel" and vs[1].ok
    assert list(tmp_path.iterdir()) == []
