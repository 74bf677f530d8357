// ascendsched CPU runtime: a host implementation of exactly the AscendC calls that
// ascendsched.emit_ascendc emits, with the same names and signatures, so an emitted kernel
// compiles unchanged with g++ (-std=c++17). Semantics follow the AscendC documentation
// (mirror-cann/asc-devkit include/basic_api, impl/basic_api/dav_c220, docs); every violation
// of a documented rule aborts with the kernel source file and line of the offending call.
//
// Every API takes two extra defaulted trailing parameters (file, line) filled in at the call
// site by __builtin_FILE()/__builtin_LINE(); emitted code never passes them.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ascendsched_rt.hpp"

#define __global__
#define __aicore__
#define __gm__
#define ASCENDSCHED_LOC const char *file_ = __builtin_FILE(), int line_ = __builtin_LINE()

using GM_ADDR = uint8_t*;

// pipe_t is a global enum in CCE (PIPE_S, PIPE_V, ...).
enum pipe_t : uint8_t { PIPE_S = 0, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL, PIPE_FIX };

// Kernel types, docs "设置Kernel类型" (KERNEL_TASK_TYPE_DEFAULT, hiascend atlasascendc_api_07_0218):
// KERNEL_TYPE_AIC_ONLY launches only Cube cores, KERNEL_TYPE_AIV_ONLY only Vector cores,
// KERNEL_TYPE_MIX_AIC_1_2 one AIC and two AIVs per block. The CPU driver runs the program of
// each core type the kernel has; the macro records the declared type and the runtime checks it
// against the core that runs the code.
enum KernelMetaType {
    KERNEL_TYPE_AIV_ONLY,
    KERNEL_TYPE_AIC_ONLY,
    KERNEL_TYPE_MIX_AIV_1_0,
    KERNEL_TYPE_MIX_AIC_1_0,
    KERNEL_TYPE_MIX_AIC_1_1,
    KERNEL_TYPE_MIX_AIC_1_2,
    KERNEL_TYPE_AICORE,
    KERNEL_TYPE_VECTORCORE,
    KERNEL_TYPE_MIX_AICORE,
    KERNEL_TYPE_MIX_VECTOR_CORE,
    KERNEL_TYPE_MAX
};

namespace ascendsched_rt {
inline void kernel_task_type(KernelMetaType t, const char* file, int line) {
    const bool aic = is_aic();
    const bool ok = t == KERNEL_TYPE_MIX_AIC_1_2 || t == KERNEL_TYPE_MIX_AIC_1_1 ||
                    (aic ? (t == KERNEL_TYPE_AIC_ONLY || t == KERNEL_TYPE_MIX_AIC_1_0)
                         : (t == KERNEL_TYPE_AIV_ONLY || t == KERNEL_TYPE_MIX_AIV_1_0));
    if (!ok) {
        fail(file, line, std::string("KERNEL_TASK_TYPE_DEFAULT: the kernel type launches no ") + st().core +
                             " cores, but this code runs on the " + st().core);
    }
    // KERNEL_TYPE_MIX_AIC_1_2 runs two Vector cores per block, the other types one (docs
    // GetSubBlockNum(ISASI).md, table 2): the driver must have launched as many
    if (!aic && (t == KERNEL_TYPE_MIX_AIC_1_2) != (st().sub_num == 2)) {
        fail(file, line, "KERNEL_TASK_TYPE_DEFAULT: the kernel type runs " +
                             std::string(t == KERNEL_TYPE_MIX_AIC_1_2 ? "2 Vector cores" : "1 Vector core") +
                             " per block, but the driver launched " + S(st().sub_num));
    }
}
}  // namespace ascendsched_rt

#define KERNEL_TASK_TYPE_DEFAULT(value) ::ascendsched_rt::kernel_task_type(value, __FILE__, __LINE__)

// impl/utils/sys_macros.h (asc-devkit): ASCEND_IS_AIC / ASCEND_IS_AIV select the code of one
// core type (`if ASCEND_IS_AIC { ... }`); the device compiler folds them per core
// (__DAV_C220_CUBE__ / __DAV_C220_VEC__), the CPU runtime evaluates them per run, as the
// ASCENDC_CPU_DEBUG build of the real headers does (g_coreType).
#define ASCEND_IS_AIC (::ascendsched_rt::is_aic())
#define ASCEND_IS_AIV (!::ascendsched_rt::is_aic())
#define ASCEND_IS_NOT_AIC (!::ascendsched_rt::is_aic())
#define ASCEND_IS_NOT_AIV (::ascendsched_rt::is_aic())

