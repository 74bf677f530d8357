"""Cube (AIC) kernels from tests/kit/cube.py, synced and memory-planned, emitted as AscendC,
built with g++ -fsanitize=address,undefined against the CPU runtime and run over the grid:
outputs equal the numpy reference, the C++ trace equals the IR simulator's trace event for
event, and the race checker passes it. Mutations of the emitted text (a wrong fractal stride,
a wrong Nd2Nz stride, GEMV-mode m) are caught by wrong numbers or a runtime abort.

Builds are cached by content and run two at a time (about 5-10 s each when cold).
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from ascendsched.emit_ascendc import KernelAbort, emit_project, run_cpu
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.insert_sync import insert_sync
from ascendsched.lower.ir import Kernel, Program, copied
from ascendsched.lower.polyhedral import analyze_dependences
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel
from ascendsched.sim.trace import Trace, traces_match
from ascendsched.target import ASCEND_910B, CoreType
from tests.kit.cpp import Built, build_projects
from tests.kit.cube import CASES, batched_kernel, gemm_kernel, inputs, reference
from tests.kit.ir import planned

pytestmark = pytest.mark.slow  # g++ builds and runs

# The fixtures that cover distinct emission paths: K loop with L1/L0 double buffering and
# K tails; several blocks with M/N tails and double-buffered L0C; int8 with transposed A and B
# (LoadDataWithTranspose into L0A and L0B). bf16 in and out runs in test_cube_lowered.py.
BUILT = ("fp16_kloop_db", "fp16_blocks", "int8_trans")


def _final(k: Kernel) -> Kernel:
    p = planned(k)
    return insert_sync(p, analyze_dependences(p), ASCEND_910B)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Built]:
    root = tmp_path_factory.mktemp("cube_emit")
    kernels = {n: _final(gemm_kernel(CASES[n])) for n in BUILT}
    kernels["batched"] = _final(batched_kernel())
    kernels["fp16_single"] = _final(gemm_kernel(CASES["fp16_single"]))
    # A nz -> Zz: the source fractal stride of the per-16-row-block load is Mp/16 = 3; 2 reads
    # the fractals of the wrong rows.
    muts = {
        "mut_srcstride": ("LoadData2DParams(0, 5, 3, 0, 0, false, 0)",
                          "LoadData2DParams(0, 5, 2, 0, 0, false, 0)"),
        # B's Nd2Nz: column groups Rp = 80 rows apart; 64 makes groups overlap rows of the next
        "mut_nd2nz_c0stride": ("Nd2NzParams(1, 70, 47, 0, 47, 80, 1, 0)",
                               "Nd2NzParams(1, 70, 47, 0, 47, 64, 1, 0)"),
        "mut_gemv": ("MmadParams(33, 47, 70,", "MmadParams(1, 47, 70,"),
        # the M pipe no longer waits for the L0A/L0B loads
        "mut_no_wait": ("WaitFlag<HardEvent::MTE1_M>(0);", "// dropped"),
    }
    return build_projects(kernels, root,
                          {name: ("fp16_single", old, new) for name, (old, new) in muts.items()})


def _check_against_sim(b: Built, ins: dict[str, np.ndarray], ref: np.ndarray) -> Trace:
    run = run_cpu(b.binary, b.kernel, ins)
    np.testing.assert_array_equal(run.outputs["c"].astype(np.float64), ref.astype(np.float64))
    cpu = Trace.from_jsonl(run.trace_jsonl)
    sim = run_kernel(b.kernel, ins, trace=True)
    diffs = traces_match(sim.trace, cpu)
    assert not diffs, "\n".join(diffs)
    report = check_trace(cpu, b.kernel.target)
    assert report.ok, str(report)
    return cpu


@pytest.mark.parametrize("name", BUILT)
def test_fixture_runs_equal_numpy_and_sim_trace(built, name):
    b, c = built[name], CASES[name]
    ins = inputs(c)
    cpu = _check_against_sim(b, ins, reference(c, ins))
    assert {e.core for e in cpu.events} == {"AIC"}
    assert len({e.block for e in cpu.events}) == c.blocks
    ops = {e.op for e in cpu.events}
    assert {"copy_gm_l1", "mmad", "fixpipe", "set_flag", "wait_flag"} <= ops


def test_random_values_within_fp32_rounding(built):
    # non-integer inputs: the C++ Mmad rounds its k-sum once, the simulator sums in fp32;
    # both stay within fp32 accumulation error of the float64 product
    c = CASES["fp16_kloop_db"]
    ins = inputs(c, seed=7, small_ints=False)
    run = run_cpu(built["fp16_kloop_db"].binary, built["fp16_kloop_db"].kernel, ins)
    exact = ins["a"].astype(np.float64) @ ins["b"].astype(np.float64)
    np.testing.assert_allclose(run.outputs["c"], exact, rtol=1e-5, atol=1e-4)
    sim = run_kernel(built["fp16_kloop_db"].kernel, ins).outputs["c"]
    np.testing.assert_allclose(run.outputs["c"], sim, rtol=1e-5, atol=1e-5)


def test_batched_nd_matrices(built):
    b = built["batched"]
    rng = np.random.default_rng(3)
    ins = {"a": rng.integers(-4, 5, (3, 20, 40)).astype(np.float16),
           "b": rng.integers(-4, 5, (3, 40, 24)).astype(np.float16)}
    ref = np.einsum("bmk,bkn->bmn", ins["a"].astype(np.float64), ins["b"].astype(np.float64))
    _check_against_sim(b, ins, ref.astype(np.float32))
    src = b.project.kernel_source
    assert "Nd2NzParams(3, 20, 40, 800, 40, 32, 1, 1536)" in src  # ndNum 3, matrix strides
    assert "FixpipeParamsV220(24, 20, 32, 24, false, QuantMode_t::NoQuant, 0, 3, 4, 480, 0)" in src


# ----------------------------------------------------------------------------- emitted text
def test_entry_kernel_type_and_cube_buffers(built):
    s = built["fp16_kloop_db"].project.kernel_source
    assert "KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIC_ONLY);" in s
    assert "if ASCEND_IS_AIC {" in s and "ASCEND_IS_AIV {" not in s
    for pos, var in (("A1", "l1buf"), ("A2", "l0abuf"), ("B2", "l0bbuf"), ("CO1", "l0cbuf")):
        assert f"TBuf<TPosition::{pos}> {var};" in s
        assert s.count(f"pipe.InitBuffer({var}, ") == 1
    assert s.count("TPipe pipe;") == 1
    k = built["fp16_kloop_db"].kernel
    for b in k.buffers:  # every copy at its planned offset in its scope's TBuf
        for off in b.offsets:
            assert re.search(rf"{b.name}(\[2\])? = .*GetWithOffset<\w+>\({b.elems}, {off}\)", s)


def test_cube_calls_carry_the_ir_params(built, tmp_path):
    s = built["fp16_kloop_db"].project.kernel_source
    # the tile loop i has one trip here: a block with i = 0 in every index
    assert ("DataCopy(a_l1[kl % 2], a_gm[7200*block_idx + 64*kl], "
            "Nd2NzParams(1, 33, 64, 0, 150, 48, 1, 0));") in s
    assert "LoadData2DParams(0, 3, 4, 0, 0, true, 0)" in s  # B: fractal transpose, stride Kp/16
    assert "MmadParams(33, 47, 16, 0, false, (k0 + kl == 0))" in s  # init on the first K step
    assert ("Fixpipe<float, float, CFG_ROW_MAJOR>(c_gm[2256*block_idx], c_l0, "
            "FixpipeParamsV220(47, 33, 48, 47, false, QuantMode_t::NoQuant, 0, 1, 0, 0, 0));") in s
    assert re.search(r"SetFlag<HardEvent::MTE1_M>\(k0 % 2\);  // \w+\[copy \(k0 % 2\)\]: "
                     r"MTE1 write -> M read \(RAW\)", s)
    t = built["int8_trans"].project.kernel_source
    assert "LoadDataWithTranspose(a_l0[" in t and "LoadData2dTransposeParams(" in t
    assert "Fixpipe<int32_t, int32_t, CFG_ROW_MAJOR>" in t
    bf = emit_project(_final(gemm_kernel(CASES["bf16_out_bf16"])), tmp_path).kernel_source
    assert "Fixpipe<bfloat16_t, float, CFG_ROW_MAJOR>" in bf and "QuantMode_t::F322BF16" in bf


def test_cpu_driver_runs_the_aic_program(built):
    main = built["fp16_blocks"].project.cpu_main.read_text()
    assert "ascendsched_rt::run_block(block, blockDim, {\"AIC\"}, [&] { fp16_blocks(" in main
    assert "-DASCENDSCHED_L0C_USABLE=131072" in " ".join(built["fp16_blocks"].project.cpu_defines)


def test_vector_op_in_the_aic_program_is_rejected(tmp_path):
    k = _final(gemm_kernel(CASES["fp16_single"]))
    from tests.kit.ir import hand_plan, vadd_kernel

    v = hand_plan(vadd_kernel())
    bad = k.with_programs((Program(CoreType.AIC, k.program(CoreType.AIC).body
                                   + copied(v.program(CoreType.AIV).body)),
                           Program(CoreType.AIV, copied(v.program(CoreType.AIV).body))))
    bad = replace(bad, params=bad.params + tuple(p for p in v.params),
                  buffers=bad.buffers + v.buffers)
    with pytest.raises(InternalCompilerError, match=r"in the AIC program breaks the IR contract "
                       r"\(core\): copy_gm_ub runs on the AIV core, not in the AIC program"):
        emit_project(bad, tmp_path)


# ----------------------------------------------------------------------------- mutations
def _single_inputs() -> dict[str, np.ndarray]:
    return inputs(CASES["fp16_single"])


def test_unmutated_single_tile_is_correct(built):
    ins = _single_inputs()
    _check_against_sim(built["fp16_single"], ins, reference(CASES["fp16_single"], ins))


def test_wrong_fractal_stride_is_caught(built):
    # the load takes L1 fractals of rows no copy wrote, so Mmad reads never-loaded bytes,
    # which the runtime refuses (docs Mmad.md:329: NaN inputs may raise an execution error)
    b = built["mut_srcstride"]
    ins = _single_inputs()
    with pytest.raises(KernelAbort, match=r"Mmad reads L0A .* which no copy or load wrote") as e:
        run_cpu(b.binary, b.kernel, ins)
    # and the load reads other L1 bytes than the IR says: the trace comparison flags it
    diffs = traces_match(run_kernel(b.kernel, ins, trace=True).trace,
                         Trace.from_jsonl(e.value.trace_jsonl))
    assert any("load_l0a" in d and "reads" in d for d in diffs), diffs


def test_wrong_nd2nz_stride_aborts(built):
    b = built["mut_nd2nz_c0stride"]
    with pytest.raises(KernelAbort, match=r"is written twice: Nd2Nz destinations must not overlap"):
        run_cpu(b.binary, b.kernel, _single_inputs())


def test_gemv_mode_m_aborts(built):
    b = built["mut_gemv"]
    with pytest.raises(KernelAbort, match=r"fp16_single_kernel\.cpp:\d+: block 0: Mmad: m == 1 "
                                          r"switches the Cube into GEMV mode"):
        run_cpu(b.binary, b.kernel, _single_inputs())


def test_region_that_disagrees_with_its_params_is_not_emitted(tmp_path):
    from tests.kit.cube import mutate

    # repeatTimes changed without re-deriving the region: the analysis saw 5 fractals, the call
    # would move 4
    bad = mutate(gemm_kernel(CASES["fp16_single"]), "load_l0a", 0, keep_dims=True, repeatTimes=4)
    with pytest.raises(InternalCompilerError, match=r"\(footprint\): region a_l0.* does not match "
                                                    r"the params' footprint .* \(build cube "
                                                    r"instructions with cube_ops.make_cube_instr\)"):
        emit_project(_final(bad), tmp_path)


def test_dropped_waitflag_is_an_unpaired_flag(built):
    b = built["mut_no_wait"]
    with pytest.raises(KernelAbort, match=r"SetFlag<HardEvent::MTE1_M>\(0\) was never waited: "
                                          r"unpaired flag at kernel end"):
        run_cpu(b.binary, b.kernel, _single_inputs())
