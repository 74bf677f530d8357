"""What the real AscendC implementation does that the CPU runtime must model (the hardware-
fidelity issue): one small C++ program of named cases, built once against the runtime, each
case a few direct API calls; a test checks the case's abort message or its output bytes.

Every rule is cited next to the case that exercises it (mirror-cann/asc-devkit paths).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ascendsched.emit_ascendc.check import build_source
from ascendsched.emit_ascendc.emitter import _cpu_defines
from ascendsched.errors import ToolchainError
from ascendsched.target import DEFAULT_TARGET

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
