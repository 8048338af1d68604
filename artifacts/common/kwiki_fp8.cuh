// kwiki_fp8.cuh: fp8 (e4m3) quantization with amax scales, the device code an artifact shares when it quantizes bf16
// values: scale = amax / 448 over a group (a tensor, a row, a 1 x 128 group, a 128 x 128 block), codes =
// cvt.rn.satfinite.e4m3(v * (1 / scale)), and the decode. Used by fp8_quant_sm90a; artifacts that carry their own copy
// (rmsnorm_cuda_sm90a's per-token rung) move to it when their code next changes, since moving them restarts their
// series. Includes cuda_bf16.h and cuda_fp8.h only.
//
// The arithmetic is fixed so that a reference computing the same expressions gets the same bits: the amax is exact
// (a maximum of absolute values), the scale one fp32 division, its inverse one fp32 division, each code one fp32
// multiply and one rounding conversion (round to nearest even, saturating at +-448; NaN never occurs for finite
// inputs). There is no fused multiply-add to contract.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace kwiki {
namespace fp8 {

constexpr float kE4M3Max = 448.0f;  // the largest finite e4m3 value: a group's amax maps to it
constexpr float kMinAmax = 1e-12f;  // the amax of an all-zero group (its scale must not be 0)

// The scale of a group whose largest magnitude is `amax`: codes = value / scale reach +-448 at the amax.
__host__ __device__ inline float scale_of(float amax) { return (amax > kMinAmax ? amax : kMinAmax) / kE4M3Max; }

// A bf16 pair in a 32-bit word as two floats (a bf16 is the high half of a float): the low element, the high one.
__device__ __forceinline__ float lo_f(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_f(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// max(m, |v_i|) over the 8 bf16 of a 16-byte vector.
__device__ __forceinline__ float amax8(uint4 v, float m) {
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) m = fmaxf(m, fmaxf(fabsf(lo_f(u[i])), fabsf(hi_f(u[i]))));
    return m;
}

// Two values times inv as e4m3 codes in 16 bits (cvt.rn.satfinite.e4m3x2.f32: the first value in the low byte).
__device__ __forceinline__ uint32_t e4m3x2(float a, float b, float inv) {
    return uint32_t(__nv_cvt_float2_to_fp8x2(make_float2(a * inv, b * inv), __NV_SATFINITE, __NV_E4M3));
}

// The 8 bf16 of a 16-byte vector times inv as 8 e4m3 codes (8 bytes, element order kept).
__device__ __forceinline__ uint2 e4m3x8(uint4 v, float inv) {
    return {e4m3x2(lo_f(v.x), hi_f(v.x), inv) | (e4m3x2(lo_f(v.y), hi_f(v.y), inv) << 16),
            e4m3x2(lo_f(v.z), hi_f(v.z), inv) | (e4m3x2(lo_f(v.w), hi_f(v.w), inv) << 16)};
}

// One value times inv as an e4m3 code, on the host or the device (the same rounding as e4m3x2).
__host__ __device__ inline uint8_t e4m3(float v, float inv) {
    return uint8_t(__nv_cvt_float_to_fp8(v * inv, __NV_SATFINITE, __NV_E4M3));
}

// The value of an e4m3 code (NaN for 0x7F and 0xFF), on the host or the device.
__host__ __device__ inline float e4m3_value(uint8_t code) {
    __nv_fp8_e4m3 f;
    f.__x = code;
    return float(f);
}

}  // namespace fp8
}  // namespace kwiki