namespace AscendC {

namespace rt = ascendsched_rt;

// ============================================================================ enums and structs
// include/basic_api/kernel_tpipe.h (TPosition), impl/basic_api/kernel_event.h (HardEvent).
enum class TPosition : uint8_t { GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC, LCM, SPM, TSCM };

// Third column: the cores on which the event exists (1 = AIV, 2 = AIC, 3 = both), from the
// valid pairs per core type in shared/ASCEND_910B.md "Synchronisation" (target/ascend910b.py).
#define ASCENDSCHED_HARD_EVENTS(X)                                                                           \
    X(MTE2_V, "MTE2", "V", 1) X(V_MTE2, "V", "MTE2", 1) X(MTE3_V, "MTE3", "V", 1) X(V_MTE3, "V", "MTE3", 1)    \
    X(V_V, "V", "V", 1) X(MTE3_MTE2, "MTE3", "MTE2", 3) X(MTE2_MTE3, "MTE2", "MTE3", 3) X(S_V, "S", "V", 1)     \
    X(V_S, "V", "S", 1) X(S_MTE2, "S", "MTE2", 3) X(MTE2_S, "MTE2", "S", 3) X(S_MTE3, "S", "MTE3", 3)          \
    X(MTE3_S, "MTE3", "S", 3) X(MTE2_MTE1, "MTE2", "MTE1", 2) X(MTE1_MTE2, "MTE1", "MTE2", 2)                 \
    X(MTE1_M, "MTE1", "M", 2) X(M_MTE1, "M", "MTE1", 2) X(MTE3_MTE1, "MTE3", "MTE1", 2)                       \
    X(MTE1_MTE3, "MTE1", "MTE3", 2) X(MTE2_M, "MTE2", "M", 2) X(M_MTE2, "M", "MTE2", 2) X(M_FIX, "M", "FIX", 2) \
    X(FIX_M, "FIX", "M", 2) X(MTE2_FIX, "MTE2", "FIX", 2) X(FIX_MTE2, "FIX", "MTE2", 2) X(FIX_S, "FIX", "S", 2) \
    X(M_S, "M", "S", 2) X(FIX_MTE3, "FIX", "MTE3", 2) X(MTE1_FIX, "MTE1", "FIX", 2)                           \
    X(FIX_MTE1, "FIX", "MTE1", 2) X(FIX_FIX, "FIX", "FIX", 2)

#define ASCENDSCHED_ENUM_ITEM(name, s, d, c) name,
enum class HardEvent : uint8_t { ASCENDSCHED_HARD_EVENTS(ASCENDSCHED_ENUM_ITEM) };
#undef ASCENDSCHED_ENUM_ITEM

inline const char* event_name(HardEvent e) {
#define ASCENDSCHED_NAME_ITEM(name, s, d, c) if (e == HardEvent::name) return #name;
    ASCENDSCHED_HARD_EVENTS(ASCENDSCHED_NAME_ITEM)
#undef ASCENDSCHED_NAME_ITEM
    return "?";
}

inline const char* event_src(HardEvent e) {
#define ASCENDSCHED_SRC_ITEM(name, s, d, c) if (e == HardEvent::name) return s;
    ASCENDSCHED_HARD_EVENTS(ASCENDSCHED_SRC_ITEM)
#undef ASCENDSCHED_SRC_ITEM
    return "?";
}

inline const char* event_dst(HardEvent e) {
#define ASCENDSCHED_DST_ITEM(name, s, d, c) if (e == HardEvent::name) return d;
    ASCENDSCHED_HARD_EVENTS(ASCENDSCHED_DST_ITEM)
#undef ASCENDSCHED_DST_ITEM
    return "?";
}

inline int event_cores(HardEvent e) {
#define ASCENDSCHED_CORE_ITEM(name, s, d, c) if (e == HardEvent::name) return c;
    ASCENDSCHED_HARD_EVENTS(ASCENDSCHED_CORE_ITEM)
#undef ASCENDSCHED_CORE_ITEM
    return 0;
}

// impl/basic_api/utils/kernel_utils_mode.h
enum class RoundMode : uint8_t { CAST_NONE = 0, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };
enum class CMPMODE : uint8_t { LT = 0, GT, EQ, LE, GE, NE };
enum class SELMODE : uint8_t { VSEL_CMPMASK_SPR = 0, VSEL_TENSOR_SCALAR_MODE, VSEL_TENSOR_TENSOR_MODE };
enum class ReduceOrder : uint8_t { ORDER_VALUE_INDEX = 0, ORDER_INDEX_VALUE, ORDER_ONLY_VALUE, ORDER_ONLY_INDEX };

// include/basic_api/kernel_struct_data_copy.h
struct DataCopyParams {
    DataCopyParams() {}
    DataCopyParams(const uint16_t count, const uint16_t len, const uint16_t srcStrideIn, const uint16_t dstStrideIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn) {}
    uint16_t blockCount = 1;
    uint16_t blockLen = 0;   // 32-byte blocks
    uint16_t srcStride = 0;  // gap between blocks, 32-byte blocks
    uint16_t dstStride = 0;  // gap between blocks, 32-byte blocks
};

struct DataCopyExtParams {
    DataCopyExtParams() {}
    DataCopyExtParams(const uint16_t count, const uint32_t len, const uint32_t srcStrideIn, const uint32_t dstStrideIn,
                      const uint32_t rsvIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn), rsv(rsvIn) {}
    uint16_t blockCount = 1;
    uint32_t blockLen = 0;   // bytes
    uint32_t srcStride = 0;  // gap: bytes on the GM side, 32-byte blocks on the UB side
    uint32_t dstStride = 0;  // gap: bytes on the GM side, 32-byte blocks on the UB side
    uint32_t rsv = 0;
};

template <typename T>
struct DataCopyPadExtParams {
    DataCopyPadExtParams() {}
    DataCopyPadExtParams(const bool isPadValue, const uint8_t leftPadValue, const uint8_t rightPadValue, T padValue)
        : isPad(isPadValue), leftPadding(leftPadValue), rightPadding(rightPadValue), paddingValue(padValue) {}
    bool isPad = false;
    uint8_t leftPadding = 0;
    uint8_t rightPadding = 0;
    T paddingValue = T(0);
};

// include/basic_api/kernel_struct_binary.h, kernel_struct_unary.h, kernel_struct_brcb.h
struct BinaryRepeatParams {
    BinaryRepeatParams() {}
    BinaryRepeatParams(const uint8_t dstBlkStrideIn, const uint8_t src0BlkStrideIn, const uint8_t src1BlkStrideIn,
                       const uint8_t dstRepStrideIn, const uint8_t src0RepStrideIn, const uint8_t src1RepStrideIn)
        : dstBlkStride(dstBlkStrideIn), src0BlkStride(src0BlkStrideIn), src1BlkStride(src1BlkStrideIn),
          dstRepStride(dstRepStrideIn), src0RepStride(src0RepStrideIn), src1RepStride(src1RepStrideIn) {}
    uint8_t dstBlkStride = 1;
    uint8_t src0BlkStride = 1;
    uint8_t src1BlkStride = 1;
    uint8_t dstRepStride = 8;
    uint8_t src0RepStride = 8;
    uint8_t src1RepStride = 8;
};

struct UnaryRepeatParams {
    UnaryRepeatParams() {}
    UnaryRepeatParams(const uint16_t dstBlkStrideIn, const uint16_t srcBlkStrideIn, const uint8_t dstRepStrideIn,
                      const uint8_t srcRepStrideIn)
        : dstBlkStride(dstBlkStrideIn), srcBlkStride(srcBlkStrideIn), dstRepStride(dstRepStrideIn),
          srcRepStride(srcRepStrideIn) {}
    uint16_t dstBlkStride = 1;
    uint16_t srcBlkStride = 1;
    uint8_t dstRepStride = 8;
    uint8_t srcRepStride = 8;
};

struct CopyRepeatParams {
    CopyRepeatParams() {}
    CopyRepeatParams(const uint16_t dstStrideIn, const uint16_t srcStrideIn, uint16_t dstRepeatSizeIn,
                     uint16_t srcRepeatSizeIn)
        : dstStride(dstStrideIn), srcStride(srcStrideIn), dstRepeatSize(dstRepeatSizeIn),
          srcRepeatSize(srcRepeatSizeIn) {}
    uint16_t dstStride = 1;
    uint16_t srcStride = 1;
    uint16_t dstRepeatSize = 8;
    uint16_t srcRepeatSize = 8;
};

struct BrcbRepeatParams {
    BrcbRepeatParams() {}
    BrcbRepeatParams(const uint16_t dstBlkStrideIn, const uint16_t dstRepStrideIn)
        : dstRepStride(dstRepStrideIn), dstBlkStride(dstBlkStrideIn) {}
    uint16_t dstRepStride = 8;
    uint16_t dstBlkStride = 1;
};

// ============================================================================ tensors
template <typename T>
class LocalTensor {
public:
    uint64_t addr_ = 0;  // physical byte address in its memory
    uint64_t size_ = 0;  // elements
    uint8_t space_ = rt::kUB;  // the physical memory (rt::Space) of its TPosition
    LocalTensor operator[](const uint32_t offset) const {
        LocalTensor t = *this;
        t.addr_ += static_cast<uint64_t>(offset) * sizeof(T);
        t.size_ = offset <= size_ ? size_ - offset : 0;
        return t;
    }
    uint32_t GetSize() const { return static_cast<uint32_t>(size_); }
};

template <typename T>
class GlobalTensor {
public:
    T* base_ = nullptr;
    uint64_t size_ = 0;  // elements of the whole buffer
    uint64_t off_ = 0;   // element offset of this view
    void SetGlobalBuffer(__gm__ T* buffer, uint64_t bufferSize) {
        base_ = buffer;
        size_ = bufferSize;
        off_ = 0;
    }
    GlobalTensor operator[](const uint64_t offset) const {
        GlobalTensor t = *this;
        t.off_ += offset;
        return t;
    }
};

// The physical memory of a TPosition on 910B (include/basic_api/kernel_tpipe.h; docs TPosition):
// VECIN/VECOUT/VECCALC (and LCM) = UB, A1/B1/C1 = L1, A2 = L0A, B2 = L0B, CO1 = L0C,
// C2 = the bias table (docs DataCopy（L1ToBiasTable-Buffer数据搬运）.md, Mmad.md).
constexpr uint8_t position_space(TPosition pos) {
    switch (pos) {
        case TPosition::A1: case TPosition::B1: case TPosition::C1: return rt::kL1;
        case TPosition::A2: return rt::kL0A;
        case TPosition::B2: return rt::kL0B;
        case TPosition::CO1: return rt::kL0C;
        case TPosition::C2: return rt::kBT;
        case TPosition::VECIN: case TPosition::VECOUT: case TPosition::VECCALC: case TPosition::LCM: return rt::kUB;
        default: return rt::kNumSpaces;
    }
}

template <TPosition pos = TPosition::LCM>
class TBuf {
    static_assert(position_space(pos) != rt::kNumSpaces, "TBuf position not modelled by the CPU runtime");

public:
    uint64_t base_ = 0;
    uint64_t len_ = 0;
    bool init_ = false;
    // include/basic_api/kernel_tpipe.h: GetWithOffset(uint32_t size, uint32_t bufOffset);
    // size in elements, bufOffset in bytes and 32-byte aligned, size*sizeof(T)+bufOffset <= len.
    template <typename T>
    LocalTensor<T> GetWithOffset(uint32_t size, uint32_t bufOffset, ASCENDSCHED_LOC) const {
        if (!init_) rt::fail(file_, line_, "TBuf::GetWithOffset on a TBuf that TPipe::InitBuffer never initialised");
        if (bufOffset % rt::kBlock != 0) {
            rt::fail(file_, line_, "TBuf::GetWithOffset: bufOffset " + rt::S(bufOffset) + " is not " +
                                       rt::S(rt::kBlock) + "-byte aligned");
        }
        if (static_cast<uint64_t>(size) * sizeof(T) + bufOffset > len_) {
            rt::fail(file_, line_, "TBuf::GetWithOffset: " + rt::S(size) + " elements of " + rt::S(sizeof(T)) +
                                       " B at offset " + rt::S(bufOffset) + " exceed the TBuf length " +
                                       rt::S(static_cast<long long>(len_)));
        }
        LocalTensor<T> t;
        t.addr_ = base_ + bufOffset;
        t.size_ = size;
        t.space_ = position_space(pos);
        return t;
    }
    template <typename T>
    LocalTensor<T> Get(ASCENDSCHED_LOC) const {
        return GetWithOffset<T>(static_cast<uint32_t>(len_ / sizeof(T)), 0, file_, line_);
    }
};

// TPipe's own synchronisation (impl/basic_api/kernel_tpipe_impl.h, __NPU_ARCH__ 2201):
// - the constructor (TPipe::Init, lines 98-113) allocates HardEvent::M_MTE1 event ids 0, 1 and 2
//   on the AIC ("for matmul macro ... For load Bias") and SETS them;
// - Destroy (DestroyWithoutPipeAll, lines 571-581, then pipe_barrier(PIPE_ALL), 595-600) waits
//   and releases them; the destructor calls Destroy unless it already ran (lines 80-86).
// So a kernel that sets M_MTE1 0, 1 or 2 itself while the TPipe lives sets the flag twice
// before its wait (undefined: docs SetFlag-WaitFlag(ISASI).md:97). catlass releases the pipe's
// flags right after building its buffers (include/catlass/arch/resource.hpp:35-37).
// Only one TPipe may exist at a time (docs TPipe/TPipe构造函数.md:42).
// These flags are library internals, not calls of the kernel text: they move the flag state
// the kernel's SetFlag/WaitFlag see, but write no trace events (the IR does not hold them;
// they come before the first and after the last call of the kernel).
constexpr int32_t kTPipeMte1Ids = 3;  // M_MTE1 ids 0..2, kernel_tpipe_impl.h:102-113

class TPipe {
public:
    TPipe(ASCENDSCHED_LOC) {
        rt::State& s = rt::st();
        if (s.tpipes > 0) {
            rt::fail(file_, line_, "TPipe: a second TPipe while one is alive (docs TPipe构造函数.md: only one TPipe at a "
                                   "time; Destroy() the first)");
        }
        ++s.tpipes;
        if (rt::is_aic()) {
            for (int32_t id = 0; id < kTPipeMte1Ids; ++id) {
                int& n = s.pending[{static_cast<int>(HardEvent::M_MTE1), id}];
                if (n > 0) {
                    rt::fail(file_, line_, "TPipe: its constructor sets SetFlag<HardEvent::M_MTE1>(" + rt::S(id) +
                                               "), which is already set");
                }
                ++n;
            }
        }
    }
    TPipe(const TPipe&) = delete;
    TPipe& operator=(const TPipe&) = delete;
    ~TPipe() {
        if (!destroyed_) Destroy("TPipe::~TPipe", 0);
    }
    // docs TPipe/Destroy.md: releases the pipe's resources; WaitFlag<M_MTE1>(0..2) on the AIC
    // and pipe_barrier(PIPE_ALL) (kernel_tpipe_impl.h:571-600). LocalTensors taken from its
    // TBufs before stay usable (catlass resource.hpp takes them, then destroys the pipe).
    void Destroy(ASCENDSCHED_LOC) {
        rt::State& s = rt::st();
        if (destroyed_) {
            rt::fail(file_, line_, "TPipe::Destroy on a destroyed TPipe: its WaitFlag<HardEvent::M_MTE1> would wait "
                                   "forever");
        }
        if (rt::is_aic()) {
            for (int32_t id = 0; id < kTPipeMte1Ids; ++id) {
                int& n = s.pending[{static_cast<int>(HardEvent::M_MTE1), id}];
                if (n == 0) {
                    rt::fail(file_, line_, "TPipe::Destroy waits WaitFlag<HardEvent::M_MTE1>(" + rt::S(id) +
                                               "), which nobody set: the kernel consumed the flag TPipe's constructor "
                                               "set (kernel_tpipe_impl.h:102-113); the pipe would wait forever");
                }
                --n;
            }
        }
        destroyed_ = true;
        --s.tpipes;
    }
    // include/basic_api/kernel_tpipe.h: InitBuffer(TBuf<pos>& buf, uint32_t len); len in bytes,
    // allocated after the previous buffers of this TPipe in the same physical memory and rounded
    // up to 32 bytes. UB exists only on the AIV, L1/L0A/L0B/L0C only on the AIC.
    template <TPosition pos>
    bool InitBuffer(TBuf<pos>& buf, uint32_t len, ASCENDSCHED_LOC) {
        rt::State& s = rt::st();
        if (destroyed_) rt::fail(file_, line_, "TPipe::InitBuffer on a destroyed TPipe");
        constexpr uint8_t space = position_space(pos);
        const bool cube = space != rt::kUB;
        if (cube != rt::is_aic()) {
            rt::fail(file_, line_, std::string("TPipe::InitBuffer: ") + rt::space_name(space) + " does not exist on the " +
                                       s.core + " (UB is on the AIV; L1, L0A, L0B, L0C, BT are on the AIC)");
        }
        uint64_t& cursor = cube ? s.cursors[space] : s.pipe_cursor;
        const uint64_t usable = rt::space_usable(space);
        uint64_t rounded = (static_cast<uint64_t>(len) + rt::kBlock - 1) / rt::kBlock * rt::kBlock;
        if (len == 0 || cursor + rounded > usable) {
            rt::fail(file_, line_, "TPipe::InitBuffer of " + rt::S(len) + " B at " + rt::space_name(space) + " offset " +
                                       rt::S(static_cast<long long>(cursor)) + " exceeds the usable " +
                                       rt::space_name(space) + " (" + rt::S(static_cast<long long>(usable)) + " B)");
        }
        buf.base_ = cursor;
        buf.len_ = rounded;
        buf.init_ = true;
        cursor += rounded;
        return true;
    }

private:
    bool destroyed_ = false;
};

// ============================================================================ system variables
// include/basic_api/kernel_operator_sys_var_intf.h
// On an AIV of a 1:2 kernel GetBlockIdx() is 2 * block + GetSubBlockIdx() (impl/basic_api/dav_c220/
// kernel_operator_sys_var_impl.h, GetBlockIdxImpl: get_block_idx() * GetTaskRation() + get_subblockid();
// docs GetBlockIdx.md: [0, 2 * numBlocks) on the AIV), and GetBlockNum() the blocks (docs GetBlockNum.md).
// GetSubBlockIdx() is 0 or 1 there, 0 on the AIC; GetSubBlockNum() 2 there, 1 on the AIC and in
// 1:1 kernels (docs GetSubBlockIdx(ISASI).md, GetSubBlockNum(ISASI).md table 2).
inline int64_t GetBlockIdx() { return rt::st().block * rt::st().sub_num + rt::st().sub; }
inline int64_t GetBlockNum() { return rt::st().block_num; }
inline int64_t GetSubBlockIdx() { return rt::st().sub; }
inline int64_t GetSubBlockNum() { return rt::st().sub_num; }

// ============================================================================ synchronisation
// include/basic_api/kernel_operator_block_sync_intf.h: SetFlag<HardEvent>(int32_t eventID),
// WaitFlag<HardEvent>(int32_t eventID), PipeBarrier<pipe_t>().
inline void check_event_id(const char* api, HardEvent e, int32_t id, const char* file_, int line_) {
    if (!(event_cores(e) & (rt::is_aic() ? 2 : 1))) {
        rt::fail(file_, line_, std::string(api) + "<HardEvent::" + event_name(e) + ">: this event does not exist on the " +
                                   rt::st().core + " (see the valid HardEvent pairs per core type)");
    }
    if (id < 0 || id >= rt::kEventIdLimit) {
        rt::fail(file_, line_, std::string(api) + "<HardEvent::" + event_name(e) + ">(" + rt::S(id) +
                                   "): event id outside the target's budget [0, " + rt::S(rt::kEventIdLimit) + ")");
    }
}

template <HardEvent event>
inline void SetFlag(int32_t eventID, ASCENDSCHED_LOC) {
    check_event_id("SetFlag", event, eventID, file_, line_);
    int& n = rt::st().pending[{static_cast<int>(event), eventID}];
    if (n > 0) {
        const bool tpipe = event == HardEvent::M_MTE1 && eventID < kTPipeMte1Ids && rt::is_aic() && rt::st().tpipes > 0;
        rt::fail(file_, line_, std::string("SetFlag<HardEvent::") + event_name(event) + ">(" + rt::S(eventID) +
                                   ") set again before its WaitFlag" +
                                   (tpipe ? " (the live TPipe's constructor set it, kernel_tpipe_impl.h:102-113: "
                                            "call pipe.Destroy() before placing M_MTE1 flags 0..2)" : ""));
    }
    ++n;
    rt::Record r;
    r.op = "set_flag";
    r.pipe = event_src(event);
    r.src = event_src(event);
    r.dst = event_dst(event);
    r.has_id = true;
    r.id = eventID;
    r.label = rt::label((std::string("SetFlag<") + event_name(event) + ">").c_str(), file_, line_);
    rt::emit(r);
}

template <HardEvent event>
inline void WaitFlag(int32_t eventID, ASCENDSCHED_LOC) {
    check_event_id("WaitFlag", event, eventID, file_, line_);
    int& n = rt::st().pending[{static_cast<int>(event), eventID}];
    if (n == 0) {
        rt::fail(file_, line_, std::string("WaitFlag<HardEvent::") + event_name(event) + ">(" + rt::S(eventID) +
                                   ") with no pending SetFlag: the pipe would wait forever");
    }
    --n;
    rt::Record r;
    r.op = "wait_flag";
    r.pipe = event_dst(event);
    r.src = event_src(event);
    r.dst = event_dst(event);
    r.has_id = true;
    r.id = eventID;
    r.label = rt::label((std::string("WaitFlag<") + event_name(event) + ">").c_str(), file_, line_);
    rt::emit(r);
}

inline const char* pipe_name(pipe_t p) {
    switch (p) {
        case PIPE_S: return "S";
        case PIPE_V: return "V";
        case PIPE_M: return "M";
        case PIPE_MTE1: return "MTE1";
        case PIPE_MTE2: return "MTE2";
        case PIPE_MTE3: return "MTE3";
        case PIPE_ALL: return "ALL";
        case PIPE_FIX: return "FIX";
    }
    return "?";
}

// The pipes of each core type on 910B (shared/ASCEND_910B.md "Pipes and data paths"): the AIV
// has V, MTE2, MTE3, S; the AIC has MTE1, MTE2, M, FIX, S (MTE3 appears in AIC HardEvents too).
inline bool pipe_on_core(pipe_t p, bool aic) {
    switch (p) {
        case PIPE_V: return !aic;
        case PIPE_M: case PIPE_MTE1: case PIPE_FIX: return aic;
        default: return true;
    }
}

template <pipe_t pipe>
inline void PipeBarrier(ASCENDSCHED_LOC) {
    if (!pipe_on_core(pipe, rt::is_aic())) {
        rt::fail(file_, line_, std::string("PipeBarrier<PIPE_") + pipe_name(pipe) + ">: the " + rt::st().core +
                                   " has no " + pipe_name(pipe) + " pipe");
    }
    rt::Record r;
    r.op = "barrier";
    r.pipe = pipe_name(pipe);
    r.label = rt::label((std::string("PipeBarrier<PIPE_") + pipe_name(pipe) + ">").c_str(), file_, line_);
    rt::emit(r);
}

// SetSyncBaseAddr(uint64_t config): the FFTS base address cross-core flags use when a mix kernel
// is launched with <<<>>> (catlass kernels call AscendC::SetSyncBaseAddr(fftsAddr) first; host
// rtGetC2cCtrlAddr). The CPU runtime's flags need no base: accepted and ignored.
inline void SetSyncBaseAddr(uint64_t config) { (void)config; }

// include/basic_api/kernel_operator_block_sync_intf.h; docs CrossCoreSetFlag(ISASI),
// CrossCoreWaitFlag(ISASI): modes 0/1/2 take pipes V, M, MTE1, MTE2, MTE3, FIX (not S, ALL) and
// flag ids 0..15; on 910B a wait blocks every pipe of its core (its template args have no
// effect). Only mode 2 (the AIC and the AIV(s) of one block, KERNEL_TYPE_MIX_AIC_1_1 / _1_2) is
// modelled.
template <uint8_t modeId, pipe_t pipe>
inline void CrossCoreSetFlag(uint16_t flagId, ASCENDSCHED_LOC) {
    if (modeId != 2) {
        rt::fail(file_, line_, "CrossCoreSetFlag<" + rt::S(modeId) + ">: only mode 2 (AIC <-> AIV of one block) is "
                               "modelled by the CPU runtime");
    }
    if (pipe == PIPE_S || pipe == PIPE_ALL) {
        rt::fail(file_, line_, std::string("CrossCoreSetFlag: PIPE_") + pipe_name(pipe) + " is not supported in mode 2");
    }
    if (flagId > 15) rt::fail(file_, line_, "CrossCoreSetFlag(" + rt::S(flagId) + "): flag ids are 0..15");
    rt::Record r;  // recorded before the counter moves: the file lists a set before its wait
    r.op = "cross_set";
    r.pipe = pipe_name(pipe);
    r.has_flag = true;
    r.flag = flagId;
    r.label = rt::label("CrossCoreSetFlag", file_, line_);
    rt::emit(r);
    rt::cross_set(file_, line_, flagId);
}

template <uint8_t modeId = 0, pipe_t pipe = PIPE_S>
inline void CrossCoreWaitFlag(uint16_t flagId, ASCENDSCHED_LOC) {
    if (flagId > 15) rt::fail(file_, line_, "CrossCoreWaitFlag(" + rt::S(flagId) + "): flag ids are 0..15");
    rt::cross_wait(file_, line_, flagId);
    rt::Record r;
    r.op = "cross_wait";
    r.pipe = pipe_name(pipe);
    r.has_flag = true;
    r.flag = flagId;
    r.label = rt::label("CrossCoreWaitFlag", file_, line_);
    rt::emit(r);
}

// ============================================================================ DMA (MTE2 / MTE3)
namespace detail {

inline uint64_t ceil_blocks(uint64_t bytes) { return (bytes + rt::kBlock - 1) / rt::kBlock; }

template <typename T>
inline const uint8_t* gm_bytes(const GlobalTensor<T>& g, uint64_t byte_off, uint64_t len, const char* api,
                               const char* file_, int line_) {
    if (!g.base_) rt::fail(file_, line_, std::string(api) + ": GlobalTensor without SetGlobalBuffer");
    uint64_t lo = g.off_ * sizeof(T) + byte_off;
    if (lo + len > g.size_ * sizeof(T)) {
        rt::fail(file_, line_, std::string(api) + ": GM bytes [" + rt::S(static_cast<long long>(lo)) + ", " +
                                   rt::S(static_cast<long long>(lo + len)) + ") are outside the GlobalTensor of " +
                                   rt::S(static_cast<long long>(g.size_ * sizeof(T))) + " B");
    }
    return reinterpret_cast<const uint8_t*>(g.base_) + lo;
}

inline void need_ub_tensor(const char* api, const char* operand, uint8_t space, const char* file_, int line_) {
    if (space != rt::kUB) {
        rt::fail(file_, line_, std::string(api) + ": " + operand + " is a LocalTensor in " + rt::space_name(space) +
                                   "; this DataCopy overload moves GM <-> UB (use Nd2NzParams for GM -> L1)");
    }
}

// One burst: GM [gm_off, gm_off+len) <-> UB [ub, ub+len); UB side traced as whole 32 B blocks.
template <typename T>
inline void burst(bool to_ub, const GlobalTensor<T>& g, uint64_t gm_off, uint64_t ub, uint64_t len, const char* api,
                  rt::Record& rec, const char* file_, int line_) {
    const uint8_t* gp = gm_bytes(g, gm_off, len, api, file_, line_);
    uint64_t ub_len = ceil_blocks(len) * rt::kBlock;
    rt::check_ub(file_, line_, api, ub, ub_len);
    rt::Access ga = rt::gm_access(file_, line_, gp, len);
    rt::Access ua{"UB", ub, ub + ub_len};
    if (to_ub) {
        std::memcpy(rt::st().ub.data() + ub, gp, len);
        if (len < ub_len) {
            // DataCopyPad GM->UB without padding fills the rest of the last 32 B block with the
            // first element of the burst ("dummy" values, docs DataCopyPad(ISASI)).
            for (uint64_t b = len; b + sizeof(T) <= ub_len; b += sizeof(T)) {
                std::memcpy(rt::st().ub.data() + ub + b, gp, sizeof(T));
            }
        }
        rec.reads.push_back(ga);
        rec.writes.push_back(ua);
    } else {
        std::memcpy(const_cast<uint8_t*>(gp), rt::st().ub.data() + ub, len);
        rec.reads.push_back(ua);
        rec.writes.push_back(ga);
    }
}

template <typename T>
inline void copy_blocks(bool to_ub, const GlobalTensor<T>& g, uint64_t ub, const DataCopyParams& p, const char* api,
                        const char* file_, int line_) {
    if (p.blockCount < 1 || p.blockCount > 4095) {
        rt::fail(file_, line_, std::string(api) + ": blockCount " + rt::S(p.blockCount) + " outside [1, 4095]");
    }
    if (p.blockLen < 1) rt::fail(file_, line_, std::string(api) + ": blockLen must be >= 1 (32-byte blocks)");
    rt::check_align(file_, line_, api, "the UB operand", ub, rt::kBlock);
    rt::Record rec;
    rec.op = to_ub ? "copy_gm_ub" : "copy_ub_gm";
    rec.pipe = to_ub ? "MTE2" : "MTE3";
    const uint64_t len = static_cast<uint64_t>(p.blockLen) * rt::kBlock;
    const uint64_t gm_step = (p.blockLen + static_cast<uint64_t>(to_ub ? p.srcStride : p.dstStride)) * rt::kBlock;
    const uint64_t ub_step = (p.blockLen + static_cast<uint64_t>(to_ub ? p.dstStride : p.srcStride)) * rt::kBlock;
    for (uint64_t i = 0; i < p.blockCount; ++i) burst(to_ub, g, i * gm_step, ub + i * ub_step, len, api, rec, file_, line_);
    rec.label = rt::label(api, file_, line_);
    rt::emit(rec);
}

template <typename T>
inline void copy_pad(bool to_ub, const GlobalTensor<T>& g, uint64_t ub, const DataCopyExtParams& p, const char* api,
                     const char* file_, int line_) {
    if (p.blockCount < 1 || p.blockCount > 4095) {
        rt::fail(file_, line_, std::string(api) + ": blockCount " + rt::S(p.blockCount) + " outside [1, 4095]");
    }
    if (p.blockLen < 1 || p.blockLen > 2097151) {
        rt::fail(file_, line_, std::string(api) + ": blockLen " + rt::S(p.blockLen) + " B outside [1, 2097151]");
    }
    if (p.blockLen % sizeof(T) != 0) {
        rt::fail(file_, line_, std::string(api) + ": blockLen " + rt::S(p.blockLen) + " B is not a multiple of the " +
                                   rt::S(sizeof(T)) + "-byte element");
    }
    rt::check_align(file_, line_, api, "the UB operand", ub, rt::kBlock);
    rt::Record rec;
    rec.op = to_ub ? "copy_gm_ub" : "copy_ub_gm";
    rec.pipe = to_ub ? "MTE2" : "MTE3";
    const uint64_t gm_step = p.blockLen + static_cast<uint64_t>(to_ub ? p.srcStride : p.dstStride);  // bytes
    const uint64_t ub_step = (ceil_blocks(p.blockLen) + (to_ub ? p.dstStride : p.srcStride)) * rt::kBlock;
    for (uint64_t i = 0; i < p.blockCount; ++i) burst(to_ub, g, i * gm_step, ub + i * ub_step, p.blockLen, api, rec, file_, line_);
    rec.label = rt::label(api, file_, line_);
    rt::emit(rec);
}

// DataCopy(dst, src, count) as one block-count copy: count * size bytes rounded down to whole
// 32 B blocks, as the hardware does (warned), and none at all is an error.
inline DataCopyParams count_params(uint32_t count, uint64_t size, const char* file_, int line_) {
    uint64_t bytes = static_cast<uint64_t>(count) * size;
    if (bytes % rt::kBlock != 0) {
        rt::warn(file_, line_, "DataCopy count " + rt::S(count) + " is " + rt::S(static_cast<long long>(bytes)) +
                                   " B, not a multiple of 32 B: rounded down as the hardware does");
    }
    DataCopyParams p(1, static_cast<uint16_t>(bytes / rt::kBlock), 0, 0);
    if (p.blockLen == 0) rt::fail(file_, line_, "DataCopy of fewer than 32 bytes moves nothing");
    return p;
}

// docs DataCopy（GMToL1连续数据搬运）.md: count elements GM -> L1 (TPosition A1/B1/C1), as they
// are (b8..b64 on 910B); count*sizeof(T) must be a multiple of 32 B (the hardware rounds down:
// refused here, as the IR verifier does); dst 32 B aligned. MTE2, traced as "copy_gm_l1_cont".
template <typename T>
inline void copy_gm_l1_count(const LocalTensor<T>& dst, const GlobalTensor<T>& src, uint32_t count, const char* file_,
                             int line_) {
    const char* api = "DataCopy(GM -> L1, count)";
    if (!rt::is_aic()) rt::fail(file_, line_, std::string(api) + " is a Cube (AIC) instruction, but this code runs on the AIV");
    const uint64_t bytes = static_cast<uint64_t>(count) * sizeof(T);
    if (bytes == 0 || bytes % rt::kBlock != 0) {
        rt::fail(file_, line_, std::string(api) + ": count " + rt::S(count) + " moves " + rt::S(static_cast<long long>(bytes)) +
                                   " B, not a positive multiple of 32 B (the hardware rounds down)");
    }
    rt::check_align(file_, line_, api, "the L1 destination", dst.addr_, rt::kBlock);
    const uint8_t* g = gm_bytes(src, 0, bytes, api, file_, line_);
    rt::check_space(file_, line_, api, rt::kL1, dst.addr_, bytes);
    std::memcpy(rt::mem(rt::kL1).data() + dst.addr_, g, bytes);
    std::memset(rt::loaded(rt::kL1).data() + dst.addr_, 1, bytes);
    rt::Record rec;
    rec.op = "copy_gm_l1_cont";
    rec.pipe = "MTE2";
    rec.reads.push_back(rt::gm_access(file_, line_, g, bytes));
    rec.writes.push_back(rt::Access{rt::space_name(rt::kL1), dst.addr_, dst.addr_ + bytes});
    rec.label = rt::label(api, file_, line_);
    rt::emit(rec);
}

}  // namespace detail

// include/basic_api/kernel_operator_data_copy_intf.h: DataCopy(dst, src, count) moves
// count*sizeof(T) bytes, which must be a multiple of 32 B (the hardware rounds down).
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count, ASCENDSCHED_LOC) {
    if (dst.space_ == rt::kL1) {  // GM -> L1 (DataCopy（GMToL1连续数据搬运）.md)
        detail::copy_gm_l1_count(dst, src, count, file_, line_);
        return;
    }
    const DataCopyParams p = detail::count_params(count, sizeof(T), file_, line_);
    detail::need_ub_tensor("DataCopy", "dst", dst.space_, file_, line_);
    detail::copy_blocks(true, src, dst.addr_, p, "DataCopy", file_, line_);
}

