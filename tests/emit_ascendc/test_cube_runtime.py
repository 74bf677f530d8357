"""The CPU runtime's Cube calls against numpy layout math (one g++ build, many runs).

A small C++ program drives DataCopy(Nd2NzParams), LoadData(LoadData2DParams),
LoadDataWithTranspose, Mmad and Fixpipe<CFG_ROW_MAJOR> directly, dumps L1/L0A/L0B/L0C and the
GM output, and each test recomputes the expected bytes from the layout formulas of the draft
cube contract (nz / zz / zn / L0C nz) with numpy. Abort cases run the same binary with another
case name and check the runtime's message.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascendsched.dtypes import bf16_bits, from_bf16_bits
from ascendsched.emit_ascendc.check import build_source
from ascendsched.emit_ascendc.project import _cpu_defines
from ascendsched.sim.trace import Trace
from ascendsched.target import DEFAULT_TARGET

pytestmark = pytest.mark.slow  # g++ builds and runs

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
static std::vector<uint8_t> readf(const std::string& n, size_t bytes) {
    std::vector<uint8_t> v(bytes);
    std::ifstream f(dir + "/" + n, std::ios::binary);
    f.read(reinterpret_cast<char*>(v.data()), bytes);
    if (!f) { std::fprintf(stderr, "cannot read %s\n", n.c_str()); std::exit(2); }
    return v;
}
static void writef(const std::string& n, const uint8_t* p, size_t bytes) {
    std::ofstream f(dir + "/" + n, std::ios::binary);
    f.write(reinterpret_cast<const char*>(p), bytes);
}
static void dump(const std::string& n, const std::vector<uint8_t>& m, size_t bytes) { writef(n, m.data(), bytes); }

// GM operands of one GEMM test: a and b read from a.bin / b.bin, c pre-filled with 0xEE,
// all registered with the runtime (sizes in elements).
template <typename In, typename Out>
struct Gm {
    std::vector<uint8_t> a, b, c;
    GlobalTensor<In> ag, bg;
    GlobalTensor<Out> cg;
    Gm(size_t na, size_t nb, size_t nc)
        : a(readf("a.bin", na * sizeof(In))), b(readf("b.bin", nb * sizeof(In))), c(nc * sizeof(Out), 0xEE) {
        ascendsched_rt::register_gm("a", a.data(), a.size());
        ascendsched_rt::register_gm("b", b.data(), b.size());
        ascendsched_rt::register_gm("c", c.data(), c.size());
        ag.SetGlobalBuffer((__gm__ In*)a.data(), na);
        bg.SetGlobalBuffer((__gm__ In*)b.data(), nb);
        cg.SetGlobalBuffer((__gm__ Out*)c.data(), nc);
    }
};

struct Bufs {
    TPipe pipe;
    TBuf<TPosition::A1> l1;
    TBuf<TPosition::A2> l0a;
    TBuf<TPosition::B2> l0b;
    TBuf<TPosition::CO1> l0c;
    Bufs() {
        pipe.InitBuffer(l1, 65536);
        pipe.InitBuffer(l0a, 65536);
        pipe.InitBuffer(l0b, 65536);
        pipe.InitBuffer(l0c, 131072);
    }
};

static void dump_all(size_t c_bytes, const std::vector<uint8_t>& c) {
    auto& s = ascendsched_rt::st();
    dump("l1.bin", s.l1, 65536);
    dump("l0a.bin", s.l0a, 16384);
    dump("l0b.bin", s.l0b, 16384);
    dump("l0c.bin", s.l0c, 32768);
    writef("c.bin", c.data(), c_bytes);
}

// fp16 A (20 x 40) x B (40 x 24) -> half C: Nd2Nz, LoadData (A plain, B transposed), Mmad, Fixpipe F322F16
static void gemm_f16() {
    const int M = 20, K = 40, N = 24, Mb = 2, Kb = 3, Nb = 2;
    Gm<half, half> g(M * K, K * N, M * N);
    auto &ag = g.ag, &bg = g.bg;
    auto &cg = g.cg;
    auto &c = g.c;
    Bufs B;
    LocalTensor<half> a1 = B.l1.GetWithOffset<half>(32 * 48, 0);
    LocalTensor<half> b1 = B.l1.GetWithOffset<half>(48 * 32, 4096);
    LocalTensor<half> a0 = B.l0a.GetWithOffset<half>(Mb * Kb * 256, 0);
    LocalTensor<half> b0 = B.l0b.GetWithOffset<half>(Kb * Nb * 256, 0);
    LocalTensor<float> c0 = B.l0c.GetWithOffset<float>(Mb * Nb * 256, 0);
    DataCopy(a1, ag, Nd2NzParams(1, M, K, 0, K, 32, 1, 0));
    DataCopy(b1, bg, Nd2NzParams(1, K, N, 0, N, 48, 1, 0));
    SetFlag<HardEvent::MTE2_MTE1>(0);
    WaitFlag<HardEvent::MTE2_MTE1>(0);
    for (int i = 0; i < Mb; ++i) LoadData(a0[i * Kb * 256], a1[i * 256], LoadData2DParams(0, Kb, Mb, 0, 0, false, 0));
    for (int k = 0; k < Kb; ++k) LoadData(b0[k * Nb * 256], b1[k * 256], LoadData2DParams(0, Nb, 3, 0, 0, true, 0));
    SetFlag<HardEvent::MTE1_M>(0);
    WaitFlag<HardEvent::MTE1_M>(0);
    Mmad(c0, a0, b0, MmadParams(M, N, K, 0, false, true));
    SetFlag<HardEvent::M_FIX>(0);
    WaitFlag<HardEvent::M_FIX>(0);
    FixpipeParamsV220 fp(N, M, 32, N, false, QuantMode_t::F322F16, 0, 1, 0, 0, 0);
    Fixpipe<half, float, CFG_ROW_MAJOR>(cg, c0, fp);
    PipeBarrier<PIPE_ALL>();
    dump_all(c.size(), c);
}

// int8 A (18 x 70) x B (70 x 40) -> int32: B through LoadDataWithTranspose (32x32 squares), n = 64
static void gemm_i8() {
    const int M = 18, K = 70, N = 40, Mb = 2, Kb = 3, Nb = 4;
    Gm<int8_t, int32_t> g(M * K, K * N, M * N);
    auto &ag = g.ag, &bg = g.bg;
    auto &cg = g.cg;
    auto &c = g.c;
    Bufs B;
    LocalTensor<int8_t> a1 = B.l1.GetWithOffset<int8_t>(32 * 96, 0);
    LocalTensor<int8_t> b1 = B.l1.GetWithOffset<int8_t>(96 * 64, 4096);
    LocalTensor<int8_t> a0 = B.l0a.GetWithOffset<int8_t>(Mb * Kb * 512, 0);
    LocalTensor<int8_t> b0 = B.l0b.GetWithOffset<int8_t>(Kb * Nb * 512, 0);
    LocalTensor<int32_t> c0 = B.l0c.GetWithOffset<int32_t>(Mb * Nb * 256, 0);
    DataCopy(a1, ag, Nd2NzParams(1, M, K, 0, K, 32, 1, 0));
    DataCopy(b1, bg, Nd2NzParams(1, K, N, 0, N, 96, 1, 0));
    for (int i = 0; i < Mb; ++i) LoadData(a0[i * Kb * 512], a1[i * 512], LoadData2DParams(0, Kb, Mb, 0, 0, false, 0));
    for (int k = 0; k < Kb; ++k) {
        LoadDataWithTranspose(b0[k * Nb * 512], b1[k * 1024], LoadData2dTransposeParams(0, 2, 3, 1, 0));
    }
    Mmad(c0, a0, b0, MmadParams(M, 64, K, 0, false, true));
    FixpipeParamsV220 fp(N, M, 32, N, false, QuantMode_t::NoQuant, 0, 1, 0, 0, 0);
    Fixpipe<int32_t, int32_t, CFG_ROW_MAJOR>(cg, c0, fp);
    dump_all(c.size(), c);
}

// fp32 A (17 x 20) x B given transposed as (12 x 20) -> float with ReLU; B loaded without transpose
static void gemm_f32_tb() {
    const int M = 17, K = 20, N = 12, Mb = 2, Kb = 3, Nb = 1;
    Gm<float, float> g(M * K, N * K, M * N);
    auto &ag = g.ag, &bg = g.bg;
    auto &cg = g.cg;
    auto &c = g.c;
    Bufs B;
    LocalTensor<float> a1 = B.l1.GetWithOffset<float>(32 * 24, 0);
    LocalTensor<float> b1 = B.l1.GetWithOffset<float>(16 * 24, 4096);
    LocalTensor<float> a0 = B.l0a.GetWithOffset<float>(Mb * Kb * 128, 0);
    LocalTensor<float> b0 = B.l0b.GetWithOffset<float>(Kb * Nb * 128, 0);
    LocalTensor<float> c0 = B.l0c.GetWithOffset<float>(Mb * Nb * 256, 0);
    DataCopy(a1, ag, Nd2NzParams(1, M, K, 0, K, 32, 1, 0));
    DataCopy(b1, bg, Nd2NzParams(1, N, K, 0, K, 16, 1, 0));
    for (int i = 0; i < Mb; ++i) LoadData(a0[i * Kb * 128], a1[i * 128], LoadData2DParams(0, Kb, Mb, 0, 0, false, 0));
    LoadData(b0, b1, LoadData2DParams(0, Kb * Nb, 1, 0, 0, false, 0));
    Mmad(c0, a0, b0, MmadParams(M, N, K, 0, false, true));
    FixpipeParamsV220 fp(N, M, 32, N, true, QuantMode_t::NoQuant, 0, 1, 0, 0, 0);
    Fixpipe<float, float, CFG_ROW_MAJOR>(cg, c0, fp);
    dump_all(c.size(), c);
}

// bf16 A (32 x 64) x B (64 x 32) in two K steps of 32 (init, then accumulate) -> bfloat16
static void gemm_bf16_acc() {
    const int M = 32, K = 64, N = 32, Mb = 2, Nb = 2, Kc = 2;
    Gm<bfloat16_t, bfloat16_t> g(M * K, K * N, M * N);
    auto &ag = g.ag, &bg = g.bg;
    auto &cg = g.cg;
    auto &c = g.c;
    Bufs B;
    LocalTensor<bfloat16_t> a1 = B.l1.GetWithOffset<bfloat16_t>(32 * 64, 0);
    LocalTensor<bfloat16_t> b1 = B.l1.GetWithOffset<bfloat16_t>(64 * 32, 4096);
    LocalTensor<float> c0 = B.l0c.GetWithOffset<float>(Mb * Nb * 256, 0);
    DataCopy(a1, ag, Nd2NzParams(1, M, K, 0, K, 32, 1, 0));
    DataCopy(b1, bg, Nd2NzParams(1, K, N, 0, N, 64, 1, 0));
    for (int kc = 0; kc < 2; ++kc) {
        LocalTensor<bfloat16_t> a0 = B.l0a.GetWithOffset<bfloat16_t>(Mb * Kc * 256, kc * 4096);
        LocalTensor<bfloat16_t> b0 = B.l0b.GetWithOffset<bfloat16_t>(Kc * Nb * 256, kc * 4096);
        for (int i = 0; i < Mb; ++i) {
            LoadData(a0[i * Kc * 256], a1[(kc * Kc * Mb + i) * 256], LoadData2DParams(0, Kc, Mb, 0, 0, false, 0));
        }
        for (int k = 0; k < Kc; ++k) {
            LoadData(b0[k * Nb * 256], b1[(kc * Kc + k) * 256], LoadData2DParams(0, Nb, 4, 0, 0, true, 0));
        }
        Mmad(c0, a0, b0, MmadParams(M, N, 32, 0, false, kc == 0));
        PipeBarrier<PIPE_M>();
    }
    FixpipeParamsV220 fp(N, M, 32, N, false, QuantMode_t::F322BF16, 0, 1, 0, 0, 0);
    Fixpipe<bfloat16_t, float, CFG_ROW_MAJOR>(cg, c0, fp);
    dump_all(c.size(), c);
}

// fp32 X (16 x 16) -> L1 nz (two 16x8 fractals side by side = one square) -> transposed into L0B
static void transpose_b32() {
    auto x = readf("a.bin", 16 * 16 * 4);
    std::vector<uint8_t> c(4, 0);
    ascendsched_rt::register_gm("a", x.data(), x.size());
    GlobalTensor<float> xg;
    xg.SetGlobalBuffer((__gm__ float*)x.data(), 256);
    Bufs B;
    LocalTensor<float> l1 = B.l1.GetWithOffset<float>(256, 0);
    DataCopy(l1, xg, Nd2NzParams(1, 16, 16, 0, 16, 16, 1, 0));
    LoadDataWithTranspose(B.l0b.GetWithOffset<float>(256, 0), l1, LoadData2dTransposeParams(0, 1, 1, 0, 0));
    dump_all(0, c);
}

// fp16 (M x K) x (K x N) -> half for any M, N, K in 1..128 (argv): the recipe of lower/cube_ops.py
static int M_ = 0, K_ = 0, N_ = 0;
static void gemm_any() {
    const int M = M_, K = K_, N = N_;
    const int Mb = (M + 15) / 16, Kb = (K + 15) / 16, Nb = (N + 15) / 16;
    Gm<half, half> g(M * K, K * N, M * N);
    auto &ag = g.ag, &bg = g.bg;
    auto &cg = g.cg;
    auto &c = g.c;
    Bufs B;
    LocalTensor<half> a1 = B.l1.GetWithOffset<half>(Mb * Kb * 256, 0);
    LocalTensor<half> b1 = B.l1.GetWithOffset<half>(Kb * Nb * 256, 32768);
    LocalTensor<half> a0 = B.l0a.GetWithOffset<half>(Mb * Kb * 256, 0);
    LocalTensor<half> b0 = B.l0b.GetWithOffset<half>(Kb * Nb * 256, 0);
    LocalTensor<float> c0 = B.l0c.GetWithOffset<float>(Mb * Nb * 256, 0);
    // one row: copied twice (rows 0 and 1) so Mmad takes m = 2 (m == 1 is GEMV) over loaded rows
    DataCopy(a1, ag, Nd2NzParams(M == 1 ? 2 : 1, M, K, 0, K, Mb * 16, 1, M == 1 ? 16 : 0));
    DataCopy(b1, bg, Nd2NzParams(1, K, N, 0, N, Kb * 16, 1, 0));
    for (int i = 0; i < Mb; ++i) LoadData(a0[i * Kb * 256], a1[i * 256], LoadData2DParams(0, Kb, Mb, 0, 0, false, 0));
    for (int k = 0; k < Kb; ++k) LoadData(b0[k * Nb * 256], b1[k * 256], LoadData2DParams(0, Nb, Kb, 0, 0, true, 0));
    Mmad(c0, a0, b0, MmadParams(M == 1 ? 2 : M, N, K, 0, false, true));
    Fixpipe<half, float, CFG_ROW_MAJOR>(cg, c0, FixpipeParamsV220(N, M, Mb * 16, N, false, QuantMode_t::F322F16, 0, 1, 0, 0, 0));
    dump_all(c.size(), c);
}

// ---- aborts: each breaks one documented rule
static void small_setup(std::function<void(Bufs&, GlobalTensor<half>&, GlobalTensor<half>&)> body) {
    static std::vector<uint8_t> a(64 * 64 * 2, 0), c(64 * 64 * 2, 0);
    ascendsched_rt::register_gm("a", a.data(), a.size());
    ascendsched_rt::register_gm("c", c.data(), c.size());
    GlobalTensor<half> ag, cg;
    ag.SetGlobalBuffer((__gm__ half*)a.data(), 64 * 64);
    cg.SetGlobalBuffer((__gm__ half*)c.data(), 64 * 64);
    Bufs B;
    body(B, ag, cg);
}

static std::map<std::string, std::function<void()>> cases() {
    std::map<std::string, std::function<void()>> m;
    m["gemm_f16"] = gemm_f16;
    m["gemm_i8"] = gemm_i8;
    m["gemm_f32_tb"] = gemm_f32_tb;
    m["gemm_bf16_acc"] = gemm_bf16_acc;
    m["gemm_any"] = gemm_any;
    m["transpose_b32"] = transpose_b32;
    m["gemv"] = [] { small_setup([](Bufs& B, GlobalTensor<half>&, GlobalTensor<half>&) {
        Mmad(B.l0c.Get<float>(), B.l0a.Get<half>(), B.l0b.Get<half>(), MmadParams(1, 16, 16, 0, false, true)); }); };
    m["mmad_k_4096"] = [] { small_setup([](Bufs& B, GlobalTensor<half>&, GlobalTensor<half>&) {
        Mmad(B.l0c.Get<float>(), B.l0a.Get<half>(), B.l0b.Get<half>(), MmadParams(16, 16, 4096, 0, false, true)); }); };
    m["l0a_misaligned"] = [] { small_setup([](Bufs& B, GlobalTensor<half>&, GlobalTensor<half>&) {
        LoadData(B.l0a.GetWithOffset<half>(256, 256), B.l1.Get<half>(), LoadData2DParams(0, 1, 1, 0, 0, false, 0)); }); };
    m["repeat_0"] = [] { small_setup([](Bufs& B, GlobalTensor<half>&, GlobalTensor<half>&) {
        LoadData(B.l0a.Get<half>(), B.l1.Get<half>(), LoadData2DParams(0, 0, 1, 0, 0, false, 0)); }); };
    m["nd2nz_overlap"] = [] { small_setup([](Bufs& B, GlobalTensor<half>& a, GlobalTensor<half>&) {
        DataCopy(B.l1.Get<half>(), a, Nd2NzParams(1, 20, 40, 0, 40, 16, 1, 0)); }); };
    m["l1_out_of_bounds"] = [] { small_setup([](Bufs& B, GlobalTensor<half>& a, GlobalTensor<half>&) {
        DataCopy(B.l1.GetWithOffset<half>(16, 0), a, Nd2NzParams(1, 16, 16, 0, 16, 16384, 16384, 0)); }); };
    m["fixpipe_rows_overlap"] = [] { small_setup([](Bufs& B, GlobalTensor<half>&, GlobalTensor<half>& c) {
        Fixpipe<half, float, CFG_ROW_MAJOR>(c, B.l0c.Get<float>(),
            FixpipeParamsV220(32, 16, 16, 16, false, QuantMode_t::F322F16, 0, 1, 0, 0, 0)); }); };
    m["fixpipe_quant_mismatch"] = [] { small_setup([](Bufs& B, GlobalTensor<half>&, GlobalTensor<half>& c) {
        Fixpipe<half, float, CFG_ROW_MAJOR>(c, B.l0c.Get<float>(), FixpipeParamsV220(16, 16, 16, 16, false)); }); };
    m["transpose_b32_loaddata"] = [] { small_setup([](Bufs& B, GlobalTensor<half>&, GlobalTensor<half>&) {
        LoadData(B.l0b.Get<float>(), B.l1.Get<float>(), LoadData2DParams(0, 1, 1, 0, 0, true, 0)); }); };
    m["aiv_event_on_aic"] = [] { small_setup([](Bufs&, GlobalTensor<half>&, GlobalTensor<half>&) {
        SetFlag<HardEvent::MTE2_V>(0); }); };
    m["ub_on_aic"] = [] { TPipe p; TBuf<TPosition::VECCALC> u; p.InitBuffer(u, 1024); };
    m["mmad_operand_in_l1"] = [] { small_setup([](Bufs& B, GlobalTensor<half>&, GlobalTensor<half>&) {
        Mmad(B.l0c.Get<float>(), B.l1.Get<half>(), B.l0b.Get<half>(), MmadParams(16, 16, 16, 0, false, true)); }); };
    m["vector_on_l1"] = [] { small_setup([](Bufs& B, GlobalTensor<half>&, GlobalTensor<half>&) {
        Add(B.l1.Get<half>(), B.l1.Get<half>(), B.l1.Get<half>(), 128, 1, BinaryRepeatParams()); }); };
    m["ub_copy_into_l1"] = [] { small_setup([](Bufs& B, GlobalTensor<half>& a, GlobalTensor<half>&) {
        DataCopy(B.l1.Get<half>(), a, 64); }); };
    m["pipe_v_barrier_on_aic"] = [] { PipeBarrier<PIPE_V>(); };
    // A: 40 rows loaded into a 48-row nz tile; Mmad over 48 rows reads 8 never-loaded rows
    for (int rows : {40, 48}) {
        m["mmad_m" + std::to_string(rows)] = [rows] { small_setup([rows](Bufs& B, GlobalTensor<half>& a, GlobalTensor<half>&) {
            DataCopy(B.l1.Get<half>(), a, Nd2NzParams(1, 40, 16, 0, 64, 48, 1, 0));
            DataCopy(B.l1.GetWithOffset<half>(256, 32768), a, Nd2NzParams(1, 16, 16, 0, 64, 16, 1, 0));
            LoadData(B.l0a.Get<half>(), B.l1.Get<half>(), LoadData2DParams(0, 3, 1, 0, 0, false, 0));
            LoadData(B.l0b.Get<half>(), B.l1.GetWithOffset<half>(256, 32768), LoadData2DParams(0, 1, 1, 0, 0, true, 0));
            Mmad(B.l0c.Get<float>(), B.l0a.Get<half>(), B.l0b.Get<half>(), MmadParams(rows, 16, 16, 0, false, true)); }); };
    }
    return m;
}

int main(int argc, char** argv) {
    if (argc != 3 && argc != 6) return 2;
    dir = argv[2];
    if (argc == 6) {
        M_ = std::atoi(argv[3]);
        K_ = std::atoi(argv[4]);
        N_ = std::atoi(argv[5]);
    }
    auto m = cases();
    auto it = m.find(argv[1]);
    if (it == m.end()) { std::fprintf(stderr, "unknown case %s\n", argv[1]); return 2; }
    ascendsched_rt::open_trace((dir + "/trace.jsonl").c_str());
    ascendsched_rt::begin_block(0, 1, "AIC");
    it->second();
    ascendsched_rt::end_block();
    ascendsched_rt::close_trace();
    return 0;
}
"""


