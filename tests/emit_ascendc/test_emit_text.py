"""Golden-ish checks of the emitted text (no compiler needed)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ascendsched.emit_ascendc import emit_project
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.ir import Program, copied
from ascendsched.target import CoreType
from tests.kit.hand import ops_kernel, sync_row_max_sub, sync_vadd
from tests.kit.ir import hand_plan, row_max_sub_kernel, vadd_kernel


@pytest.fixture(scope="module")
def vadd_src(tmp_path_factory):
    k = sync_vadd(hand_plan(vadd_kernel(n=8192, tile=1024, copies=2, blocks=2)))
    return emit_project(k, tmp_path_factory.mktemp("vadd"))


def test_entry_and_buffers(vadd_src):
    s = vadd_src.kernel_source
    # 'vadd' is the CCE builtin Add is built on (impl/basic_api/dav_c220/
    # kernel_operator_vec_binary_impl.h:38): the kernel function gets a name of its own
    assert ('extern "C" __global__ __aicore__ void vadd_kernel(GM_ADDR x, GM_ADDR y, GM_ADDR z, '
            'GM_ADDR workspace, GM_ADDR tiling)') in s
    assert "TBuf<TPosition::VECCALC> ubuf;" in s and "pipe.InitBuffer(ubuf, 12288);" in s
    assert ("LocalTensor<half> x_ub[2] = {ubuf.GetWithOffset<half>(1024, 0), "
            "ubuf.GetWithOffset<half>(1024, 2048)};") in s
    assert "x_gm.SetGlobalBuffer((__gm__ half*)x, 8192);" in s
    assert "const int64_t block_idx = GetBlockIdx();" in s


def test_loops_flags_and_copies(vadd_src):
    s = vadd_src.kernel_source
    assert "for (int64_t k = 0; k < 4; ++k) {  // tiles of this block (double buffered)" in s
    assert ("WaitFlag<HardEvent::MTE2_V>(k % 2);  // x_ub/y_ub[k%2]: MTE2 write -> V read (RAW)"
            in s)
    assert "SetFlag<HardEvent::V_MTE2>(0);  // prologue: buffers start free" in s
    assert ("DataCopy(x_ub[k % 2], x_gm[1024*block_idx + 2048*k], DataCopyParams(1, 64, 0, 0));"
            in s)
    assert ("Add(z_ub[k % 2], x_ub[k % 2], y_ub[k % 2], 128, 8, "
            "BinaryRepeatParams(1, 1, 1, 8, 8, 8));  // z = x + y") in s


def test_row_broadcast_reduce_brcb(tmp_path):
    s = emit_project(sync_row_max_sub(hand_plan(row_max_sub_kernel())), tmp_path).kernel_source
    assert "DataCopy(x_ub, x_gm, DataCopyParams(16, 8, 0, 0));" in s
    assert "WholeReduceMax(m_ub, x_ub, 64, 16, 1, 1, 8, ReduceOrder::ORDER_ONLY_VALUE);" in s
    assert "Brcb(mb_ub, m_ub, 2, BrcbRepeatParams(1, 8));" in s
    # block-broadcast operand: block stride 0, repeat stride 1 block (one 32 B block per row)
    assert "Sub(y_ub, x_ub, mb_ub, 64, 16, BinaryRepeatParams(1, 1, 0, 8, 8, 1));" in s
    assert "PipeBarrier<PIPE_V>();  // m_ub: V write -> V read (RAW)" in s


def test_unaligned_rows_use_datacopypad_units(tmp_path):
    s = emit_project(hand_plan(ops_kernel()), tmp_path).kernel_source
    # GM -> UB: 16 rows of 80 B; GM gap 0 bytes; UB gap 1 block (rows 128 B apart)
    assert ("DataCopyPad(x_ub, x_gm, DataCopyExtParams(16, 80, 0, 1, 0), "
            "DataCopyPadExtParams<float>(false, 0, 0, 0));") in s
    # UB -> GM: UB gap 1 block (src), GM gap 0 bytes (dst)
    assert "DataCopyPad(y_gm, y_ub, DataCopyExtParams(16, 80, 1, 0, 0));" in s
    assert "Compare(m_ub, x_ub, d_ub, CMPMODE::GT, 20, 16," in s  # packed mask: one call
    assert "Compare(m2_ub[row_ * 32], x_ub[row_ * 32], d_ub[row_ * 32], CMPMODE::LE, 20, 1," in s
    assert "Cast(h_ub, y1_ub, RoundMode::CAST_RINT, 20, 16, UnaryRepeatParams(1, 1, 2, 4));" in s
    assert "WholeReduceSum(r_ub, y_ub, 20, 16, 1, 1, 4);" in s
    assert "Muls(s_ub, x_ub, 0.5f, 20, 16, UnaryRepeatParams(1, 1, 4, 4));" in s


def test_project_files(vadd_src):
    cmake = vadd_src.cmake.read_text()
    assert "ascendc_library(vadd_kernels STATIC" in cmake and "ascendc.cmake" in cmake
    host = vadd_src.host_main.read_text()
    for call in ("aclInit", "aclrtSetDevice", "aclrtCreateStream", "aclrtMalloc",
                 "aclrtMemcpy", "ACLRT_LAUNCH_KERNEL(vadd_kernel)(blockDim, stream,",
                 '#include "aclrtlaunch_vadd_kernel.h"'):
        assert call in host
    assert "struct VaddTilingData" in vadd_src.tiling_h.read_text()
    assert "CANN" in vadd_src.readme.read_text()
    assert "[&] { vadd_kernel(" in vadd_src.cpu_main.read_text()


def test_kernel_names_clear_of_cce_builtins(tmp_path):
    """A kernel named like a CCE builtin (vadd, set_flag) or a C++ keyword gets '_kernel'
    appended; other names are kept."""
    from ascendsched.emit_ascendc.c_syntax import c_name

    assert [c_name(n) for n in ("vadd", "set_flag", "copy_gm_to_ubuf", "vconv_deq", "new",
                                "softmax", "vadd_kernel", "gemm_relu_mix")] == [
        "vadd_kernel", "set_flag_kernel", "copy_gm_to_ubuf_kernel", "vconv_deq_kernel",
        "new_kernel", "softmax", "vadd_kernel", "gemm_relu_mix"]
    k = replace(hand_plan(vadd_kernel()), name="vexp")
    s = emit_project(k, tmp_path).kernel_source
    assert "void vexp_kernel(GM_ADDR x" in s and "void vexp(" not in s


def test_unplanned_kernel_is_rejected(tmp_path):
    with pytest.raises(InternalCompilerError, match=r"\(memory plan\): no offsets for x_ub, "
                                                    r"y_ub, z_ub"):
        emit_project(vadd_kernel(), tmp_path)


def test_vector_ops_in_an_aic_program_are_rejected(tmp_path):
    # the Cube core has no vector unit: an AIC program holding vector calls is refused
    k = hand_plan(vadd_kernel())
    aiv = k.program(CoreType.AIV)
    k = k.with_programs((aiv, Program(CoreType.AIC, copied(aiv.body))))
    with pytest.raises(InternalCompilerError, match=r"in the AIC program breaks the IR contract "
                       r"\(core\): copy_gm_ub runs on the AIV core, not in the AIC program"):
        emit_project(k, tmp_path)


def test_each_flag_comment_names_its_first_dependence_and_counts_the_rest(tmp_path):
    """The IR keeps every reason of a sync; the emitted line names the first and how many
    more (a softmax tile's MTE2->V flag orders a dozen buffer pairs)."""
    import re

    from ascendsched.algo import library as L
    from ascendsched.lower.ir import iter_instrs
    from ascendsched.lower.pipeline import lower
    from ascendsched.lower.sync_ir import Sync
    from ascendsched.schedule import Schedule

    algo = L.softmax(16, 512)
    sched = Schedule(algo).split("y", "i", 4).compute_at("xf", "y", "i_o").compute_at(
        "mx", "y", "i_o").compute_at("e", "y", "i_o").compute_at("s", "y", "i_o")
    k = lower(sched)
    syncs = [i for p in k.programs for i, _ in iter_instrs(p.body) if isinstance(i, Sync)]
    many = [i for i in syncs if i.comment.count("; ") >= 2]
    assert many, "expected a sync ordering several dependences"
    src = emit_project(k, tmp_path).kernel_cpp.read_text()
    lines = [ln for ln in src.splitlines() if re.search(r"(SetFlag|WaitFlag|PipeBarrier)<", ln)]
    assert lines and all(ln.count("(RAW)") + ln.count("(WAR)") + ln.count("(WAW)") <= 1
                         for ln in lines)
    first = many[0].comment.split("; ")[0]
    n = many[0].comment.count("; ")
    assert any(f"{first} (+{n} more)" in ln for ln in lines)
