"""What the real AscendC implementation does that the CPU runtime must model (the hardware-
fidelity issue): one small C++ program of named cases, built once against the runtime, each
case a few direct API calls; a test checks the case's abort message or its output bytes.

Every rule is cited next to the case that exercises it (mirror-cann/asc-devkit paths).

All cases build C++ with g++, so the module is ``slow``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ascendsched.algo.library import gemm
from ascendsched.api.compile import compile_kernel
from ascendsched.api.numerics import random_inputs
from ascendsched.dtypes import float16, float32
from ascendsched.emit_ascendc.check import KernelAbort, build_cpu, build_source, run_cpu
from ascendsched.emit_ascendc.project import _cpu_defines
from ascendsched.errors import ToolchainError
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.sim.precision import approx_unary, tree_sum
from ascendsched.target import DEFAULT_TARGET

pytestmark = pytest.mark.slow

HARNESS = r"""
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>
#include "kernel_operator.h"
using namespace AscendC;

static std::string dir;
static std::vector<uint8_t> readf(const std::string& n) {
    std::ifstream f(dir + "/" + n, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
static void writef(const std::string& n, const void* p, size_t bytes) {
    std::ofstream f(dir + "/" + n, std::ios::binary);
    f.write(reinterpret_cast<const char*>(p), bytes);
}
// UB bytes [0, n) from in.bin, then the case, then UB bytes [0, n) to out.bin
static void with_ub(size_t n, const std::function<void(const TBuf<TPosition::VECCALC>&)>& body) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> ub;
    pipe.InitBuffer(ub, 65536);
    std::vector<uint8_t> in = readf("in.bin");
    if (!in.empty()) std::memcpy(ascendsched_rt::st().ub.data(), in.data(), std::min(in.size(), n));
    body(ub);
    writef("out.bin", ascendsched_rt::st().ub.data(), n);
}

static std::map<std::string, std::pair<const char*, std::function<void()>>> cases() {
    std::map<std::string, std::pair<const char*, std::function<void()>>> m;
    // ---- item 6: Brcb and WholeReduce rules
    m["brcb_blk_stride_0"] = {"AIV", [] { with_ub(1024, [](const TBuf<TPosition::VECCALC>& u) {
        Brcb(u.GetWithOffset<half>(128, 512), u.Get<half>(), 1, BrcbRepeatParams(0, 8)); }); }};
    m["brcb_in_place"] = {"AIV", [] { with_ub(1024, [](const TBuf<TPosition::VECCALC>& u) {
        Brcb(u.Get<half>(), u.Get<half>(), 1, BrcbRepeatParams(1, 8)); }); }};
    m["reduce_sum_dst_on_one_element"] = {"AIV", [] { with_ub(1024, [](const TBuf<TPosition::VECCALC>& u) {
        WholeReduceSum(u.Get<half>()[1], u.GetWithOffset<half>(128, 256), 16, 1, 1, 1, 8); }); }};
    m["reduce_max_dst_on_one_element"] = {"AIV", [] { with_ub(1024, [](const TBuf<TPosition::VECCALC>& u) {
        WholeReduceMax(u.Get<half>()[1], u.GetWithOffset<half>(128, 256), 16, 1, 1, 1, 8,
                       ReduceOrder::ORDER_ONLY_VALUE); }); }};
    // ---- item 2: the Cast table (docs Cast.md:215-247)
    m["cast_i32_i16_rint"] = {"AIV", [] { with_ub(1024, [](const TBuf<TPosition::VECCALC>& u) {
        Cast(u.GetWithOffset<int16_t>(64, 512), u.Get<int32_t>(), RoundMode::CAST_RINT, 64, 1,
             UnaryRepeatParams(1, 1, 4, 8)); }); }};
    m["cast_i32_i16_none"] = {"AIV", [] { with_ub(1024, [](const TBuf<TPosition::VECCALC>& u) {
        Cast(u.GetWithOffset<int16_t>(64, 512), u.Get<int32_t>(), RoundMode::CAST_NONE, 64, 1,
             UnaryRepeatParams(1, 1, 4, 8)); }); }};
    m["cast_i32_half"] = {"AIV", [] { with_ub(1024, [](const TBuf<TPosition::VECCALC>& u) {
        Cast(u.GetWithOffset<half>(64, 512), u.Get<int32_t>(), RoundMode::CAST_NONE, 64, 1,
             UnaryRepeatParams(1, 1, 4, 8)); }); }};
    // ---- item 3: documented precision (sim/precision.py is the twin)
    m["rsqrt_f32"] = {"AIV", [] { with_ub(2048, [](const TBuf<TPosition::VECCALC>& u) {
        Rsqrt(u.GetWithOffset<float>(256, 1024), u.Get<float>(), 64, 4, UnaryRepeatParams(1, 1, 8, 8)); }); }};
    m["reciprocal_f16"] = {"AIV", [] { with_ub(2048, [](const TBuf<TPosition::VECCALC>& u) {
        Reciprocal(u.GetWithOffset<half>(512, 1024), u.Get<half>(), 128, 4, UnaryRepeatParams(1, 1, 8, 8)); }); }};
    m["reduce_sum_tree"] = {"AIV", [] { with_ub(1056, [](const TBuf<TPosition::VECCALC>& u) {
        WholeReduceSum(u.GetWithOffset<half>(16, 1024), u.Get<half>(), 128, 4, 1, 1, 8); }); }};
    // ---- item 1: TPipe owns HardEvent::M_MTE1 ids 0, 1, 2 on the AIC (kernel_tpipe_impl.h:100-113)
    m["tpipe_then_m_mte1"] = {"AIC", [] {
        TPipe pipe;
        SetFlag<HardEvent::M_MTE1>(0);
        WaitFlag<HardEvent::M_MTE1>(0); }};
    m["tpipe_destroy_then_m_mte1"] = {"AIC", [] {
        TPipe pipe;
        pipe.Destroy();
        for (int32_t id = 0; id < 6; ++id) SetFlag<HardEvent::M_MTE1>(id);
        for (int32_t id = 0; id < 6; ++id) WaitFlag<HardEvent::M_MTE1>(id); }};
    m["tpipe_flag_consumed"] = {"AIC", [] {
        TPipe pipe;
        WaitFlag<HardEvent::M_MTE1>(2); }};
    m["tpipe_destroyed_twice"] = {"AIC", [] {
        TPipe pipe;
        pipe.Destroy();
        pipe.Destroy(); }};
    m["two_tpipes"] = {"AIV", [] {
        TPipe a;
        TPipe b; }};
    m["tpipe_on_aiv_m_mte1_free"] = {"AIV", [] {
        TPipe pipe;
        SetFlag<HardEvent::MTE2_V>(0);
        WaitFlag<HardEvent::MTE2_V>(0); }};
    return m;
}

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    dir = argv[2];
    auto m = cases();
    auto it = m.find(argv[1]);
    if (it == m.end()) { std::fprintf(stderr, "unknown case %s\n", argv[1]); return 2; }
    ascendsched_rt::open_trace((dir + "/trace.jsonl").c_str());
    ascendsched_rt::begin_block(0, 1, it->second.first);
    it->second.second();
    ascendsched_rt::end_block();
    ascendsched_rt::close_trace();
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("fidelity") / "fidelity_unit.cpp"
    src.write_text(HARNESS)
    return build_source("fidelity_unit", src, defines=_cpu_defines(DEFAULT_TARGET))


def _run(binary: Path, case: str, d: Path, ub: bytes = b"") -> subprocess.CompletedProcess:
    (d / "in.bin").write_bytes(ub)
    return subprocess.run([str(binary), case, str(d)], capture_output=True, text=True, timeout=60)


def _aborts(p: subprocess.CompletedProcess, pattern: str) -> None:
    assert p.returncode != 0, f"expected an abort matching {pattern!r}"
    assert "ascendsched CPU runtime" in p.stderr
    assert re.search(pattern, p.stderr), p.stderr


def _out(d: Path, dtype) -> np.ndarray:  # noqa: ANN001
    return np.frombuffer((d / "out.bin").read_bytes(), dtype=dtype)


# ----------------------------------------------------------------------------- item 1
def test_tpipe_owns_m_mte1_ids_0_to_2_on_the_aic(harness, tmp_path):
    # impl/basic_api/kernel_tpipe_impl.h:100-113: on __NPU_ARCH__ 2201 the AIC's TPipe sets
    # M_MTE1 0, 1, 2; :571-581 Destroy waits them; :80-86 the destructor destroys once.
    _aborts(_run(harness, "tpipe_then_m_mte1", tmp_path),
            r"SetFlag<HardEvent::M_MTE1>\(0\) set again before its WaitFlag \(the live TPipe's constructor")
    p = _run(harness, "tpipe_destroy_then_m_mte1", tmp_path)
    assert p.returncode == 0, p.stderr
    _aborts(_run(harness, "tpipe_flag_consumed", tmp_path),
            r"TPipe::Destroy waits WaitFlag<HardEvent::M_MTE1>\(2\), which nobody set")
    _aborts(_run(harness, "tpipe_destroyed_twice", tmp_path), r"TPipe::Destroy on a destroyed TPipe")
    # docs TPipe/TPipe构造函数.md:42: one TPipe at a time
    _aborts(_run(harness, "two_tpipes", tmp_path), r"a second TPipe while one is alive")
    p = _run(harness, "tpipe_on_aiv_m_mte1_free", tmp_path)  # the AIV's TPipe sets no flag
    assert p.returncode == 0, p.stderr


def test_gemm_emission_releases_the_tpipe_flags(tmp_path):
    # A GEMM with double-buffered L0A/L0B guards each L0 copy with M_MTE1 ids 0 and 1 (WAR).
    # Emitted without pipe.Destroy() (the emission before this fix) its first
    # SetFlag<M_MTE1>(0) sets TPipe's flag a second time: the runtime aborts. With it, the
    # numbers are right and the flags drain.
    algo = gemm(m=40, n=24, k=96, dtype="float16", out_dtype="float32")
    sched = GemmSchedule(algo).tile(48, 32, 96).split_k(32).buffer("l0", 2)
    k, proj = compile_kernel(sched, tmp_path / "gemm")
    src = proj.kernel_cpp.read_text()
    aic = src[src.index("if ASCEND_IS_AIC"):]
    assert "SetFlag<HardEvent::M_MTE1>(0)" in aic
    assert aic.index("pipe.Destroy();") < aic.index("SetFlag<") < aic.index("PipeBarrier<PIPE_ALL>();")
    inputs = random_inputs(algo)
    got = run_cpu(build_cpu(proj), k, inputs).outputs["C"]
    want = inputs["A"].astype(np.float32) @ inputs["B"].astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
    proj.kernel_cpp.write_text(src.replace("pipe.Destroy();", ""))
    with pytest.raises(KernelAbort, match=r"SetFlag<HardEvent::M_MTE1>\(0\) set again before its "
                                          r"WaitFlag \(the live TPipe's constructor set it"):
        run_cpu(build_cpu(proj), k, inputs)


# ----------------------------------------------------------------------------- item 3
def test_runtime_rsqrt_reciprocal_are_the_modelled_approximations(harness, tmp_path):
    # Rsqrt.md:179, Reciprocal.md:202: not correctly rounded; the runtime gives bit for bit
    # what the simulator gives (sim/precision.py approx_unary), not the exact result
    rng = np.random.default_rng(11)
    x = rng.uniform(0.25, 4.0, 256).astype(np.float32)
    p = _run(harness, "rsqrt_f32", tmp_path, x.tobytes())
    assert p.returncode == 0, p.stderr
    got = _out(tmp_path, np.float32)[256:512]
    np.testing.assert_array_equal(got, approx_unary("rsqrt", x, float32, DEFAULT_TARGET))
    assert not np.array_equal(got, (1 / np.sqrt(x.astype(np.float64))).astype(np.float32))
    h = rng.uniform(0.25, 4.0, 512).astype(np.float16)
    p = _run(harness, "reciprocal_f16", tmp_path, h.tobytes())
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(_out(tmp_path, np.float16)[512:1024],
                                  approx_unary("reciprocal", h, float16, DEFAULT_TARGET))


def test_runtime_whole_reduce_sum_is_a_binary_tree(harness, tmp_path):
    # ReduceRepeat.md:270, ReduceDataBlock.md:183-191; row 0: tree 2050, exact-then-round 2052
    a = np.random.default_rng(12).uniform(-4, 4, (4, 128)).astype(np.float16)
    a[0] = 0
    a[0, :4] = [2048, 1, 1, 1]
    p = _run(harness, "reduce_sum_tree", tmp_path, a.tobytes())
    assert p.returncode == 0, p.stderr
    got = _out(tmp_path, np.float16)[512:516]
    assert got[0] == 2050
    np.testing.assert_array_equal(got, tree_sum(a).ravel())


# ----------------------------------------------------------------------------- item 6
def test_brcb_rejects_block_stride_0(harness, tmp_path):
    # docs Brcb.md:123: dstBlkStride = 0 may produce undefined behaviour
    _aborts(_run(harness, "brcb_blk_stride_0", tmp_path), r"Brcb: dstBlkStride = 0 is undefined")


def test_brcb_rejects_in_place(harness, tmp_path):
    # docs Brcb.md:122: the source must not share memory with the destination
    _aborts(_run(harness, "brcb_in_place", tmp_path), r"in-place Brcb is not supported")


def test_whole_reduce_dst_alignment(harness, tmp_path):
    # sum: sizeof(T) (ReduceRepeat.md:171); max/min: 2 * sizeof(T) (the library's check,
    # impl/basic_api/kernel_operator_vec_reduce_intf_impl.h:177)
    x = np.zeros(512, np.float16)
    x[128:144] = np.arange(16)
    p = _run(harness, "reduce_sum_dst_on_one_element", tmp_path, x.tobytes())
    assert p.returncode == 0, p.stderr
    assert _out(tmp_path, np.float16)[1] == 120
    _aborts(_run(harness, "reduce_max_dst_on_one_element", tmp_path, x.tobytes()),
            r"WholeReduceMax: dst starts at UB address 2, which is not 4-byte aligned")


# ----------------------------------------------------------------------------- item 2
def test_cast_round_modes_are_the_tables(harness, tmp_path):
    # int32 -> int16 takes CAST_NONE only (Cast.md:234), and saturates
    # (precision_conversion.md:411-415: 2^31 - 1 becomes 2^15 - 1)
    x = np.zeros(256, np.int32)
    x[:4] = [2**31 - 1, -2**31, 300, -7]
    _aborts(_run(harness, "cast_i32_i16_rint", tmp_path, x.tobytes()),
            r"Cast: int32_t -> int16_t does not take RoundMode 1")
    p = _run(harness, "cast_i32_i16_none", tmp_path, x.tobytes())
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(_out(tmp_path, np.int16)[256:260], [32767, -32768, 300, -7])


def test_cast_int32_to_half_is_a_dequantisation(harness, tmp_path):
    # Cast.md:235 + impl/basic_api/dav_c220/kernel_operator_vec_vconv_impl.h:29-40 (vconv_deq)
    _aborts(_run(harness, "cast_i32_half", tmp_path), r"int32_t -> half is a dequantisation")


def test_cast_outside_the_table_does_not_compile(tmp_path):
    # int16 -> int32 has no CastIntrinsicsImpl overload on 910B: the call does not compile
    src = tmp_path / "cast_i16_i32.cpp"
    src.write_text(HARNESS.split("static std::map")[0] + """
int main() {
    TPipe pipe;
    TBuf<TPosition::VECCALC> u;
    pipe.InitBuffer(u, 1024);
    Cast(u.GetWithOffset<int32_t>(64, 512), u.Get<int16_t>(), RoundMode::CAST_NONE, 64, 1,
         UnaryRepeatParams(1, 1, 8, 4));
}
""")
    with pytest.raises(ToolchainError, match="no vector conversion between these types"):
        build_source("cast_i16_i32", src, defines=_cpu_defines(DEFAULT_TARGET))
