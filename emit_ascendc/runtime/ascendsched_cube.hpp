// ascendsched CPU runtime, Cube (AIC) part: the AscendC calls of the GEMM data path on 910B,
// with the names, signatures and parameter units of the real API. Included by kernel_operator.h
// (after TPosition, LocalTensor, GlobalTensor, TBuf and the trace writer are defined).
//
//   GM -> L1   DataCopy(LocalTensor, GlobalTensor, Nd2NzParams)            MTE2  "copy_gm_l1"
//   L1 -> L0A  LoadData(LocalTensor A2, LocalTensor A1, LoadData2DParams)   MTE1  "load_l0a"
//   L1 -> L0B  LoadData(LocalTensor B2, LocalTensor B1, LoadData2DParams)   MTE1  "load_l0b"
//              LoadDataWithTranspose(dst, src, LoadData2dTransposeParams)   MTE1  "load_l0a_transpose",
//                                                                                 "load_l0b_transpose"
//   L0A x L0B -> L0C  Mmad(dst CO1, fm A2, filter B2, MmadParams)           M     "mmad"
//   L0C -> GM  Fixpipe<T, U, CFG_ROW_MAJOR>(GlobalTensor, LocalTensor CO1, FixpipeParamsV220)
//                                                                           FIX   "fixpipe"
//   L1 -> BT   DataCopy(LocalTensor C2, LocalTensor C1, DataCopyParams)     MTE1  "copy_l1_bt"
//   A x B + bias  Mmad(dst CO1, fm A2, filter B2, bias C2, MmadParams)      M     "mmad_bias"
//   GM -> L1   DataCopy(LocalTensor, GlobalTensor, count) (kernel_operator.h) MTE2  "copy_gm_l1_cont"
//   L0C -> GM  Fixpipe<T, U, CFG_ROW_MAJOR>(GlobalTensor, LocalTensor CO1, LocalTensor<uint64_t> C1,
//              FixpipeParamsV220) with quantPre VDEQF16 (per-channel quant)  FIX   "fixpipe_quant"
//
// Sources (asc-devkit = mirror-cann/asc-devkit, docs = docs/zh/api/SIMD-API/basic_api/
// cube_compute_ISASI/ of hicann/asc-devkit):
//   structs     include/basic_api/kernel_struct_data_copy.h (Nd2NzParams),
//               include/basic_api/kernel_struct_mm.h (LoadData2DParams, LoadData2dTransposeParams,
//               MmadParams), include/basic_api/kernel_struct_fixpipe.h (FixpipeParamsV220,
//               FixpipeConfig, CFG_ROW_MAJOR)
//   semantics   docs cube_compute_load/DataCopy_GMToL1_ND2NZ.md, cube_compute_load/LoadData_2D.md
//               (+ examples/.../load_data_l12l0/scripts/load2d.py), cube_compute_load/
//               LoadDataWithTranspose.md (+ scripts/load_data_with_transpose.py),
//               mmad_compute/Mmad.md, mmad_compute_key_features/{GEMV,k_direction_alignment_
//               constraint}.md, cube_compute_store/Fixpipe_L0CToGM.md,
//               cube_store_key_features/NZ2ND.md
//
// Layouts (element offsets; C0 = 32 B / sizeof(T): 16 for half/bfloat16, 8 for float/int32,
// 32 for int8; a fractal is 16 x C0 elements = 512 B; L0C fractals are 16 x 16 fp32/int32):
//   L1 (Nd2Nz with dstNzC0Stride = Rp, dstNzNStride = 1):  (c / C0) * Rp * C0 + r * C0 + c % C0
//   L0A Zz, A (m x k) as Mmad reads it:  ((r / 16) * Kb + c / C0) * 16 * C0 + (r % 16) * C0 + c % C0
//   L0B Zn, B (k x n):                   ((k / C0) * Nb + n / 16) * 16 * C0 + (n % 16) * C0 + k % C0
//   L0C Nz, C (m x n):                   (n / 16) * Mb * 16 * 16 + m * 16 + n % 16
// with Kb = ceil(k / C0) (float with kDirectionAlign: ceil(k / 16) * 2), Mb = ceil(m / 16),
// Nb = ceil(n / 16).
//
// Bytes in the trace (exact, from the params): Nd2Nz reads every GM row exactly and writes
// whole 32 B blocks (the pad of a row's last block is written with zeros); LoadData reads and
// writes whole 512 B fractals; Mmad reads the ceil(m/16) x Kb A fractals and Kb x ceil(n/16)
// B fractals it uses and writes (and, when accumulating, reads) the ceil(m/16) x ceil(n/16)
// L0C fractals; Fixpipe reads whole 16-element L0C row blocks (ceil(nSize/16) per row) and
// writes exactly the mSize x nSize GM elements. (The same bytes as lower/ir.py's
// cube_footprints and sim/cube.py, derived here independently from the params.)
//
// Undefined bytes are poisoned: L0C elements of the written fractals outside m x n are filled
// with 0xFF (NaN / -1), as are the Cube memories at block start; Mmad ignores A/B elements
// outside m x k / k x n (docs Mmad: "其他无效数据在计算中会被忽略").
#pragma once

#include <vector>

// CCE global enum (docs Fixpipe_L0CToGM.md, FixpipeParamsV220::quantPre); used as
// QuantMode_t::F322F16 in kernels.
enum QuantMode_t { NoQuant, F322F16, F322BF16, DEQF16, VDEQF16, QF322B8_PRE, VQF322B8_PRE, REQ8, VREQ8 };

