"""A kernel from the real pipeline (algo -> schedule -> lower: memory plan + sync insertion)
emits, compiles with g++ against the CPU runtime, and matches the IR simulator bit for bit,
trace included; the CPU trace passes the race checker."""

from __future__ import annotations

import numpy as np
import pytest

from ascendsched.emit_ascendc import build_cpu, emit_project, run_cpu
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel
from ascendsched.sim.trace import Trace, traces_match

pytestmark = pytest.mark.slow  # g++ builds and runs


@pytest.fixture(scope="module")
def softmax_build(tmp_path_factory):
    from ascendsched.algo.library import softmax
    from ascendsched.lower.pipeline import lower
    from ascendsched.schedule import Schedule

    s = Schedule(softmax(m=16, n=256)).split("y", "i", 8)
    for stage in ("xf", "mx", "e", "s"):
        s = s.compute_at(stage, "y", "i_o")
    kernel = lower(s)
    project = emit_project(kernel, tmp_path_factory.mktemp("softmax"))
    return kernel, project, build_cpu(project)


def test_lowered_softmax_matches_sim(softmax_build):
    kernel, project, binary = softmax_build
    assert "SetFlag<HardEvent::" in project.kernel_source
    (inp,) = [p for p in kernel.params if p.kind == "input"]
    x = np.random.default_rng(1).standard_normal(inp.shape).astype(inp.dtype.np)
    run = run_cpu(binary, kernel, {inp.name: x})
    sim = run_kernel(kernel, {inp.name: x}, trace=True)
    for name, out in sim.outputs.items():
        np.testing.assert_array_equal(run.outputs[name], out)
    cpu_trace = Trace.from_jsonl(run.trace_jsonl)
    diffs = traces_match(sim.trace, cpu_trace)
    assert not diffs, "\n".join(diffs)
    report = check_trace(cpu_trace, kernel.target)
    assert report.ok, str(report)
