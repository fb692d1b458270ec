// Internal: the vector helpers the CUDA kernels share. A vector of N elements of T travels as one
// raw word of N * sizeof(T) bytes (uint4, uint2, unsigned int or unsigned short) and is converted
// to and from fp32 word by word. Include only from .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace tileops::cuda_kernels::vec {

// fp32 <-> T for the element types of the kernels (float, __half, __nv_bfloat16), rounding to
// nearest even.
template <typename T>
__device__ __forceinline__ T round_to(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    static_assert(std::is_same_v<T, __half>);
    return __float2half_rn(v);
  }
}

template <typename T>
__device__ __forceinline__ float to_float(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    static_assert(std::is_same_v<T, __half>);
    return __half2float(v);
  }
}

template <int Bytes>
struct RawOf;
template <>
struct RawOf<16> {
  using type = uint4;
};
template <>
struct RawOf<8> {
  using type = uint2;
};
template <>
struct RawOf<4> {
  using type = unsigned int;
};
template <>
struct RawOf<2> {
  using type = unsigned short;
};

template <typename T, int N>
using Raw = typename RawOf<static_cast<int>(sizeof(T)) * N>::type;

// Read once: ld.global.cs (evict-first); a weak load, coherent for the thread (y may be x).
template <typename T, int N>
__device__ __forceinline__ Raw<T, N> load_once(const T* p) {
  return __ldcs(reinterpret_cast<const Raw<T, N>*>(p));
}

// Read-only for the whole kernel (ld.global.nc).
template <typename T, int N>
__device__ __forceinline__ Raw<T, N> load_nc(const T* p) {
  return __ldg(reinterpret_cast<const Raw<T, N>*>(p));
}

template <typename T, int N>
__device__ __forceinline__ void unpack(const Raw<T, N>& raw, float (&f)[N]) {
  constexpr int kBytes = static_cast<int>(sizeof(T)) * N;
  if constexpr (kBytes == 2) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      f[0] = __uint_as_float(static_cast<unsigned int>(raw) << 16);
    } else {
      f[0] = __half2float(__ushort_as_half(raw));
    }
  } else {
    constexpr int kWords = kBytes / 4;
    unsigned int w[kWords];
    __builtin_memcpy(w, &raw, kBytes);
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (std::is_same_v<T, float>) {
        f[i] = __uint_as_float(w[i]);
      } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
      } else {
        __half2 h;
        __builtin_memcpy(&h, &w[i], 4);
        const float2 t = __half22float2(h);
        f[2 * i] = t.x;
        f[2 * i + 1] = t.y;
      }
    }
  }
}

// Two fp32 values rounded to T (__nv_bfloat16 or __half, round to nearest even) as one 32-bit
// word, v0 in the low half: what a 32-bit store of a pair of T writes.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float v0, float v1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(v0, v1);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(v0, v1);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

// Rounds to T (round to nearest even) and packs.
template <typename T, int N>
__device__ __forceinline__ Raw<T, N> pack(const float (&f)[N]) {
  constexpr int kBytes = static_cast<int>(sizeof(T)) * N;
  if constexpr (kBytes == 2) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      return __bfloat16_as_ushort(__float2bfloat16_rn(f[0]));
    } else {
      return __half_as_ushort(__float2half_rn(f[0]));
    }
  } else {
    constexpr int kWords = kBytes / 4;
    unsigned int w[kWords];
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (std::is_same_v<T, float>) {
        w[i] = __float_as_uint(f[i]);
      } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        const __nv_bfloat162 t = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
        __builtin_memcpy(&w[i], &t, 4);
      } else {
        const __half2 t = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
        __builtin_memcpy(&w[i], &t, 4);
      }
    }
    Raw<T, N> raw;
    __builtin_memcpy(&raw, w, kBytes);
    return raw;
  }
}

}  // namespace tileops::cuda_kernels::vec