namespace AscendC {

// ============================================================================ parameter structs
// include/basic_api/kernel_struct_data_copy.h. Units (docs DataCopy_GMToL1_ND2NZ.md):
// srcNdMatrixStride, srcDValue, dstNzMatrixStride in elements; dstNzC0Stride, dstNzNStride in
// C0_SIZE (32 B).
struct Nd2NzParams {
    Nd2NzParams() {}
    Nd2NzParams(const uint16_t ndNumIn, const uint16_t nValueIn, const uint16_t dValueIn,
                const uint16_t srcNdMatrixStrideIn, const uint16_t srcDValueIn, const uint16_t dstNzC0StrideIn,
                const uint16_t dstNzNStrideIn, const uint16_t dstNzMatrixStrideIn)
        : ndNum(ndNumIn), nValue(nValueIn), dValue(dValueIn), srcNdMatrixStride(srcNdMatrixStrideIn),
          srcDValue(srcDValueIn), dstNzC0Stride(dstNzC0StrideIn), dstNzNStride(dstNzNStrideIn),
          dstNzMatrixStride(dstNzMatrixStrideIn) {}
    uint16_t ndNum = 0;
    uint16_t nValue = 0;
    uint16_t dValue = 0;
    uint16_t srcNdMatrixStride = 0;
    uint16_t srcDValue = 0;
    uint16_t dstNzC0Stride = 0;
    uint16_t dstNzNStride = 0;
    uint16_t dstNzMatrixStride = 0;
};

// include/basic_api/kernel_struct_mm.h. Units (docs LoadData_2D.md): startIndex, srcStride,
// dstGap in 512 B fractals; dst of repeat r at r * (1 + dstGap) fractals.
struct LoadData2DParams {
    LoadData2DParams() {}
    LoadData2DParams(const uint16_t startIndexIn, const uint8_t repeatTimesIn, const uint16_t srcStrideIn,
                     const uint8_t sidIn, const uint16_t dstGapIn, const bool ifTransposeIn, const uint8_t addrModeIn)
        : startIndex(startIndexIn), dstGap(dstGapIn), srcStride(srcStrideIn), ifTranspose(ifTransposeIn),
          repeatTimes(repeatTimesIn), sid(sidIn), addrMode(addrModeIn) {}
    uint16_t startIndex = 0;
    uint16_t dstGap = 0;
    uint16_t srcStride = 0;
    bool ifTranspose = 0;
    uint8_t repeatTimes = 0;
    uint8_t sid = 0;
    uint8_t addrMode = 0;
};
using LoadData2dParams = LoadData2DParams;

// include/basic_api/kernel_struct_mm.h. Units (docs LoadDataWithTranspose.md): startIndex and
// srcStride in square matrices (b8: 32x32 B, b16: 16x16x2 B, b32: 16x16x4 B); dstGap and
// dstFracGap in 512 B.
struct LoadData2dTransposeParams {
    LoadData2dTransposeParams() {}
    LoadData2dTransposeParams(const uint16_t startIndexIn, const uint8_t repeatTimesIn, const uint16_t srcStrideIn,
                              const uint16_t dstGapIn, const uint16_t dstfracGapIn, const uint8_t addrModeIn)
        : startIndex(startIndexIn), repeatTimes(repeatTimesIn), srcStride(srcStrideIn), dstGap(dstGapIn),
          dstFracGap(dstfracGapIn), addrMode(addrModeIn) {}
    LoadData2dTransposeParams(const uint16_t startIndexIn, const uint8_t repeatTimesIn, const uint16_t srcStrideIn,
                              const uint16_t dstGapIn, const uint16_t dstfracGapIn)
        : startIndex(startIndexIn), repeatTimes(repeatTimesIn), srcStride(srcStrideIn), dstGap(dstGapIn),
          dstFracGap(dstfracGapIn) {}
    uint16_t startIndex = 0;
    uint8_t repeatTimes = 0;
    uint16_t srcStride = 0;
    uint16_t dstGap = 0;
    uint16_t dstFracGap = 0;
    uint8_t addrMode = 0;
};

// include/basic_api/kernel_struct_mm.h (the 6-argument constructor; kDirectionAlign is set as a
// field). docs Mmad.md: m, n, k in [0, 4095]; cmatrixInitVal true: C = A x B, false: C += A x B.
struct MmadParams {
    MmadParams() {}
    MmadParams(const uint16_t mIn, const uint16_t nIn, const uint16_t kIn, const bool isBiasIn, const int32_t fmOffsetIn,
               const bool enSsparseIn, const bool enWinogradAIn, const bool enWinogradBIn)
        : m(mIn), n(nIn), k(kIn), isBias(isBiasIn), fmOffset(fmOffsetIn), enSsparse(enSsparseIn),
          enWinogradA(enWinogradAIn), enWinogradB(enWinogradBIn) {}
    MmadParams(const uint16_t mIn, const uint16_t nIn, const uint16_t kIn, const uint8_t unitFlagIn,
               const bool cmatrixSourceIn, const bool cmatrixInitValIn)
        : m(mIn), n(nIn), k(kIn), unitFlag(unitFlagIn), cmatrixSource(cmatrixSourceIn),
          cmatrixInitVal(cmatrixInitValIn) {}
    uint16_t m = 0;
    uint16_t n = 0;
    uint16_t k = 0;
    bool isBias = false;
    int32_t fmOffset = 0;
    bool enSsparse = false;
    bool enWinogradA = false;
    bool enWinogradB = false;
    uint8_t unitFlag = 0;
    bool kDirectionAlign = false;
    bool cmatrixSource = false;
    bool cmatrixInitVal = true;
};

// include/basic_api/kernel_struct_fixpipe.h
enum class CO2Layout : uint8_t { NZ = 0, ROW_MAJOR, COLUMN_MAJOR };

struct FixpipeConfig {
    CO2Layout format;
    constexpr FixpipeConfig(CO2Layout format_) : format(format_) {}
};
constexpr FixpipeConfig CFG_NZ = {CO2Layout::NZ};
constexpr FixpipeConfig CFG_ROW_MAJOR = {CO2Layout::ROW_MAJOR};
constexpr FixpipeConfig CFG_COLUMN_MAJOR = {CO2Layout::COLUMN_MAJOR};

// include/basic_api/kernel_struct_fixpipe.h. Units (docs Fixpipe_L0CToGM.md, NZ2ND.md):
// srcStride in C0_Size = 16 L0C elements (distance of adjacent N-fractal columns, "should be
// mSize rounded up to 16"); dstStride with NZ2ND = elements per GM row; srcNdStride in
// 16 * C0_Size; dstNdStride in elements.
struct FixpipeParamsV220 {
    FixpipeParamsV220() {}
    FixpipeParamsV220(const uint16_t nSizeIn, const uint16_t mSizeIn, const uint16_t srcStrideIn,
                      const uint32_t dstStrideIn, const bool reluEnIn)
        : nSize(nSizeIn), mSize(mSizeIn), srcStride(srcStrideIn), dstStride(dstStrideIn), reluEn(reluEnIn) {}
    FixpipeParamsV220(const uint16_t nSizeIn, const uint16_t mSizeIn, const uint16_t srcStrideIn,
                      const uint32_t dstStrideIn, const bool reluEnIn, const QuantMode_t quantPreIn,
                      const int64_t deqScalarIn, const uint16_t ndNumIn, const uint16_t srcNdStrideIn,
                      const uint16_t dstNdStrideIn, const uint8_t unitFlagIn)
        : nSize(nSizeIn), mSize(mSizeIn), srcStride(srcStrideIn), dstStride(dstStrideIn), quantPre(quantPreIn),
          deqScalar(static_cast<uint64_t>(deqScalarIn)), ndNum(ndNumIn), srcNdStride(srcNdStrideIn),
          dstNdStride(dstNdStrideIn), reluEn(reluEnIn), unitFlag(unitFlagIn) {}
    uint16_t nSize = 0;
    uint16_t mSize = 0;
    uint16_t srcStride = 0;
    uint32_t dstStride = 0;
    QuantMode_t quantPre = QuantMode_t::NoQuant;
    uint64_t deqScalar = 0;
    uint16_t ndNum = 1;
    uint16_t srcNdStride = 0;
    uint16_t dstNdStride = 0;
    bool reluEn = false;
    uint8_t unitFlag = 0;
    bool isChannelSplit = false;
};

// ============================================================================ helpers
namespace cube {

constexpr uint64_t kFractal = 512;     // bytes of one L0A/L0B fractal (16 x C0)
constexpr uint64_t kC0Bytes = 32;      // C0_SIZE
constexpr uint64_t kL0CFractal = 1024;  // 16 x 16 fp32/int32
constexpr uint64_t kMaxMnk = 4095;     // Mmad m/n/k, Fixpipe nSize (docs)

template <typename T> constexpr const char* tname() {
    if constexpr (std::is_same_v<T, half>) return "half";
    else if constexpr (std::is_same_v<T, bfloat16_t>) return "bfloat16_t";
    else if constexpr (std::is_same_v<T, float>) return "float";
    else if constexpr (std::is_same_v<T, int32_t>) return "int32_t";
    else if constexpr (std::is_same_v<T, uint32_t>) return "uint32_t";
    else if constexpr (std::is_same_v<T, int16_t>) return "int16_t";
    else if constexpr (std::is_same_v<T, uint16_t>) return "uint16_t";
    else if constexpr (std::is_same_v<T, int8_t>) return "int8_t";
    else if constexpr (std::is_same_v<T, uint8_t>) return "uint8_t";
    else if constexpr (std::is_same_v<T, uint64_t>) return "uint64_t";
    else return "?";
}

inline std::string S(uint64_t v) { return rt::S(static_cast<long long>(v)); }

inline void need_aic(const char* api, const char* file_, int line_) {
    if (!rt::is_aic()) {
        rt::fail(file_, line_, std::string(api) + " is a Cube (AIC) instruction, but this code runs on the AIV");
    }
}

template <typename T>
inline void need_space(const char* api, const char* operand, const LocalTensor<T>& t, uint8_t space,
                       const char* positions, const char* file_, int line_) {
    if (t.space_ != space) {
        rt::fail(file_, line_, std::string(api) + ": " + operand + " is a LocalTensor in " + rt::space_name(t.space_) +
                                   ", but must be in " + rt::space_name(space) + " (TPosition " + positions + ")");
    }
}

inline void need_align(const char* api, const char* operand, uint8_t space, uint64_t addr, uint64_t align,
                       const char* file_, int line_) {
    if (addr % align != 0) {
        rt::fail(file_, line_, std::string(api) + ": " + operand + " starts at " + rt::space_name(space) + " address " +
                                   S(addr) + ", which is not " + S(align) + "-byte aligned");
    }
}

inline void need_range(const char* api, const char* field, uint64_t v, uint64_t lo, uint64_t hi, const char* file_,
                       int line_, const char* why = "") {
    if (v < lo || v > hi) {
        rt::fail(file_, line_, std::string(api) + ": " + field + " = " + S(v) + " is outside [" + S(lo) + ", " + S(hi) +
                                   "]" + why);
    }
}

inline uint8_t* at(uint8_t space, uint64_t addr) { return rt::mem(space).data() + addr; }

inline rt::Access acc(uint8_t space, uint64_t lo, uint64_t bytes) {
    return rt::Access{rt::space_name(space), lo, lo + bytes};
}

// Granules of one memory written by one call, for the documented "destinations must not
// overlap" rules (a byte map over the memory: cheap next to the copy itself).
struct WriteSet {
    uint64_t granule;
    std::vector<uint8_t> seen;
    WriteSet(uint8_t space, uint64_t granule_) : granule(granule_), seen(rt::space_usable(space) / granule_ + 1, 0) {}
    bool add(uint64_t lo, uint64_t bytes) {  // lo, bytes: multiples of the granule, in bounds
        for (uint64_t a = lo / granule; a < (lo + bytes) / granule; ++a) {
            if (seen[a]) return false;
            seen[a] = 1;
        }
        return true;
    }
};

// Appends an access, extending the previous one when it continues it (most calls touch their
// bytes in address order; the trace writer coalesces the rest).
inline void push(std::vector<rt::Access>& v, rt::Access a) {
    if (!v.empty() && v.back().hi == a.lo && v.back().space == a.space) {
        v.back().hi = a.hi;
        return;
    }
    v.push_back(std::move(a));
}

template <typename T> inline double to_double(T v) {
    if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16_t>) return static_cast<double>(static_cast<float>(v));
    else return static_cast<double>(v);
}

template <typename T> inline T load(uint8_t space, uint64_t addr) {
    T v;
    std::memcpy(&v, at(space, addr), sizeof(T));
    return v;
}

template <typename T> inline void store(uint8_t space, uint64_t addr, T v) { std::memcpy(at(space, addr), &v, sizeof(T)); }

// out[r*n + c] = sum_k a[r*k + kk] * bt[c*k + kk]: exact products summed in double, four
// columns at a time (independent chains; the ISA does not document the order of additions
// inside one Mmad). The runtime's hottest loop; it walks only the runtime's own vectors of
// m*k, n*k and m*n doubles, so it is exempt from the sanitizers (the kernel's memory accesses
// are all checked before it runs) and optimized even in the -O0 check builds.
__attribute__((no_sanitize("address", "undefined"), optimize("O2")))
inline void dots(const double* a, const double* bt, uint64_t m, uint64_t n, uint64_t k, double* out) {
    for (uint64_t r = 0; r < m; ++r) {
        const double* ar = a + r * k;
        uint64_t c = 0;
        for (; c + 4 <= n; c += 4) {
            const double *b0 = bt + c * k, *b1 = b0 + k, *b2 = b1 + k, *b3 = b2 + k;
            double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (uint64_t kk = 0; kk < k; ++kk) {
                const double x = ar[kk];
                s0 += x * b0[kk];
                s1 += x * b1[kk];
                s2 += x * b2[kk];
                s3 += x * b3[kk];
            }
            out[r * n + c] = s0;
            out[r * n + c + 1] = s1;
            out[r * n + c + 2] = s2;
            out[r * n + c + 3] = s3;
        }
        for (; c < n; ++c) {
            const double* bc = bt + c * k;
            double s0 = 0;
            for (uint64_t kk = 0; kk < k; ++kk) s0 += ar[kk] * bc[kk];
            out[r * n + c] = s0;
        }
    }
}

}  // namespace cube

