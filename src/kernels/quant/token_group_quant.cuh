// Internal: the device arithmetic of per-token-group FP8 quantization (quant_cuda.h states the
// values), shared by the kernels that quantize. Include only from .cu files.
#pragma once

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "tileops/core/half.h"

namespace tileops::cuda_kernels::fp8_quant {

constexpr float kE4M3Max = 448.0f;
constexpr uint32_t kNaNScaleBits = 0x7fc00000u;
constexpr uint8_t kNaNCode = 0x7f;

/// max(m, a), NaN as soon as either is NaN (fmaxf would drop it).
__device__ __forceinline__ float max_nan(float m, float a) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(m), "f"(a));
  return r;
}

/// The scale of a group from its float32 amax: in double, rounded once (as the CPU does).
__device__ __forceinline__ float group_scale(float amax, double eps) {
  if (amax != amax) return __uint_as_float(kNaNScaleBits);
  return __double2float_rn(__ddiv_rn(fmax(static_cast<double>(amax), eps), 448.0));
}

/// Whether the hardware conversion serves the group: a finite positive scale means every x is
/// finite and every quotient finite, where cvt.rn.satfinite equals clamp-then-round.
__device__ __forceinline__ bool plain_scale(float scale) {
  return scale > 0.0f && scale < __uint_as_float(0x7f800000u);  // (0, inf), not NaN
}

/// One element exactly as the CPU implementation computes it (any scale, NaN and inf included).
__device__ __forceinline__ uint8_t quantize_exact(float x, float scale) {
  const float v = __fdiv_rn(x, scale);
  if (v != v) return kNaNCode;
  const float c = v > kE4M3Max ? kE4M3Max : (v < -kE4M3Max ? -kE4M3Max : v);
  return float_to_fp8e4m3(c);
}

/// Two elements of a group with a plain scale: the IEEE quotient, then one cvt (round to nearest
/// even, saturating to +-448). Returns the two codes, a's in the low byte.
__device__ __forceinline__ uint16_t quantize_pair(float a, float b, float scale) {
  return __nv_cvt_float2_to_fp8x2(make_float2(__fdiv_rn(a, scale), __fdiv_rn(b, scale)),
                                  __NV_SATFINITE, __NV_E4M3);
}

/// N (even) elements of one group to N codes packed little-endian into `out` words.
template <int N>
__device__ __forceinline__ void quantize_vector(const float (&f)[N], float scale,
                                                uint32_t (&out)[(N + 3) / 4]) {
  static_assert(N % 4 == 0);
  if (plain_scale(scale)) {
#pragma unroll
    for (int w = 0; w < N / 4; ++w) {
      const uint32_t lo = quantize_pair(f[4 * w], f[4 * w + 1], scale);
      const uint32_t hi = quantize_pair(f[4 * w + 2], f[4 * w + 3], scale);
      out[w] = lo | (hi << 16);
    }
  } else {
#pragma unroll
    for (int w = 0; w < N / 4; ++w) {
      uint32_t word = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        word |= static_cast<uint32_t>(quantize_exact(f[4 * w + i], scale)) << (8 * i);
      }
      out[w] = word;
    }
  }
}

}  // namespace tileops::cuda_kernels::fp8_quant