template <typename T>
inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count, ASCENDSCHED_LOC) {
    const DataCopyParams p = detail::count_params(count, sizeof(T), file_, line_);
    detail::need_ub_tensor("DataCopy", "src", src.space_, file_, line_);
    detail::copy_blocks(false, dst, src.addr_, p, "DataCopy", file_, line_);
}

template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p, ASCENDSCHED_LOC) {
    detail::need_ub_tensor("DataCopy", "dst", dst.space_, file_, line_);
    detail::copy_blocks(true, src, dst.addr_, p, "DataCopy", file_, line_);
}

template <typename T>
inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p, ASCENDSCHED_LOC) {
    detail::need_ub_tensor("DataCopy", "src", src.space_, file_, line_);
    detail::copy_blocks(false, dst, src.addr_, p, "DataCopy", file_, line_);
}

// docs DataCopyPad(ISASI): blockLen in bytes; strides in bytes on the GM side and in 32-byte
// blocks on the UB side; each UB row occupies ceil(blockLen / 32) blocks.
template <typename T>
inline void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& p,
                        const DataCopyPadExtParams<T>& pad, ASCENDSCHED_LOC) {
    if (pad.leftPadding != 0 || pad.rightPadding != 0) {
        rt::fail(file_, line_, "DataCopyPad: left/right padding is not supported by the CPU runtime");
    }
    detail::need_ub_tensor("DataCopy", "dst", dst.space_, file_, line_);
    detail::copy_pad(true, src, dst.addr_, p, "DataCopyPad", file_, line_);
}