// ============================================================================ GM -> L1 (MTE2)
// docs DataCopy_GMToL1_ND2NZ.md: ND matrix i, row r, column c (c < dValue) of GM element
// i*srcNdMatrixStride + r*srcDValue + c goes to L1 byte
//   dst + i*dstNzMatrixStride*sizeof(T) + (c/C0)*dstNzC0Stride*32 + r*dstNzNStride*32 + (c%C0)*sizeof(T);
// "当dValue*sizeof(T)不满足32字节对齐时，在目的矩阵中会补0对齐到32字节" (the rest of a row's last
// 32 B block is zero-filled). Rows beyond nValue are not written. L1 destinations must not
// overlap ("不保证重叠数据的写入顺序"); dst 32 B aligned.
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const Nd2NzParams& p, ASCENDSCHED_LOC) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4, "Nd2Nz moves b8/b16/b32 data");
    const char* api = "DataCopy(Nd2NzParams)";
    cube::need_aic(api, file_, line_);
    cube::need_space(api, "dst", dst, rt::kL1, "A1/B1", file_, line_);
    cube::need_align(api, "dst", rt::kL1, dst.addr_, cube::kC0Bytes, file_, line_);
    cube::need_range(api, "ndNum", p.ndNum, 1, 4095, file_, line_, " (0 makes the copy a NOP)");
    cube::need_range(api, "nValue", p.nValue, 1, 16384, file_, line_, " (0 makes the copy a NOP)");
    cube::need_range(api, "dValue", p.dValue, 1, 65535, file_, line_, " (0 makes the copy a NOP)");
    cube::need_range(api, "srcDValue", p.srcDValue, 1, 65535, file_, line_);
    cube::need_range(api, "dstNzC0Stride", p.dstNzC0Stride, 1, 16384, file_, line_);
    cube::need_range(api, "dstNzNStride", p.dstNzNStride, 1, 16384, file_, line_);
    cube::need_range(api, "dstNzMatrixStride", p.dstNzMatrixStride, 0, 16384, file_, line_);
    const uint64_t c0 = cube::kC0Bytes / sizeof(T);
    const uint64_t blocks = (p.dValue + c0 - 1) / c0;
    rt::Record rec;
    rec.op = "copy_gm_l1";
    rec.pipe = "MTE2";
    cube::WriteSet written(rt::kL1, cube::kC0Bytes);
    for (uint64_t i = 0; i < p.ndNum; ++i) {
        for (uint64_t r = 0; r < p.nValue; ++r) {
            const uint64_t gm_elem = i * p.srcNdMatrixStride + r * p.srcDValue;
            const uint8_t* g = detail::gm_bytes(src, gm_elem * sizeof(T), p.dValue * sizeof(T), api, file_, line_);
            cube::push(rec.reads, rt::gm_access(file_, line_, g, p.dValue * sizeof(T)));
            for (uint64_t c = 0; c < blocks; ++c) {
                const uint64_t a = dst.addr_ + i * p.dstNzMatrixStride * sizeof(T) +
                                   (c * p.dstNzC0Stride + r * p.dstNzNStride) * cube::kC0Bytes;
                rt::check_space(file_, line_, api, rt::kL1, a, cube::kC0Bytes);
                if (!written.add(a, cube::kC0Bytes)) {
                    rt::fail(file_, line_, std::string(api) + ": the 32 B L1 block at " + cube::S(a) + " (matrix " +
                                               cube::S(i) + ", row " + cube::S(r) + ", column block " + cube::S(c) +
                                               ") is written twice: Nd2Nz destinations must not overlap "
                                               "(dstNzC0Stride/dstNzNStride/dstNzMatrixStride too small)");
                }
                const uint64_t n = std::min<uint64_t>(c0, p.dValue - c * c0);
                std::memset(cube::at(rt::kL1, a), 0, cube::kC0Bytes);
                std::memcpy(cube::at(rt::kL1, a), g + c * c0 * sizeof(T), n * sizeof(T));
                std::memset(rt::loaded(rt::kL1).data() + a, 1, cube::kC0Bytes);  // zero round-up included
                cube::push(rec.writes, cube::acc(rt::kL1, a, cube::kC0Bytes));
            }
        }
    }
    rec.label = rt::label(api, file_, line_);
    rt::emit(rec);
}

