"""build_cpu's errors: a missing g++ says how to install it; a failing build carries stderr,
the repro command and the source path."""

from __future__ import annotations

import pytest

from ascendsched.emit_ascendc import build_cpu, check, emit_project
from ascendsched.errors import ToolchainError
from tests.kit.hand import sync_row_max_sub
from tests.kit.ir import hand_plan, row_max_sub_kernel

pytestmark = pytest.mark.slow  # g++ builds and runs


@pytest.fixture()
def project(tmp_path):
    return emit_project(sync_row_max_sub(hand_plan(row_max_sub_kernel())), tmp_path)


def test_missing_gxx(project, monkeypatch):
    monkeypatch.setattr(check.shutil, "which", lambda name: None)
    with pytest.raises(ToolchainError, match="apt-get install g\\+\\+"):
        build_cpu(project)


def test_failing_build_reports_stderr_and_repro(project):
    project.kernel_cpp.write_text(project.kernel_source.replace("PipeBarrier<PIPE_V>();",
                                                                "PipeBarrier<PIPE_NOPE>();", 1))
    with pytest.raises(ToolchainError) as e:
        build_cpu(project, sanitize=False)
    msg = str(e.value)
    assert "PIPE_NOPE" in msg and "Repro command: " in msg
    assert str(project.kernel_cpp) in msg