template <typename T>
inline void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& p,
                        ASCENDSCHED_LOC) {
    detail::need_ub_tensor("DataCopy", "src", src.space_, file_, line_);
    detail::copy_pad(false, dst, src.addr_, p, "DataCopyPad", file_, line_);
}

// ============================================================================ vector (PIPE_V)
namespace detail {

template <typename T> struct Calc { using type = T; };
template <> struct Calc<half> { using type = float; };
template <> struct Calc<bfloat16_t> { using type = float; };

// One operand of a level-0 instruction: lane k of repeat r lives at
// base + r*rep*32 + (k / lanes_per_block)*blk*32 + (k % lanes_per_block)*esize.
struct Operand {
    const char* name;
    uint64_t base;
    uint64_t esize;
    uint64_t blk;
    uint64_t rep;
    uint8_t space = rt::kUB;
    uint64_t lane(uint64_t r, uint64_t k) const {
        const uint64_t epb = rt::kBlock / esize;
        return base + r * rep * rt::kBlock + (k / epb) * blk * rt::kBlock + (k % epb) * esize;
    }
};

// Bytes an operand touches: exact lane bytes, or the whole 32 B block when the block stride is 0
// (block broadcast). Checks UB bounds on the way.
inline void touch(std::vector<rt::Access>& acc, const Operand& o, uint64_t repeats, uint64_t lanes, const char* api,
                  const char* file_, int line_) {
    const uint64_t epb = rt::kBlock / o.esize;
    for (uint64_t r = 0; r < repeats; ++r) {
        for (uint64_t k0 = 0; k0 < lanes; k0 += epb) {
            uint64_t lo = o.lane(r, k0);
            uint64_t n = (o.blk == 0) ? rt::kBlock : std::min(epb, lanes - k0) * o.esize;
            if (o.blk == 0) lo = o.base + r * o.rep * rt::kBlock;
            rt::check_ub(file_, line_, api, lo, n);
            acc.push_back(rt::Access{"UB", lo, lo + n});
        }
    }
}

inline void check_level0(const char* api, uint64_t mask, uint64_t lanes, uint64_t repeats, const char* file_,
                         int line_) {
    if (mask < 1 || mask > lanes) {
        rt::fail(file_, line_, std::string(api) + ": mask (continuous mode) " + rt::S(static_cast<long long>(mask)) +
                                   " outside [1, " + rt::S(static_cast<long long>(lanes)) + "]");
    }
    if (repeats > rt::kMaxRepeat) {
        rt::fail(file_, line_, std::string(api) + ": repeatTime " + rt::S(static_cast<long long>(repeats)) +
                                   " exceeds " + rt::S(rt::kMaxRepeat));
    }
}

inline void need_ub(const char* api, const char* operand, uint8_t space, const char* file_, int line_) {
    if (space != rt::kUB) {
        rt::fail(file_, line_, std::string(api) + ": " + operand + " is a LocalTensor in " + rt::space_name(space) +
                                   ": vector instructions and GM<->UB copies work on UB (TPosition VECIN/VECOUT/VECCALC)");
    }
}

inline void check_operand(const char* api, const Operand& o, const char* file_, int line_) {
    need_ub(api, o.name, o.space, file_, line_);
    rt::check_align(file_, line_, api, o.name, o.base, rt::kBlock);
}

// Generic elementwise level-0 instruction: reads every source lane of a repeat before writing
// the destination lanes (so in-place operands behave like the hardware's repeat pipeline).
template <typename D, typename F>
inline void elementwise(const char* api, const char* op, const Operand& dst, const std::vector<Operand>& srcs,
                        uint64_t mask, uint64_t lanes, uint64_t repeats, F fn, const char* file_, int line_) {
    check_level0(api, mask, lanes, repeats, file_, line_);
    check_operand(api, dst, file_, line_);
    for (const Operand& s : srcs) check_operand(api, s, file_, line_);
    rt::Record rec;
    rec.op = op;
    rec.pipe = "V";
    for (const Operand& s : srcs) touch(rec.reads, s, repeats, mask, api, file_, line_);
    touch(rec.writes, dst, repeats, mask, api, file_, line_);
    std::vector<D> out(mask);
    for (uint64_t r = 0; r < repeats; ++r) {
        for (uint64_t k = 0; k < mask; ++k) out[k] = fn(r, k);
        for (uint64_t k = 0; k < mask; ++k) rt::ub_store<D>(dst.lane(r, k), out[k]);
    }
    rec.label = rt::label(api, file_, line_);
    rt::emit(rec);
}

template <typename T>
inline Operand opnd(const char* name, const LocalTensor<T>& t, uint64_t blk, uint64_t rep) {
    return Operand{name, t.addr_, sizeof(T), blk, rep, t.space_};
}

template <typename T, typename F>
inline void binary(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b,
                   uint64_t mask, uint8_t repeatTime, const BinaryRepeatParams& p, F f, const char* file_, int line_) {
    using C = typename Calc<T>::type;
    Operand od = opnd("dst", dst, p.dstBlkStride, p.dstRepStride);
    Operand oa = opnd("src0", a, p.src0BlkStride, p.src0RepStride);
    Operand ob = opnd("src1", b, p.src1BlkStride, p.src1RepStride);
    elementwise<T>(api, "vec_binary", od, {oa, ob}, mask, rt::kRepeat / sizeof(T), repeatTime,
                   [&](uint64_t r, uint64_t k) {
                       C x = static_cast<C>(rt::ub_load<T>(oa.lane(r, k)));
                       C y = static_cast<C>(rt::ub_load<T>(ob.lane(r, k)));
                       return static_cast<T>(f(x, y));
                   },
                   file_, line_);
}

template <typename T, typename F>
inline void unary(const char* api, const char* op, const LocalTensor<T>& dst, const LocalTensor<T>& src, uint64_t mask,
                  uint8_t repeatTime, uint64_t dblk, uint64_t sblk, uint64_t drep, uint64_t srep, F f,
                  const char* file_, int line_) {
    using C = typename Calc<T>::type;
    Operand od = opnd("dst", dst, dblk, drep);
    Operand os = opnd("src", src, sblk, srep);
    elementwise<T>(api, op, od, {os}, mask, rt::kRepeat / sizeof(T), repeatTime,
                   [&](uint64_t r, uint64_t k) {
                       return static_cast<T>(f(static_cast<C>(rt::ub_load<T>(os.lane(r, k)))));
                   },
                   file_, line_);
}

}  // namespace detail

