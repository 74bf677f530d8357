"""NaN through max/min in the emitted C++: the host runtime's Max/Min, Maxs/Mins, Relu and
WholeReduceMax/Min propagate NaN as numpy and the IR simulator do (the 910B docs are silent,
emit_ascendc/runtime/kernel_operator.h cites what they say), through ``check`` and the CLI's
``check --inputs``."""

import numpy as np
import pytest

from ascendsched.api.check import check
from ascendsched.api.cli import main
from tests.e2e.nan_cases import elementwise, nan_inputs, row_extremes

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_emitted_max_and_min_propagate_nan(tmp_path, dtype):
    for n, (s, names) in enumerate(((elementwise(dtype), ("x", "y")),
                                    (row_extremes(dtype), ("x",)))):
        vs = check(s, inputs=nan_inputs(names, dtype), work_dir=tmp_path / str(n))
        run = next(v for v in vs if v.check.startswith("C++ run == numpy"))
        assert run.ok, run.detail
        assert all(v.ok for v in vs), "\n".join(map(str, vs))


def test_cli_check_with_nan_inputs(tmp_path, capsys):
    f = tmp_path / "k.py"
    f.write_text("from tests.e2e.nan_cases import row_extremes\n"
                 "def schedule():\n    return row_extremes()\n")
    npz = tmp_path / "in.npz"
    np.savez(npz, **nan_inputs(("x",)))
    assert main(["check", f"{f}:schedule", "--inputs", str(npz)]) == 0
    out = capsys.readouterr().out
    assert "C++ run == numpy" in out and "FAIL" not in out
