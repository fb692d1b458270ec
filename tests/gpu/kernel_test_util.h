// Host helpers of the GPU tests of the CUDA kernels (test_norm_kernels.cpp, test_rope_kernels.cpp,
// test_moe_*_kernels.cpp): the skip without a device, CUDA call checks, host element conversions,
// raw host tensors, a seeded generator, device buffers, tolerances and names of the dtypes.
#pragma once

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tileops/core/dtype.h"

/// Skips the test when no CUDA device is found.
#define SKIP_WITHOUT_GPU()                                                           \
  do {                                                                               \
    if (!::tileops::kernel_test::have_gpu()) GTEST_SKIP() << "no CUDA device found"; \
  } while (0)

/// Asserts that a CUDA runtime call returns cudaSuccess, naming the call and the error.
#define CUDA_OK(expr)                                                          \
  do {                                                                         \
    const cudaError_t err_ = (expr);                                           \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_); \
  } while (0)

namespace tileops::kernel_test {

/// Whether the CUDA runtime reports at least one device.
inline bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// ---- host-side element conversions (round to nearest even) ----

/// The bits of a float.
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// The float of the given bits.
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// float -> bfloat16 bits, round to nearest even (NaN stays a quiet NaN).
inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// bfloat16 bits -> float (exact).
inline float bf16_to_f32(uint16_t h) {
  return bits_float(static_cast<uint32_t>(h) << 16);
}

/// float -> float16 bits, round to nearest even (subnormals, inf and NaN included).
inline uint16_t f32_to_f16(float f) {
  const uint32_t x = float_bits(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (a < 0x38800000u) {                                               // subnormal or zero
    const float scaled = bits_float(a) * 16777216.0f;                  // exact: units of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  const uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
}

/// float16 bits -> float (exact).
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);
    return sign ? -v : v;
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

/// A host tensor of `dtype` (float32, float16 or bfloat16) stored as raw bytes.
struct HostTensor {
  DType dtype = DType::float32;
  std::vector<unsigned char> bytes;

  HostTensor(DType d, size_t n) : dtype(d), bytes(n * tileops::element_size(d)) {}
  size_t size() const { return bytes.size() / tileops::element_size(dtype); }
  uint32_t bits(size_t i) const {
    if (dtype == DType::float32) {
      uint32_t u;
      std::memcpy(&u, &bytes[4 * i], 4);
      return u;
    }
    uint16_t h;
    std::memcpy(&h, &bytes[2 * i], 2);
    return h;
  }
  float get(size_t i) const {
    switch (dtype) {
      case DType::float32:
        return bits_float(bits(i));
      case DType::float16:
        return f16_to_f32(static_cast<uint16_t>(bits(i)));
      default:
        return bf16_to_f32(static_cast<uint16_t>(bits(i)));
    }
  }
  // Stores T(v) (one rounding from float).
  void set(size_t i, float v) {
    if (dtype == DType::float32) {
      std::memcpy(&bytes[4 * i], &v, 4);
      return;
    }
    const uint16_t h = dtype == DType::float16 ? f32_to_f16(v) : f32_to_bf16(v);
    std::memcpy(&bytes[2 * i], &h, 2);
  }
};

/// splitmix64 with fixed seeds (state starts at seed * golden + `bias`: 1 by default).
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed, uint64_t bias = 1) : state(seed * 0x9e3779b97f4a7c15ull + bias) {}
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi), never within 1e-3 of zero.
  float uniform(float lo, float hi) {
    const float u = static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
    float v = lo + (hi - lo) * u;
    if (std::fabs(v) < 1e-3f) v = 0.37f;
    return v;
  }
  // Uniform in [0, n) (modulo, n > 0).
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
};

/// Fills every element of `t` with rng.uniform(lo, hi), in order.
inline void fill_random(HostTensor& t, Rng& rng, float lo, float hi) {
  for (size_t i = 0; i < t.size(); ++i) t.set(i, rng.uniform(lo, hi));
}

/// cudaMalloc'd bytes (at least 16) freed on destruction; ptr is null when the allocation failed.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(std::max<size_t>(n, 16)) {
    if (cudaMalloc(&ptr, bytes) != cudaSuccess) ptr = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // The address `byte_offset` bytes into the buffer, as a U*.
  template <typename U = unsigned char>
  U* at(size_t byte_offset) const {
    return reinterpret_cast<U*>(static_cast<unsigned char*>(ptr) + byte_offset);
  }
};

/// Relative tolerance of the norm and rope kernel checks: 1e-5 (fp32), 1e-3 (fp16), 1.6e-2 (bf16).
inline double tolerance(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return 1e-5;
    case DType::float16:
      return 1e-3;
    default:
      return 1.6e-2;
  }
}

/// The name of a floating dtype for messages ("float32", "float16" or "bfloat16").
inline std::string dtype_str(DType d) {
  return d == DType::float32 ? "float32" : d == DType::float16 ? "float16" : "bfloat16";
}

}  // namespace tileops::kernel_test

#endif  // TILEOPS_WITH_CUDA