// NaN in Max/Min, Maxs/Mins, Relu and WholeReduceMax/Min. The AscendC docs for the 910B say
// nothing about it: Max.md / Min.md / Maxs.md / Mins.md / Relu.md (docs/zh/api/SIMD-API/基础API/
// Memory矢量计算/基础算术/) give only dst_i = max(src0_i, src1_i) and the like; ReduceMax.md and
// ReduceRepeat.md (Memory矢量计算/归约计算/), ClampMax.md / ClampMin.md (高阶API/数学计算/
// Clamp接口/, Maxs/Mins in impl/adv_api/detail/math/clamp/clamp_common_impl.h) are silent too
// (asc-devkit @82b89a15f; impl/basic_api/dav_c220/kernel_operator_vec_binary_impl.h calls
// the vmax/vmin intrinsics with nothing about NaN either). Only the
// 950's register-based reductions are documented to propagate NaN ("如果输入数据存在nan，将nan
// 写入目的操作数", docs/zh/api/SIMD-API/C-API/reg/reduce_compute/asc_reduce_max.md:72, Reg矢量计算/
// 归约计算/Reduce.md:158), and the 950's Clamp keeps NaN (Clamp.md: "除nan值以外"). Lacking a
// 910B statement we propagate NaN as numpy.maximum/minimum/max/min do, which is what the
// reference (algo/evaluate.py) and the IR simulator (sim/) compute: a NaN in either operand
// (or any lane of a reduction) gives NaN. A real 910B may differ here.
namespace detail {
template <typename C>
inline C nan_max(C a, C b) {
    return a != a ? a : (b != b ? b : (a > b ? a : b));
}
template <typename C>
inline C nan_min(C a, C b) {
    return a != a ? a : (b != b ? b : (a < b ? a : b));
}
}  // namespace detail

// include/basic_api/kernel_operator_vec_binary_intf.h (level 0, mask continuous mode)
#define ASCENDSCHED_BINARY(NAME, EXPR)                                                                             \
    template <typename T, bool isSetMask = true>                                                                   \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,             \
                     uint64_t mask, const uint8_t repeatTime, const BinaryRepeatParams& repeatParams,              \
                     ASCENDSCHED_LOC) {                                                                            \
        detail::binary(#NAME, dst, src0, src1, mask, repeatTime, repeatParams, [](auto x, auto y) { return EXPR; }, \
                       file_, line_);                                                                              \
    }
ASCENDSCHED_BINARY(Add, x + y)
ASCENDSCHED_BINARY(Sub, x - y)
ASCENDSCHED_BINARY(Mul, x * y)
ASCENDSCHED_BINARY(Div, x / y)
ASCENDSCHED_BINARY(Max, detail::nan_max(x, y))
ASCENDSCHED_BINARY(Min, detail::nan_min(x, y))
#undef ASCENDSCHED_BINARY

// include/basic_api/kernel_operator_vec_binary_intf.h (level 0, mask continuous mode), asc-devkit
// @82b89a15f: FusedMulAdd "@brief dst = src0 * dst + src1" (vmadd), MulAddDst "@brief dst =
// src0 * src1 + dst" (vmla); half and float (docs 复合计算/FusedMulAdd.md, MulAddDst.md 数据类型;
// impl/basic_api/dav_c220/kernel_operator_vec_binary_impl.h static_asserts). dst is read as a
// source, so the trace records its read first, then src0 and src1 (the IR's vec_fma reads). The
// product is rounded to T before the add, as sim/vector.py's _vec_fma does: the docs do not say
// whether the hardware rounds once.
namespace detail {
template <typename T>
inline void mul_add(const char* api, bool product_with_dst, const LocalTensor<T>& dst, const LocalTensor<T>& src0,
                    const LocalTensor<T>& src1, uint64_t mask, uint8_t repeatTime, const BinaryRepeatParams& p,
                    const char* file_, int line_) {
    static_assert(std::is_same<T, half>::value || std::is_same<T, float>::value,
                  "FusedMulAdd / MulAddDst support half and float (FusedMulAdd.md, MulAddDst.md)");
    using C = typename Calc<T>::type;
    Operand od = opnd("dst", dst, p.dstBlkStride, p.dstRepStride);
    Operand oa = opnd("src0", src0, p.src0BlkStride, p.src0RepStride);
    Operand ob = opnd("src1", src1, p.src1BlkStride, p.src1RepStride);
    elementwise<T>(api, "vec_fma", od, {od, oa, ob}, mask, rt::kRepeat / sizeof(T), repeatTime,
                   [&](uint64_t r, uint64_t k) {
                       C d = static_cast<C>(rt::ub_load<T>(od.lane(r, k)));
                       C x = static_cast<C>(rt::ub_load<T>(oa.lane(r, k)));
                       C y = static_cast<C>(rt::ub_load<T>(ob.lane(r, k)));
                       C prod = static_cast<C>(static_cast<T>(product_with_dst ? x * d : x * y));
                       return static_cast<T>(prod + (product_with_dst ? y : d));
                   },
                   file_, line_);
}
}  // namespace detail

template <typename T, bool isSetMask = true>
inline void FusedMulAdd(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,
                        uint64_t mask, const uint8_t repeatTime, const BinaryRepeatParams& repeatParams,
                        ASCENDSCHED_LOC) {
    detail::mul_add("FusedMulAdd", true, dst, src0, src1, mask, repeatTime, repeatParams, file_, line_);
}

// MulAddDst's T (dst) and U (sources) may differ on the hardware (half sources, float dst); this runtime
// implements the same-dtype forms the compiler emits.
template <typename T, typename U, bool isSetMask = true>
inline void MulAddDst(const LocalTensor<T>& dst, const LocalTensor<U>& src0, const LocalTensor<U>& src1,
                      uint64_t mask, const uint8_t repeatTime, const BinaryRepeatParams& repeatParams,
                      ASCENDSCHED_LOC) {
    static_assert(std::is_same<T, U>::value, "ascendsched runtime: MulAddDst with dst and sources of one dtype only");
    detail::mul_add("MulAddDst", false, dst, src0, src1, mask, repeatTime, repeatParams, file_, line_);
}

// include/basic_api/kernel_operator_vec_unary_intf.h (level 0, mask continuous mode)
#define ASCENDSCHED_UNARY(NAME, EXPR)                                                                              \
    template <typename T, bool isSetMask = true>                                                                   \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, uint64_t mask, const uint8_t repeatTime, \
                     const UnaryRepeatParams& p, ASCENDSCHED_LOC) {                                                \
        detail::unary(#NAME, "vec_unary", dst, src, mask, repeatTime, p.dstBlkStride, p.srcBlkStride,             \
                      p.dstRepStride, p.srcRepStride, [](auto x) { return EXPR; }, file_, line_);                 \
    }
ASCENDSCHED_UNARY(Exp, std::exp(x))
ASCENDSCHED_UNARY(Ln, std::log(x))
ASCENDSCHED_UNARY(Sqrt, std::sqrt(x))
#undef ASCENDSCHED_UNARY

// Rsqrt and Reciprocal are approximations on the 910B (docs Rsqrt.md:179, Reciprocal.md:202:
// half misses 双千分之一, float 双万分之一; the modelled bound and why: target/ascend910b.py,
// APPROX_REL_ERROR). The result is the exact one times 1 + d, d in [-bound, bound] drawn from a
// hash of the source bits, then rounded to float and to T: bit for bit sim/precision.py's
// approx_unary, so the simulator and this runtime agree.
namespace detail {
inline uint32_t hash32(uint32_t x) {  // lowbias32, sim/precision.py:hash32
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}
template <typename T> inline uint32_t source_bits(T x) {
    uint32_t b = 0;
    std::memcpy(&b, &x, sizeof(T));  // half: its 16 bits, zero-extended (little endian)
    return b;
}
template <typename T> inline double approx_bound(const char* api);
template <> inline double approx_bound<half>(const char* api) {
    return std::strcmp(api, "Rsqrt") == 0 ? ASCENDSCHED_REL_ERR_RSQRT_FLOAT16 : ASCENDSCHED_REL_ERR_RECIPROCAL_FLOAT16;
}
template <> inline double approx_bound<float>(const char* api) {
    return std::strcmp(api, "Rsqrt") == 0 ? ASCENDSCHED_REL_ERR_RSQRT_FLOAT32 : ASCENDSCHED_REL_ERR_RECIPROCAL_FLOAT32;
}
template <typename T>
inline T approx(const char* api, T x, double exact) {
    const double u = static_cast<double>(hash32(source_bits(x)) >> 8) / static_cast<double>(1u << 24);
    const double d = (2.0 * u - 1.0) * approx_bound<T>(api);
    return T(static_cast<float>(exact * (1.0 + d)));
}
template <typename T>
inline void approx_unary(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& src, uint64_t mask,
                         uint8_t repeatTime, const UnaryRepeatParams& p, bool rsqrt, const char* file_, int line_) {
    static_assert(std::is_same<T, half>::value || std::is_same<T, float>::value,
                  "Rsqrt/Reciprocal take half or float (docs Rsqrt.md, Reciprocal.md)");
    Operand od = opnd("dst", dst, p.dstBlkStride, p.dstRepStride);
    Operand os = opnd("src", src, p.srcBlkStride, p.srcRepStride);
    elementwise<T>(api, "vec_unary", od, {os}, mask, rt::kRepeat / sizeof(T), repeatTime,
                   [&](uint64_t r, uint64_t k) {
                       const T x = rt::ub_load<T>(os.lane(r, k));
                       const double v = static_cast<double>(static_cast<float>(x));
                       return approx<T>(api, x, rsqrt ? 1.0 / std::sqrt(v) : 1.0 / v);
                   },
                   file_, line_);
}
}  // namespace detail

