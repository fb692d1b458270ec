// Internal: the device helpers and the launch parameters that the RMSNorm kernels share
// (the rms_norm_*_cuda.cu kernel families). Include only from .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/vectors.cuh"
#include "kernels/norm/rms_norm_cuda.h"

namespace tileops::cuda_kernels::rms {

// Vector loads and conversions: kernels/common/vectors.cuh.
using vec::load_nc;
using vec::load_once;
using vec::pack;
using vec::Raw;
using vec::round_to;
using vec::to_float;
using vec::unpack;

// Plain (weak, coherent for the thread) global load: y may alias x, a thread may re-read what it
// wrote.
template <typename T, int N>
__device__ __forceinline__ Raw<T, N> load_global(const T* p) {
  return *reinterpret_cast<const Raw<T, N>*>(p);
}

// Brings a line of the weight into L1 ahead of its use; no register is held.
__device__ __forceinline__ void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

// A plain store (a 16-byte vector: one STG.E.128; checked in the SASS of every instantiation).
template <typename T, int N>
__device__ __forceinline__ void store(T* p, const Raw<T, N>& v) {
  *reinterpret_cast<Raw<T, N>*>(p) = v;
}

template <typename T>
__device__ __forceinline__ float scalar_global(const T* p) {
  float f[1];
  unpack<T, 1>(load_global<T, 1>(p), f);
  return f[0];
}

template <typename T>
__device__ __forceinline__ float scalar_once(const T* p) {
  float f[1];
  unpack<T, 1>(load_once<T, 1>(p), f);
  return f[0];
}

template <typename T>
__device__ __forceinline__ float scalar_nc(const T* p) {
  float f[1];
  unpack<T, 1>(load_nc<T, 1>(p), f);
  return f[0];
}

// Sum of v over the tpr threads of one row group (tpr: 8, 16, 32 or a multiple of 32; groups are
// consecutive threads; first_warp: the group's first warp). Every thread of the block must call
// it (it may hold a barrier); every thread of a group gets the same value. `red` holds at least
// blockDim.x / 32 floats and must not be written again before the next barrier (the caller
// alternates two buffers).
__device__ __forceinline__ float group_sum(float v, int tpr, int first_warp, float* red) {
  if (tpr < 32) {
    for (int o = tpr >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (tpr == 32) return v;
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  const int warps_per_row = tpr >> 5;
  float s = 0.f;
  for (int i = 0; i < warps_per_row; ++i) s += red[first_warp + i];
  return s;
}

// What every kernel reads: the launch's arguments as given (cols < 2^31, checked at launch) and
// what the launch derives from its configuration.
struct RMSNormParams : RMSNormArgs {
  int tpr;  // threads per row
  int rows_per_block;
  float inv_cols;  // 1 / cols
};

// L2 cache policies (createpolicy) and the loads and stores that carry one.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t pol;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

__device__ __forceinline__ uint64_t l2_evict_last_policy() {
  uint64_t pol;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

// What a 16-byte load with an L2 cache policy does in L1.
enum class L1Path {
  coherent_skip,  // ld.global.L1::no_allocate: a thread may re-read what it wrote, y may alias x
  coherent_keep,  // ld.global.L1::evict_last: as coherent_skip, but kept in L1 for a re-read
  coherent_drop,  // ld.global.L1::evict_first: as coherent_skip, allocated in L1 but first to go
  readonly_skip,  // ld.global.nc.L1::no_allocate: data of the launch that nobody writes, read once
  readonly,       // ld.global.nc: data that nobody writes, read again by other rows (the weight)
};

#define TILEOPS_LD16_L2_POLICY(QUALIFIERS)                                                 \
  asm volatile("ld.global" QUALIFIERS ".L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;" \
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)                                \
               : "l"(p), "l"(pol))

// A 16-byte load whose L2 line gets the priority `pol` (a createpolicy result).
template <L1Path kPath, typename T, int VEC>
__device__ __forceinline__ Raw<T, VEC> load_l2_policy(const T* p, uint64_t pol) {
  static_assert(sizeof(Raw<T, VEC>) == 16);
  uint4 v;
  if constexpr (kPath == L1Path::coherent_skip) {
    TILEOPS_LD16_L2_POLICY(".L1::no_allocate");
  } else if constexpr (kPath == L1Path::coherent_keep) {
    TILEOPS_LD16_L2_POLICY(".L1::evict_last");
  } else if constexpr (kPath == L1Path::coherent_drop) {
    TILEOPS_LD16_L2_POLICY(".L1::evict_first");
  } else if constexpr (kPath == L1Path::readonly_skip) {
    TILEOPS_LD16_L2_POLICY(".nc.L1::no_allocate");
  } else {
    TILEOPS_LD16_L2_POLICY(".nc");
  }
  return v;
}

#undef TILEOPS_LD16_L2_POLICY

// A 16-byte store whose L2 line gets the priority `pol`; ordered before every later load.
template <typename T, int VEC>
__device__ __forceinline__ void store_l2_policy(T* p, const Raw<T, VEC>& v, uint64_t pol) {
  static_assert(sizeof(Raw<T, VEC>) == 16);
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p), "r"(v.x),
               "r"(v.y), "r"(v.z), "r"(v.w), "l"(pol)
               : "memory");
}

// The launch function of every RMSNorm kernel but the staged one.
using KernelFn = void (*)(RMSNormParams);

}  // namespace tileops::cuda_kernels::rms