def _defines() -> tuple[str, ...]:
    return _cpu_defines(DEFAULT_TARGET)  # the target macros every emitted project gets


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("cube_rt") / "cube_unit.cpp"
    src.write_text(HARNESS)
    return build_source("cube_unit", src, defines=_defines())


def _run(binary: Path, case: str, d: Path, inputs: dict[str, np.ndarray],
         args: tuple[int, ...] = ()) -> subprocess.CompletedProcess:
    for name, arr in inputs.items():
        (d / f"{name}.bin").write_bytes(np.ascontiguousarray(arr).tobytes())
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:abort_on_error=1")
    return subprocess.run([str(binary), case, str(d), *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=120)


def _mem(d: Path, name: str, dtype) -> np.ndarray:
    return np.frombuffer((d / f"{name}.bin").read_bytes(), dtype=dtype)


# ----------------------------------------------------------------------------- layout math
C0 = {1: 32, 2: 16, 4: 8}


def nz(x: np.ndarray, rows_p: int) -> np.ndarray:
    """L1 image of Nd2Nz with dstNzC0Stride = rows_p, dstNzNStride = 1; None where unwritten."""
    r, c = x.shape
    c0 = C0[x.itemsize]
    cp = -(-c // c0) * c0
    out = np.full(rows_p * cp, np.nan, dtype=object)
    for i in range(r):
        for j in range(cp):
            out[(j // c0) * rows_p * c0 + i * c0 + j % c0] = x[i, j] if j < c else 0
    return out


def zz(x: np.ndarray) -> np.ndarray:
    """L0A Zz image of a padded (Mp, Kp) matrix."""
    mp, kp = x.shape
    c0 = C0[x.itemsize]
    out = np.empty(mp * kp, dtype=x.dtype)
    for r in range(mp):
        for c in range(kp):
            out[((r // 16) * (kp // c0) + c // c0) * 16 * c0 + (r % 16) * c0 + c % c0] = x[r, c]
    return out


def zn(x: np.ndarray) -> np.ndarray:
    """L0B Zn image of a padded (Kp, Np) matrix."""
    kp, np_ = x.shape
    c0 = C0[x.itemsize]
    out = np.empty(kp * np_, dtype=x.dtype)
    for k in range(kp):
        for n in range(np_):
            out[((k // c0) * (np_ // 16) + n // 16) * 16 * c0 + (n % 16) * c0 + k % c0] = x[k, n]
    return out


def l0c_nz(c: np.ndarray, mp: int, np_: int) -> np.ndarray:
    out = np.empty(mp * np_, dtype=c.dtype)
    for m in range(mp):
        for n in range(np_):
            out[(n // 16) * mp * 16 + m * 16 + n % 16] = c[m, n]
    return out


def _check_nz(l1: np.ndarray, expect: np.ndarray, poison) -> None:
    got = l1[:expect.size]
    written = np.array([not (isinstance(v, float) and np.isnan(v)) for v in expect])
    np.testing.assert_array_equal(got[written], expect[written].astype(got.dtype))
    assert (got.view(np.uint8 if got.itemsize == 1 else f"u{got.itemsize}")[~written]
            == poison).all(), "rows Nd2Nz does not write keep the 0xFF poison"


def _pad(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    out = np.zeros((rows, cols), dtype=x.dtype)
    out[:x.shape[0], :x.shape[1]] = x
    return out


# ----------------------------------------------------------------------------- tests
def test_gemm_fp16_layouts_numbers_and_trace(harness, tmp_path):
    r = np.random.default_rng(1)
    a = r.standard_normal((20, 40)).astype(np.float16)
    b = r.standard_normal((40, 24)).astype(np.float16)
    p = _run(harness, "gemm_f16", tmp_path, {"a": a, "b": b})
    assert p.returncode == 0, p.stderr
    l1 = _mem(tmp_path, "l1", np.float16)
    _check_nz(l1, nz(a, 32), 0xFFFF)                        # A: Rp = 32, 3 column blocks
    _check_nz(l1[2048:], nz(b, 48), 0xFFFF)                 # B at 4096 B: Rp = 48
    # L0A = zz of A padded to (32, 48); pad rows 20..31 are L1 poison (NaN), pad cols are 0
    a_pad = _pad(a, 32, 48)
    l0a = _mem(tmp_path, "l0a", np.float16)[:32 * 48]
    want = zz(a_pad)
    rows_valid = zz(_pad(np.ones((20, 48), np.float16), 32, 48)).astype(bool)
    np.testing.assert_array_equal(l0a[rows_valid], want[rows_valid])
    assert np.isnan(l0a[~rows_valid]).all()
    # L0B = zn of B padded to (48, 32): rows 40..47 are L1 poison
    l0b = _mem(tmp_path, "l0b", np.float16)[:48 * 32]
    b_rows = zn(_pad(np.ones((40, 32), np.float16), 48, 32)).astype(bool)
    np.testing.assert_array_equal(l0b[b_rows], zn(_pad(b, 48, 32))[b_rows])
    # L0C: valid 20 x 24 products, pad elements of the 2 x 2 fractals poisoned
    ref = a.astype(np.float64) @ b.astype(np.float64)
    l0c = _mem(tmp_path, "l0c", np.float32)[:32 * 32]
    full = np.full((32, 32), np.nan, np.float32)
    full[:20, :24] = ref
    img = l0c_nz(full, 32, 32)
    np.testing.assert_allclose(l0c[~np.isnan(img)], img[~np.isnan(img)], rtol=1e-6)
    assert np.isnan(l0c[np.isnan(img)]).all()
    c = _mem(tmp_path, "c", np.float16).reshape(20, 24)
    np.testing.assert_array_equal(c, ref.astype(np.float32).astype(np.float16))
    # trace: one event per call, exact byte ranges
    ev = Trace.from_jsonl((tmp_path / "trace.jsonl").read_text()).events
    assert [e.op for e in ev] == (["copy_gm_l1"] * 2 + ["set_flag", "wait_flag"] + ["load_l0a"] * 2
                                  + ["load_l0b"] * 3 + ["set_flag", "wait_flag", "mmad", "set_flag",
                                                        "wait_flag", "fixpipe", "barrier"])
    assert all(e.core == "AIC" for e in ev)
    cp_a, cp_b = ev[0], ev[1]
    assert cp_a.pipe == "MTE2" and cp_a.reads == (("GM:a", 0, 1600),)
    # 20 rows x 3 blocks of 32 B at (block * 32 + row) * 32: rows 0..19 of each 1 KB column block
    assert cp_a.writes == tuple(("L1", blk * 1024, blk * 1024 + 640) for blk in range(3))
    assert cp_b.writes == (("L1", 4096, 4096 + 1280), ("L1", 4096 + 1536, 4096 + 1536 + 1280))
    la = ev[4]
    assert la.pipe == "MTE1" and la.writes == (("L0A", 0, 1536),)
    assert la.reads == (("L1", 0, 512), ("L1", 1024, 1536), ("L1", 2048, 2560))
    mm = next(e for e in ev if e.op == "mmad")
    assert mm.pipe == "M" and mm.writes == (("L0C", 0, 4096),)
    assert mm.reads == (("L0A", 0, 3072), ("L0B", 0, 3072))
    fx = next(e for e in ev if e.op == "fixpipe")
    assert fx.pipe == "FIX" and fx.writes == (("GM:c", 0, 960),)
    # L0C reads: whole 16-element row blocks, rows 0..19 of both N-fractal columns, the
    # second one Mp * 16 elements = 2 KB further
    assert fx.reads == (("L0C", 0, 1280), ("L0C", 2048, 2048 + 1280))
    sets = [e for e in ev if e.op == "set_flag"]
    assert [(e.src, e.dst) for e in sets] == [("MTE2", "MTE1"), ("MTE1", "M"), ("M", "FIX")]


def test_gemm_int8_with_transposed_squares(harness, tmp_path):
    r = np.random.default_rng(2)
    a = r.integers(-128, 128, (18, 70)).astype(np.int8)
    b = r.integers(-128, 128, (70, 40)).astype(np.int8)
    p = _run(harness, "gemm_i8", tmp_path, {"a": a, "b": b})
    assert p.returncode == 0, p.stderr
    # L0B = zn (C0 = 32 along K) of B padded to (96, 64); K rows 70..95 are L1 poison (-1)
    l0b = _mem(tmp_path, "l0b", np.int8)[:96 * 64]
    valid = zn(_pad(np.ones((70, 64), np.int8), 96, 64)).astype(bool)
    np.testing.assert_array_equal(l0b[valid], zn(_pad(b, 96, 64))[valid])
    assert (l0b[~valid] == -1).all()
    c = _mem(tmp_path, "c", np.int32).reshape(18, 40)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
    ev = Trace.from_jsonl((tmp_path / "trace.jsonl").read_text()).events
    tr = [e for e in ev if e.op == "load_l0b_transpose"]
    assert len(tr) == 3 and tr[0].pipe == "MTE1"
    # k block 0: squares (n block pair 0, 1) at L1 4096 + 0 and + 3 KB; L0B fractals 0..3
    assert tr[0].reads == (("L1", 4096, 5120), ("L1", 4096 + 3072, 4096 + 4096))
    assert tr[0].writes == (("L0B", 0, 2048),)


def test_gemm_fp32_b_transposed_relu(harness, tmp_path):
    r = np.random.default_rng(3)
    a = r.standard_normal((17, 20)).astype(np.float32)
    bt = r.standard_normal((12, 20)).astype(np.float32)
    p = _run(harness, "gemm_f32_tb", tmp_path, {"a": a, "b": bt})
    assert p.returncode == 0, p.stderr
    c = _mem(tmp_path, "c", np.float32).reshape(17, 12)
    ref = np.maximum(a.astype(np.float64) @ bt.T.astype(np.float64), 0)
    np.testing.assert_allclose(c, ref, rtol=1e-6, atol=1e-6)
    # L0B holds Zn of B = bt.T with C0 = 8 along K (the bytes of L1's nz of bt); N rows
    # 12..15 were never written by Nd2Nz and keep the poison
    l0b = _mem(tmp_path, "l0b", np.float32)[:24 * 16]
    valid = zn(_pad(np.ones((24, 12), np.float32), 24, 16)).astype(bool)
    np.testing.assert_array_equal(l0b[valid], zn(_pad(bt.T.copy(), 24, 16))[valid])
    assert np.isnan(l0b[~valid]).all()


def test_gemm_bf16_accumulates_over_k(harness, tmp_path):
    r = np.random.default_rng(4)
    a = from_bf16_bits(bf16_bits(r.standard_normal((32, 64)).astype(np.float32)))
    b = from_bf16_bits(bf16_bits(r.standard_normal((64, 32)).astype(np.float32)))
    p = _run(harness, "gemm_bf16_acc", tmp_path, {"a": bf16_bits(a), "b": bf16_bits(b)})
    assert p.returncode == 0, p.stderr
    c = from_bf16_bits(_mem(tmp_path, "c", np.uint16)).reshape(32, 32)
    # each Mmad's k-sum rounds to fp32 once, the accumulation adds in fp32
    half1 = (a[:, :32].astype(np.float64) @ b[:32].astype(np.float64)).astype(np.float32)
    half2 = (a[:, 32:].astype(np.float64) @ b[32:].astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(c, from_bf16_bits(bf16_bits(half1 + half2)))
    mm = [e for e in Trace.from_jsonl((tmp_path / "trace.jsonl").read_text()).events
          if e.op == "mmad"]
    assert mm[0].reads == (("L0A", 0, 2048), ("L0B", 0, 2048))          # init: C not read
    assert ("L0C", 0, 4096) in mm[1].reads                                # accumulate: C read


@pytest.mark.parametrize("case, message", [
    ("gemv", r"Mmad: m == 1 switches the Cube into GEMV mode"),
    ("mmad_k_4096", r"Mmad: k = 4096 is outside \[1, 4095\]"),
    ("l0a_misaligned", r"LoadData\(LoadData2DParams\): dst starts at L0A address 256, which is not "
                       r"512-byte aligned"),
    ("repeat_0", r"repeatTimes = 0 is outside \[1, 255\] \(0 makes the load a NOP\)"),
    ("nd2nz_overlap", r"is written twice: Nd2Nz destinations must not overlap"),
    ("l1_out_of_bounds", r"L1 access \[\d+, \d+\) is outside the usable L1"),
    ("fixpipe_rows_overlap", r"Fixpipe: dstStride 16 < nSize 32"),
    ("fixpipe_quant_mismatch", r"float -> half needs quantPre F322F16, got mode 0"),
    ("transpose_b32_loaddata", r"ifTranspose needs b16 data, got float"),
    ("aiv_event_on_aic", r"SetFlag<HardEvent::MTE2_V>: this event does not exist on the AIC"),
    ("ub_on_aic", r"TPipe::InitBuffer: UB does not exist on the AIC"),
    ("mmad_operand_in_l1", r"Mmad: fm is a LocalTensor in L1, but must be in L0A \(TPosition A2\)"),
    ("vector_on_l1", r"Add: dst is a LocalTensor in L1: vector instructions and GM<->UB copies work on UB"),
    ("ub_copy_into_l1", r"DataCopy: dst is a LocalTensor in L1; this DataCopy overload moves GM <-> UB"),
    ("pipe_v_barrier_on_aic", r"PipeBarrier<PIPE_V>: the AIC has no V pipe"),
])
def test_documented_rules_abort(harness, tmp_path, case, message):
    p = _run(harness, case, tmp_path, {})
    assert p.returncode != 0
    assert "ascendsched CPU runtime" in p.stderr
    import re
    assert re.search(message, p.stderr), p.stderr


def test_mmad_over_never_loaded_rows_aborts(harness, tmp_path):
    # docs Mmad.md:329 (NaN inputs may raise an execution error), 285-287 (the rest of a
    # fractal is ignored): m of the valid 40 rows runs; m = 48 reads 8 rows no copy wrote
    p = _run(harness, "mmad_m40", tmp_path, {})
    assert p.returncode == 0, p.stderr
    p = _run(harness, "mmad_m48", tmp_path, {})
    assert p.returncode != 0
    assert re.search(r"Mmad reads L0A A element \(row, k\) \(40, 0\) at 1280, which no copy or "
                     r"load wrote", p.stderr), p.stderr


def test_trace_is_valid_jsonl(harness, tmp_path):
    r = np.random.default_rng(5)
    p = _run(harness, "gemm_f16", tmp_path, {"a": r.standard_normal((20, 40)).astype(np.float16),
                                             "b": r.standard_normal((40, 24)).astype(np.float16)})
    assert p.returncode == 0
    for line in (tmp_path / "trace.jsonl").read_text().splitlines():
        d = json.loads(line)
        assert d["block"] == 0 and d["core"] == "AIC"


def test_load_with_transpose_b32_square(harness, tmp_path):
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    p = _run(harness, "transpose_b32", tmp_path, {"a": x})
    assert p.returncode == 0, p.stderr
    l0b = _mem(tmp_path, "l0b", np.float32)
    # the square is [F0 | F1] = X; its transpose splits into two 16x8 fractals
    np.testing.assert_array_equal(l0b[:128].reshape(16, 8), x.T[:, :8])
    np.testing.assert_array_equal(l0b[128:256].reshape(16, 8), x.T[:, 8:])
    ev = Trace.from_jsonl((tmp_path / "trace.jsonl").read_text()).events
    assert ev[-1].op == "load_l0b_transpose" and ev[-1].writes == (("L0B", 0, 1024),)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 128), k=st.integers(1, 128), n=st.integers(1, 128),
       seed=st.integers(0, 2**16))
def test_random_shapes_equal_numpy(harness, tmp_path_factory, m, k, n, seed):
    """Any fp16 shape up to 128 through Nd2Nz, LoadData (A plain, B transposed), Mmad and
    Fixpipe F322F16, with the recipe of lower/cube_ops.py: bit-equal to numpy's float64 product
    rounded to fp32 then fp16 (m == 1 runs Mmad with m = 2 over a copied row: never GEMV, and
    never over rows no copy loaded)."""
    d = tmp_path_factory.mktemp("any")
    r = np.random.default_rng(seed)
    a = r.standard_normal((m, k)).astype(np.float16)
    b = r.standard_normal((k, n)).astype(np.float16)
    p = _run(harness, "gemm_any", d, {"a": a, "b": b}, (m, k, n))
    assert p.returncode == 0, p.stderr
    c = _mem(d, "c", np.float16).reshape(m, n)
    ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32).astype(np.float16)
    np.testing.assert_array_equal(c, ref)
