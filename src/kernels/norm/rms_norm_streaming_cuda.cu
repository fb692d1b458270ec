// Two-pass streaming RMSNorm kernels, any row length: pass 1 accumulates the sum of squares (fused:
// and writes r = T(x + residual)), pass 2 re-reads the row (from L2) and writes y. The scalar
// path (VEC == 1) serves unaligned arguments; the high-occupancy variant is the fused default for
// many rows of 8 KB and more that the re-reading kernel does not take (rms_norm_policy.cpp).
//
// U: accesses in flight per thread and pass (8 scalar, 4 vectors). The high-occupancy kernels
// (16-byte vectors, U = 1 or 2) trade loads in flight for registers: their launch bounds ask for 4
// (U = 1: 32 registers) or 2 (U = 2) blocks of 512 threads a multiprocessor, so that latency is
// hidden by resident warps (with U = 4, 84-94 registers a thread allow one block of 512).
// HINT (high-occupancy kernels only, RMSNormHighOccupancyStreamingConfig::cache_hint 1, 2 or 3):
// what pass 2 re-reads is read (plain: x) or written (fused: the residual) in pass 1 with an L2
// evict_last policy, so that it stays in L2 until pass 2; what is read once (fused: x and the
// residual in pass 1; pass 2) is read with evict_first; with HINT 1 and 2 these accesses skip L1.
// HINT 1 stores y with st.global.cs; HINT 2 stores y plainly and reads the weight with evict_last
// (it is read again by every row). HINT 3 is HINT 2 with the loads allocating in L1 under the same
// priority as in L2, so that pass 2 can re-read a row from L1 while the rows of the resident
// blocks fit there: the policies of torch.compile's Triton kernels on sm_90.
#include "kernels/norm/rms_norm_kernels.cuh"

