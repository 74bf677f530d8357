// ascendsched CPU runtime: per-block state (on-chip memories, flags, TPipe cursors), GM
// registry, trace writer.
//
// Execution model: one block (and core type) at a time, every call executed immediately in
// program order (pipes are not modelled concurrently; races are the trace checker's job). Each
// executed AscendC call appends one JSON line to the trace in the format of sim/trace.py:
//   {"block", "core", "seq", "op", "pipe", "reads", "writes", "src", "dst", "id", "flag", "label"}
// with reads/writes as sorted, coalesced [space, lo, hi) byte intervals ("GM:<param>" offsets
// inside the tensor; "UB", "L1", "L0A", "L0B", "L0C" physical addresses).
//
// On-chip memories: UB on the AIV; L1, L0A, L0B and L0C on the AIC. Each block starts with
// fresh, poisoned memories (UB 0xCD, the Cube memories 0xFF = NaN for every float type and -1
// for integers), so a kernel that reads bytes no instruction wrote shows it in its results.
//
// Hardware numbers come from the emitted project (generated from kernel.target), as macros:
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "ascendsched_types.hpp"

#if !defined(ASCENDSCHED_UB_USABLE) || !defined(ASCENDSCHED_BLOCK_BYTES) ||                    \
    !defined(ASCENDSCHED_REPEAT_BYTES) || !defined(ASCENDSCHED_MAX_REPEAT) ||                   \
    !defined(ASCENDSCHED_EVENT_ID_LIMIT) || !defined(ASCENDSCHED_REL_ERR_RSQRT_FLOAT16) ||       \
    !defined(ASCENDSCHED_REL_ERR_RSQRT_FLOAT32) || !defined(ASCENDSCHED_REL_ERR_RECIPROCAL_FLOAT16) || \
    !defined(ASCENDSCHED_REL_ERR_RECIPROCAL_FLOAT32)
#error "define the target macros (the generated cpu_main.cpp does) before kernel_operator.h"
#endif