template <typename T, bool isSetMask = true>
inline void Rsqrt(const LocalTensor<T>& dst, const LocalTensor<T>& src, uint64_t mask, const uint8_t repeatTime,
                  const UnaryRepeatParams& p, ASCENDSCHED_LOC) {
    detail::approx_unary("Rsqrt", dst, src, mask, repeatTime, p, true, file_, line_);
}
template <typename T, bool isSetMask = true>
inline void Reciprocal(const LocalTensor<T>& dst, const LocalTensor<T>& src, uint64_t mask, const uint8_t repeatTime,
                       const UnaryRepeatParams& p, ASCENDSCHED_LOC) {
    detail::approx_unary("Reciprocal", dst, src, mask, repeatTime, p, false, file_, line_);
}

#define ASCENDSCHED_UNARY(NAME, EXPR)                                                                              \
    template <typename T, bool isSetMask = true>                                                                   \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, uint64_t mask, const uint8_t repeatTime, \
                     const UnaryRepeatParams& p, ASCENDSCHED_LOC) {                                                \
        detail::unary(#NAME, "vec_unary", dst, src, mask, repeatTime, p.dstBlkStride, p.srcBlkStride,             \
                      p.dstRepStride, p.srcRepStride, [](auto x) { return EXPR; }, file_, line_);                 \
    }
ASCENDSCHED_UNARY(Abs, (x < decltype(x)(0) ? -x : x))
ASCENDSCHED_UNARY(Relu, detail::nan_max(x, decltype(x)(0)))
#undef ASCENDSCHED_UNARY

// include/basic_api/kernel_operator_data_copy_intf.h: Copy (UB -> UB, level 0, mask continuous)
template <typename T, bool isSetMask = true>
inline void Copy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint64_t mask, const uint8_t repeatTime,
                 const CopyRepeatParams& p, ASCENDSCHED_LOC) {
    detail::unary("Copy", "vec_unary", dst, src, mask, repeatTime, p.dstStride, p.srcStride, p.dstRepeatSize,
                  p.srcRepeatSize, [](auto x) { return x; }, file_, line_);
}

// include/basic_api/kernel_operator_vec_binary_scalar_intf.h (level 0, mask continuous mode)
#define ASCENDSCHED_SCALAR(NAME, EXPR)                                                                             \
    template <typename T, bool isSetMask = true>                                                                   \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, uint64_t mask,     \
                     const uint8_t repeatTime, const UnaryRepeatParams& p, ASCENDSCHED_LOC) {                      \
        using C = typename detail::Calc<T>::type;                                                                  \
        const C s = static_cast<C>(scalarValue);                                                                   \
        detail::unary(#NAME, "vec_scalar", dst, src, mask, repeatTime, p.dstBlkStride, p.srcBlkStride,            \
                      p.dstRepStride, p.srcRepStride, [s](C x) { return EXPR; }, file_, line_);                    \
    }
ASCENDSCHED_SCALAR(Adds, x + s)
ASCENDSCHED_SCALAR(Muls, x * s)
ASCENDSCHED_SCALAR(Maxs, detail::nan_max(x, s))
ASCENDSCHED_SCALAR(Mins, detail::nan_min(x, s))
#undef ASCENDSCHED_SCALAR

// include/basic_api/kernel_operator_vec_duplicate_intf.h (level 0, mask continuous mode)
template <typename T, bool isSetMask = true>
inline void Duplicate(const LocalTensor<T>& dst, const T& scalarValue, uint64_t mask, const uint8_t repeatTime,
                      const uint16_t dstBlockStride, const uint8_t dstRepeatStride, ASCENDSCHED_LOC) {
    detail::Operand od = detail::opnd("dst", dst, dstBlockStride, dstRepeatStride);
    const T v = scalarValue;
    detail::elementwise<T>("Duplicate", "vec_dup", od, {}, mask, rt::kRepeat / sizeof(T), repeatTime,
                           [v](uint64_t, uint64_t) { return v; }, file_, line_);
}

// ---------------------------------------------------------------------------- Cast
namespace detail {

inline uint16_t next16(uint16_t bits, bool up) {
    // Next representable 16-bit float (binary16 or bfloat16 share the sign/magnitude ordering).
    const bool neg = bits & 0x8000u;
    if ((bits & 0x7fffu) == 0) return up ? 0x0001u : 0x8001u;
    return static_cast<uint16_t>((up != neg) ? bits + 1 : bits - 1);
}

template <typename D> inline D step(D x, bool up) {
    if constexpr (std::is_same_v<D, half>) return half::from_bits(next16(x.bits, up));
    else if constexpr (std::is_same_v<D, bfloat16_t>) return bfloat16_t::from_bits(next16(x.bits, up));
    else return std::nextafter(x, up ? std::numeric_limits<D>::infinity() : -std::numeric_limits<D>::infinity());
}

inline double round_int(double v, RoundMode m) {
    switch (m) {
        case RoundMode::CAST_FLOOR: return std::floor(v);
        case RoundMode::CAST_CEIL: return std::ceil(v);
        case RoundMode::CAST_TRUNC: return std::trunc(v);
        case RoundMode::CAST_ROUND: return std::round(v);  // ties away from zero
        default: return std::nearbyint(v);                 // RINT / NONE: ties to even
    }
}

// docs Cast: CAST_NONE rounds like CAST_RINT when the conversion loses precision; a float ->
// float Cast with a rounding mode rounds to an integral value.
template <typename D, typename S>
inline D cast_value(S s, RoundMode m, const char* file_, int line_) {
    const double v = static_cast<double>(static_cast<typename Calc<S>::type>(s));
    constexpr bool dst_float = std::is_floating_point_v<D> || std::is_same_v<D, half> || std::is_same_v<D, bfloat16_t>;
    constexpr bool src_float = std::is_floating_point_v<S> || std::is_same_v<S, half> || std::is_same_v<S, bfloat16_t>;
    if (m == RoundMode::CAST_ODD) rt::fail(file_, line_, "Cast: CAST_ODD is not supported by the CPU runtime");
    if constexpr (!dst_float) {
        // an integer result out of range saturates ("溢出默认按照饱和模式处理", docs
        // 数据结构/precision_conversion.md:30; e.g. int32 -> int16 of 2^31 - 1 is 2^15 - 1)
        if (std::isnan(v)) return D(0);
        double r = round_int(v, m);
        r = std::max(static_cast<double>(std::numeric_limits<D>::min()),
                     std::min(static_cast<double>(std::numeric_limits<D>::max()), r));
        return static_cast<D>(static_cast<int64_t>(r));
    } else {
        if constexpr (src_float && sizeof(D) == sizeof(S) && std::is_same_v<D, S>) {
            return (m == RoundMode::CAST_NONE) ? s : D(static_cast<float>(round_int(v, m)));
        }
        D r = D(static_cast<float>(v));  // nearest even
        if (m == RoundMode::CAST_NONE || m == RoundMode::CAST_RINT || std::isnan(v)) return r;
        const double back = static_cast<double>(static_cast<typename Calc<D>::type>(r));
        if (back == v) return r;
        D lo = back < v ? r : step(r, false);
        D hi = back < v ? step(r, true) : r;
        switch (m) {
            case RoundMode::CAST_FLOOR: return lo;
            case RoundMode::CAST_CEIL: return hi;
            case RoundMode::CAST_TRUNC: return v < 0 ? hi : lo;
            default: {  // CAST_ROUND: nearest, ties away from zero
                const double dl = v - static_cast<double>(static_cast<typename Calc<D>::type>(lo));
                const double dh = static_cast<double>(static_cast<typename Calc<D>::type>(hi)) - v;
                if (dl < dh) return lo;
                if (dh < dl) return hi;
                return v < 0 ? lo : hi;
            }
        }
    }
}

}  // namespace detail

namespace detail {
// The 910B Cast table, docs Memory矢量计算/类型转换/Cast.md:215-247: the round modes each
// (src U, dst T) pair takes, as a bit set over RoundMode (bit m = RoundMode m); 0 = no such
// pair (impl/basic_api/dav_c220/kernel_operator_vec_vconv_impl.h has no CastIntrinsicsImpl
// overload for it, so the call does not compile against the real headers).
constexpr uint32_t bit(RoundMode m) { return 1u << static_cast<uint32_t>(m); }
constexpr uint32_t kNone = bit(RoundMode::CAST_NONE);
constexpr uint32_t kDirected = bit(RoundMode::CAST_RINT) | bit(RoundMode::CAST_FLOOR) | bit(RoundMode::CAST_CEIL) |
                               bit(RoundMode::CAST_ROUND) | bit(RoundMode::CAST_TRUNC);
template <typename T, typename U, typename A, typename B>
constexpr bool is_pair = std::is_same_v<U, A> && std::is_same_v<T, B>;
template <typename T> constexpr const char* type_name() {
    if constexpr (std::is_same_v<T, half>) return "half";
    else if constexpr (std::is_same_v<T, bfloat16_t>) return "bfloat16_t";
    else if constexpr (std::is_same_v<T, float>) return "float";
    else if constexpr (std::is_same_v<T, int64_t>) return "int64_t";
    else if constexpr (std::is_same_v<T, int32_t>) return "int32_t";
    else if constexpr (std::is_same_v<T, int16_t>) return "int16_t";
    else if constexpr (std::is_same_v<T, int8_t>) return "int8_t";
    else if constexpr (std::is_same_v<T, uint8_t>) return "uint8_t";
    else return "?";
}
template <typename T, typename U>
constexpr uint32_t cast_modes() {
    if constexpr (is_pair<T, U, int8_t, half> || is_pair<T, U, uint8_t, half> || is_pair<T, U, int16_t, float> ||
                  is_pair<T, U, half, float> || is_pair<T, U, bfloat16_t, float> || is_pair<T, U, int32_t, int16_t> ||
                  is_pair<T, U, int32_t, int64_t> || is_pair<T, U, int64_t, int32_t>) {
        return kNone;
    } else if constexpr (is_pair<T, U, int16_t, half> || is_pair<T, U, half, int8_t> || is_pair<T, U, half, uint8_t> ||
                         is_pair<T, U, int32_t, float>) {
        return kDirected | kNone;
    } else if constexpr (is_pair<T, U, half, int16_t> || is_pair<T, U, half, int32_t> ||
                         is_pair<T, U, bfloat16_t, int32_t> || is_pair<T, U, float, int16_t> ||
                         is_pair<T, U, float, bfloat16_t> || is_pair<T, U, float, int32_t> ||
                         is_pair<T, U, float, float> || is_pair<T, U, float, int64_t> || is_pair<T, U, int64_t, float>) {
        return kDirected;
    } else if constexpr (is_pair<T, U, float, half>) {
        return kDirected | bit(RoundMode::CAST_ODD) | kNone;
    } else {
        return 0;
    }
}
}  // namespace detail

