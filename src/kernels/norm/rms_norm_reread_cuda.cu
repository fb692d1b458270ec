// Re-reading RMSNorm kernels (RMSNormRereadConfig): a row per block, all of pass 1's loads in
// flight at 32 registers, pass 2 from L1. The default on sm_90 for rows of exactly 512, 1024 or
// 2048 16-byte vectors (rms_norm_policy.cpp).
//
// They take the shape of torch.compile's kernels for rows of a static length, which keep 2 to 8
// loads in flight per thread at 22-32 registers and 4 blocks of 512 threads a multiprocessor
// (docs/perf/2026-12-01-h200-norm-flush-triton.md).
//
// A block of kThreads threads (fixed at compile time) takes one row at a time (grid stride).
// Thread t owns the vectors t, t + kThreads, ..., t + (kNV - 1) * kThreads of the row: their
// offsets from the thread's first vector are compile-time multiples of kThreads * 16 bytes, so
// one address register serves them all.
// - Pass 1 issues all of the thread's loads of x (fused: and of the residual) before their first
//   use, with an L1 and L2 evict_last priority, and sums the squares in fp32 (fused: of
//   T(x + residual), the value that pass 2 writes). It writes nothing and keeps nothing.
// - After the block reduction, pass 2 reads the same vectors again, with evict_first (from L1
//   while the rows of the resident blocks fit there, else from L2), and the weight (evict_last),
//   and stores y (fused: also the residual, T(x + residual)) plainly.
// A row is exactly kThreads * kNV vectors (rms_norm_config_refusal refuses other lengths for this
// kernel), so no access is predicated. Registers: at most 32 a thread (2048 / kThreads blocks a
// multiprocessor). y == x is allowed: each vector is read by the thread that writes it, before it
// writes it; the residual likewise.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/norm/rms_norm_kernels.cuh"

namespace tileops::cuda_kernels::rms {
namespace {

// Fused pass 1: the kNV vectors of x and of the residual (each kStepBytes apart), all with an L1
// and L2 evict_last priority `pol`, from one asm block, so that they are issued together:
// otherwise ptxas, short of registers at 32, converts the first pair before it issues the second.
template <int kNV, int kStepBytes>
__device__ __forceinline__ void load_fused_keep(uint4 (&v)[kNV], uint4 (&r)[kNV], const void* xs,
                                                const void* rs, uint64_t pol) {
  static_assert(kNV == 1 || kNV == 2, "a fused launch holds at most 2 vectors of each");
  if constexpr (kNV == 1) {
    asm volatile(
        "ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%8], %10;\n\t"
        "ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%4, %5, %6, %7}, [%9], %10;"
        : "=r"(v[0].x), "=r"(v[0].y), "=r"(v[0].z), "=r"(v[0].w), "=r"(r[0].x), "=r"(r[0].y),
          "=r"(r[0].z), "=r"(r[0].w)
        : "l"(xs), "l"(rs), "l"(pol));
  } else {
    asm volatile(
        "ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%16], %18;\n\t"
        "ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%4, %5, %6, %7}, [%17], %18;\n\t"
        "ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%8, %9, %10, %11}, [%16+%19], %18;\n\t"
        "ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%12, %13, %14, %15}, [%17+%19], %18;"
        : "=r"(v[0].x), "=r"(v[0].y), "=r"(v[0].z), "=r"(v[0].w), "=r"(r[0].x), "=r"(r[0].y),
          "=r"(r[0].z), "=r"(r[0].w), "=r"(v[1].x), "=r"(v[1].y), "=r"(v[1].z), "=r"(v[1].w),
          "=r"(r[1].x), "=r"(r[1].y), "=r"(r[1].z), "=r"(r[1].w)
        : "l"(xs), "l"(rs), "l"(pol), "n"(kStepBytes));
  }
}

// The 16-byte vectors are worked on one 32-bit word (2 elements of 16 bits, or 1 fp32) at a time,
// so that few registers hold fp32 values beside the vectors in flight.
template <typename T>
constexpr int kPerWord = 4 / static_cast<int>(sizeof(T));
template <typename T>
using Word = Raw<T, kPerWord<T>>;

__device__ __forceinline__ unsigned int word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ void set_word(uint4& v, int i, unsigned int w) {
  if (i == 0) v.x = w;
  if (i == 1) v.y = w;
  if (i == 2) v.z = w;
  if (i == 3) v.w = w;
}

// The word of T(x + residual) (fp32 sum, one rounding): the residual a fused launch writes.
template <typename T>
__device__ __forceinline__ Word<T> rounded_sum(Word<T> x, Word<T> r) {
  float a[kPerWord<T>];
  float b[kPerWord<T>];
  unpack<T, kPerWord<T>>(x, a);
  unpack<T, kPerWord<T>>(r, b);
#pragma unroll
  for (int e = 0; e < kPerWord<T>; ++e) a[e] += b[e];
  return pack<T, kPerWord<T>>(a);
}

// ss + the sum of the squares of the elements of word w.
template <typename T>
__device__ __forceinline__ float add_squares(Word<T> w, float ss) {
  float a[kPerWord<T>];
  unpack<T, kPerWord<T>>(w, a);
#pragma unroll
  for (int e = 0; e < kPerWord<T>; ++e) ss = fmaf(a[e], a[e], ss);
  return ss;
}

// The word of T(x * inv * g).
template <typename T>
__device__ __forceinline__ Word<T> scaled(Word<T> x, Word<T> g, float inv) {
  float a[kPerWord<T>];
  float b[kPerWord<T>];
  unpack<T, kPerWord<T>>(x, a);
  unpack<T, kPerWord<T>>(g, b);
#pragma unroll
  for (int e = 0; e < kPerWord<T>; ++e) a[e] = a[e] * inv * b[e];
  return pack<T, kPerWord<T>>(a);
}

template <typename T, int kThreads, int kNV, bool kFused>
__global__ void __launch_bounds__(kThreads, 2048 / kThreads)
    rms_norm_reread_kernel(const RMSNormParams p) {
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  constexpr int kStep = kThreads * VEC;  // elements between a thread's consecutive vectors
  using V = Raw<T, VEC>;
  __shared__ float red[2][32];

  const int lt = static_cast<int>(threadIdx.x);
  // One policy of each kind for the whole launch: uniform registers, not a thread's.
  const uint64_t keep = l2_evict_last_policy();
  const uint64_t drop = l2_evict_first_policy();

  int buf = 0;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x, buf ^= 1) {
    const T* const xs = static_cast<const T*>(p.x) + row * p.x_row_stride + lt * VEC;
    T* const rs =
        kFused ? static_cast<T*>(p.residual) + row * p.residual_row_stride + lt * VEC : nullptr;

    // Pass 1: every load in flight, then the sum of squares, one partial sum per vector.
    V v[kNV];
    V r[kFused ? kNV : 1];
    if constexpr (kFused) {
      load_fused_keep<kNV, kStep* static_cast<int>(sizeof(T))>(v, r, xs, rs, keep);
    } else {
#pragma unroll
      for (int k = 0; k < kNV; ++k)
        v[k] = load_l2_policy<L1Path::coherent_keep, T, VEC>(xs + k * kStep, keep);
    }
    float part[kNV];
#pragma unroll
    for (int k = 0; k < kNV; ++k) {
      part[k] = 0.f;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        Word<T> x = word_of(v[k], i);
        if constexpr (kFused) x = rounded_sum<T>(x, word_of(r[k], i));
        part[k] = add_squares<T>(x, part[k]);
      }
    }
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < kNV; ++k) ss += part[k];
    ss = group_sum(ss, kThreads, 0, red[buf]);
    const float inv = rsqrtf(ss * p.inv_cols + p.eps);