// ============================================================================ L1 -> L0A/L0B (MTE1)
namespace cube {
template <typename T>
inline const char* load_op(const char* api, const LocalTensor<T>& dst, bool transpose, const char* file_, int line_) {
    if (dst.space_ == rt::kL0A) return transpose ? "load_l0a_transpose" : "load_l0a";
    if (dst.space_ == rt::kL0B) return transpose ? "load_l0b_transpose" : "load_l0b";
    rt::fail(file_, line_, std::string(api) + ": dst is in " + rt::space_name(dst.space_) +
                               ", but must be in L0A (TPosition A2) or L0B (TPosition B2)");
}
}  // namespace cube

// docs LoadData_2D.md and scripts/load2d.py: repeat r copies the 512 B fractal number
// startIndex + r*srcStride of src (addrMode 0) to dst + r*(1 + dstGap)*512 B, transposing each
// 16x16 b16 fractal when ifTranspose. repeatTimes in [1, 255] (0 = NOP); dst in L0A/L0B
// 512 B aligned, src in L1 32 B aligned; ifTranspose only for b16; addrMode 1 exists only on the
// GM -> L1 path.
template <typename T>
inline void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2DParams& p, ASCENDSCHED_LOC) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4, "LoadData moves b8/b16/b32 fractals");
    const char* api = "LoadData(LoadData2DParams)";
    cube::need_aic(api, file_, line_);
    const char* op = cube::load_op(api, dst, false, file_, line_);
    cube::need_space(api, "src", src, rt::kL1, "A1/B1", file_, line_);
    cube::need_align(api, "dst", dst.space_, dst.addr_, cube::kFractal, file_, line_);
    cube::need_align(api, "src", rt::kL1, src.addr_, cube::kC0Bytes, file_, line_);
    cube::need_range(api, "repeatTimes", p.repeatTimes, 1, 255, file_, line_, " (0 makes the load a NOP)");
    if (p.addrMode != 0) {
        rt::fail(file_, line_, std::string(api) + ": addrMode " + cube::S(p.addrMode) +
                                   ": only the GM -> L1 path supports a decrementing address; keep 0");
    }
    if (p.ifTranspose && sizeof(T) != 2) {
        rt::fail(file_, line_, std::string(api) + ": ifTranspose needs b16 data, got " + cube::tname<T>() +
                                   " (use LoadDataWithTranspose for b8/b32)");
    }
    rt::Record rec;
    rec.op = op;
    rec.pipe = "MTE1";
    std::vector<uint8_t> frac(cube::kFractal), fracl(cube::kFractal);
    uint8_t* dl = rt::loaded(dst.space_).data();
    for (uint64_t r = 0; r < p.repeatTimes; ++r) {
        const uint64_t s = src.addr_ + (p.startIndex + r * p.srcStride) * cube::kFractal;
        const uint64_t d = dst.addr_ + r * (1 + static_cast<uint64_t>(p.dstGap)) * cube::kFractal;
        rt::check_space(file_, line_, api, rt::kL1, s, cube::kFractal);
        rt::check_space(file_, line_, api, dst.space_, d, cube::kFractal);
        std::memcpy(frac.data(), cube::at(rt::kL1, s), cube::kFractal);
        std::memcpy(fracl.data(), rt::loaded(rt::kL1).data() + s, cube::kFractal);  // loaded bytes move along
        if (p.ifTranspose) {
            for (uint64_t i = 0; i < 16; ++i) {
                for (uint64_t j = 0; j < 16; ++j) {
                    std::memcpy(cube::at(dst.space_, d + (i * 16 + j) * 2), &frac[(j * 16 + i) * 2], 2);
                    std::memcpy(dl + d + (i * 16 + j) * 2, &fracl[(j * 16 + i) * 2], 2);
                }
            }
        } else {
            std::memcpy(cube::at(dst.space_, d), frac.data(), cube::kFractal);
            std::memcpy(dl + d, fracl.data(), cube::kFractal);
        }
        cube::push(rec.reads, cube::acc(rt::kL1, s, cube::kFractal));
        cube::push(rec.writes, cube::acc(dst.space_, d, cube::kFractal));
    }
    rec.label = rt::label(api, file_, line_);
    rt::emit(rec);
}

