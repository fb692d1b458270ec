// Internal: the device arithmetic of per-token-group FP8 quantization (quant_cuda.h states the
// values), shared by the kernels that quantize. Include only from .cu files.
//
// Two shortcuts keep the kernels memory-bound while the bits stay the CPU's (both checked
// exhaustively or on 4e8 samples on the host when they were written, and bit for bit against the
// CPU by tests/gpu/test_token_group_quant_kernels.cpp):
// - the scale float(max(double(amax), eps) / 448) is the float division amax / 448 when
//   double(amax) >= eps (the exact quotient's bits past float precision repeat with period 3, so
//   rounding it to double first never changes the float rounding), else float(eps / 448) made on
//   the host;
// - the quotient x / scale is q0 = x * y with y the correctly rounded 1 / scale, then two
//   residual corrections q += (x - scale * q) * y by FMA (Markstein: the second is correctly
//   rounded while the residual is exact, true for scale >= 2^-88 wherever the code is not +-0),
//   and the sign of x (for x = -0). Smaller, zero, infinite and NaN scales divide element by
//   element (__fdiv_rn), as the CPU does.
#pragma once

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "tileops/core/half.h"

namespace tileops::cuda_kernels::fp8_quant {

constexpr float kE4M3Max = 448.0f;
constexpr uint32_t kNaNScaleBits = 0x7fc00000u;
constexpr uint8_t kNaNCode = 0x7f;

/// What the scale needs of eps, made once on the host (token_group_quant_cuda.cu:
/// eps_terms): the smallest float amax with double(amax) >= eps, and float(eps / 448).
struct EpsTerms {
  float amax_floor;
  float eps_scale;
};

/// max(m, a), NaN as soon as either is NaN (fmaxf would drop it).
__device__ __forceinline__ float max_nan(float m, float a) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(m), "f"(a));
  return r;
}

/// The scale of a group from its float32 amax: float(max(double(amax), eps) / 448), the quiet
/// NaN for a NaN amax.
__device__ __forceinline__ float group_scale(float amax, EpsTerms eps) {
  if (amax != amax) return __uint_as_float(kNaNScaleBits);
  return amax >= eps.amax_floor ? __fdiv_rn(amax, kE4M3Max) : eps.eps_scale;
}

/// Whether a group takes the reciprocal path: a finite scale of at least 2^-88 (every x is then
/// finite and every quotient finite, so cvt.rn.satfinite equals clamp-then-round).
__device__ __forceinline__ bool plain_scale(float scale) {
  return scale >= 0x1p-88f && scale < __uint_as_float(0x7f800000u);
}

/// x / scale correctly rounded, for a plain scale and y = __frcp_rn(scale).
__device__ __forceinline__ float quotient(float x, float scale, float y) {
  const float q0 = __fmul_rn(x, y);
  const float q1 = __fmaf_rn(__fmaf_rn(-scale, q0, x), y, q0);
  const float q2 = __fmaf_rn(__fmaf_rn(-scale, q1, x), y, q1);
  return copysignf(q2, x);
}

/// One element exactly as the CPU implementation computes it (any scale, NaN and inf included).
__device__ __forceinline__ uint8_t quantize_exact(float x, float scale) {
  const float v = __fdiv_rn(x, scale);
  if (v != v) return kNaNCode;
  const float c = v > kE4M3Max ? kE4M3Max : (v < -kE4M3Max ? -kE4M3Max : v);
  return float_to_fp8e4m3(c);
}

/// Two quotients to two codes by one cvt (round to nearest even, saturating to +-448), a's in
/// the low byte.
__device__ __forceinline__ uint16_t convert_pair(float a, float b) {
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}

/// N (a multiple of 4) elements of one group to N codes packed little-endian into `out` words.
template <int N>
__device__ __forceinline__ void quantize_vector(const float (&f)[N], float scale,
                                                uint32_t (&out)[N / 4]) {
  static_assert(N % 4 == 0);
  if (plain_scale(scale)) {
    const float y = __frcp_rn(scale);
#pragma unroll
    for (int w = 0; w < N / 4; ++w) {
      const uint32_t lo =
          convert_pair(quotient(f[4 * w], scale, y), quotient(f[4 * w + 1], scale, y));
      const uint32_t hi =
          convert_pair(quotient(f[4 * w + 2], scale, y), quotient(f[4 * w + 3], scale, y));
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

// ---- host side ----------------------------------------------------------------------------

/// float(d) rounded to nearest even, inf past float's range (no undefined conversion).
inline float round_to_float(double d) {
  return d >= 0x1.ffffffp127 ? std::numeric_limits<float>::infinity() : static_cast<float>(d);
}

/// The EpsTerms of eps (> 0).
inline EpsTerms eps_terms(double eps) {
  EpsTerms t{};
  t.eps_scale = round_to_float(eps / 448.0);
  if (eps > std::numeric_limits<float>::max()) {
    t.amax_floor = std::numeric_limits<float>::infinity();
  } else {
    t.amax_floor = static_cast<float>(eps);
    if (static_cast<double>(t.amax_floor) < eps)
      t.amax_floor = std::nextafter(t.amax_floor, std::numeric_limits<float>::infinity());
  }
  return t;
}

/// How a group of `group_size` elements spreads over a warp with vectors of `vec` elements:
/// lanes (a power of two up to 32) times vecs (two where the group has them, four only where 32
/// lanes of two are too few). False (and vecs 0) when no layout fits.
inline bool vector_layout(int64_t group_size, int vec, int& lanes_log2, int& vecs) {
  vecs = 0;
  lanes_log2 = -1;
  if (group_size < 1 || group_size % vec != 0) return false;
  const int64_t n = group_size / vec;
  for (const int v : {2, 1, 4}) {
    const int64_t l = n / v;
    if (n % v == 0 && l >= 1 && l <= 32 && (l & (l - 1)) == 0) {
      vecs = v;
      lanes_log2 = __builtin_ctzll(static_cast<unsigned long long>(l));
      return true;
    }
  }
  return false;
}

}  // namespace tileops::cuda_kernels::fp8_quant