namespace ascendsched_rt {

constexpr uint64_t kUbUsable = ASCENDSCHED_UB_USABLE;
constexpr uint64_t kBlock = ASCENDSCHED_BLOCK_BYTES;
constexpr uint64_t kRepeat = ASCENDSCHED_REPEAT_BYTES;
constexpr uint64_t kBlocksPerRepeat = kRepeat / kBlock;
constexpr uint32_t kMaxRepeat = ASCENDSCHED_MAX_REPEAT;
constexpr int32_t kEventIdLimit = ASCENDSCHED_EVENT_ID_LIMIT;

// Cube (AIC) memories: usable bytes from kernel.target (0 = the kernel uses none of them).
#ifndef ASCENDSCHED_L1_USABLE
#define ASCENDSCHED_L1_USABLE 0
#endif
#ifndef ASCENDSCHED_L0A_USABLE
#define ASCENDSCHED_L0A_USABLE 0
#endif
#ifndef ASCENDSCHED_L0B_USABLE
#define ASCENDSCHED_L0B_USABLE 0
#endif
#ifndef ASCENDSCHED_L0C_USABLE
#define ASCENDSCHED_L0C_USABLE 0
#endif
#ifndef ASCENDSCHED_BT_USABLE  // the bias table (TPosition C2); defined only for kernels using it
#define ASCENDSCHED_BT_USABLE 0
#endif

// Physical memories of one core. Index into State::mem.
enum Space : uint8_t { kUB = 0, kL1, kL0A, kL0B, kL0C, kBT, kNumSpaces };

inline const char* space_name(uint8_t s) {
    static const char* const names[kNumSpaces] = {"UB", "L1", "L0A", "L0B", "L0C", "BT"};
    return s < kNumSpaces ? names[s] : "?";
}

inline uint64_t space_usable(uint8_t s) {
    switch (s) {
        case kUB: return kUbUsable;
        case kL1: return ASCENDSCHED_L1_USABLE;
        case kL0A: return ASCENDSCHED_L0A_USABLE;
        case kL0B: return ASCENDSCHED_L0B_USABLE;
        case kL0C: return ASCENDSCHED_L0C_USABLE;
        case kBT: return ASCENDSCHED_BT_USABLE;
        default: return 0;
    }
}

struct GmRegion {
    std::string name;
    const uint8_t* base;
    uint64_t bytes;
};

struct Access {
    std::string space;
    uint64_t lo;
    uint64_t hi;
};

// Per core program: each runs on its own thread in a mix kernel (AIC and AIV of a block
// concurrently, as the cross-core flags need), so the state is thread_local.
struct State {
    std::vector<uint8_t> ub;
    std::vector<uint8_t> l1, l0a, l0b, l0c, bt;  // AIC memories (empty on the AIV)
    // Mmad's inputs: 1 per byte of L1/L0A/L0B that a copy or load wrote (ascendsched_cube.hpp)
    std::vector<uint8_t> l1_loaded, l0a_loaded, l0b_loaded;
    int64_t block = 0;
    int64_t block_num = 1;
    int64_t seq = 0;
    const char* core = "AIV";  // "AIV" | "AIC": the core type this program runs on
    int64_t sub = 0;      // GetSubBlockIdx(): which Vector core of its block (0 on the AIC)
    int64_t sub_num = 1;  // GetSubBlockNum(): 2 on an AIV of a KERNEL_TYPE_MIX_AIC_1_2 kernel
    std::string name = "AIV";  // the trace's core: AIC, AIV, or AIV0 / AIV1 of a 1:2 block
    uint64_t pipe_cursor = 0;  // TPipe::InitBuffer allocation cursor in UB (bytes)
    uint64_t cursors[kNumSpaces] = {0, 0, 0, 0, 0, 0};  // ... in the Cube memories
    std::map<std::pair<int, int32_t>, int> pending;  // (HardEvent, id) -> outstanding sets
    int tpipes = 0;  // TPipe objects alive and not destroyed (at most one, kernel_operator.h)
};

inline State& st() {
    thread_local State s;
    return s;
}

// Shared by every core program: the GM registry (written before the grid runs), the trace file
// and the cross-core flag counters (mode 2: per block, per receiving core, per flag id).
struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::FILE* trace = nullptr;
    std::vector<GmRegion> gm;
    std::map<std::tuple<int64_t, std::string, int>, int> cross;  // (block, to core, flag) -> count
    // (block, flag) -> sets of each AIV (by sub-block) the AIC's counter has not taken yet
    std::map<std::pair<int64_t, int>, std::vector<int>> aiv_sets;
    // (block, core) -> kRunning, kDone, or the flag id it waits on (>= 0)
    std::map<std::pair<int64_t, std::string>, int> state;
};
constexpr int kRunning = -1;
constexpr int kDone = -2;

inline Shared& shared() {
    static Shared s;
    return s;
}

[[noreturn]] inline void fail(const char* file, int line, const std::string& msg) {
    if (shared().trace) std::fflush(shared().trace);
    std::fprintf(stderr, "ascendsched CPU runtime: %s:%d: block %lld: %s\n", file, line,
                 static_cast<long long>(st().block), msg.c_str());
    std::fflush(stderr);
    std::abort();
}

inline void warn(const char* file, int line, const std::string& msg) {
    std::fprintf(stderr, "ascendsched CPU runtime warning: %s:%d: block %lld: %s\n", file, line,
                 static_cast<long long>(st().block), msg.c_str());
}

inline std::string S(long long v) { return std::to_string(v); }

// ----------------------------------------------------------------------------- UB access
inline void check_ub(const char* file, int line, const char* api, uint64_t lo, uint64_t bytes) {
    if (lo + bytes > kUbUsable) {
        fail(file, line, std::string(api) + ": UB access [" + S(lo) + ", " + S(lo + bytes) +
                             ") is outside the usable UB [0, " + S(kUbUsable) + ")");
    }
}

inline void check_align(const char* file, int line, const char* api, const char* operand,
                        uint64_t addr, uint64_t align) {
    if (addr % align != 0) {
        fail(file, line, std::string(api) + ": " + operand + " starts at UB address " + S(addr) +
                             ", which is not " + S(align) + "-byte aligned");
    }
}

inline bool is_aic() { return std::strcmp(st().core, "AIC") == 0; }