// docs LoadDataWithTranspose.md and scripts/load_data_with_transpose.py. Repeat i takes the
// square matrix number startIndex + i*srcStride of src: b16 one 16x16 fractal; b8 two
// consecutive 16x32 fractals stacked into 32x32; b32 two consecutive 16x8 fractals side by
// side into 16x16. It writes the transposed square split into fractals of the same shape,
// fractal j at dst + i*(dstGap + 1)*512 + j*(dstFracGap + 1)*512 B. Destinations must not
// overlap ("开发者需要保证目的操作数转置后的分形没有重叠").
template <typename T>
inline void LoadDataWithTranspose(const LocalTensor<T>& dst, const LocalTensor<T>& src,
                                  const LoadData2dTransposeParams& p, ASCENDSCHED_LOC) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4, "LoadDataWithTranspose moves b8/b16/b32");
    const char* api = "LoadDataWithTranspose";
    cube::need_aic(api, file_, line_);
    const char* op = cube::load_op(api, dst, true, file_, line_);
    cube::need_space(api, "src", src, rt::kL1, "A1/B1", file_, line_);
    cube::need_align(api, "dst", dst.space_, dst.addr_, cube::kFractal, file_, line_);
    cube::need_align(api, "src", rt::kL1, src.addr_, cube::kC0Bytes, file_, line_);
    cube::need_range(api, "repeatTimes", p.repeatTimes, 1, 255, file_, line_, " (0 makes the load a NOP)");
    if (p.addrMode != 0) rt::fail(file_, line_, std::string(api) + ": addrMode must stay 0 (incrementing)");
    constexpr uint64_t nfrac = sizeof(T) == 2 ? 1 : 2;          // fractals per square
    constexpr uint64_t side = sizeof(T) == 1 ? 32 : 16;         // square side in elements
    constexpr uint64_t c0 = cube::kC0Bytes / sizeof(T);        // fractal columns
    rt::Record rec;
    rec.op = op;
    rec.pipe = "MTE1";
    cube::WriteSet written(dst.space_, cube::kFractal);
    std::vector<T> q(side * side), qt(side * side);
    std::vector<uint8_t> ql(side * side), qlt(side * side);  // loaded flag per element (all its bytes)
    const uint8_t* sl = rt::loaded(rt::kL1).data();
    uint8_t* dl = rt::loaded(dst.space_).data();
    auto all_loaded = [&](uint64_t addr) {
        for (uint64_t b = 0; b < sizeof(T); ++b) {
            if (!sl[addr + b]) return uint8_t{0};
        }
        return uint8_t{1};
    };
    for (uint64_t i = 0; i < p.repeatTimes; ++i) {
        const uint64_t s = src.addr_ + (p.startIndex + i * p.srcStride) * nfrac * cube::kFractal;
        rt::check_space(file_, line_, api, rt::kL1, s, nfrac * cube::kFractal);
        cube::push(rec.reads, cube::acc(rt::kL1, s, nfrac * cube::kFractal));
        // square Q[r][c]
        for (uint64_t f = 0; f < nfrac; ++f) {
            for (uint64_t r = 0; r < 16; ++r) {
                for (uint64_t c = 0; c < c0; ++c) {
                    const uint64_t src_addr = s + f * cube::kFractal + (r * c0 + c) * sizeof(T);
                    const T v = cube::load<T>(rt::kL1, src_addr);
                    const uint64_t qi = sizeof(T) == 4 ? r * side + f * c0 + c    // side by side
                                                       : (f * 16 + r) * side + c;  // stacked (b8) / single (b16)
                    q[qi] = v;
                    ql[qi] = all_loaded(src_addr);
                }
            }
        }
        for (uint64_t r = 0; r < side; ++r) {
            for (uint64_t c = 0; c < side; ++c) {
                qt[r * side + c] = q[c * side + r];
                qlt[r * side + c] = ql[c * side + r];
            }
        }
        for (uint64_t f = 0; f < nfrac; ++f) {
            const uint64_t d = dst.addr_ + (i * (1 + static_cast<uint64_t>(p.dstGap)) +
                                            f * (1 + static_cast<uint64_t>(p.dstFracGap))) * cube::kFractal;
            rt::check_space(file_, line_, api, dst.space_, d, cube::kFractal);
            if (!written.add(d, cube::kFractal)) {
                rt::fail(file_, line_, std::string(api) + ": the destination fractal at " + rt::space_name(dst.space_) +
                                           " " + cube::S(d) + " is written twice (dstGap/dstFracGap too small)");
            }
            for (uint64_t r = 0; r < 16; ++r) {
                for (uint64_t c = 0; c < c0; ++c) {
                    const uint64_t qi = sizeof(T) == 4 ? r * side + f * c0 + c : (f * 16 + r) * side + c;
                    cube::store<T>(dst.space_, d + (r * c0 + c) * sizeof(T), qt[qi]);
                    std::memset(dl + d + (r * c0 + c) * sizeof(T), qlt[qi], sizeof(T));
                }
            }
            cube::push(rec.writes, cube::acc(dst.space_, d, cube::kFractal));
        }
    }
    rec.label = rt::label(api, file_, line_);
    rt::emit(rec);
}

// ============================================================================ L1 -> bias table (MTE1)
// docs 矩阵计算（ISASI）/矩阵计算的搬入/DataCopy（L1ToBiasTable-Buffer数据搬运）.md: on 910B the
// bias table (TPosition C2) holds 1 KB; dst 64 B aligned, src (L1, C1) 32 B aligned; blockLen
// and dstGap in 64 B units, srcGap in 32 B; block b of blockCount copies blockLen * 64 bytes.
// Overflowing the table "将引发异常". src half -> dst float converts on the way; only same-type
// copies (float, int32_t) are modelled here. Issued on PIPE_MTE1 (impl/basic_api/dav_c220/
// kernel_operator_data_copy_impl.h: DataCopyL12BTImpl is __inout_pipe__(MTE1)).
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p, ASCENDSCHED_LOC) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, int32_t>,
                  "L1 -> bias table copies of float or int32_t are modelled (half -> float converts: not modelled)");
    const char* api = "DataCopy(L1 -> BiasTable)";
    cube::need_aic(api, file_, line_);
    cube::need_space(api, "dst", dst, rt::kBT, "C2", file_, line_);
    cube::need_space(api, "src", src, rt::kL1, "C1/A1/B1", file_, line_);
    cube::need_align(api, "dst", rt::kBT, dst.addr_, 64, file_, line_);
    cube::need_align(api, "src", rt::kL1, src.addr_, cube::kC0Bytes, file_, line_);
    cube::need_range(api, "blockCount", p.blockCount, 1, 4095, file_, line_, " (0 makes the copy a NOP)");
    cube::need_range(api, "blockLen", p.blockLen, 1, 65535, file_, line_, " (0 makes the copy a NOP)");
    rt::Record rec;
    rec.op = "copy_l1_bt";
    rec.pipe = "MTE1";
    constexpr uint64_t unit = 64;  // blockLen / dstGap unit on 910B
    for (uint64_t b = 0; b < p.blockCount; ++b) {
        const uint64_t s0 = src.addr_ + b * (p.blockLen * unit + p.srcStride * cube::kC0Bytes);
        const uint64_t d0 = dst.addr_ + b * (p.blockLen + p.dstStride) * unit;
        const uint64_t n = p.blockLen * unit;
        rt::check_space(file_, line_, api, rt::kL1, s0, n);
        rt::check_space(file_, line_, api, rt::kBT, d0, n);
        std::memcpy(cube::at(rt::kBT, d0), cube::at(rt::kL1, s0), n);
        cube::push(rec.reads, cube::acc(rt::kL1, s0, n));
        cube::push(rec.writes, cube::acc(rt::kBT, d0, n));
    }
    rec.label = rt::label(api, file_, line_);
    rt::emit(rec);
}

