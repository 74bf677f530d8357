// The cube-call harness of test_cube_runtime.py: drives DataCopy(Nd2NzParams), LoadData,
// LoadDataWithTranspose, Mmad and Fixpipe on the CPU runtime and dumps every buffer.
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
    // GM -> L1 by count is legal (DataCopy（GMToL1连续数据搬运）.md); GM -> L0A is not: L0A is
    // filled from L1 by LoadData
    m["gm_copy_into_l0a"] = [] { small_setup([](Bufs& B, GlobalTensor<half>& a, GlobalTensor<half>&) {
        DataCopy(B.l0a.Get<half>(), a, 64); }); };
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
