"""The command line as a new user meets it: loading user files, user inputs, time limits."""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np
import pytest

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.api.cli import load, main
from ascendsched.emit_ascendc.check import run_cpu
from ascendsched.errors import KernelTimeoutError, ToolchainError
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule

USER_FILE = """\
from __future__ import annotations

from dataclasses import dataclass

from ascendsched.algo import algorithm, compute, placeholder


@dataclass(frozen=True)
class Config:
    n: int = 256
    scale: float = 2.0


def schedule(cfg: Config = Config()):
    x = placeholder("x", (cfg.n,), "float32")
    return algorithm("scaled", compute("y", (cfg.n,), lambda i: x[i] * cfg.scale))
"""


def test_user_file_with_future_annotations_and_a_dataclass_loads(tmp_path):
    f = tmp_path / "user_kernel.py"
    f.write_text(USER_FILE)
    algo = load(f"{f}:schedule")
    assert algo.name == "scaled"


@pytest.mark.parametrize("body, expect", [
    ("def f(n):\n    pass\n", "needs arguments (n)"),
    ("def f():\n    return 42\n", "returned int 42"),
    ("raise RuntimeError('boom')\n", "raised RuntimeError: boom"),
])
def test_cli_reports_user_code_errors_without_a_traceback(tmp_path, capsys, body, expect):
    f = tmp_path / "bad.py"
    f.write_text(body)
    assert main(["check", f"{f}:f", "--ir-only"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ascendsched: error:") and expect in err
    assert "Traceback" not in err


def test_check_takes_user_inputs_with_zero_rows_inf_and_nan(tmp_path, capsys):
    a = L.softmax(8, 256)
    x = np.random.default_rng(0).uniform(-2, 2, (8, 256)).astype(np.float16)
    x[1] = 0  # a row of zeros
    x[2, :5] = -np.inf
    x[3, 7] = np.nan
    s = Schedule(a)
    for st in ("xf", "mx", "e", "s"):
        s = s.compute_at(st, "y", "root")
    verdicts = check(s, inputs={"x": x}, cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
    # the reference really saw them: row 3 is NaN, row 2 has zeros where x was -inf
    from ascendsched.algo import evaluate

    y = evaluate(a, {"x": x})["y"]
    assert np.isnan(y[3]).all() and (y[2, :5] == 0).all() and np.allclose(y[1], 1 / 256)
    # and through the command line, from an .npz file
    f = tmp_path / "k.py"
    f.write_text("from ascendsched.algo import library as L\n"
                 "def f():\n    return L.vadd(64, 'float32')\n")
    npz = tmp_path / "in.npz"
    np.savez(npz, x=np.full(64, np.nan, np.float32), y=np.full(64, -np.inf, np.float32))
    assert main(["check", f"{f}:f", "--ir-only", "--inputs", str(npz)]) == 0
    assert "all checks passed" in capsys.readouterr().out


def test_cpu_run_timeout_is_a_typed_error_with_a_settable_limit(tmp_path):
    k = lower(Schedule(L.vadd(64, "float32")))
    fake = tmp_path / "slow_kernel"
    fake.write_text("#!/bin/sh\nsleep 5\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    ins = {"x": np.zeros(64, np.float32), "y": np.zeros(64, np.float32)}
    with pytest.raises(KernelTimeoutError, match=r"within 0.2 s.*--timeout SECONDS") as e:
        run_cpu(Path(fake), k, ins, timeout=0.2)
    assert isinstance(e.value, ToolchainError)
