// ascendsched CPU runtime: the device scalar types AscendC kernels use (half, bfloat16_t).
//
// half is IEEE 754 binary16 held as its 16-bit pattern; every conversion from float rounds to
// nearest, ties to even (the vector unit's default, AscendC RoundMode::CAST_RINT). Arithmetic
// on half values goes through float and rounds back on assignment, as the NPU's fp16 ALUs
// return correctly rounded fp16 results for + - * (float holds every fp16 product exactly).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ascendsched_rt {

inline uint16_t float_to_half_bits(float value) {
    // Round-to-nearest-even float -> binary16 (F. Giesen's float_to_half_fast3_rtne).
    uint32_t f;
    std::memcpy(&f, &value, 4);
    const uint32_t f32infty = 255u << 23;
    const uint32_t f16max = (127u + 16u) << 23;
    const uint32_t denorm_magic_u = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    float denorm_magic;
    std::memcpy(&denorm_magic, &denorm_magic_u, 4);
    const uint32_t sign = f & 0x80000000u;
    f ^= sign;
    uint16_t o;
    if (f >= f16max) {
        o = (f > f32infty) ? 0x7e00 : 0x7c00;  // NaN stays NaN, overflow -> inf
    } else if (f < (113u << 23)) {            // result is subnormal or zero
        float ff;
        std::memcpy(&ff, &f, 4);
        ff += denorm_magic;  // the FPU rounds to nearest even here
        uint32_t fu;
        std::memcpy(&fu, &ff, 4);
        o = static_cast<uint16_t>(fu - denorm_magic_u);
    } else {
        const uint32_t mant_odd = (f >> 13) & 1u;
        f += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu;
        f += mant_odd;
        o = static_cast<uint16_t>(f >> 13);
    }
    return static_cast<uint16_t>(o | (sign >> 16));
}

inline float half_bits_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    uint32_t f;
    if (exp == 0) {
        float v = std::ldexp(static_cast<float>(mant), -24);
        std::memcpy(&f, &v, 4);
        f |= sign;
    } else if (exp == 31) {
        f = sign | 0x7f800000u | (mant << 13);
    } else {
        f = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    float r;
    std::memcpy(&r, &f, 4);
    return r;
}

inline uint16_t float_to_bf16_bits(float value) {
    uint32_t x;
    std::memcpy(&x, &value, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>(x >> 16);
}

inline float bf16_bits_to_float(uint16_t b) {
    uint32_t x = static_cast<uint32_t>(b) << 16;
    float r;
    std::memcpy(&r, &x, 4);
    return r;
}

}  // namespace ascendsched_rt

struct half {
    uint16_t bits = 0;
    half() = default;
    half(float f) : bits(ascendsched_rt::float_to_half_bits(f)) {}
    half(double d) : half(static_cast<float>(d)) {}
    half(int v) : half(static_cast<float>(v)) {}
    operator float() const { return ascendsched_rt::half_bits_to_float(bits); }
    static half from_bits(uint16_t b) {
        half h;
        h.bits = b;
        return h;
    }
};

struct bfloat16_t {
    uint16_t bits = 0;
    bfloat16_t() = default;
    bfloat16_t(float f) : bits(ascendsched_rt::float_to_bf16_bits(f)) {}
    bfloat16_t(double d) : bfloat16_t(static_cast<float>(d)) {}
    bfloat16_t(int v) : bfloat16_t(static_cast<float>(v)) {}
    operator float() const { return ascendsched_rt::bf16_bits_to_float(bits); }
    static bfloat16_t from_bits(uint16_t b) {
        bfloat16_t h;
        h.bits = b;
        return h;
    }
};

static_assert(sizeof(half) == 2 && sizeof(bfloat16_t) == 2, "device scalar types are 16-bit");