// include/basic_api/kernel_operator_vec_vconv_intf.h: Cast level 0; one repeat covers
// 256 B of the wider type, so mask <= 256 / max(sizeof(D), sizeof(S)). Only the pairs and
// round modes of the 910B table (detail::cast_modes). int32_t -> half is in the table but is a
// dequantisation: vconv_deq scales by the SetDeqScale value and ignores roundMode (Cast.md:235,
// vconv_impl.h:29-40), not modelled here.
template <typename T, typename U, bool isSetMask = true>
inline void Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src, const RoundMode& roundMode, const uint64_t mask,
                 const uint8_t repeatTime, const UnaryRepeatParams& p, ASCENDSCHED_LOC) {
    constexpr bool deq = std::is_same_v<U, int32_t> && std::is_same_v<T, half>;
    static_assert(detail::cast_modes<T, U>() != 0 || deq,
                  "Cast: the 910B has no vector conversion between these types (docs Cast.md, the Atlas A2 table)");
    if constexpr (deq) {
        rt::fail(file_, line_, "Cast: int32_t -> half is a dequantisation (vconv_deq: src times the SetDeqScale "
                               "scale, roundMode ignored), not a conversion; cast through float");
    }
    if (!((detail::cast_modes<T, U>() >> static_cast<uint32_t>(roundMode)) & 1u)) {
        rt::fail(file_, line_, std::string("Cast: ") + detail::type_name<U>() + " -> " + detail::type_name<T>() +
                                   " does not take RoundMode " + rt::S(static_cast<int>(roundMode)) +
                                   " (docs Cast.md, the Atlas A2 table)");
    }
    detail::Operand od = detail::opnd("dst", dst, p.dstBlkStride, p.dstRepStride);
    detail::Operand os = detail::opnd("src", src, p.srcBlkStride, p.srcRepStride);
    const RoundMode m = roundMode;
    detail::elementwise<T>("Cast", "vec_cast", od, {os}, mask, rt::kRepeat / std::max(sizeof(T), sizeof(U)), repeatTime,
                           [&](uint64_t r, uint64_t k) {
                               return detail::cast_value<T, U>(rt::ub_load<U>(os.lane(r, k)), m, file_, line_);
                           },
                           file_, line_);
}

// ---------------------------------------------------------------------------- reductions
// include/basic_api/kernel_operator_vec_reduce_intf.h; docs ReduceRepeat.md (the current name of
// WholeReduceSum/Max/Min, docs/zh/api/附录/接口变更说明.md:30): dstRepStride is in units of one
// reduced result (sizeof(T) for value-only results, ReduceRepeat.md:165-183). dst alignment:
// SUM sizeof(T) (ReduceRepeat.md:171-172 and the library's own check,
// impl/basic_api/kernel_operator_vec_reduce_intf_impl.h:148); MAX/MIN with ORDER_ONLY_VALUE the
// docs say sizeof(T) (ReduceRepeat.md:178, 182) but the library's check asks 2 * sizeof(T) for
// every order (kernel_operator_vec_reduce_intf_impl.h:177): the stricter rule is enforced.
// Each repeat's lanes are fold()ed by the caller's rule.
namespace detail {
template <typename T, typename F>
inline void whole_reduce(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& src, int32_t mask,
                         int32_t repeatTime, int32_t dstRepStride, int32_t srcBlkStride, int32_t srcRepStride, F fold,
                         uint64_t dst_align, const char* file_, int line_) {
    if (mask < 1 || repeatTime < 0) rt::fail(file_, line_, std::string(api) + ": mask and repeatTime must be positive");
    check_level0(api, static_cast<uint64_t>(mask), rt::kRepeat / sizeof(T), static_cast<uint64_t>(repeatTime), file_, line_);
    need_ub(api, "src", src.space_, file_, line_);
    need_ub(api, "dst", dst.space_, file_, line_);
    rt::check_align(file_, line_, api, "src", src.addr_, rt::kBlock);
    rt::check_align(file_, line_, api, "dst", dst.addr_, dst_align);
    Operand os = opnd("src", src, static_cast<uint64_t>(srcBlkStride), static_cast<uint64_t>(srcRepStride));
    rt::Record rec;
    rec.op = "vec_reduce";
    rec.pipe = "V";
    touch(rec.reads, os, static_cast<uint64_t>(repeatTime), static_cast<uint64_t>(mask), api, file_, line_);
    std::vector<T> out(static_cast<size_t>(repeatTime));
    std::vector<T> lanes(static_cast<size_t>(mask));
    for (int32_t r = 0; r < repeatTime; ++r) {
        for (int32_t k = 0; k < mask; ++k) lanes[k] = rt::ub_load<T>(os.lane(r, k));
        out[r] = fold(lanes);
    }
    for (int32_t r = 0; r < repeatTime; ++r) {
        uint64_t a = dst.addr_ + static_cast<uint64_t>(r) * static_cast<uint64_t>(dstRepStride) * sizeof(T);
        rt::check_ub(file_, line_, api, a, sizeof(T));
        rt::ub_store<T>(a, out[r]);
        rec.writes.push_back(rt::Access{"UB", a, a + sizeof(T)});
    }
    rec.label = rt::label(api, file_, line_);
    rt::emit(rec);
}
}  // namespace detail

namespace detail {
// SUM: a binary tree of adjacent pairs per repeat, every partial sum rounded to T (docs
// ReduceRepeat.md:270, ReduceDataBlock.md:183-191); lanes past the mask count as 0. Bit for bit
// sim/precision.py's tree_sum.
template <typename T>
inline T tree_sum(std::vector<T> v) {
    using C = typename Calc<T>::type;
    size_t width = 1;
    while (width < v.size()) width *= 2;
    v.resize(width, T(C(0)));
    for (; width > 1; width /= 2) {
        for (size_t i = 0; i < width / 2; ++i) v[i] = T(static_cast<C>(v[2 * i]) + static_cast<C>(v[2 * i + 1]));
    }
    return v[0];
}

template <typename T, typename F>
inline T fold_lanes(const std::vector<T>& v, F pick) {
    using C = typename Calc<T>::type;
    C acc = static_cast<C>(v[0]);
    for (size_t k = 1; k < v.size(); ++k) acc = pick(acc, static_cast<C>(v[k]));
    return T(acc);
}
}  // namespace detail

template <typename T, bool isSetMask = true>
inline void WholeReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t mask,
                           const int32_t repeatTime, const int32_t dstRepStride, const int32_t srcBlkStride,
                           const int32_t srcRepStride, ASCENDSCHED_LOC) {
    detail::whole_reduce("WholeReduceSum", dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride,
                         [](const std::vector<T>& v) { return detail::tree_sum(v); }, sizeof(T), file_, line_);
}

template <typename T, bool isSetMask = true>
inline void WholeReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t mask,
                           const int32_t repeatTime, const int32_t dstRepStride, const int32_t srcBlkStride,
                           const int32_t srcRepStride, ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX,
                           ASCENDSCHED_LOC) {
    if (order != ReduceOrder::ORDER_ONLY_VALUE) {
        rt::fail(file_, line_, "WholeReduceMax: only ReduceOrder::ORDER_ONLY_VALUE is modelled by the CPU runtime");
    }
    detail::whole_reduce("WholeReduceMax", dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride,
                         [](const std::vector<T>& v) { return detail::fold_lanes(v, [](auto a, auto b) { return detail::nan_max(a, b); }); },
                         2 * sizeof(T), file_, line_);
}

template <typename T, bool isSetMask = true>
inline void WholeReduceMin(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t mask,
                           const int32_t repeatTime, const int32_t dstRepStride, const int32_t srcBlkStride,
                           const int32_t srcRepStride, ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX,
                           ASCENDSCHED_LOC) {
    if (order != ReduceOrder::ORDER_ONLY_VALUE) {
        rt::fail(file_, line_, "WholeReduceMin: only ReduceOrder::ORDER_ONLY_VALUE is modelled by the CPU runtime");
    }
    detail::whole_reduce("WholeReduceMin", dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride,
                         [](const std::vector<T>& v) { return detail::fold_lanes(v, [](auto a, auto b) { return detail::nan_min(a, b); }); },
                         2 * sizeof(T), file_, line_);
}

// ---------------------------------------------------------------------------- BlockReduce
// include/basic_api/kernel_operator_vec_reduce_intf.h; docs BlockReduceSum.md / BlockReduceMax.md:
// each 32 B datablock of a repeat reduces to one element, so a repeat of 8 blocks writes 8
// results; dstRepStride is in units of one repeat's results (8 elements: 16 B for half, 32 B
// for float); dst starts on 32 B for float, 16 B for half; src on 32 B. A sum adds the block's
// elements as a binary tree of adjacent pairs, every partial rounded to T (the doc's figure and
// its half overflow example), as tree_sum does.
namespace detail {
template <typename T, typename F>
inline void block_reduce(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& src, int32_t mask,
                         int32_t repeatTime, int32_t dstRepStride, int32_t srcBlkStride, int32_t srcRepStride, F fold,
                         const char* file_, int line_) {
    const uint64_t lanes = rt::kRepeat / sizeof(T);
    const uint64_t per = rt::kBlock / sizeof(T);
    if (mask < 1 || repeatTime < 0) rt::fail(file_, line_, std::string(api) + ": mask and repeatTime must be positive");
    if (static_cast<uint64_t>(mask) != lanes) {
        rt::fail(file_, line_, std::string(api) + ": the CPU runtime models whole repeats only (mask " +
                                   std::to_string(mask) + ", a repeat holds " + std::to_string(lanes) + ")");
    }
    check_level0(api, static_cast<uint64_t>(mask), lanes, static_cast<uint64_t>(repeatTime), file_, line_);
    need_ub(api, "src", src.space_, file_, line_);
    need_ub(api, "dst", dst.space_, file_, line_);
    rt::check_align(file_, line_, api, "src", src.addr_, rt::kBlock);
    rt::check_align(file_, line_, api, "dst", dst.addr_, sizeof(T) == 2 ? 16 : rt::kBlock);
    Operand os = opnd("src", src, static_cast<uint64_t>(srcBlkStride), static_cast<uint64_t>(srcRepStride));
    rt::Record rec;
    rec.op = "vec_block_reduce";
    rec.pipe = "V";
    touch(rec.reads, os, static_cast<uint64_t>(repeatTime), static_cast<uint64_t>(mask), api, file_, line_);
    const uint64_t blocks = lanes / per;
    std::vector<T> out(static_cast<size_t>(repeatTime) * blocks);
    std::vector<T> vals(static_cast<size_t>(per));
    for (int32_t r = 0; r < repeatTime; ++r) {
        for (uint64_t b = 0; b < blocks; ++b) {
            for (uint64_t k = 0; k < per; ++k) vals[k] = rt::ub_load<T>(os.lane(r, b * per + k));
            out[static_cast<size_t>(r) * blocks + b] = fold(vals);
        }
    }
    for (int32_t r = 0; r < repeatTime; ++r) {
        uint64_t a = dst.addr_ + static_cast<uint64_t>(r) * static_cast<uint64_t>(dstRepStride) * blocks * sizeof(T);
        rt::check_ub(file_, line_, api, a, blocks * sizeof(T));
        for (uint64_t b = 0; b < blocks; ++b) rt::ub_store<T>(a + b * sizeof(T), out[static_cast<size_t>(r) * blocks + b]);
        rec.writes.push_back(rt::Access{"UB", a, a + blocks * sizeof(T)});
    }
    rec.label = rt::label(api, file_, line_);
    rt::emit(rec);
}
}  // namespace detail

template <typename T, bool isSetMask = true>
inline void BlockReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t repeatTime,
                           const int32_t mask, const int32_t dstRepStride, const int32_t srcBlkStride,
                           const int32_t srcRepStride, ASCENDSCHED_LOC) {
    detail::block_reduce("BlockReduceSum", dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride,
                         [](const std::vector<T>& v) { return detail::tree_sum(v); }, file_, line_);
}