    // Pass 2: read again, one vector at a time (y may be x), and store.
    T* const ys = static_cast<T*>(p.y) + row * p.y_row_stride + lt * VEC;
    // The weight's address is made here, for each row, rather than held in two registers through
    // pass 1 (the empty asm keeps the compiler from hoisting it out of the row loop).
    const void* wbase = p.weight;
    asm volatile("" : "+l"(wbase));
    const T* const w = static_cast<const T*>(wbase) + lt * VEC;
#pragma unroll
    for (int k = 0; k < kNV; ++k) {
      V x = load_l2_policy<L1Path::coherent_drop, T, VEC>(xs + k * kStep, drop);
      if constexpr (kFused) {
        const V res = load_l2_policy<L1Path::coherent_drop, T, VEC>(rs + k * kStep, drop);
#pragma unroll
        for (int i = 0; i < 4; ++i) set_word(x, i, rounded_sum<T>(word_of(x, i), word_of(res, i)));
        store<T, VEC>(rs + k * kStep, x);
      }
      const V g = load_l2_policy<L1Path::coherent_keep, T, VEC>(w + k * kStep, keep);
#pragma unroll
      for (int i = 0; i < 4; ++i) set_word(x, i, scaled<T>(word_of(x, i), word_of(g, i), inv));
      store<T, VEC>(ys + k * kStep, x);
    }
  }
}

template <typename T, bool kFused, int kThreads>
KernelFn reread_kernel_of(int nv) {
  switch (nv) {
    case 1:
      return rms_norm_reread_kernel<T, kThreads, 1, kFused>;
    case 2:
      return rms_norm_reread_kernel<T, kThreads, 2, kFused>;
    case 4:
      // Fused, four vectors of x and of the residual would not fit 32 registers.
      if constexpr (!kFused) return rms_norm_reread_kernel<T, kThreads, 4, false>;
      return nullptr;
    default:
      return nullptr;
  }
}

template <typename T, bool kFused>
KernelFn reread_kernel_of(int threads, int nv) {
  switch (threads) {
    case 256:
      return reread_kernel_of<T, kFused, 256>(nv);
    case 512:
      return reread_kernel_of<T, kFused, 512>(nv);
    case 1024:
      return reread_kernel_of<T, kFused, 1024>(nv);
    default:
      return nullptr;
  }
}

template <typename T>
KernelFn reread_kernel_of(bool fused, int threads, int nv) {
  return fused ? reread_kernel_of<T, true>(threads, nv) : reread_kernel_of<T, false>(threads, nv);
}

}  // namespace

KernelFn reread_kernel(DType dtype, bool fused, int threads, int nv) {
  switch (dtype) {
    case DType::float32:
      return reread_kernel_of<float>(fused, threads, nv);
    case DType::float16:
      return reread_kernel_of<__half>(fused, threads, nv);
    case DType::bfloat16:
      return reread_kernel_of<__nv_bfloat16>(fused, threads, nv);
    default:
      return nullptr;
  }
}

}  // namespace tileops::cuda_kernels::rms