namespace tileops::cuda_kernels::rms {
namespace {

template <typename T, int VEC, bool kFused, int U, int HINT = 0>
__device__ __forceinline__ void streaming_rows(const RMSNormParams& p) {
  static_assert(HINT == 0 || VEC * sizeof(T) == 16, "hinted accesses are 16-byte vectors");
  using V = Raw<T, VEC>;
  __shared__ float red[2][32];

  const int tpr = p.tpr;
  const int group = static_cast<int>(threadIdx.x) / tpr;
  const int lt = static_cast<int>(threadIdx.x) - group * tpr;
  const int first_warp = (group * tpr) >> 5;
  const int cols = static_cast<int>(p.cols);
  const int nvec = cols / VEC;
  const int tail_col = nvec * VEC + lt;
  const bool has_tail = VEC > 1 && tail_col < cols;
  const T* __restrict__ w = static_cast<const T*>(p.weight);
  uint64_t keep = 0;
  uint64_t drop = 0;
  if constexpr (HINT != 0) {
    keep = l2_evict_last_policy();
    drop = l2_evict_first_policy();
  }
  // Pass 1's reads of x and of the residual (kept when pass 2 reads them again), and pass 2's.
  constexpr bool kL1 = HINT == 3;
  constexpr L1Path kKeepPath = kL1 ? L1Path::coherent_keep : L1Path::coherent_skip;
  constexpr L1Path kDropPath = kL1 ? L1Path::coherent_drop : L1Path::coherent_skip;
  constexpr bool kXAgain = !kFused;  // pass 2 re-reads x
  constexpr L1Path kXPath = kXAgain ? kKeepPath : kDropPath;
  const auto load_x = [&](const T* q) {
    if constexpr (HINT != 0) return load_l2_policy<kXPath, T, VEC>(q, kXAgain ? keep : drop);
    return load_global<T, VEC>(q);
  };
  const auto load_residual = [&](const T* q) {
    if constexpr (HINT != 0) return load_l2_policy<kDropPath, T, VEC>(q, drop);
    return load_global<T, VEC>(q);
  };
  const auto load_once_more = [&](const T* q) {
    if constexpr (HINT != 0) return load_l2_policy<kDropPath, T, VEC>(q, drop);
    return load_global<T, VEC>(q);
  };
  const auto load_weight = [&](const T* q) {
    if constexpr (HINT == 3) return load_l2_policy<L1Path::coherent_keep, T, VEC>(q, keep);
    if constexpr (HINT == 2) return load_l2_policy<L1Path::readonly, T, VEC>(q, keep);
    return load_nc<T, VEC>(q);
  };

  int buf = 0;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * p.rows_per_block; base < p.rows;
       base += static_cast<int64_t>(gridDim.x) * p.rows_per_block, buf ^= 1) {
    const int64_t row = base + group;
    const bool active = row < p.rows;
    const int64_t safe_row = active ? row : 0;
    const T* xr = static_cast<const T*>(p.x) + safe_row * p.x_row_stride;
    T* rr = kFused ? static_cast<T*>(p.residual) + safe_row * p.residual_row_stride : nullptr;
    float vt = 0.f;
    float ss = 0.f;
    if (active) {
      float acc[U];
#pragma unroll
      for (int u = 0; u < U; ++u) acc[u] = 0.f;
      for (int j0 = lt; j0 < nvec; j0 += U * tpr) {
        V v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int j = j0 + u * tpr;
          if (j < nvec) v[u] = load_x(xr + static_cast<int64_t>(j) * VEC);
        }
        if constexpr (kFused) {
          V rv[U];
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const int j = j0 + u * tpr;
            if (j < nvec) rv[u] = load_residual(rr + static_cast<int64_t>(j) * VEC);
          }
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const int j = j0 + u * tpr;
            if (j < nvec) {
              float a[VEC];
              float b[VEC];
              unpack<T, VEC>(v[u], a);
              unpack<T, VEC>(rv[u], b);
#pragma unroll
              for (int e = 0; e < VEC; ++e) a[e] += b[e];
              v[u] = pack<T, VEC>(a);
              if constexpr (HINT != 0) {
                store_l2_policy<T, VEC>(rr + static_cast<int64_t>(j) * VEC, v[u], keep);
              } else {
                store<T, VEC>(rr + static_cast<int64_t>(j) * VEC, v[u]);
              }
            }
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int j = j0 + u * tpr;
          if (j < nvec) {
            float f[VEC];
            unpack<T, VEC>(v[u], f);
#pragma unroll
            for (int e = 0; e < VEC; ++e) acc[u] = fmaf(f[e], f[e], acc[u]);
          }
        }
      }
      if (has_tail) {
        vt = scalar_global(xr + tail_col);
        if constexpr (kFused) {
          const T r = round_to<T>(vt + scalar_global(rr + tail_col));
          rr[tail_col] = r;
          vt = to_float(r);
        }
      }
      ss = vt * vt;
#pragma unroll
      for (int u = 0; u < U; ++u) ss += acc[u];
    }
    ss = group_sum(ss, tpr, first_warp, red[buf]);
    const float inv = rsqrtf(ss * p.inv_cols + p.eps);
    if (active) {
      // Pass 2 re-reads what this same thread read (x) or wrote (the residual) in pass 1.
      const T* src = kFused ? static_cast<const T*>(rr) : xr;
      T* yr = static_cast<T*>(p.y) + row * p.y_row_stride;
      for (int j0 = lt; j0 < nvec; j0 += U * tpr) {
        V v[U];
        V wk[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int j = j0 + u * tpr;
          if (j < nvec) {
            v[u] = load_once_more(src + static_cast<int64_t>(j) * VEC);
            wk[u] = load_weight(w + static_cast<int64_t>(j) * VEC);
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int j = j0 + u * tpr;
          if (j < nvec) {
            float f[VEC];
            float g[VEC];
            unpack<T, VEC>(v[u], f);
            unpack<T, VEC>(wk[u], g);
#pragma unroll
            for (int e = 0; e < VEC; ++e) f[e] = f[e] * inv * g[e];
            if constexpr (HINT == 1)
              __stcs(reinterpret_cast<uint4*>(yr + static_cast<int64_t>(j) * VEC), pack<T, VEC>(f));
            else
              store<T, VEC>(yr + static_cast<int64_t>(j) * VEC, pack<T, VEC>(f));
          }
        }
      }
      if (has_tail) yr[tail_col] = round_to<T>(vt * inv * scalar_nc(w + tail_col));
    }
  }
}