inline std::vector<uint8_t>& mem(uint8_t space) {
    State& s = st();
    switch (space) {
        case kL1: return s.l1;
        case kL0A: return s.l0a;
        case kL0B: return s.l0b;
        case kL0C: return s.l0c;
        case kBT: return s.bt;
        default: return s.ub;
    }
}

// Which bytes of L1/L0A/L0B were loaded (1) since the block started; empty for other spaces.
inline std::vector<uint8_t>& loaded(uint8_t space) {
    State& s = st();
    static thread_local std::vector<uint8_t> none;
    switch (space) {
        case kL1: return s.l1_loaded;
        case kL0A: return s.l0a_loaded;
        case kL0B: return s.l0b_loaded;
        default: none.clear(); return none;
    }
}

// Bounds of an access to a Cube memory: inside the usable part of that memory.
inline void check_space(const char* file, int line, const char* api, uint8_t space, uint64_t lo, uint64_t bytes) {
    const uint64_t usable = space_usable(space);
    if (lo + bytes > usable) {
        fail(file, line, std::string(api) + ": " + space_name(space) + " access [" + S(static_cast<long long>(lo)) +
                             ", " + S(static_cast<long long>(lo + bytes)) + ") is outside the usable " +
                             space_name(space) + " [0, " + S(static_cast<long long>(usable)) + ")");
    }
}

template <typename T>
inline T ub_load(uint64_t addr) {
    T v;
    std::memcpy(&v, st().ub.data() + addr, sizeof(T));
    return v;
}

template <typename T>
inline void ub_store(uint64_t addr, T v) {
    std::memcpy(st().ub.data() + addr, &v, sizeof(T));
}

// ----------------------------------------------------------------------------- GM registry
inline void register_gm(const std::string& name, const uint8_t* base, uint64_t bytes) {
    shared().gm.push_back(GmRegion{name, base, bytes});
}

inline Access gm_access(const char* file, int line, const void* ptr, uint64_t bytes) {
    const uint8_t* p = static_cast<const uint8_t*>(ptr);
    for (const GmRegion& r : shared().gm) {
        if (p >= r.base && p + bytes <= r.base + r.bytes) {
            uint64_t lo = static_cast<uint64_t>(p - r.base);
            return Access{"GM:" + r.name, lo, lo + bytes};
        }
    }
    fail(file, line, "GM access of " + S(static_cast<long long>(bytes)) +
                         " bytes outside every registered GM tensor");
}

// ----------------------------------------------------------------------------- trace
struct Record {
    const char* op = "";
    const char* pipe = "";
    std::vector<Access> reads;
    std::vector<Access> writes;
    const char* src = nullptr;
    const char* dst = nullptr;
    bool has_id = false;
    int32_t id = 0;
    bool has_flag = false;  // cross-core flag id
    int32_t flag = 0;
    std::string label;
};

inline std::vector<Access> coalesce(std::vector<Access> v) {
    std::sort(v.begin(), v.end(), [](const Access& a, const Access& b) {
        return a.space != b.space ? a.space < b.space : a.lo < b.lo;
    });
    std::vector<Access> out;
    for (const Access& a : v) {
        if (a.hi <= a.lo) continue;
        if (!out.empty() && out.back().space == a.space && a.lo <= out.back().hi) {
            out.back().hi = std::max(out.back().hi, a.hi);
        } else {
            out.push_back(a);
        }
    }
    return out;
}

inline std::string json_str(const std::string& s) {
    std::string o = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            o += ' ';
        } else {
            o += c;
        }
    }
    return o + "\"";
}

inline std::string json_accesses(const std::vector<Access>& v) {
    std::string o = "[";
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) o += ", ";
        o += "[" + json_str(v[i].space) + ", " + S(static_cast<long long>(v[i].lo)) + ", " +
             S(static_cast<long long>(v[i].hi)) + "]";
    }
    return o + "]";
}