// ============================================================================ Mmad (M)
// docs Mmad.md: C (L0C, Nz, 1 KB aligned) = A (L0A, Zz, 512 B aligned) x B (L0B, Zn, 512 B
// aligned) [+ C]. Types (910B): half x half -> float, bfloat16_t x bfloat16_t -> float,
// float x float -> float, int8_t x int8_t -> int32_t. m, n, k in [1, 4095] (0 = NOP); m == 1
// switches to GEMV mode, which reads A as ND (docs GEMV.md): never used by ascendsched.
// Only the valid m x k and k x n elements enter the product. unitFlag and the deprecated isBias
// are not modelled; a bias comes through the with-bias prototype below.
namespace cube {
template <typename T, typename U, typename S>
inline void mmad(const LocalTensor<T>& dst, const LocalTensor<U>& fm, const LocalTensor<S>& filter,
                 const LocalTensor<T>* bias, const MmadParams& p, const char* file_, int line_) {
    static_assert((std::is_same_v<T, float> && std::is_same_v<U, half> && std::is_same_v<S, half>) ||
                      (std::is_same_v<T, float> && std::is_same_v<U, bfloat16_t> && std::is_same_v<S, bfloat16_t>) ||
                      (std::is_same_v<T, float> && std::is_same_v<U, float> && std::is_same_v<S, float>) ||
                      (std::is_same_v<T, int32_t> && std::is_same_v<U, int8_t> && std::is_same_v<S, int8_t>),
                  "Mmad on 910B supports half/bfloat16_t/float -> float and int8_t -> int32_t (docs Mmad.md)");
    const char* api = bias ? "Mmad(bias)" : "Mmad";
    cube::need_aic(api, file_, line_);
    cube::need_space(api, "dst", dst, rt::kL0C, "CO1", file_, line_);
    cube::need_space(api, "fm", fm, rt::kL0A, "A2", file_, line_);
    cube::need_space(api, "filter", filter, rt::kL0B, "B2", file_, line_);
    cube::need_align(api, "dst", rt::kL0C, dst.addr_, cube::kL0CFractal, file_, line_);
    cube::need_align(api, "fm", rt::kL0A, fm.addr_, cube::kFractal, file_, line_);
    cube::need_align(api, "filter", rt::kL0B, filter.addr_, cube::kFractal, file_, line_);
    cube::need_range(api, "m", p.m, 1, cube::kMaxMnk, file_, line_, " (0 makes Mmad a NOP)");
    cube::need_range(api, "n", p.n, 1, cube::kMaxMnk, file_, line_, " (0 makes Mmad a NOP)");
    cube::need_range(api, "k", p.k, 1, cube::kMaxMnk, file_, line_, " (0 makes Mmad a NOP)");
    if (p.m == 1) {
        rt::fail(file_, line_, "Mmad: m == 1 switches the Cube into GEMV mode, which reads L0A as ND instead of Zz "
                               "(docs Mmad.md, GEMV.md); pad m to 16");
    }
    if (p.isBias || (p.cmatrixSource && !bias)) {
        rt::fail(file_, line_, "Mmad: isBias / cmatrixSource without a bias tensor is not modelled by the CPU runtime "
                               "(pass the bias table tensor: Mmad(dst, fm, filter, bias, params))");
    }
    if (bias) {
        // The with-bias prototype (Mmad.md): bias in the bias table (C2), 64 B aligned; the API sets
        // cmatrixSource from that position and passes cmatrixInitVal on, which must be false (true
        // clears C; docs BT-Buffer bias guide and example data_copy_gm2l1: cmatrixInitVal = false).
        cube::need_space(api, "bias", *bias, rt::kBT, "C2", file_, line_);
        cube::need_align(api, "bias", rt::kBT, bias->addr_, 64, file_, line_);
        if (p.cmatrixInitVal) {
            rt::fail(file_, line_, "Mmad(bias): cmatrixInitVal = true would clear C instead of loading the bias; "
                                   "set it to false (docs Mmad.md, BT-Buffer bias guide)");
        }
    }
    if (p.unitFlag != 0) rt::fail(file_, line_, "Mmad: unitFlag != 0 is not modelled by the CPU runtime");
    if (p.kDirectionAlign && !std::is_same_v<U, float>) {
        rt::fail(file_, line_, std::string("Mmad: kDirectionAlign applies to float inputs only, got ") + cube::tname<U>());
    }
    const uint64_t m = p.m, n = p.n, k = p.k;
    const uint64_t c0 = cube::kC0Bytes / sizeof(U);
    const uint64_t mb = (m + 15) / 16, nb = (n + 15) / 16;
    const uint64_t kb_read = (k + c0 - 1) / c0;
    const uint64_t kb_layout = p.kDirectionAlign ? (k + 15) / 16 * (16 / c0) : kb_read;
    rt::Record rec;
    rec.op = bias ? "mmad_bias" : "mmad";
    rec.pipe = "M";
    for (uint64_t i = 0; i < mb; ++i) {
        const uint64_t a = fm.addr_ + i * kb_layout * cube::kFractal;
        rt::check_space(file_, line_, api, rt::kL0A, a, kb_read * cube::kFractal);
        rec.reads.push_back(cube::acc(rt::kL0A, a, kb_read * cube::kFractal));
    }
    rt::check_space(file_, line_, api, rt::kL0B, filter.addr_, kb_read * nb * cube::kFractal);
    rec.reads.push_back(cube::acc(rt::kL0B, filter.addr_, kb_read * nb * cube::kFractal));
    const uint64_t cbytes = mb * nb * cube::kL0CFractal;
    rt::check_space(file_, line_, api, rt::kL0C, dst.addr_, cbytes);
    const bool accumulate = !p.cmatrixInitVal && !bias;
    if (accumulate) rec.reads.push_back(cube::acc(rt::kL0C, dst.addr_, cbytes));
    if (bias) {  // the bias row of the nb * 16 columns the Mmad writes
        rt::check_space(file_, line_, api, rt::kBT, bias->addr_, nb * 16 * sizeof(T));
        rec.reads.push_back(cube::acc(rt::kBT, bias->addr_, nb * 16 * sizeof(T)));
    }
    rec.writes.push_back(cube::acc(rt::kL0C, dst.addr_, cbytes));

    auto a_addr = [&](uint64_t r, uint64_t c) {
        return fm.addr_ + ((r / 16) * kb_layout + c / c0) * cube::kFractal + ((r % 16) * c0 + c % c0) * sizeof(U);
    };
    auto b_addr = [&](uint64_t kk, uint64_t nn) {
        return filter.addr_ + ((kk / c0) * nb + nn / 16) * cube::kFractal + ((nn % 16) * c0 + kk % c0) * sizeof(S);
    };
    auto c_addr = [&](uint64_t r, uint64_t c) {
        return dst.addr_ + ((c / 16) * mb * 256 + r * 16 + c % 16) * sizeof(T);
    };
    // Only loaded bytes may enter the product: the rest of a fractal is stale or, on a core's
    // first tile, never written, possibly NaN, and "Mmad指令应避免NaN输入，否则可能会产生执行报错"
    // (docs Mmad.md:329). Pass m/n/k of the valid region (the rest of a fractal is ignored,
    // Mmad.md:285-287) or fill the padding.
    auto need_loaded = [&](uint8_t space, uint64_t addr, uint64_t bytes, const char* what, uint64_t i, uint64_t j) {
        const uint8_t* l = rt::loaded(space).data();
        for (uint64_t b = 0; b < bytes; ++b) {
            if (!l[addr + b]) {
                rt::fail(file_, line_, std::string("Mmad reads ") + rt::space_name(space) + " " + what + " (" + cube::S(i) +
                                           ", " + cube::S(j) + ") at " + cube::S(addr) + ", which no copy or load wrote"
                                           " (m=" + cube::S(m) + ", n=" + cube::S(n) + ", k=" + cube::S(k) + "): NaN "
                                           "inputs may raise an execution error (docs Mmad.md:329); pass m/n of the valid "
                                           "region (Mmad.md:285-287: the rest of a fractal is ignored)");
            }
        }
    };
    // A row-major (m x k) and B column-major (n x k), so each dot product walks contiguous memory
    std::vector<double> av(m * k), bt(n * k);
    const uint8_t* l0a = rt::mem(rt::kL0A).data();
    const uint8_t* l0b = rt::mem(rt::kL0B).data();
    for (uint64_t r = 0; r < m; ++r) {
        for (uint64_t c = 0; c < k; ++c) {
            U v;
            need_loaded(rt::kL0A, a_addr(r, c), sizeof(U), "A element (row, k)", r, c);
            std::memcpy(&v, l0a + a_addr(r, c), sizeof(U));
            av[r * k + c] = cube::to_double(v);
        }
    }
    for (uint64_t kk = 0; kk < k; ++kk) {
        for (uint64_t nn = 0; nn < n; ++nn) {
            S v;
            need_loaded(rt::kL0B, b_addr(kk, nn), sizeof(S), "B element (k, column)", kk, nn);
            std::memcpy(&v, l0b + b_addr(kk, nn), sizeof(S));
            bt[nn * k + kk] = cube::to_double(v);
        }
    }
    std::vector<double> dot(m * n);
    cube::dots(av.data(), bt.data(), m, n, k, dot.data());
    std::vector<T> out(mb * 16 * nb * 16);
    for (uint64_t r = 0; r < mb * 16; ++r) {
        for (uint64_t c = 0; c < nb * 16; ++c) {
            T& o = out[r * nb * 16 + c];
            if (r >= m || c >= n) {  // undefined pad of the written fractals: poison
                std::memset(&o, 0xFF, sizeof(T));
                continue;
            }
            if constexpr (std::is_same_v<T, int32_t>) {
                // int8 x int8 sums of up to 4095 terms are exact in double (< 2^53)
                int64_t s = static_cast<int64_t>(dot[r * n + c]);
                if (accumulate) s += cube::load<int32_t>(rt::kL0C, c_addr(r, c));
                if (bias) s += cube::load<int32_t>(rt::kBT, bias->addr_ + c * sizeof(T));
                o = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(s)));  // wraps
            } else {
                // the k-sum of one Mmad rounded once to fp32, then added to C in fp32 when
                // accumulating (sums in fp32, lower/ir.py)
                float f = static_cast<float>(dot[r * n + c]);
                if (accumulate) f = cube::load<float>(rt::kL0C, c_addr(r, c)) + f;
                if (bias) f = cube::load<float>(rt::kBT, bias->addr_ + c * sizeof(T)) + f;
                o = f;
            }
        }
    }
    for (uint64_t r = 0; r < mb * 16; ++r) {
        for (uint64_t c = 0; c < nb * 16; ++c) cube::store<T>(rt::kL0C, c_addr(r, c), out[r * nb * 16 + c]);
    }
    rec.label = rt::label(api, file_, line_);
    rt::emit(rec);
}
}  // namespace cube