template <typename T, bool isSetMask = true>
inline void BlockReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t repeatTime,
                           const int32_t mask, const int32_t dstRepStride, const int32_t srcBlkStride,
                           const int32_t srcRepStride, ASCENDSCHED_LOC) {
    detail::block_reduce("BlockReduceMax", dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride,
                         [](const std::vector<T>& v) { return detail::fold_lanes(v, [](auto a, auto b) { return detail::nan_max(a, b); }); },
                         file_, line_);
}

template <typename T, bool isSetMask = true>
inline void BlockReduceMin(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t repeatTime,
                           const int32_t mask, const int32_t dstRepStride, const int32_t srcBlkStride,
                           const int32_t srcRepStride, ASCENDSCHED_LOC) {
    detail::block_reduce("BlockReduceMin", dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride,
                         [](const std::vector<T>& v) { return detail::fold_lanes(v, [](auto a, auto b) { return detail::nan_min(a, b); }); },
                         file_, line_);
}

// ---------------------------------------------------------------------------- Brcb
// include/basic_api/kernel_operator_vec_brcb_intf.h: each repeat takes 8 consecutive src
// elements and fills one 32 B dst block with each, block j of repeat r at
// (r*dstRepStride + j*dstBlkStride) * 32 B. docs Brcb.md:122-123 (约束说明): src and dst
// must not share memory, and dstBlkStride = 0 is undefined behaviour (both rejected here).
template <typename T>
inline void Brcb(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const uint8_t repeatTime,
                 const BrcbRepeatParams& p, ASCENDSCHED_LOC) {
    detail::need_ub("Brcb", "dst", dst.space_, file_, line_);
    detail::need_ub("Brcb", "src0", src0.space_, file_, line_);
    rt::check_align(file_, line_, "Brcb", "dst", dst.addr_, rt::kBlock);
    rt::check_align(file_, line_, "Brcb", "src0", src0.addr_, rt::kBlock);
    if (repeatTime > rt::kMaxRepeat) rt::fail(file_, line_, "Brcb: repeatTime exceeds the limit");
    if (p.dstBlkStride == 0) {
        rt::fail(file_, line_, "Brcb: dstBlkStride = 0 is undefined behaviour (docs Brcb.md: "
                               "\"dstBlkStride不支持设置为0\"); use 1 for consecutive blocks");
    }
    rt::Record rec;
    rec.op = "vec_brcb";
    rec.pipe = "V";
    const uint64_t per = rt::kBlocksPerRepeat;
    rt::check_ub(file_, line_, "Brcb", src0.addr_, repeatTime * per * sizeof(T));
    {  // in place: any dst block overlapping the source bytes
        const uint64_t slo = src0.addr_, shi = src0.addr_ + repeatTime * per * sizeof(T);
        for (uint64_t r = 0; r < repeatTime; ++r) {
            for (uint64_t j = 0; j < per; ++j) {
                const uint64_t a = dst.addr_ + (r * p.dstRepStride + j * p.dstBlkStride) * rt::kBlock;
                if (a < shi && slo < a + rt::kBlock) {
                    rt::fail(file_, line_, "Brcb: dst block at UB " + rt::S(static_cast<long long>(a)) +
                                               " overlaps the source [" + rt::S(static_cast<long long>(slo)) + ", " +
                                               rt::S(static_cast<long long>(shi)) +
                                               "): in-place Brcb is not supported (docs Brcb.md)");
                }
            }
        }
    }
    rec.reads.push_back(rt::Access{"UB", src0.addr_, src0.addr_ + repeatTime * per * sizeof(T)});
    std::vector<T> vals(repeatTime * per);
    for (uint64_t i = 0; i < vals.size(); ++i) vals[i] = rt::ub_load<T>(src0.addr_ + i * sizeof(T));
    for (uint64_t r = 0; r < repeatTime; ++r) {
        for (uint64_t j = 0; j < per; ++j) {
            uint64_t a = dst.addr_ + (r * p.dstRepStride + j * p.dstBlkStride) * rt::kBlock;
            rt::check_ub(file_, line_, "Brcb", a, rt::kBlock);
            for (uint64_t b = 0; b < rt::kBlock; b += sizeof(T)) rt::ub_store<T>(a + b, vals[r * per + j]);
            rec.writes.push_back(rt::Access{"UB", a, a + rt::kBlock});
        }
    }
    rec.label = rt::label("Brcb", file_, line_);
    rt::emit(rec);
}

// ---------------------------------------------------------------------------- Compare / Select
// include/basic_api/kernel_operator_vec_cmpsel_intf.h, docs Compare/Select,
// impl/basic_api/dav_c220/kernel_operator_vec_cmp_impl.h. On 910B the level-0 Compare ignores
// the mask ("保留参数，设置无效"): every repeat compares all 256 B of lanes and writes
// 256/sizeof(T) bits, packed: repeat r's bits start at byte r*256/sizeof(T)/8 of dst (the
// level-2 CompareCompute advances dst by that much); bit k%8 of byte k/8 is lane k
// (little-endian). Select in VSEL_TENSOR_TENSOR_MODE consumes selMask contiguously,
// 256/sizeof(T) bits per repeat; bit 1 picks src0.
inline bool compare(CMPMODE m, double a, double b) {
    switch (m) {
        case CMPMODE::LT: return a < b;
        case CMPMODE::GT: return a > b;
        case CMPMODE::EQ: return a == b;
        case CMPMODE::LE: return a <= b;
        case CMPMODE::GE: return a >= b;
        case CMPMODE::NE: return a != b;
    }
    return false;
}

template <typename T, typename U, bool isSetMask = true>
inline void Compare(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, CMPMODE cmpMode,
                    const uint64_t mask, uint8_t repeatTime, const BinaryRepeatParams& p, ASCENDSCHED_LOC) {
    static_assert(sizeof(U) == 1, "Compare writes a uint8_t/int8_t bit mask");
    (void)mask;  // reserved on 910B
    const uint64_t lanes = rt::kRepeat / sizeof(T);
    if (repeatTime > rt::kMaxRepeat) rt::fail(file_, line_, "Compare: repeatTime exceeds the limit");
    detail::Operand oa = detail::opnd("src0", src0, p.src0BlkStride, p.src0RepStride);
    detail::Operand ob = detail::opnd("src1", src1, p.src1BlkStride, p.src1RepStride);
    detail::check_operand("Compare", oa, file_, line_);
    detail::check_operand("Compare", ob, file_, line_);
    rt::check_align(file_, line_, "Compare", "dst", dst.addr_, rt::kBlock);
    rt::Record rec;
    rec.op = "vec_cmp";
    rec.pipe = "V";
    detail::touch(rec.reads, oa, repeatTime, lanes, "Compare", file_, line_);
    detail::touch(rec.reads, ob, repeatTime, lanes, "Compare", file_, line_);
    const uint64_t bytes = lanes / 8;
    rt::check_ub(file_, line_, "Compare", dst.addr_, repeatTime * bytes);
    rec.writes.push_back(rt::Access{"UB", dst.addr_, dst.addr_ + repeatTime * bytes});
    using C = typename detail::Calc<T>::type;
    std::vector<uint8_t> out(repeatTime * bytes, 0);
    for (uint64_t r = 0; r < repeatTime; ++r) {
        for (uint64_t k = 0; k < lanes; ++k) {
            double a = static_cast<double>(static_cast<C>(rt::ub_load<T>(oa.lane(r, k))));
            double b = static_cast<double>(static_cast<C>(rt::ub_load<T>(ob.lane(r, k))));
            if (compare(cmpMode, a, b)) out[r * bytes + k / 8] |= static_cast<uint8_t>(1u << (k % 8));
        }
    }
    std::memcpy(rt::st().ub.data() + dst.addr_, out.data(), out.size());
    rec.label = rt::label("Compare", file_, line_);
    rt::emit(rec);
}

template <typename T, typename U, bool isSetMask = true>
inline void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
                   const LocalTensor<T>& src1, SELMODE selMode, uint64_t mask, uint8_t repeatTime,
                   const BinaryRepeatParams& p, ASCENDSCHED_LOC) {
    static_assert(sizeof(U) == 1, "the CPU runtime models uint8_t select masks");
    if (selMode != SELMODE::VSEL_TENSOR_TENSOR_MODE) {
        rt::fail(file_, line_, "Select: only SELMODE::VSEL_TENSOR_TENSOR_MODE is modelled by the CPU runtime");
    }
    const uint64_t lanes = rt::kRepeat / sizeof(T);
    detail::Operand od = detail::opnd("dst", dst, p.dstBlkStride, p.dstRepStride);
    detail::Operand oa = detail::opnd("src0", src0, p.src0BlkStride, p.src0RepStride);
    detail::Operand ob = detail::opnd("src1", src1, p.src1BlkStride, p.src1RepStride);
    rt::check_align(file_, line_, "Select", "selMask", selMask.addr_, rt::kBlock);
    // selMask bytes this call consumes (lanes [0, mask) of every repeat).
    const uint64_t m0 = selMask.addr_;
    rt::check_ub(file_, line_, "Select", m0, repeatTime * lanes / 8);
    std::vector<rt::Access> mask_reads;
    for (uint64_t r = 0; r < repeatTime; ++r) {
        uint64_t lo = m0 + r * lanes / 8;
        mask_reads.push_back(rt::Access{"UB", lo, lo + (std::min(mask, lanes) + 7) / 8});
    }
    std::vector<uint8_t> bits(repeatTime * lanes / 8);
    std::memcpy(bits.data(), rt::st().ub.data() + m0, bits.size());
    // elementwise() emits the record; append the mask reads through a wrapper record.
    detail::check_level0("Select", mask, lanes, repeatTime, file_, line_);
    detail::check_operand("Select", od, file_, line_);
    detail::check_operand("Select", oa, file_, line_);
    detail::check_operand("Select", ob, file_, line_);
    rt::Record rec;
    rec.op = "vec_select";
    rec.pipe = "V";
    rec.reads = mask_reads;
    detail::touch(rec.reads, oa, repeatTime, mask, "Select", file_, line_);
    detail::touch(rec.reads, ob, repeatTime, mask, "Select", file_, line_);
    detail::touch(rec.writes, od, repeatTime, mask, "Select", file_, line_);
    std::vector<T> out(mask);
    for (uint64_t r = 0; r < repeatTime; ++r) {
        for (uint64_t k = 0; k < mask; ++k) {
            const uint64_t bit = r * lanes + k;
            const bool take0 = (bits[bit / 8] >> (bit % 8)) & 1u;
            out[k] = rt::ub_load<T>(take0 ? oa.lane(r, k) : ob.lane(r, k));
        }
        for (uint64_t k = 0; k < mask; ++k) rt::ub_store<T>(od.lane(r, k), out[k]);
    }
    rec.label = rt::label("Select", file_, line_);
    rt::emit(rec);
}

}  // namespace AscendC

#include "ascendsched_cube.hpp"

namespace ascendsched_rt {
inline void check_flags_drained() {
    for (const auto& kv : st().pending) {
        if (kv.second > 0) {
            const auto e = static_cast<AscendC::HardEvent>(kv.first.first);
            fail("<end of kernel>", 0, std::string("SetFlag<HardEvent::") + AscendC::event_name(e) + ">(" +
                                           S(kv.first.second) + ") was never waited: unpaired flag at kernel end");
        }
    }
}
}  // namespace ascendsched_rt