inline void emit(Record r) {
    State& s = st();
    std::string line = "{\"block\": " + S(s.block) + ", \"core\": \"" + s.name + "\", \"seq\": " + S(s.seq) +
                       ", \"op\": " + json_str(r.op) + ", \"pipe\": " + json_str(r.pipe) +
                       ", \"reads\": " + json_accesses(coalesce(r.reads)) +
                       ", \"writes\": " + json_accesses(coalesce(r.writes)) +
                       ", \"src\": " + (r.src ? json_str(r.src) : "null") +
                       ", \"dst\": " + (r.dst ? json_str(r.dst) : "null") +
                       ", \"id\": " + (r.has_id ? S(r.id) : "null") +
                       ", \"flag\": " + (r.has_flag ? S(r.flag) : "null") +
                       ", \"label\": " + json_str(r.label) + "}\n";
    ++s.seq;
    Shared& sh = shared();
    std::lock_guard<std::mutex> lock(sh.mu);
    if (sh.trace) std::fputs(line.c_str(), sh.trace);
}

inline std::string label(const char* api, const char* file, int line) {
    std::string f(file);
    size_t slash = f.find_last_of('/');
    if (slash != std::string::npos) f = f.substr(slash + 1);
    return std::string(api) + " @ " + f + ":" + S(line);
}

// ----------------------------------------------------------------------------- launch
inline void open_trace(const char* path) {
    shared().trace = std::fopen(path, "w");
    if (!shared().trace) {
        std::fprintf(stderr, "ascendsched CPU runtime: cannot write trace %s\n", path);
        std::exit(2);
    }
}

// core: "AIV" (vector program: a fresh, poisoned UB) or "AIC" (Cube program: fresh L1, L0A,
// L0B, L0C and the bias table filled with 0xFF, which the hardware leaves undefined).
// sub / sub_num: the Vector core's GetSubBlockIdx() / GetSubBlockNum() (0 / 1 on the AIC).
inline void begin_block(int64_t block, int64_t block_num, const char* core = "AIV", int64_t sub = 0,
                        int64_t sub_num = 1) {
    State& s = st();
    s.block = block;
    s.block_num = block_num;
    s.seq = 0;
    s.core = core;
    s.sub = sub;
    s.sub_num = sub_num;
    s.name = std::string(core) + (sub_num > 1 ? S(sub) : "");
    s.pipe_cursor = 0;
    for (uint64_t& c : s.cursors) c = 0;
    s.pending.clear();
    s.tpipes = 0;
    const bool aic = std::strcmp(core, "AIC") == 0;
    s.ub.assign(aic ? 0 : kUbUsable, 0xCD);  // fresh UB per block, poisoned so unwritten data shows
    s.l1.assign(aic ? space_usable(kL1) : 0, 0xFF);
    s.l0a.assign(aic ? space_usable(kL0A) : 0, 0xFF);
    s.l0b.assign(aic ? space_usable(kL0B) : 0, 0xFF);
    s.l0c.assign(aic ? space_usable(kL0C) : 0, 0xFF);
    s.bt.assign(aic ? space_usable(kBT) : 0, 0xFF);
    s.l1_loaded.assign(s.l1.size(), 0);
    s.l0a_loaded.assign(s.l0a.size(), 0);
    s.l0b_loaded.assign(s.l0b.size(), 0);
}

inline void check_flags_drained();  // defined in kernel_operator.h (needs HardEvent names)

inline void end_block() {
    check_flags_drained();
    Shared& sh = shared();
    std::lock_guard<std::mutex> lock(sh.mu);
    sh.state[{st().block, st().name}] = kDone;
    sh.cv.notify_all();
}

// Runs block `block` of the grid: the program of every core type in `cores` ("AIC", "AIV"),
// the AIV's on `sub_num` Vector cores (2: KERNEL_TYPE_MIX_AIC_1_2), each with fresh memories;
// with several cores on as many threads, so that cross-core flags (CrossCoreSetFlag /
// CrossCoreWaitFlag, mode 2) pass between them and a wait really blocks its core.
template <typename F>
inline void run_block(int64_t block, int64_t block_num, std::initializer_list<const char*> cores,
                      int64_t sub_num, F kernel) {
    std::vector<std::pair<const char*, int64_t>> runs;  // (core type, sub-block)
    for (const char* c : cores) {
        const bool aiv = std::strcmp(c, "AIV") == 0;
        for (int64_t sub = 0; sub < (aiv ? sub_num : 1); ++sub) runs.emplace_back(c, sub);
    }
    {
        Shared& sh = shared();
        std::lock_guard<std::mutex> lock(sh.mu);
        for (const auto& r : runs) {
            const bool aiv = std::strcmp(r.first, "AIV") == 0;
            sh.state[{block, std::string(r.first) + (aiv && sub_num > 1 ? S(r.second) : "")}] = kRunning;
        }
    }
    auto one = [&](const char* core, int64_t sub) {
        begin_block(block, block_num, core, sub, std::strcmp(core, "AIV") == 0 ? sub_num : 1);
        kernel();
        end_block();
    };
    if (runs.size() == 1) {
        one(runs[0].first, runs[0].second);
        return;
    }
    std::vector<std::thread> threads;
    for (const auto& r : runs) threads.emplace_back(one, r.first, r.second);
    for (std::thread& t : threads) t.join();
}

