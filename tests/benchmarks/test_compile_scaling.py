"""benchmarks/compile_scaling.py's drawn shapes (``--random``): seeded, every library kernel
kind, and each one compiles through the benchmark's own runner."""

from ascendsched.benchmarks.compile_scaling import RANDOM, random_cases, run, schedule_of


def test_drawn_shapes_are_seeded_and_schedulable():
    cases = random_cases(12, 3)
    assert cases == random_cases(12, 3)
    assert cases != random_cases(12, 4)
    for case in cases:
        assert case.schedule == RANDOM and case.label.endswith(f"[{RANDOM}]")
        algo = schedule_of(case).algo
        dims = [d for t in algo.inputs for d in t.shape]
        assert all(n in dims for n in case.shape[-2:]), (case, dims)


def test_a_drawn_shape_compiles_in_the_benchmarks_runner():
    case = next(c for c in random_cases(40, 0) if c.kernel == "softmax")
    row = run(case)
    assert "error" not in row and row["cpu"] > 0 and row["statements"] > 0, row


def test_an_only_filter_matching_no_case_is_a_usage_error(monkeypatch, capsys):
    import sys

    import pytest

    from ascendsched.benchmarks.compile_scaling import main

    monkeypatch.setattr(sys, "argv", ["compile_scaling.py", "--only", "no such kernel"])
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == 2
    assert "--only 'no such kernel': no case's label contains it" in capsys.readouterr().err