template <typename T, typename U, typename S>
inline void Mmad(const LocalTensor<T>& dst, const LocalTensor<U>& fm, const LocalTensor<S>& filter,
                 const MmadParams& p, ASCENDSCHED_LOC) {
    cube::mmad(dst, fm, filter, static_cast<const LocalTensor<T>*>(nullptr), p, file_, line_);
}

// Mmad.md, 传入bias的原型: C = A x B + bias, the bias row (n values in the bias table, C2) added
// to every row; bias type = C type (910B: float for half/bfloat16_t/float, int32_t for int8_t,
// Mmad.md 表8).
template <typename T, typename U, typename S, typename V>
inline void Mmad(const LocalTensor<T>& dst, const LocalTensor<U>& fm, const LocalTensor<S>& filter,
                 const LocalTensor<V>& bias, const MmadParams& p, ASCENDSCHED_LOC) {
    static_assert(std::is_same_v<T, V>, "Mmad bias type must be the result type on 910B (docs Mmad.md 表8)");
    cube::mmad(dst, fm, filter, &bias, p, file_, line_);
}

// ============================================================================ L0C -> GM (FIX)
// docs Fixpipe_L0CToGM.md (FixpipeParamsV220) and NZ2ND.md: with CFG_ROW_MAJOR (NZ2ND), element
// (r, c) of ND matrix i, r < mSize, c < nSize, is read from L0C element
//   i*srcNdStride*256 + (c/16)*srcStride*16 + r*16 + c%16
// and written to GM element i*dstNdStride + r*dstStride + c, converted by quantPre:
// NoQuant (float -> float, int32_t -> int32_t), F322F16 / F322BF16 (float -> half / bfloat16_t,
// CAST_RINT); reluEn applies ReLU before the cast. src 64 B aligned in L0C; mSize in [1, 8192] with NZ2ND;
// nSize in [1, 4095]; GM destinations must not overlap (dstStride >= nSize).
//
// With a quant tensor (the per-channel overload, docs Fixpipe（L0C到GM数据搬运）.md 表2: cbufWorkspace
// a LocalTensor<uint64_t> in L1, 32 B aligned, for VDEQF16/VQF322B8_PRE/VREQ8; modelled: VDEQF16,
// int32_t -> half): column c is float(v) * M1(word[c]), M1 = the word's bits 0..31 with the low 13
// cleared (the hardware's (1, 8, 10) float, 随路量化.md 表1), negative v times 0 under reluEn (M2 = 0,
// 随路量化与随路ReLU场景组合.md 表1), stored as half. The API copies the words L1 -> Fixpipe buffer in
// 128 B units (impl/basic_api/dav_c220/kernel_operator_fixpipe_v2_impl.h CopyDeqTensorToFbuf): it
// reads words [0, ceil(nSize/16)*16). Rounding of the conversion, product and store is not
// documented: round to nearest even assumed (lower/fixpipe_quant.py says the same).
namespace cube {
template <typename T, typename U, typename S>
inline void fixpipe(const GlobalTensor<T>& dst, const LocalTensor<U>& src, const LocalTensor<S>* quant,
                    const FixpipeParamsV220& p, const FixpipeConfig& config, const char* file_, int line_) {
    static_assert(std::is_same_v<U, float> || std::is_same_v<U, int32_t>, "L0C holds float or int32_t");
    const char* api = "Fixpipe";
    cube::need_aic(api, file_, line_);
    if (config.format != CO2Layout::ROW_MAJOR) {
        rt::fail(file_, line_, "Fixpipe: only CFG_ROW_MAJOR (NZ2ND) is modelled by the CPU runtime");
    }
    cube::need_space(api, "src", src, rt::kL0C, "CO1", file_, line_);
    cube::need_align(api, "src", rt::kL0C, src.addr_, 64, file_, line_);
    constexpr bool f2h = std::is_same_v<U, float> && std::is_same_v<T, half>;
    constexpr bool f2b = std::is_same_v<U, float> && std::is_same_v<T, bfloat16_t>;
    constexpr bool same = std::is_same_v<U, T>;
    constexpr bool deq = std::is_same_v<U, int32_t> && std::is_same_v<T, half>;
    const QuantMode_t want = f2h ? QuantMode_t::F322F16 : f2b ? QuantMode_t::F322BF16 : QuantMode_t::NoQuant;
    const uint64_t words = (static_cast<uint64_t>(p.nSize) + 15) / 16 * 16;  // whole 128 B
    if (quant != nullptr) {
        if (!deq || p.quantPre != QuantMode_t::VDEQF16) {
            rt::fail(file_, line_, std::string("Fixpipe with a quant tensor: ") + cube::tname<U>() + " -> " + cube::tname<T>() +
                                       " with mode " + cube::S(static_cast<uint64_t>(p.quantPre)) +
                                       "; the CPU runtime models VDEQF16 (int32_t -> half) only");
        }
        cube::need_space(api, "cbufWorkspace", *quant, rt::kL1, "C1", file_, line_);
        cube::need_align(api, "cbufWorkspace", rt::kL1, quant->addr_, cube::kC0Bytes, file_, line_);
        rt::check_space(file_, line_, api, rt::kL1, quant->addr_, words * sizeof(uint64_t));
        const uint8_t* l = rt::loaded(rt::kL1).data() + quant->addr_;
        for (uint64_t b = 0; b < p.nSize * sizeof(uint64_t); ++b) {
            if (!l[b]) {
                rt::fail(file_, line_, "Fixpipe reads quant word " + cube::S(b / sizeof(uint64_t)) + " of cbufWorkspace, "
                                       "which no copy wrote: the column's scale would be garbage");
            }
        }
    } else if (p.quantPre == QuantMode_t::VDEQF16 || p.quantPre == QuantMode_t::VREQ8 ||
               p.quantPre == QuantMode_t::VQF322B8_PRE) {
        rt::fail(file_, line_, "Fixpipe: a per-channel quant mode needs the overload with cbufWorkspace "
                               "(docs Fixpipe（L0C到GM数据搬运）.md)");
    }
    if (quant == nullptr && !(f2h || f2b || same)) {
        rt::fail(file_, line_, std::string("Fixpipe: ") + cube::tname<U>() + " -> " + cube::tname<T>() +
                                   " needs a quantization mode the CPU runtime does not model");
    }
    if (quant == nullptr && p.quantPre != want) {
        rt::fail(file_, line_, std::string("Fixpipe: ") + cube::tname<U>() + " -> " + cube::tname<T>() + " needs quantPre " +
                                   (f2h ? "F322F16" : f2b ? "F322BF16" : "NoQuant") + ", got mode " +
                                   cube::S(static_cast<uint64_t>(p.quantPre)));
    }
    cube::need_range(api, "nSize", p.nSize, 1, cube::kMaxMnk, file_, line_, " (0 makes Fixpipe a NOP)");
    cube::need_range(api, "mSize", p.mSize, 1, 8192, file_, line_, " (with NZ2ND; 0 makes Fixpipe a NOP)");
    cube::need_range(api, "ndNum", p.ndNum, 1, 65535, file_, line_, " (0 makes Fixpipe a NOP)");
    cube::need_range(api, "srcNdStride", p.srcNdStride, 0, 512, file_, line_);
    const uint64_t mp = (p.mSize + 15) / 16 * 16;
    if (p.srcStride < mp) {
        rt::fail(file_, line_, "Fixpipe: srcStride " + cube::S(p.srcStride) + " (in 16-element C0 units) is smaller than "
                               "mSize rounded up to 16 (" + cube::S(mp) + "): adjacent Z columns would overlap");
    }
    if (p.dstStride < p.nSize) {
        rt::fail(file_, line_, "Fixpipe: dstStride " + cube::S(p.dstStride) + " < nSize " + cube::S(p.nSize) +
                               ": NZ2ND destination rows would overlap");
    }
    if (p.unitFlag != 0) rt::fail(file_, line_, "Fixpipe: unitFlag != 0 is not modelled by the CPU runtime");
    if (p.isChannelSplit) rt::fail(file_, line_, "Fixpipe: isChannelSplit cannot be combined with NZ2ND");
    rt::Record rec;
    rec.op = quant ? "fixpipe_quant" : "fixpipe";
    rec.pipe = "FIX";
    std::vector<float> m1(quant ? p.nSize : 0);
    if (quant) {
        rec.reads.push_back(cube::acc(rt::kL1, quant->addr_, words * sizeof(uint64_t)));
        for (uint64_t c = 0; c < p.nSize; ++c) {
            const uint64_t w = cube::load<uint64_t>(rt::kL1, quant->addr_ + c * sizeof(uint64_t));
            const uint32_t bits = static_cast<uint32_t>(w & 0xFFFFE000ull);
            std::memcpy(&m1[c], &bits, sizeof(bits));
        }
    }
    std::vector<T> row(p.nSize);
    for (uint64_t i = 0; i < p.ndNum; ++i) {
        const uint64_t s0 = src.addr_ + i * p.srcNdStride * 256 * sizeof(U);
        for (uint64_t r = 0; r < p.mSize; ++r) {
            for (uint64_t cb = 0; cb * 16 < p.nSize; ++cb) {
                const uint64_t lo = s0 + (cb * p.srcStride * 16 + r * 16) * sizeof(U);
                const uint64_t cnt = std::min<uint64_t>(16, p.nSize - cb * 16);
                rt::check_space(file_, line_, api, rt::kL0C, lo, 16 * sizeof(U));
                cube::push(rec.reads, cube::acc(rt::kL0C, lo, 16 * sizeof(U)));  // whole row block
                for (uint64_t j = 0; j < cnt; ++j) {
                    U v = cube::load<U>(rt::kL0C, lo + j * sizeof(U));
                    if (p.reluEn && v < U(0)) v = U(0);
                    if constexpr (deq) {
                        if (quant) {  // VDEQF16: float32 product, then half (both to nearest even)
                            row[cb * 16 + j] = T(static_cast<float>(v) * m1[cb * 16 + j]);
                            continue;
                        }
                    }
                    if constexpr (f2h || f2b || same) {
                        row[cb * 16 + j] = T(v);  // half(float) / bfloat16_t(float) round to nearest even
                    }
                }
            }
            const uint64_t gm_elem = i * p.dstNdStride + r * static_cast<uint64_t>(p.dstStride);
            uint8_t* g = const_cast<uint8_t*>(detail::gm_bytes(dst, gm_elem * sizeof(T), p.nSize * sizeof(T), api, file_, line_));
            std::memcpy(g, row.data(), p.nSize * sizeof(T));
            cube::push(rec.writes, rt::gm_access(file_, line_, g, p.nSize * sizeof(T)));
        }
    }
    rec.label = rt::label(api, file_, line_);
    rt::emit(rec);
}
}  // namespace cube

template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR>
inline void Fixpipe(const GlobalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& p, ASCENDSCHED_LOC) {
    cube::fixpipe(dst, src, static_cast<const LocalTensor<uint64_t>*>(nullptr), p, config, file_, line_);
}

// The per-channel ("tensor") quantisation overload (docs Fixpipe（L0C到GM数据搬运）.md, 函数原型:
// S must be uint64_t).
template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR, typename S = uint64_t>
inline void Fixpipe(const GlobalTensor<T>& dst, const LocalTensor<U>& src, const LocalTensor<S>& cbufWorkspace,
                    const FixpipeParamsV220& p, ASCENDSCHED_LOC) {
    static_assert(std::is_same_v<S, uint64_t>, "Fixpipe's cbufWorkspace is a LocalTensor<uint64_t>");
    cube::fixpipe(dst, src, &cbufWorkspace, p, config, file_, line_);
}

}  // namespace AscendC