template <typename F>
inline void run_block(int64_t block, int64_t block_num, std::initializer_list<const char*> cores, F kernel) {
    run_block(block, block_num, cores, 1, kernel);
}

// Cross-core flags, mode 2 (asc-devkit docs CrossCoreSetFlag(ISASI).md, 模式2 "在AIC核执行
// CrossCoreSetFlag之后，两个AIV上CrossCoreWaitFlag后续的指令才会继续执行；两个AIV都执行
// CrossCoreSetFlag后，AIC上CrossCoreWaitFlag后续的指令才能执行"; CrossCoreWaitFlag(ISASI).md): an
// AIC set increments the counter of flagId on each Vector core of its block; the AIC's counter
// is incremented once every Vector core of the block has set (with one AIV per block, on each
// set). A wait blocks its core while its counter is 0, then decrements it. A counter holds at
// most 15 (more is a hardware exception). A wait that no running core of the block can
// release is a deadlock.
inline void cross_set(const char* file, int line, int flag) {
    Shared& sh = shared();
    const int64_t block = st().block;
    std::unique_lock<std::mutex> lock(sh.mu);
    std::vector<std::string> to;
    if (is_aic()) {
        // the block's Vector cores: every AIV stream the grid registered for it
        for (const auto& kv : sh.state) {
            if (kv.first.first == block && kv.first.second != "AIC") to.push_back(kv.first.second);
        }
    } else {
        std::vector<int>& pend = sh.aiv_sets[{block, flag}];
        pend.resize(static_cast<size_t>(st().sub_num), 0);
        ++pend[static_cast<size_t>(st().sub)];
        for (int n : pend) {
            if (n == 0) {  // the other Vector core has not set yet: the AIC's counter waits
                sh.cv.notify_all();
                return;
            }
        }
        for (int& n : pend) --n;
        to.push_back("AIC");
    }
    for (const std::string& t : to) {
        int& c = sh.cross[{block, t, flag}];
        if (c >= 15) {
            lock.unlock();
            fail(file, line, "CrossCoreSetFlag(" + S(flag) + "): the " + t + " counter of flag " + S(flag) +
                                 " already holds 15 sets: one more raises a hardware exception");
        }
        ++c;
    }
    sh.cv.notify_all();
}

inline void cross_wait(const char* file, int line, int flag) {
    Shared& sh = shared();
    const int64_t block = st().block;
    const std::string me = st().name;
    std::unique_lock<std::mutex> lock(sh.mu);
    sh.state[{block, me}] = flag;
    while (sh.cross[{block, me, flag}] == 0) {
        bool can_progress = false;
        std::string others;
        for (const auto& kv : sh.state) {
            if (kv.first.first != block || kv.first.second == me) continue;
            const int w = kv.second;
            others += " " + kv.first.second + (w == kDone ? " finished" : w == kRunning ? " runs" :
                                               " waits on flag " + S(w));
            if (w == kRunning || (w >= 0 && sh.cross[{block, kv.first.second, w}] > 0)) can_progress = true;
        }
        if (!can_progress) {
            lock.unlock();
            fail(file, line, "CrossCoreWaitFlag(" + S(flag) + ") can never be released: cross-core deadlock (" +
                                 me + " waits;" + others + ")");
        }
        sh.cv.wait_for(lock, std::chrono::milliseconds(20));
    }
    --sh.cross[{block, me, flag}];
    sh.state[{block, me}] = kRunning;
    sh.cv.notify_all();
}

inline void close_trace() {
    if (shared().trace) std::fclose(shared().trace);
    shared().trace = nullptr;
}

}  // namespace ascendsched_rt