template <typename T, int VEC, bool kFused>
__global__ void __launch_bounds__(kStreamingMaxThreads)
    rms_norm_streaming_kernel(const RMSNormParams p) {
  streaming_rows<T, VEC, kFused, VEC == 1 ? 8 : 4>(p);
}

template <typename T, bool kFused, int U, int HINT>
__global__ void __launch_bounds__(kStreamingMaxThreads, U == 1 ? 4 : 2)
    rms_norm_high_occupancy_streaming_kernel(const RMSNormParams p) {
  streaming_rows<T, 16 / sizeof(T), kFused, U, HINT>(p);
}

template <typename T, bool kFused, int U>
KernelFn high_occupancy_kernel_of(int hint) {
  switch (hint) {
    case 0:
      return rms_norm_high_occupancy_streaming_kernel<T, kFused, U, 0>;
    case 1:
      return rms_norm_high_occupancy_streaming_kernel<T, kFused, U, 1>;
    case 2:
      return rms_norm_high_occupancy_streaming_kernel<T, kFused, U, 2>;
    case 3:
      return rms_norm_high_occupancy_streaming_kernel<T, kFused, U, 3>;
    default:
      return nullptr;
  }
}

template <typename T, bool kFused>
KernelFn high_occupancy_kernel_of(int vectors_in_flight, int hint) {
  if (vectors_in_flight == 1) return high_occupancy_kernel_of<T, kFused, 1>(hint);
  if (vectors_in_flight == 2) return high_occupancy_kernel_of<T, kFused, 2>(hint);
  return nullptr;
}

template <typename T>
KernelFn high_occupancy_kernel_of(bool fused, int vectors_in_flight, int hint) {
  return fused ? high_occupancy_kernel_of<T, true>(vectors_in_flight, hint)
               : high_occupancy_kernel_of<T, false>(vectors_in_flight, hint);
}

template <typename T>
KernelFn streaming_kernel_of(bool fused, bool vector) {
  constexpr int kVec = 16 / sizeof(T);
  if (vector)
    return fused ? rms_norm_streaming_kernel<T, kVec, true>
                 : rms_norm_streaming_kernel<T, kVec, false>;
  return fused ? rms_norm_streaming_kernel<T, 1, true> : rms_norm_streaming_kernel<T, 1, false>;
}

}  // namespace

KernelFn streaming_kernel(DType dtype, bool fused, bool vector) {
  switch (dtype) {
    case DType::float32:
      return streaming_kernel_of<float>(fused, vector);
    case DType::float16:
      return streaming_kernel_of<__half>(fused, vector);
    case DType::bfloat16:
      return streaming_kernel_of<__nv_bfloat16>(fused, vector);
    default:
      return nullptr;
  }
}

KernelFn high_occupancy_streaming_kernel(DType dtype, bool fused, int vectors_in_flight,
                                         int cache_hint) {
  switch (dtype) {
    case DType::float32:
      return high_occupancy_kernel_of<float>(fused, vectors_in_flight, cache_hint);
    case DType::float16:
      return high_occupancy_kernel_of<__half>(fused, vectors_in_flight, cache_hint);
    case DType::bfloat16:
      return high_occupancy_kernel_of<__nv_bfloat16>(fused, vectors_in_flight, cache_hint);
    default:
      return nullptr;
  }
}

}  // namespace tileops::cuda_kernels::rms
