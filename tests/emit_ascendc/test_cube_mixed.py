"""A mix kernel: the AIC computes a GEMM tile into a GM workspace, hands it to the AIV with a
mode-2 cross-core flag, and the AIV applies ReLU and stores the result. Emitted as one
KERNEL_TYPE_MIX_AIC_1_1 kernel with ``if ASCEND_IS_AIC`` / ``if ASCEND_IS_AIV`` sections; the CPU
runtime runs both programs of a block on two threads with counting cross-core flags. Checked:
numbers, C++ trace == IR trace (both cores), race checker; a dropped CrossCoreSetFlag is a
deadlock the runtime reports.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ascendsched import dtypes as dt
from ascendsched.emit_ascendc import KernelAbort, emit_project, run_cpu
from ascendsched.lower.affine import Affine
from ascendsched.lower.insert_sync import insert_sync
from ascendsched.lower.ir import GmTensor, Instr, Kernel, Program, StmtMutator, view
from ascendsched.lower.polyhedral import analyze_dependences
from ascendsched.lower.sync_ir import CrossSet, CrossWait
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel
from ascendsched.sim.trace import Trace, traces_match
from ascendsched.target import ASCEND_910B, CoreType, Pipe, Scope
from tests.kit.cpp import build_projects
from tests.kit.cube import CASES, gemm_kernel, inputs
from tests.kit.ir import planned, set_flag, wait_flag

pytestmark = pytest.mark.slow  # g++ builds and runs

M, N = 33, 47


def mixed_kernel(*, drop_cross_set: bool = False) -> Kernel:
    """GEMM (fp16_single fixture, synced) into workspace ``ws``; AIV: y = relu(ws)."""
    p = planned(gemm_kernel(CASES["fp16_single"]))
    aic = insert_sync(p, analyze_dependences(p), ASCEND_910B)
    aic_body = aic.program(CoreType.AIC).body

    class _ToWs(StmtMutator):  # the Fixpipe writes the workspace instead of the output
        def visit_Instr(self, s: Instr) -> tuple:
            if s.op != "fixpipe":
                return (s,)
            w = replace(s.writes[0], tensor="ws")
            return (replace(s, writes=(w,)),)

    aic_body = _ToWs().visit_body(aic_body)
    if not drop_cross_set:  # data ready: after the Fixpipe (FIX) of the tile
        aic_body = aic_body + (CrossSet(Pipe.FIX, flag_id=Affine(0), mode=2,
                                        comment="ws written (FIX) -> AIV may read it"),)
    ub = "t_ub"
    aiv_body = (
        CrossWait(Pipe.MTE2, flag_id=Affine(0), mode=2,
                  comment="wait for the AIC's Fixpipe of ws"),
        Instr("copy_gm_ub", Pipe.MTE2, (view(ub, 0, M, 48, N),), (view("ws", 0, M, N, N),),
              comment="load the GEMM result"),
        set_flag(Pipe.MTE2, Pipe.V), wait_flag(Pipe.MTE2, Pipe.V),
        Instr("vec_unary", Pipe.V, (view(ub, 0, M, 48, N),), (view(ub, 0, M, 48, N),),
              (("fn", "relu"),), comment="y = relu(C)"),
        set_flag(Pipe.V, Pipe.MTE3), wait_flag(Pipe.V, Pipe.MTE3),
        Instr("copy_ub_gm", Pipe.MTE3, (view("y", 0, M, N, N),), (view(ub, 0, M, 48, N),),
              comment="store y"),
    )
    params = tuple(t for t in aic.params if t.name != "c") + (
        GmTensor("ws", (M, N), dt.float32, "workspace"), GmTensor("y", (M, N), dt.float32, "output"))
    from ascendsched.lower.ir import Buffer

    ubuf = Buffer(ub, Scope.UB, dt.float32, M * 48, offsets=(0,))
    return replace(aic, name="gemm_relu_mix", params=params, buffers=aic.buffers + (ubuf,)
                   ).with_programs((Program(CoreType.AIC, aic_body),
                                    Program(CoreType.AIV, aiv_body)))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("cube_mixed")
    kernels = {"ok": mixed_kernel(), "no_set": mixed_kernel(drop_cross_set=True)}
    return build_projects(kernels, root)


def test_mix_kernel_text(built):
    s = built["ok"].project.kernel_source
    assert "KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_1);" in s
    aic, aiv = s.index("if ASCEND_IS_AIC {"), s.index("if ASCEND_IS_AIV {")
    assert aic < s.index("Mmad(") < aiv < s.index("Relu(")
    assert s.count("TPipe pipe;") == 2  # one per core section
    assert "TBuf<TPosition::VECCALC> ubuf;" in s[aiv:] and "TBuf<TPosition::A1> l1buf;" in s[aic:aiv]
    assert "CrossCoreSetFlag<2, PIPE_FIX>(0);" in s[aic:aiv]
    assert "CrossCoreWaitFlag<2, PIPE_MTE2>(0);" in s[aiv:]
    assert "ws_gm.SetGlobalBuffer((__gm__ float*)workspace + 0, 1551);" in s
    # cross-core flags under <<<>>>: the FFTS base address comes first and is set first
    assert 'void gemm_relu_mix(uint64_t fftsAddr, GM_ADDR a, GM_ADDR b, GM_ADDR y,' in s
    assert s.index("SetSyncBaseAddr(fftsAddr);") < aic
    host = built["ok"].project.host_main.read_text()
    assert "rtGetC2cCtrlAddr(&fftsAddr, &fftsLen)" in host and '#include "runtime/rt_ffts.h"' in host
    assert "ACLRT_LAUNCH_KERNEL(gemm_relu_mix)(blockDim, stream, fftsAddr, aDevice," in host
    assert "runtime  # rtGetC2cCtrlAddr" in built["ok"].project.cmake.read_text()


def test_mix_kernel_runs_both_cores(built):
    k, binary = built["ok"].kernel, built["ok"].binary
    ins = inputs(CASES["fp16_single"])
    run = run_cpu(binary, k, ins)
    ref = np.maximum(ins["a"].astype(np.float64) @ ins["b"].astype(np.float64), 0)
    np.testing.assert_array_equal(run.outputs["y"], ref.astype(np.float32))
    cpu = Trace.from_jsonl(run.trace_jsonl)
    assert {e.core for e in cpu.events} == {"AIC", "AIV"}
    sim = run_kernel(k, ins, trace=True)
    np.testing.assert_array_equal(sim.outputs["y"], run.outputs["y"])
    diffs = traces_match(sim.trace, cpu)
    assert not diffs, "\n".join(diffs)
    assert check_trace(cpu, ASCEND_910B).ok
    cs = [e for e in cpu.events if e.op.startswith("cross")]
    assert [(e.core, e.op, e.pipe, e.flag_id) for e in cs] == [
        ("AIC", "cross_set", "FIX", 0), ("AIV", "cross_wait", "MTE2", 0)]


def test_dropped_cross_set_is_a_deadlock(built):
    k, binary = built["no_set"].kernel, built["no_set"].binary
    with pytest.raises(KernelAbort, match=r"CrossCoreWaitFlag\(0\) can never be released: "
                                          r"cross-core deadlock \(AIV waits; AIC finished\)"):
        run_cpu(binary, k, inputs(CASES["fp16_single"]))


def test_mix_launcher_finds_the_ffts_header(tmp_path):
    """The launcher includes runtime/rt_ffts.h; CANN 8.x keeps it (and the msprof headers it
    includes) under include/experiment/, which the CMake project must put on the path."""
    proj = emit_project(mixed_kernel(), tmp_path)
    assert '#include "runtime/rt_ffts.h"' in proj.host_main.read_text()
    cmake = proj.cmake.read_text()
    main_includes = cmake[cmake.index("target_include_directories(gemm_relu_mix_main"):]
    main_includes = main_includes[:main_includes.index(")")]
    assert "${ASCEND_CANN_PACKAGE_PATH}/include/experiment/runtime" in main_includes
    assert "${ASCEND_CANN_PACKAGE_PATH}/include/experiment/msprof" in main_includes
