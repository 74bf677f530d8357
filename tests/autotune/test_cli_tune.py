"""``ascendsched tune``: prints the top schedules as code that rebuilds them, with figures."""

import re
import textwrap

from ascendsched.api.cli import load, main

KERNEL = textwrap.dedent('''
    from ascendsched.algo.library import vadd
    from ascendsched.autotune import vector_space


    def algorithm():
        return vadd(65536)


    def space():
        return vector_space(algorithm(), tile=(4096, 8192, 16384), cores=(4, 8), copies_y=(1,))
''')


def test_tune_prints_pasteable_schedules(tmp_path, capsys):
    f = tmp_path / "kern.py"
    f.write_text(KERNEL)
    out_dir = tmp_path / "proj"
    rc = main(["tune", f"{f}:algorithm", "--space", f"{f}:space", "--space", "copies_z=1",
               "--budget", "5", "--jobs", "1", "--top", "2", "--cache", str(tmp_path / "c"),
               "--no-progress", "--out", str(out_dir)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "12 points" in text and "strategy tpe, budget 5" in text
    run, cached = map(int, re.search(r"evaluations: (\d+) run, (\d+) from the cache",
                                     text).groups())
    assert run + cached == 6 and run >= 5  # 5 points and the default (maybe one of them)
    assert "default schedule: modelled" in text
    codes = re.findall(r"# --- #\d\n(.*?)(?=\n# --- #|\nwrote )", text, re.S)
    assert len(codes) == 2
    ns = {"algorithm": lambda: load(f"{f}:algorithm")}
    exec(codes[0], ns)
    exec(codes[1], ns)
    best, second = ns["tuned_1"](), ns["tuned_2"]()
    assert str(best) != str(second)
    times = [float(re.search(r"# modelled ([\d.]+) us, ([\d.]+)% of the roofline", c).group(1))
             for c in codes]
    assert 0 < times[0] <= times[1]
    assert "the default schedule (modelled, not measured)" in codes[0]
    assert (out_dir / "CMakeLists.txt").exists()

    # the same command again: everything from the cache
    main(["tune", f"{f}:algorithm", "--space", f"{f}:space", "--space", "copies_z=1",
          "--budget", "5", "--jobs", "1", "--cache", str(tmp_path / "c"), "--no-progress"])
    assert "evaluations: 0 run, 6 from the cache" in capsys.readouterr().out


def test_tune_reports_a_bad_space_parameter(tmp_path, capsys):
    f = tmp_path / "kern.py"
    f.write_text(KERNEL)
    rc = main(["tune", f"{f}:algorithm", "--space", "nosuch=1", "--cache", str(tmp_path)])
    assert rc == 2 and "no parameter 'nosuch'" in capsys.readouterr().err


def test_pasted_code_runs_when_the_algorithm_function_is_named_algo() -> None:
    """``algo = algo()`` inside the pasted function would raise UnboundLocalError."""
    from ascendsched.algo import library as L
    from ascendsched.autotune.codegen import schedule_code
    from ascendsched.schedule import Schedule

    sched = Schedule(L.vadd(4096)).split("z", "i", 1024)
    code = schedule_code(sched, "algo()")
    ns = {"algo": lambda: L.vadd(4096)}
    exec(code, ns)
    assert str(ns["schedule"]()) == str(sched)
    assert "algo_ = algo()" in code
