// CUDA kernels of RMSNorm and fused add+RMSNorm (see rms_norm_cuda.h for the semantics).
//
// Every kernel loops over groups of rows with a grid stride, accumulates in fp32 and reduces with
// warp shuffles and shared memory:
// - resident: each thread keeps NV 16-byte vectors of its row in registers (as packed T), so x
//   (and the residual) are read from device memory once; the last cols % VEC elements (the tail)
//   are one scalar per thread of the first threads of the row. Its variants (resident_v2: two
//   rows in flight, 2-block clusters, cache hints, 16 vectors) are tuning-space members.
// - streaming: any row length; pass 1 accumulates the sum of squares (and in fused mode writes
//   r = T(x + residual)), pass 2 re-reads the row (from L2) and writes y. With VEC == 1 this is
//   the scalar path taken when a pointer or a row stride is not 16-byte aligned. Its lean
//   variants (1 or 2 vectors in flight, few registers, optional L2 hints) are the fused default
//   for many rows of 8 KB and more that the re-reading kernel does not take.
// - staged (sm_90): a persistent block streams its rows through a ring of shared-memory stages
//   filled by 1D TMA bulk copies; the plain default for many rows of 16 KB and more that the
//   re-reading kernel does not take (see rms_norm_default_config), refused for unaligned
//   arguments (rms_norm_staged_refusal).
// - re-reading (rms_norm_reread_cuda.cu): a row per block, threads and vectors per thread fixed
//   at compile time, all of pass 1's loads in flight at 32 registers, pass 2 from L1; the default
//   on sm_90 for rows of exactly 512, 1024 or 2048 vectors (see rms_norm_default_config).
// A row is handled by threads_per_row threads (8, 16, 32 or a multiple of 32); a block holds
// threads / threads_per_row rows at once.
#include "kernels/norm/rms_norm_cuda.h"

#include "kernels/norm/rms_norm_device.cuh"
#include "kernels/norm/rms_norm_reread.cuh"

#include "kernels/cuda_mbarrier.cuh"
#include "kernels/cuda_vectors.cuh"

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>

#include "tileops/core/cuda.h"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {
namespace {

// Device helpers, cache policies, RmsParams and KernelFn: rms_norm_device.cuh.
using namespace rms;  // NOLINT(google-build-using-namespace): this file's own internals

// ---------------------------------------------------------------------------------------------
// Register-resident kernel: rows of up to tpr * NV vectors (+ a tail of < VEC elements).
// Register budget: 64 registers a thread (1024 threads) where the row slice and the weight fit
// in it; 128 (512 threads) for 8 vectors, or 4 vectors plus 4 of weight.
constexpr int resident_max_threads(int nv, bool weight_in_regs) {
  return nv >= 8 || (nv >= 4 && weight_in_regs) ? 512 : 1024;
}

template <typename T, int NV, bool kFused, bool kWeightInRegs>
__global__ void __launch_bounds__(resident_max_threads(NV, kWeightInRegs))
    rms_norm_resident_kernel(const RmsParams p) {
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  using V = Raw<T, VEC>;
  __shared__ float red[2][32];

  const int tpr = p.tpr;
  const int group = static_cast<int>(threadIdx.x) / tpr;
  const int lt = static_cast<int>(threadIdx.x) - group * tpr;
  const int first_warp = (group * tpr) >> 5;
  const int nvec = p.cols / VEC;
  const int tail_col = nvec * VEC + lt;
  const bool has_tail = tail_col < p.cols;  // lt < cols % VEC (tpr >= 8 >= VEC)
  const T* __restrict__ w = static_cast<const T*>(p.weight);

  V wv[kWeightInRegs ? NV : 1];
  float wt = 0.f;
  if constexpr (kWeightInRegs) {
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int j = lt + k * tpr;
      if (j < nvec) wv[k] = load_nc<T, VEC>(w + j * VEC);
    }
    if (has_tail) wt = scalar_nc(w + tail_col);
  } else {
    // Weight lines into L1 now, so that the first row's second phase does not wait on L2/DRAM.
    const char* wp = reinterpret_cast<const char*>(w + lt * VEC);
    int step = tpr * VEC * static_cast<int>(sizeof(T));
    asm volatile("" : "+l"(wp), "+r"(step));  // independent of the row loop's addressing
    const int count = min(NV, (nvec - lt + tpr - 1) / tpr);
    for (int k = 0; k < count; ++k, wp += step) prefetch_l1(wp);
  }

  int buf = 0;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * p.rows_per_block; base < p.rows;
       base += static_cast<int64_t>(gridDim.x) * p.rows_per_block, buf ^= 1) {
    const int64_t row = base + group;
    const bool active = row < p.rows;
    const T* wrow = w;
    asm volatile("" : "+l"(wrow));  // recomputed per row: no NV hoisted 64-bit addresses
    V v[NV];
    float vt = 0.f;
    float ss = 0.f;
    if (active) {
      const T* xr = static_cast<const T*>(p.x) + row * p.x_stride;
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int j = lt + k * tpr;
        if (j < nvec) v[k] = load_once<T, VEC>(xr + j * VEC);
      }
      if (has_tail) vt = scalar_once(xr + tail_col);
      if constexpr (kFused) {
        T* rr = static_cast<T*>(p.residual) + row * p.residual_stride;
        V rv[NV];
#pragma unroll
        for (int k = 0; k < NV; ++k) {
          const int j = lt + k * tpr;
          if (j < nvec) rv[k] = load_once<T, VEC>(rr + j * VEC);
        }
        float rt = 0.f;
        if (has_tail) rt = scalar_once(rr + tail_col);
#pragma unroll
        for (int k = 0; k < NV; ++k) {
          const int j = lt + k * tpr;
          if (j < nvec) {
            float a[VEC];
            float b[VEC];
            unpack<T, VEC>(v[k], a);
            unpack<T, VEC>(rv[k], b);
#pragma unroll
            for (int e = 0; e < VEC; ++e) a[e] += b[e];
            v[k] = pack<T, VEC>(a);
            store<T, VEC>(rr + j * VEC, v[k]);
          }
        }
        if (has_tail) {
          const T r = round_to<T>(vt + rt);
          rr[tail_col] = r;
          vt = to_float(r);
        }
      }
      float acc[NV];
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        acc[k] = 0.f;
        const int j = lt + k * tpr;
        if (j < nvec) {
          float f[VEC];
          unpack<T, VEC>(v[k], f);
#pragma unroll
          for (int e = 0; e < VEC; ++e) acc[k] = fmaf(f[e], f[e], acc[k]);
        }
      }
      ss = vt * vt;
#pragma unroll
      for (int k = 0; k < NV; ++k) ss += acc[k];
    }
    ss = group_sum(ss, tpr, first_warp, red[buf]);
    const float inv = rsqrtf(ss * p.inv_cols + p.eps);
    if (active) {
      T* yr = static_cast<T*>(p.y) + row * p.y_stride;
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int j = lt + k * tpr;
        if (j < nvec) {
          float f[VEC];
          float g[VEC];
          unpack<T, VEC>(v[k], f);
          if constexpr (kWeightInRegs) {
            unpack<T, VEC>(wv[k], g);
          } else {
            unpack<T, VEC>(load_nc<T, VEC>(wrow + j * VEC), g);  // L1 hit (prefetched)
          }
#pragma unroll
          for (int e = 0; e < VEC; ++e) f[e] = f[e] * inv * g[e];
          store<T, VEC>(yr + j * VEC, pack<T, VEC>(f));
        }
      }
      if (has_tail) {
        const float wtail = kWeightInRegs ? wt : scalar_nc(wrow + tail_col);
        yr[tail_col] = round_to<T>(vt * inv * wtail);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Register-resident kernel, variants (tuning-space members; the defaults use the kernel above):
// - PIPE == 2: software pipelining; each group keeps two rows in registers (buffers A and B, the
//   loop unrolled by two so that no register move waits on a load in flight) and issues the loads
//   of its next row before it reduces and stores the current one.
// - CL == 2: a row is split over the two blocks of a cluster (vector j of the row belongs to the
//   thread with cluster lane j % (2 * tpr)); each block's partial sum of squares is read by the
//   other one from its shared memory after a cluster barrier.
// - HINT: 0: x and the residual through ld.global.cs; 1: ld.global.nc.L1::no_allocate with an
//   L2 evict_first policy (every element is read once, before it is written, by the thread that
//   writes it, so the non-coherent path never sees a stale element even when y == x); 2: as 1,
//   and the vector stores of y and of the residual through st.global.cs.
// - NV up to 16 (a warp per row of 4096 bf16; the weight from L1).

// Registers of row data per thread (packed T), which bounds the block size.
constexpr int v2_data_regs(int nv, bool fused, bool weight_in_regs, int pipe) {
  return 4 * nv * (fused ? 2 : 1) * pipe + (weight_in_regs ? 4 * nv : 0);
}
constexpr int v2_max_threads(int nv, bool fused, bool weight_in_regs, int pipe) {
  return v2_data_regs(nv, fused, weight_in_regs, pipe) <= 24   ? 1024
         : v2_data_regs(nv, fused, weight_in_regs, pipe) <= 72 ? 512
                                                               : 256;
}

template <typename T, int VEC, int HINT>
__device__ __forceinline__ Raw<T, VEC> load_stream(const T* p, uint64_t pol) {
  static_assert(sizeof(Raw<T, VEC>) == 16);
  if constexpr (HINT == 0) {
    return load_once<T, VEC>(p);
  } else {
    return load_l2_policy<L1Path::readonly_skip, T, VEC>(p, pol);
  }
}

template <typename T, int VEC, int HINT>
__device__ __forceinline__ void store_stream(T* p, const Raw<T, VEC>& v) {
  if constexpr (HINT == 2) {
    __stcs(reinterpret_cast<uint4*>(p), v);
  } else {
    store<T, VEC>(p, v);
  }
}

template <typename T, int NV, bool kFused>
struct RowRegs {
  Raw<T, 16 / sizeof(T)> v[NV];
  Raw<T, 16 / sizeof(T)> r[kFused ? NV : 1];
  float vt;
  float rt;
};

template <typename T, int NV, bool kFused, bool kWeightInRegs, int PIPE, int CL, int HINT>
__global__ void __launch_bounds__(v2_max_threads(NV, kFused, kWeightInRegs, PIPE))
    rms_norm_resident_v2_kernel(const RmsParams p) {
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  using V = Raw<T, VEC>;
  using Regs = RowRegs<T, NV, kFused>;
  __shared__ float red[2][32];
  __shared__ float cl_part[2][32];  // CL == 2: this block's partial sum per buffer and group
  (void)cl_part;

  const int tpr = p.tpr;  // threads per row in this block
  const int group = static_cast<int>(threadIdx.x) / tpr;
  const int lt_block = static_cast<int>(threadIdx.x) - group * tpr;
  int rank = 0;
  if constexpr (CL == 2) rank = static_cast<int>(cooperative_groups::this_cluster().block_rank());
  const int lt = rank * tpr + lt_block;  // lane in the row (over the cluster)
  const int stride = CL * tpr;           // vectors between a thread's consecutive vectors
  const int first_warp = (group * tpr) >> 5;
  const int nvec = p.cols / VEC;
  const int tail_col = nvec * VEC + lt;
  const bool has_tail = tail_col < p.cols;  // rank 0 and lt < cols % VEC (tpr >= 8 >= VEC)
  const T* __restrict__ w = static_cast<const T*>(p.weight);
  const uint64_t pol = HINT != 0 ? l2_evict_first_policy() : 0;

  V wv[kWeightInRegs ? NV : 1];
  float wt = 0.f;
  if constexpr (kWeightInRegs) {
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int j = lt + k * stride;
      if (j < nvec) wv[k] = load_nc<T, VEC>(w + j * VEC);
    }
    if (has_tail) wt = scalar_nc(w + tail_col);
  } else {
    const char* wp = reinterpret_cast<const char*>(w + lt * VEC);
    int step = stride * VEC * static_cast<int>(sizeof(T));
    asm volatile("" : "+l"(wp), "+r"(step));
    const int count = min(NV, (nvec - lt + stride - 1) / stride);
    for (int k = 0; k < count; ++k, wp += step) prefetch_l1(wp);
  }

  // Issues the loads of `row` (nothing when row >= rows).
  const auto issue = [&](Regs& b, int64_t row) {
    if (row >= p.rows) return;
    const T* xr = static_cast<const T*>(p.x) + row * p.x_stride;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int j = lt + k * stride;
      if (j < nvec) b.v[k] = load_stream<T, VEC, HINT>(xr + j * VEC, pol);
    }
    b.vt = has_tail ? scalar_once(xr + tail_col) : 0.f;
    if constexpr (kFused) {
      const T* rr = static_cast<const T*>(p.residual) + row * p.residual_stride;
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int j = lt + k * stride;
        if (j < nvec) b.r[k] = load_stream<T, VEC, HINT>(rr + j * VEC, pol);
      }
      b.rt = has_tail ? scalar_once(rr + tail_col) : 0.f;
    }
  };

  // Adds the residual (fused), reduces and stores `row`; every thread of the block calls it.
  const auto finish = [&](Regs& b, int64_t row, int buf) {
    const bool active = row < p.rows;
    const T* wrow = w;
    asm volatile("" : "+l"(wrow));
    float ss = 0.f;
    if (active) {
      if constexpr (kFused) {
        T* rr = static_cast<T*>(p.residual) + row * p.residual_stride;
#pragma unroll
        for (int k = 0; k < NV; ++k) {
          const int j = lt + k * stride;
          if (j < nvec) {
            float a[VEC];
            float c[VEC];
            unpack<T, VEC>(b.v[k], a);
            unpack<T, VEC>(b.r[k], c);
#pragma unroll
            for (int e = 0; e < VEC; ++e) a[e] += c[e];
            b.v[k] = pack<T, VEC>(a);
            store_stream<T, VEC, HINT>(rr + j * VEC, b.v[k]);
          }
        }
        if (has_tail) {
          const T r = round_to<T>(b.vt + b.rt);
          rr[tail_col] = r;
          b.vt = to_float(r);
        }
      }
      float acc[NV];
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        acc[k] = 0.f;
        const int j = lt + k * stride;
        if (j < nvec) {
          float f[VEC];
          unpack<T, VEC>(b.v[k], f);
#pragma unroll
          for (int e = 0; e < VEC; ++e) acc[k] = fmaf(f[e], f[e], acc[k]);
        }
      }
      ss = has_tail ? b.vt * b.vt : 0.f;
#pragma unroll
      for (int k = 0; k < NV; ++k) ss += acc[k];
    }
    ss = group_sum(ss, tpr, first_warp, red[buf]);
    if constexpr (CL == 2) {
      // Written here, read by the other block after the barrier; written again two rows later,
      // after the next barrier, which the other block passes only once it has read this one.
      cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
      if (lt_block == 0) cl_part[buf][group] = ss;
      cluster.sync();
      ss += *cluster.map_shared_rank(&cl_part[buf][group], static_cast<unsigned>(rank ^ 1));
    }
    const float inv = rsqrtf(ss * p.inv_cols + p.eps);
    if (active) {
      T* yr = static_cast<T*>(p.y) + row * p.y_stride;
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int j = lt + k * stride;
        if (j < nvec) {
          float f[VEC];
          float g[VEC];
          unpack<T, VEC>(b.v[k], f);
          if constexpr (kWeightInRegs) {
            unpack<T, VEC>(wv[k], g);
          } else {
            unpack<T, VEC>(load_nc<T, VEC>(wrow + j * VEC), g);  // L1 hit (prefetched)
          }
#pragma unroll
          for (int e = 0; e < VEC; ++e) f[e] = f[e] * inv * g[e];
          store_stream<T, VEC, HINT>(yr + j * VEC, pack<T, VEC>(f));
        }
      }
      if (has_tail) {
        const float wtail = kWeightInRegs ? wt : scalar_nc(wrow + tail_col);
        yr[tail_col] = round_to<T>(b.vt * inv * wtail);
      }
    }
  };

  // Row groups: one per block, or per cluster (CL == 2: both blocks take the same rows).
  const int64_t unit = static_cast<int64_t>(blockIdx.x) / CL;
  const int64_t units = static_cast<int64_t>(gridDim.x) / CL;
  const int64_t step_rows = units * p.rows_per_block;
  int64_t base = unit * p.rows_per_block;
  Regs a;
  if constexpr (PIPE == 1) {
    for (int buf = 0; base < p.rows; base += step_rows, buf ^= 1) {
      issue(a, base + group);
      finish(a, base + group, buf);
    }
  } else {
    Regs b;
    issue(a, base + group);
    while (base < p.rows) {
      int64_t next = base + step_rows;
      issue(b, next + group);
      finish(a, base + group, 0);
      base = next;
      if (base >= p.rows) break;
      next = base + step_rows;
      issue(a, next + group);
      finish(b, base + group, 1);
      base = next;
    }
  }
  // No block of a cluster exits while the other may still read its shared memory.
  if constexpr (CL == 2) cooperative_groups::this_cluster().sync();
}

// ---------------------------------------------------------------------------------------------
// Streaming kernel: any row length; VEC == 1 is the scalar path (element-aligned pointers only).
// U: accesses in flight per thread and pass (8 scalar, 4 vectors). The lean variants (16-byte
// vectors, U = 1 or 2, RmsNormConfig::streaming_unroll) trade loads in flight for registers:
// their launch bounds ask for 4 (U = 1: 32 registers) or 2 (U = 2) blocks of 512 threads a
// multiprocessor, so that latency is hidden by resident warps (with U = 4, 84-94 registers a
// thread allow one block of 512).
// HINT (lean variants only, RmsNormConfig::cache_hint 1, 2 or 3): what pass 2 re-reads is read
// (plain: x) or written (fused: the residual) in pass 1 with an L2 evict_last policy, so that it
// stays in L2 until pass 2; what is read once (fused: x and the residual in pass 1; pass 2) is
// read with evict_first; with HINT 1 and 2 these accesses skip L1. HINT 1 stores y with
// st.global.cs; HINT 2 stores y plainly and reads the weight with evict_last (it is read again by
// every row). HINT 3 is HINT 2 with the loads allocating in L1 under the same priority as in L2
// (L1::evict_last for what pass 2 re-reads and for the weight, L1::evict_first for the rest), so
// that pass 2 can re-read a row from L1 while the rows of the resident blocks fit there; these
// are the policies of torch.compile's Triton kernels on sm_90.
// kRecompute (fused lean variants only, RmsNormConfig::fused_recompute): pass 1 reads x and the
// residual and writes nothing (but the scalar tail); pass 2 reads both again, adds them again (the
// same rounding) and writes the residual and y. With a HINT, pass 1 keeps both (evict_last) and
// pass 2 drops them (evict_first).
constexpr int kStreamingMaxThreads = 512;

template <typename T, int VEC, bool kFused, int U, int HINT = 0, bool kRecompute = false>
__device__ __forceinline__ void streaming_rows(const RmsParams& p) {
  static_assert(HINT == 0 || VEC * sizeof(T) == 16, "hinted accesses are 16-byte vectors");
  static_assert(!kRecompute || kFused, "recomputation is of the fused sum");
  using V = Raw<T, VEC>;
  __shared__ float red[2][32];

  const int tpr = p.tpr;
  const int group = static_cast<int>(threadIdx.x) / tpr;
  const int lt = static_cast<int>(threadIdx.x) - group * tpr;
  const int first_warp = (group * tpr) >> 5;
  const int nvec = p.cols / VEC;
  const int tail_col = nvec * VEC + lt;
  const bool has_tail = VEC > 1 && tail_col < p.cols;
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
  constexpr bool kXAgain = !kFused || kRecompute;  // pass 2 re-reads x
  constexpr L1Path kXPath = kXAgain ? kKeepPath : kDropPath;
  constexpr L1Path kResidualPath = kRecompute ? kKeepPath : kDropPath;
  const auto load_x = [&](const T* q) {
    if constexpr (HINT != 0) return load_l2_policy<kXPath, T, VEC>(q, kXAgain ? keep : drop);
    return load_global<T, VEC>(q);
  };
  const auto load_residual = [&](const T* q) {
    if constexpr (HINT != 0)
      return load_l2_policy<kResidualPath, T, VEC>(q, kRecompute ? keep : drop);
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
    const T* xr = static_cast<const T*>(p.x) + safe_row * p.x_stride;
    T* rr = kFused ? static_cast<T*>(p.residual) + safe_row * p.residual_stride : nullptr;
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
              if constexpr (kRecompute) {
                // written in pass 2
              } else if constexpr (HINT != 0) {
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
      // Pass 2 re-reads what this same thread read (x, and the residual when recomputing) or
      // wrote (the residual) in pass 1.
      const T* src = kFused && !kRecompute ? static_cast<const T*>(rr) : xr;
      T* yr = static_cast<T*>(p.y) + row * p.y_stride;
      for (int j0 = lt; j0 < nvec; j0 += U * tpr) {
        V v[U];
        V wk[U];
        V rv[kRecompute ? U : 1];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int j = j0 + u * tpr;
          if (j < nvec) {
            v[u] = load_once_more(src + static_cast<int64_t>(j) * VEC);
            if constexpr (kRecompute) rv[u] = load_once_more(rr + static_cast<int64_t>(j) * VEC);
            wk[u] = load_weight(w + static_cast<int64_t>(j) * VEC);
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int j = j0 + u * tpr;
          if (j < nvec) {
            float f[VEC];
            float g[VEC];
            if constexpr (kRecompute) {
              unpack<T, VEC>(v[u], f);
              unpack<T, VEC>(rv[u], g);
#pragma unroll
              for (int e = 0; e < VEC; ++e) f[e] += g[e];
              v[u] = pack<T, VEC>(f);
              store<T, VEC>(rr + static_cast<int64_t>(j) * VEC, v[u]);
            }
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
    rms_norm_streaming_kernel(const RmsParams p) {
  streaming_rows<T, VEC, kFused, VEC == 1 ? 8 : 4>(p);
}

template <typename T, bool kFused, int U, int HINT, bool kRecompute>
__global__ void __launch_bounds__(kStreamingMaxThreads, U == 1 ? 4 : 2)
    rms_norm_streaming_lean_kernel(const RmsParams p) {
  streaming_rows<T, 16 / sizeof(T), kFused, U, HINT, kRecompute>(p);
}

// ---------------------------------------------------------------------------------------------
// Staged kernel (RmsNormConfig::staged_rows = D >= 2, sm_90a): rows of a multiple of 16 bytes,
// every pointer and row stride 16-byte aligned (checked by rms_norm_staged_refusal: no scalar
// tail here; the op's kernel runs rms_norm_fallback_config on arguments it refuses).
//
// Each block of a persistent grid walks its rows (blockIdx.x, + gridDim.x, ...) one at a time,
// all its threads on one row. The rows wait in a ring of D shared-memory stages (x, then the
// residual when fused), each filled by 1D bulk copies (cp.async.bulk, the TMA engine) that thread
// 0 issues with mbarrier.arrive.expect_tx on the stage's "full" mbarrier; the weight is copied
// once, into its own slot, before the first row. Per row every thread:
//   1. waits on the stage's full barrier (phase parity flips each lap of the ring);
//   2. reads its 16-byte vectors of the stage (thread t: vectors t, t + threads, ...), fused adds
//      the residual and rounds to T (written back to global), and sums the squares in fp32;
//   3. reduces over the block: warp shuffles, one float per warp into red[row & 1], __syncthreads,
//      then every warp sums the warps' floats by shuffles (the same order in every warp);
//   4. reads the stage again (and the weight slot) and stores y with 16-byte st.global.
// No "empty" barriers: the __syncthreads of step 3 of row i is passed by every thread only after
// it finished row i - 1, so right after it thread 0 refills row i - 1's stage with row i - 1 + D.
// The same barrier protects red: red[i & 1] is rewritten at row i + 2, after the barrier of row
// i + 1, which no thread passes before it has read red[i & 1] at row i. The stages are only ever
// written by the async proxy and read by the generic one, so no proxy fence is needed (the
// refill of a stage follows the generic reads of it through the barrier, as in TMA pipelines).
// y == x is fine: row r of y is written only after its bulk copy completed (the full barrier).

// Shared memory of a block, in bytes from the base of the dynamic shared memory: the weight slot,
// D stages (x slot, then the residual slot when fused; slots are the row rounded to 128 bytes),
// D + 1 mbarriers (the stages' full barriers, then the weight's), 2 x 32 floats of reduction.
struct StagedLayout {
  uint32_t row_bytes;
  uint32_t slot_bytes;
  uint32_t stage_bytes;
  uint32_t stages;
  uint32_t stage_off;
  uint32_t bar_off;
  uint32_t red_off;
  uint32_t total;
};

// Shared memory a block of sm_90 can have (227 KB), that a multiprocessor has (228 KB), and that
// the runtime reserves per block (1 KB).
constexpr int64_t kSm90SmemPerBlock = 232448;
constexpr int64_t kSm90SmemPerSm = 233472;
constexpr int64_t kSmemReservedPerBlock = 1024;

constexpr int64_t staged_round_up(int64_t a, int64_t b) {
  return (a + b - 1) / b * b;
}

// The bytes of the layout (int64: no overflow for any row length the launch accepts).
constexpr int64_t staged_smem_bytes(int64_t row_bytes, int64_t stages, bool fused) {
  const int64_t slot = staged_round_up(row_bytes, 128);
  const int64_t bars = staged_round_up(8 * (stages + 1), 16);
  return slot + stages * slot * (fused ? 2 : 1) + bars + 2 * 32 * 4;
}

// Only for sizes that staged_smem_bytes says fit (well under 4 GB).
constexpr StagedLayout staged_layout(int64_t row_bytes, int64_t stages, bool fused) {
  StagedLayout l{};
  l.row_bytes = static_cast<uint32_t>(row_bytes);
  l.slot_bytes = static_cast<uint32_t>(staged_round_up(row_bytes, 128));
  l.stage_bytes = l.slot_bytes * (fused ? 2u : 1u);
  l.stages = static_cast<uint32_t>(stages);
  l.stage_off = l.slot_bytes;
  l.bar_off = l.stage_off + l.stages * l.stage_bytes;
  l.red_off = l.bar_off + static_cast<uint32_t>(staged_round_up(8 * (stages + 1), 16));
  l.total = l.red_off + 2 * 32 * 4;
  return l;
}
static_assert(staged_layout(8192, 27, false).total == staged_smem_bytes(8192, 27, false));

// The stage body and its PTX wrappers exist for the host pass and for sm_90a; any other device
// target (such as the compute_90a PTX also embedded) gets a trapping stub.
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TILEOPS_RMS_STAGED_BODY 1
#else
#define TILEOPS_RMS_STAGED_BODY 0
#endif

using mbarrier::smem_u32;

// A 16-byte st.global (st.global.wb.v4: the plain store; a cast store came out as 4 x 32 bits
// from this kernel's loops).
__device__ __forceinline__ void store16(void* p, const uint4& v) {
  __stwb(reinterpret_cast<uint4*>(p), v);
}

// Vector j of a staged row: x, or fused T(x + residual) (fp32 sum, one rounding), packed.
template <typename T, bool kFused>
__device__ __forceinline__ Raw<T, 16 / sizeof(T)> staged_vec(const unsigned char* stage,
                                                             uint32_t slot_bytes, int j) {
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  using V = Raw<T, VEC>;
  const V x = *reinterpret_cast<const V*>(stage + 16 * j);
  if constexpr (!kFused) {
    return x;
  } else {
    const V r = *reinterpret_cast<const V*>(stage + slot_bytes + 16 * j);
    float a[VEC];
    float b[VEC];
    unpack<T, VEC>(x, a);
    unpack<T, VEC>(r, b);
#pragma unroll
    for (int e = 0; e < VEC; ++e) a[e] += b[e];
    return pack<T, VEC>(a);
  }
}

// The sum over the block of every thread's v, in the same order for every thread (see above for
// when `red` may be reused). One barrier; `after_barrier` runs on every thread right after it.
template <typename F>
__device__ __forceinline__ float block_sum(float v, float* red, F&& after_barrier) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = static_cast<int>(threadIdx.x) & 31;
  if (lane == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  after_barrier();
  float s = lane < static_cast<int>(blockDim.x >> 5) ? red[lane] : 0.f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

// HINT 1 (RmsNormConfig::cache_hint 1): the rows are copied with an L2 evict_first policy (each
// is read once), the weight with evict_last.
template <typename T, bool kFused, int HINT>
__global__ void __launch_bounds__(1024)
    rms_norm_staged_kernel(const RmsParams p, const StagedLayout l) {
#if !TILEOPS_RMS_STAGED_BODY
  // Compiled for a target without the sm_90 features: never launched there (the host checks the
  // device's compute capability).
  __trap();
#else
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  using V = Raw<T, VEC>;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t base = smem_u32(smem);
  const uint32_t full_bar = base + l.bar_off;  // stage s: full_bar + 8 * s
  const uint32_t weight_bar = full_bar + 8 * l.stages;
  float* const red = reinterpret_cast<float*>(smem + l.red_off);
  const unsigned char* const wsm = smem;

  const int tid = static_cast<int>(threadIdx.x);
  const int nthreads = static_cast<int>(blockDim.x);
  const int nvec = static_cast<int>(l.row_bytes / 16);
  const int stages = static_cast<int>(l.stages);
  const int64_t first = blockIdx.x;
  const int64_t step = gridDim.x;
  const int64_t count = (p.rows - first + step - 1) / step;  // >= 1: the grid has <= rows blocks
  const auto* const x = static_cast<const unsigned char*>(p.x);
  const auto* const res = static_cast<const unsigned char*>(p.residual);
  const int64_t x_pitch = p.x_stride * static_cast<int64_t>(sizeof(T));
  const int64_t r_pitch = p.residual_stride * static_cast<int64_t>(sizeof(T));

  // Thread 0: copies the block's local row i into stage s.
  const auto fill = [&](int s, int64_t i) {
    const int64_t row = first + i * step;
    const uint32_t bar = full_bar + 8 * s;
    const uint32_t dst = base + l.stage_off + static_cast<uint32_t>(s) * l.stage_bytes;
    mbarrier::arrive_expect_tx(bar, kFused ? 2 * l.row_bytes : l.row_bytes);
    if constexpr (HINT != 0) {
      const uint64_t once = l2_evict_first_policy();
      mbarrier::bulk_load(dst, x + row * x_pitch, l.row_bytes, bar, once);
      if constexpr (kFused)
        mbarrier::bulk_load(dst + l.slot_bytes, res + row * r_pitch, l.row_bytes, bar, once);
    } else {
      mbarrier::bulk_load(dst, x + row * x_pitch, l.row_bytes, bar);
      if constexpr (kFused)
        mbarrier::bulk_load(dst + l.slot_bytes, res + row * r_pitch, l.row_bytes, bar);
    }
  };

  if (tid == 0) {
    for (int s = 0; s <= stages; ++s) mbarrier::init(full_bar + 8 * s, 1);  // s == stages: weight
    mbarrier::fence_init();
    mbarrier::arrive_expect_tx(weight_bar, l.row_bytes);
    if constexpr (HINT != 0)
      mbarrier::bulk_load(base, p.weight, l.row_bytes, weight_bar, l2_evict_last_policy());
    else
      mbarrier::bulk_load(base, p.weight, l.row_bytes, weight_bar);
    const int64_t ahead = count < stages ? count : stages;
    for (int64_t i = 0; i < ahead; ++i) fill(static_cast<int>(i), i);
  }
  __syncthreads();  // the barriers are initialized before anyone waits on them
  mbarrier::wait(weight_bar, 0);

  int s = 0;
  uint32_t parity = 0;
  int prev_s = stages - 1;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t row = first + i * step;
    const unsigned char* const st = smem + l.stage_off + static_cast<uint32_t>(s) * l.stage_bytes;
    mbarrier::wait(full_bar + 8 * s, parity);

    T* const rrow = kFused ? static_cast<T*>(p.residual) + row * p.residual_stride : nullptr;
    float ss = 0.f;
#pragma unroll 4
    for (int j = tid; j < nvec; j += nthreads) {
      const V v = staged_vec<T, kFused>(st, l.slot_bytes, j);
      if constexpr (kFused) store16(rrow + j * VEC, v);
      float f[VEC];
      unpack<T, VEC>(v, f);
#pragma unroll
      for (int e = 0; e < VEC; ++e) ss = fmaf(f[e], f[e], ss);
    }
    // Past the barrier every thread has finished row i - 1: its stage takes row i - 1 + D.
    const int64_t refill = i - 1 + stages;
    ss = block_sum(ss, red + 32 * (i & 1), [&] {
      if (tid == 0 && i >= 1 && refill < count) fill(prev_s, refill);
    });
    const float inv = rsqrtf(ss * p.inv_cols + p.eps);

    T* const yrow = static_cast<T*>(p.y) + row * p.y_stride;
#pragma unroll 4
    for (int j = tid; j < nvec; j += nthreads) {
      float f[VEC];
      float g[VEC];
      unpack<T, VEC>(staged_vec<T, kFused>(st, l.slot_bytes, j), f);
      unpack<T, VEC>(*reinterpret_cast<const V*>(wsm + 16 * j), g);
#pragma unroll
      for (int e = 0; e < VEC; ++e) f[e] = f[e] * inv * g[e];
      store16(yrow + j * VEC, pack<T, VEC>(f));
    }

    prev_s = s;
    if (++s == stages) {
      s = 0;
      parity ^= 1u;
    }
  }
#endif
}

// ---------------------------------------------------------------------------------------------
// Host side.

template <typename T, bool kFused>
KernelFn resident_kernel(int nv, bool weight_in_regs) {
  switch (nv * 2 + (weight_in_regs ? 1 : 0)) {
    case 2:
      return rms_norm_resident_kernel<T, 1, kFused, false>;
    case 3:
      return rms_norm_resident_kernel<T, 1, kFused, true>;
    case 4:
      return rms_norm_resident_kernel<T, 2, kFused, false>;
    case 5:
      return rms_norm_resident_kernel<T, 2, kFused, true>;
    case 8:
      return rms_norm_resident_kernel<T, 4, kFused, false>;
    case 9:
      return rms_norm_resident_kernel<T, 4, kFused, true>;
    case 16:
      return rms_norm_resident_kernel<T, 8, kFused, false>;
    default:
      return nullptr;
  }
}

// The kernel a launch runs: nv == 0 streaming (with `unroll` vectors in flight), else resident;
// the variant kernel when any of its features is asked for.
struct KernelKey {
  int nv = 0;
  bool weight_in_regs = false;
  int pipe = 1;
  int cluster = 1;
  int hint = 0;
  int unroll = 0;
  bool recompute = false;
  bool reread = false;
  bool variant() const { return nv == 16 || pipe != 1 || cluster != 1 || hint != 0; }
};

KernelKey kernel_key(const RmsNormConfig& c) {
  KernelKey k;
  k.nv = c.vecs_per_thread;
  k.weight_in_regs = c.weight_in_registers;
  k.pipe = c.rows_in_flight;
  k.cluster = c.cluster_size;
  k.hint = c.cache_hint;
  k.unroll = c.streaming_unroll;
  k.recompute = c.fused_recompute;
  k.reread = c.reread;
  return k;
}

// The instantiated variants (nv, weight in registers, rows in flight, cluster size, cache hint);
// the same for every dtype, plain and fused.
#define TILEOPS_RMS_VARIANTS(X) \
  X(4, true, 2, 1, 0)           \
  X(4, true, 2, 1, 1)           \
  X(4, true, 2, 1, 2)           \
  X(4, true, 1, 1, 1)           \
  X(4, true, 1, 1, 2)           \
  X(4, false, 2, 1, 0)          \
  X(8, false, 2, 1, 0)          \
  X(8, false, 2, 1, 1)          \
  X(8, false, 2, 1, 2)          \
  X(8, false, 1, 1, 1)          \
  X(8, false, 1, 1, 2)          \
  X(16, false, 1, 1, 0)         \
  X(16, false, 1, 1, 1)         \
  X(16, false, 1, 1, 2)         \
  X(4, true, 1, 2, 0)           \
  X(4, true, 2, 2, 0)           \
  X(8, false, 1, 2, 0)          \
  X(8, false, 2, 2, 0)

bool variant_exists(const KernelKey& k) {
#define TILEOPS_RMS_MATCH(NV, W, P, C, H)                                                  \
  if (k.nv == NV && k.weight_in_regs == W && k.pipe == P && k.cluster == C && k.hint == H) \
    return true;
  TILEOPS_RMS_VARIANTS(TILEOPS_RMS_MATCH)
#undef TILEOPS_RMS_MATCH
  return false;
}

template <typename T, bool kFused>
KernelFn variant_kernel(const KernelKey& k) {
#define TILEOPS_RMS_PICK(NV, W, P, C, H)                                                   \
  if (k.nv == NV && k.weight_in_regs == W && k.pipe == P && k.cluster == C && k.hint == H) \
    return rms_norm_resident_v2_kernel<T, NV, kFused, W, P, C, H>;
  TILEOPS_RMS_VARIANTS(TILEOPS_RMS_PICK)
#undef TILEOPS_RMS_PICK
  return nullptr;
}

template <typename T, bool kFused, bool kRecompute, int U>
KernelFn lean_kernel(int hint) {
  switch (hint) {
    case 0:
      return rms_norm_streaming_lean_kernel<T, kFused, U, 0, kRecompute>;
    case 1:
      return rms_norm_streaming_lean_kernel<T, kFused, U, 1, kRecompute>;
    case 2:
      return rms_norm_streaming_lean_kernel<T, kFused, U, 2, kRecompute>;
    case 3:
      return rms_norm_streaming_lean_kernel<T, kFused, U, 3, kRecompute>;
    default:
      return nullptr;
  }
}

template <typename T, bool kFused, bool kRecompute>
KernelFn lean_kernel(int unroll, int hint) {
  if (unroll == 1) return lean_kernel<T, kFused, kRecompute, 1>(hint);
  if (unroll == 2) return lean_kernel<T, kFused, kRecompute, 2>(hint);
  return nullptr;
}

// The 16-byte streaming kernel: a lean one for streaming_unroll 1 or 2 (recomputing the fused sum
// in pass 2 when asked; launch_rms_norm refuses that for plain launches), else the default one.
template <typename T, bool kFused>
KernelFn streaming_kernel(const KernelKey& k) {
  if (k.unroll == 1 || k.unroll == 2) {
    if constexpr (kFused) {
      if (k.recompute) return lean_kernel<T, true, true>(k.unroll, k.hint);
    }
    return k.recompute ? nullptr : lean_kernel<T, kFused, false>(k.unroll, k.hint);
  }
  return rms_norm_streaming_kernel<T, 16 / sizeof(T), kFused>;
}

template <typename T, bool kFused>
KernelFn pick_kernel(bool vector_path, const KernelKey& k) {
  if (!vector_path) return rms_norm_streaming_kernel<T, 1, kFused>;
  if (k.nv == 0) return streaming_kernel<T, kFused>(k);
  if (k.variant()) return variant_kernel<T, kFused>(k);
  return resident_kernel<T, kFused>(k.nv, k.weight_in_regs);
}

template <typename T>
KernelFn pick_kernel(bool fused, bool vector_path, const KernelKey& k) {
  return fused ? pick_kernel<T, true>(vector_path, k) : pick_kernel<T, false>(vector_path, k);
}

KernelFn pick_kernel(DType dtype, bool fused, bool vector_path, const KernelKey& k) {
  switch (dtype) {
    case DType::float32:
      return pick_kernel<float>(fused, vector_path, k);
    case DType::float16:
      return pick_kernel<__half>(fused, vector_path, k);
    case DType::bfloat16:
      return pick_kernel<__nv_bfloat16>(fused, vector_path, k);
    default:
      return nullptr;
  }
}

// The block size bound of a kernel; for the variants, that of the fused instantiation (the
// tuning space serves plain and fused launches alike).
int kernel_max_threads(const KernelKey& k) {
  if (k.nv == 0) return kStreamingMaxThreads;
  if (k.reread) return 1024;
  if (k.variant()) return v2_max_threads(k.nv, true, k.weight_in_regs, k.pipe);
  return resident_max_threads(k.nv, k.weight_in_regs);
}

[[noreturn]] void throw_cuda(cudaError_t err, const char* what) {
  throw UsageError(std::string("rms_norm (CUDA): ") + what + ": " + cudaGetErrorName(err) + ": " +
                   cudaGetErrorString(err));
}

// The multiprocessor count, from the properties read once per device.
int sm_count(int device) {
  return cuda_device_properties(device).sm_count;
}

int max_blocks_per_sm(KernelFn fn, int threads, int device) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, int>, int> cache;
  const auto key = std::make_tuple(reinterpret_cast<const void*>(fn), threads, device);
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  int blocks = 0;
  const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, threads, 0);
  if (err != cudaSuccess) throw_cuda(err, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  std::lock_guard<std::mutex> lock(mutex);
  cache[key] = blocks;
  return blocks;
}

using StagedFn = void (*)(RmsParams, StagedLayout);

template <typename T>
StagedFn staged_kernel(bool fused, int hint) {
  if (hint != 0)
    return fused ? rms_norm_staged_kernel<T, true, 1> : rms_norm_staged_kernel<T, false, 1>;
  return fused ? rms_norm_staged_kernel<T, true, 0> : rms_norm_staged_kernel<T, false, 0>;
}

StagedFn staged_kernel(DType dtype, bool fused, int hint) {
  switch (dtype) {
    case DType::float32:
      return staged_kernel<float>(fused, hint);
    case DType::float16:
      return staged_kernel<__half>(fused, hint);
    case DType::bfloat16:
      return staged_kernel<__nv_bfloat16>(fused, hint);
    default:
      return nullptr;
  }
}

// Lets `fn` take up to `optin` bytes of dynamic shared memory on `device` (once per kernel and
// device: one limit for every launch, whatever its stages), and returns how many of its blocks of
// `threads` threads and `smem_bytes` bytes fit a multiprocessor.
int staged_prepare(StagedFn fn, int threads, int smem_bytes, int optin, int device) {
  static std::mutex mutex;
  static std::set<std::tuple<const void*, int>> allowed;
  static std::map<std::tuple<const void*, int, int, int>, int> cache;
  const void* const key_fn = reinterpret_cast<const void*>(fn);
  std::lock_guard<std::mutex> lock(mutex);
  if (allowed.insert(std::make_tuple(key_fn, device)).second) {
    const cudaError_t err =
        cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
    if (err != cudaSuccess) {
      allowed.erase(std::make_tuple(key_fn, device));
      throw_cuda(err, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
    }
  }
  const auto key = std::make_tuple(key_fn, threads, smem_bytes, device);
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  int blocks = 0;
  const cudaError_t err =
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, threads, smem_bytes);
  if (err != cudaSuccess) throw_cuda(err, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  cache[key] = blocks;
  return blocks;
}

bool supported_dtype(DType dtype) {
  return dtype == DType::float32 || dtype == DType::float16 || dtype == DType::bfloat16;
}

void check_dtype(DType dtype) {
  if (!supported_dtype(dtype))
    throw SignatureError("rms_norm (CUDA): dtype must be float32, float16 or bfloat16, got " +
                         std::string(dtype_name(dtype)));
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}

int vec_elems(DType dtype) {
  return 16 / static_cast<int>(element_size(dtype));
}

// The smallest threads_per_row (a multiple of 32, at most max_tpr) whose threads hold nvec
// vectors with nv vectors each; 0 if there is none.
int resident_tpr(int64_t nvec, int nv, int max_tpr) {
  const int64_t tpr = std::max<int64_t>(32, round_up(ceil_div(nvec, nv), 32));
  return tpr <= max_tpr ? static_cast<int>(tpr) : 0;
}

// check_config for staged_rows != 0 (the shared-memory fit of a fused launch, the pointers and
// the device are checked at launch).
std::string check_staged_config(const RmsNormConfig& c, DType dtype, int64_t cols) {
  const int64_t es = static_cast<int64_t>(element_size(dtype));
  if (c.staged_rows < 2) return "staged_rows must be 0 (off) or at least 2";
  if (c.threads < 32 || c.threads > 1024 || c.threads % 32 != 0)
    return "threads must be a multiple of 32 in [32, 1024]";
  if (c.rows_per_block != 1) return "the staged kernel takes rows_per_block 1";
  if (c.vec_bytes != 16) return "the staged kernel takes vec_bytes 16";
  if (c.vecs_per_thread != 0 || c.weight_in_registers || c.rows_in_flight != 1 ||
      c.cluster_size != 1 || (c.cache_hint != 0 && c.cache_hint != 1) || c.streaming_unroll != 0 ||
      c.fused_recompute || c.reread)
    return "the staged kernel takes vecs_per_thread 0, weight_in_registers false, rows_in_flight "
           "1, cluster_size 1, cache_hint 0 or 1, streaming_unroll 0, fused_recompute false and "
           "reread false";
  if (c.grid != RmsGrid::persistent && c.grid != RmsGrid::balanced)
    return "the staged kernel takes grid persistent or balanced (a block per row stages nothing)";
  if (c.blocks_per_sm < 0) return "blocks_per_sm must be >= 0";
  if (cols * es % 16 != 0)
    return "the staged kernel needs rows of a multiple of 16 bytes, not " +
           std::to_string(cols * es);
  if (const int64_t need = staged_smem_bytes(cols * es, c.staged_rows, false);
      need > kSm90SmemPerBlock)
    return "the weight and " + std::to_string(c.staged_rows) + " stages of " +
           std::to_string(cols * es) + " bytes need " + std::to_string(need) +
           " bytes of shared memory, a block has at most " + std::to_string(kSm90SmemPerBlock);
  return {};
}

// Empty when the configuration serves rows of `cols` elements of `dtype`, else why not.
std::string check_config(const RmsNormConfig& c, DType dtype, int64_t cols) {
  if (c.staged_rows != 0) return check_staged_config(c, dtype, cols);
  const int es = static_cast<int>(element_size(dtype));
  if (c.threads < 32 || c.threads > 1024 || c.threads % 32 != 0)
    return "threads must be a multiple of 32 in [32, 1024]";
  if (c.rows_per_block < 1 || c.threads % c.rows_per_block != 0)
    return "rows_per_block must divide threads";
  const int tpr = c.threads / c.rows_per_block;
  if (!(tpr == 8 || tpr == 16 || tpr % 32 == 0))
    return "threads / rows_per_block must be 8, 16 or a multiple of 32";
  if (c.vec_bytes != 16 && c.vec_bytes != es) return "vec_bytes must be 16 or the element size";
  const int nv = c.vecs_per_thread;
  if (!(nv == 0 || nv == 1 || nv == 2 || nv == 4 || nv == 8 || nv == 16))
    return "vecs_per_thread must be 0, 1, 2, 4, 8 or 16";
  if (c.grid != RmsGrid::persistent && c.grid != RmsGrid::balanced && c.grid != RmsGrid::all)
    return "grid must be persistent, balanced or all";
  if (c.rows_in_flight != 1 && c.rows_in_flight != 2) return "rows_in_flight must be 1 or 2";
  if (c.cluster_size != 1 && c.cluster_size != 2) return "cluster_size must be 1 or 2";
  if (c.cache_hint < 0 || c.cache_hint > 3) return "cache_hint must be 0, 1, 2 or 3";
  if (c.reread) {
    if (!(nv == 1 || nv == 2 || nv == 4) || c.rows_per_block != 1 || c.vec_bytes != 16 ||
        !(c.threads == 256 || c.threads == 512 || c.threads == 1024) || c.weight_in_registers ||
        c.rows_in_flight != 1 || c.cluster_size != 1 || c.cache_hint != 0 ||
        c.streaming_unroll != 0 || c.fused_recompute)
      return "reread takes vecs_per_thread 1, 2 or 4, rows_per_block 1, vec_bytes 16, threads 256, "
             "512 or 1024, and weight_in_registers false, rows_in_flight 1, cluster_size 1, "
             "cache_hint 0, streaming_unroll 0 and fused_recompute false";
    if (cols != static_cast<int64_t>(c.threads) * nv * (16 / es))
      return "reread needs rows of exactly threads x vecs_per_thread 16-byte vectors (" +
             std::to_string(static_cast<int64_t>(c.threads) * nv * (16 / es)) + " elements)";
  }
  if (c.cache_hint == 3 && c.streaming_unroll != 1 && c.streaming_unroll != 2)
    return "cache_hint 3 needs a lean streaming kernel (streaming_unroll 1 or 2)";
  if (!(c.streaming_unroll == 0 || c.streaming_unroll == 1 || c.streaming_unroll == 2 ||
        c.streaming_unroll == 4))
    return "streaming_unroll must be 0, 1, 2 or 4";
  if (c.streaming_unroll != 0 && (nv != 0 || c.vec_bytes != 16))
    return "streaming_unroll needs the streaming kernel with 16-byte vectors (vecs_per_thread 0, "
           "vec_bytes 16)";
  if (nv == 0 && (c.rows_in_flight != 1 || c.cluster_size != 1))
    return "rows_in_flight and cluster_size need a register-resident kernel";
  if (nv == 0 && c.cache_hint != 0 && c.streaming_unroll != 1 && c.streaming_unroll != 2)
    return "cache_hint on the streaming kernel needs streaming_unroll 1 or 2";
  if (c.fused_recompute && c.streaming_unroll != 1 && c.streaming_unroll != 2)
    return "fused_recompute needs streaming_unroll 1 or 2";
  const KernelKey key = kernel_key(c);
  if (c.vec_bytes != 16 && (nv != 0 || c.weight_in_registers || key.variant()))
    return "the scalar path (vec_bytes == element size) is streaming only (vecs_per_thread 0)";
  if (nv != 0 && key.variant() && !variant_exists(key))
    return "no kernel variant for vecs_per_thread=" + std::to_string(nv) +
           ",weight_in_registers=" + (c.weight_in_registers ? "true" : "false") +
           ",rows_in_flight=" + std::to_string(c.rows_in_flight) +
           ",cluster_size=" + std::to_string(c.cluster_size) +
           ",cache_hint=" + std::to_string(c.cache_hint);
  if (c.weight_in_registers && (nv == 0 || (!key.variant() && nv == 8)))
    return "weight_in_registers needs vecs_per_thread 1, 2 or 4";
  if (c.cluster_size > 1 && tpr % 32 != 0)
    return "a row split over a cluster needs threads / rows_per_block a multiple of 32";
  if (c.threads > kernel_max_threads(key))
    return "at most " + std::to_string(kernel_max_threads(key)) + " threads with this kernel";
  if (c.blocks_per_sm < 0) return "blocks_per_sm must be >= 0";
  if (nv > 0 && cols / (16 / es) > static_cast<int64_t>(tpr) * nv * c.cluster_size)
    return "the row does not fit " + std::to_string(c.cluster_size) + " x " + std::to_string(tpr) +
           " threads x " + std::to_string(nv) + " vectors";
  return {};
}

RmsNormConfig make_config(int threads, int rows_per_block, int nv, bool weight_in_regs) {
  RmsNormConfig c;
  c.threads = threads;
  c.rows_per_block = rows_per_block;
  c.vec_bytes = 16;
  c.vecs_per_thread = nv;
  c.weight_in_registers = weight_in_regs;
  c.blocks_per_sm = 0;
  return c;
}

bool aligned_to(const void* p, int64_t align) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align) == 0;
}

// The kernels' parameters for `a`, with tpr threads on each of rows_per_block rows of a block.
RmsParams make_params(const RmsNormArgs& a, int tpr, int rows_per_block) {
  RmsParams p;
  p.x = a.x;
  p.residual = a.residual;
  p.weight = a.weight;
  p.y = a.y;
  p.x_stride = a.x_row_stride;
  p.residual_stride = a.residual_row_stride;
  p.y_stride = a.y_row_stride;
  p.rows = a.rows;
  p.cols = static_cast<int>(a.cols);
  p.tpr = tpr;
  p.rows_per_block = rows_per_block;
  p.eps = a.eps;
  p.inv_cols = static_cast<float>(1.0 / static_cast<double>(a.cols));
  return p;
}

// Empty when the staged kernel can run `config` on these arguments, else why not: pointers and row
// strides, and the shared memory of a block (the configuration's own fields are checked by
// check_staged_config, the device by launch_staged). No CUDA call: cheap enough for every call.
std::string staged_refusal(const RmsNormArgs& a, const RmsNormConfig& config) {
  const bool fused = a.residual != nullptr;
  const int64_t es = static_cast<int64_t>(element_size(a.dtype));
  const int64_t row_bytes = a.cols * es;
  if (!aligned_to(a.x, 16) || !aligned_to(a.y, 16) || !aligned_to(a.weight, 16) ||
      (fused && !aligned_to(a.residual, 16)))
    return "the staged kernel needs x, residual, weight and y 16-byte aligned";
  const int64_t vec = 16 / es;
  if (a.rows > 1 && (a.x_row_stride % vec != 0 || a.y_row_stride % vec != 0 ||
                     (fused && a.residual_row_stride % vec != 0)))
    return "the staged kernel needs row strides of a multiple of 16 bytes";
  const int64_t smem = staged_smem_bytes(row_bytes, config.staged_rows, fused);
  if (smem > kSm90SmemPerBlock)
    return "the weight and " + std::to_string(config.staged_rows) + " stages of " +
           std::to_string(row_bytes * (fused ? 2 : 1)) + " bytes need " + std::to_string(smem) +
           " bytes of shared memory, a block has at most " + std::to_string(kSm90SmemPerBlock);
  return {};
}

// The staged kernel (config.staged_rows > 0), after launch_rms_norm's common checks.
void launch_staged(const RmsNormArgs& a, const RmsNormConfig& config, void* stream) {
  const bool fused = a.residual != nullptr;
  const int64_t row_bytes = a.cols * static_cast<int64_t>(element_size(a.dtype));
  const auto refuse = [&](const std::string& why) {
    throw SignatureError("rms_norm (CUDA): config {" + config.str() + "} cannot serve [" +
                         std::to_string(a.rows) + ", " + std::to_string(a.cols) + "]" +
                         (fused ? " fused" : "") + ": " + why);
  };
  if (const std::string why = staged_refusal(a, config); !why.empty()) refuse(why);
  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess)
    throw_cuda(err, "cudaGetDevice");
  const CudaDeviceProperties& props = cuda_device_properties(device);
  if (props.major != 9)
    refuse("the staged kernel needs a device of compute capability 9.x, not " +
           std::to_string(props.major) + ".x");
  const int optin = static_cast<int>(props.shared_mem_per_block_optin);
  const int64_t smem = staged_smem_bytes(row_bytes, config.staged_rows, fused);
  if (smem > optin)
    refuse(std::to_string(smem) + " bytes of shared memory, the device allows " +
           std::to_string(optin) + " a block");

  const StagedLayout layout = staged_layout(row_bytes, config.staged_rows, fused);
  const StagedFn fn = staged_kernel(a.dtype, fused, config.cache_hint);
  if (fn == nullptr) refuse("no staged kernel for the dtype");
  const int smem_bytes = static_cast<int>(layout.total);
  const int fit = staged_prepare(fn, config.threads, smem_bytes, optin, device);
  if (fit < 1)
    refuse("a block of " + std::to_string(config.threads) + " threads and " +
           std::to_string(smem_bytes) + " bytes of shared memory does not fit");
  const int per_sm = config.blocks_per_sm > 0 ? config.blocks_per_sm : fit;
  // Blocks beyond what fits still run correctly (they do not wait on each other), only later.
  const int64_t slots = std::max<int64_t>(1, static_cast<int64_t>(sm_count(device)) * per_sm);
  int64_t blocks = std::min(a.rows, slots);
  if (config.grid == RmsGrid::balanced) blocks = ceil_div(a.rows, ceil_div(a.rows, slots));

  const RmsParams p = make_params(a, config.threads, 1);
  fn<<<static_cast<unsigned>(blocks), config.threads, static_cast<size_t>(smem_bytes),
       static_cast<cudaStream_t>(stream)>>>(p, layout);
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    throw_cuda(err, "kernel launch (staged)");
}

}  // namespace

// The fields added after the first tuning runs are printed only when they differ from their
// defaults, so that the names of the earlier configurations (and of the defaults) stay as they
// were.
std::string RmsNormConfig::str() const {
  std::string extra;
  if (grid != RmsGrid::persistent)
    extra +=
        ",grid=" + std::string(grid == RmsGrid::balanced ? "balanced"
                               : grid == RmsGrid::all    ? "all"
                                                         : std::to_string(static_cast<int>(grid)));
  if (rows_in_flight != 1) extra += ",rows_in_flight=" + std::to_string(rows_in_flight);
  if (cluster_size != 1) extra += ",cluster_size=" + std::to_string(cluster_size);
  if (cache_hint != 0) extra += ",cache_hint=" + std::to_string(cache_hint);
  if (staged_rows != 0) extra += ",staged_rows=" + std::to_string(staged_rows);
  if (streaming_unroll != 0) extra += ",streaming_unroll=" + std::to_string(streaming_unroll);
  if (fused_recompute) extra += ",fused_recompute=true";
  if (reread) extra += ",reread=true";
  return "threads=" + std::to_string(threads) +
         ",rows_per_block=" + std::to_string(rows_per_block) +
         ",vec_bytes=" + std::to_string(vec_bytes) +
         ",vecs_per_thread=" + std::to_string(vecs_per_thread) +
         ",weight_in_registers=" + (weight_in_registers ? "true" : "false") +
         ",blocks_per_sm=" + std::to_string(blocks_per_sm) + extra;
}

int rms_norm_staged_max_rows(int64_t cols, DType dtype, bool fused, int blocks_per_sm) {
  check_dtype(dtype);
  const int64_t row_bytes = cols * static_cast<int64_t>(element_size(dtype));
  if (cols <= 0 || cols > INT_MAX / 2 || row_bytes % 16 != 0 || blocks_per_sm < 1) return 0;
  const int64_t budget =
      std::min(kSm90SmemPerBlock, kSm90SmemPerSm / blocks_per_sm - kSmemReservedPerBlock);
  // At most 64 stages: far more bytes in flight than the latency needs for any row that long.
  int stages = 1;
  while (stages < 64 && staged_smem_bytes(row_bytes, stages + 1, fused) <= budget) ++stages;
  return stages >= 2 ? stages : 0;
}

namespace {

// A staged configuration: `per_sm` blocks a multiprocessor (a thread per vector of the row, up to
// 1024 threads for one block, 512 for two), `stages` rows in flight.
RmsNormConfig make_staged_config(int64_t nvec, int per_sm, int stages) {
  RmsNormConfig c = make_config(
      static_cast<int>(std::clamp<int64_t>(round_up(nvec, 32), 32, per_sm == 1 ? 1024 : 512)), 1, 0,
      false);
  c.blocks_per_sm = per_sm;
  c.staged_rows = stages;
  return c;
}

// The re-reading configuration (RmsNormConfig::reread) chosen for rows of exactly 512, 1024 or
// 2048 16-byte vectors (bf16 and fp16 4096, 8192 and 16384 elements; fp32 2048, 4096 and 8192),
// plain or fused; none for other rows, nor for many (`decode` false) fused rows of 512 vectors.
// Fewer rows than multiprocessors (`decode`): the most threads a row (512, or 1024 for 2048
// vectors), so that each thread waits for the fewest loads.
std::optional<RmsNormConfig> default_reread_config(int64_t cols, DType dtype, bool fused,
                                                   bool decode) {
  const int64_t vec = vec_elems(dtype);
  if (cols % vec != 0) return std::nullopt;
  RmsNormConfig c = make_config(256, 1, 2, false);
  c.reread = true;
  const int64_t nvec = cols / vec;
  if (nvec != 512 && nvec != 1024 && nvec != 2048) return std::nullopt;
  if (decode) {
    c.threads = nvec == 2048 ? 1024 : 512;
    c.vecs_per_thread = static_cast<int>(nvec / c.threads);
    return c;
  }
  switch (nvec) {
    case 512:
      if (fused) return std::nullopt;  // 21.7 us against the lean kernel's 19.4 (events)
      c.threads = 256;
      c.vecs_per_thread = 2;
      break;
    case 1024:
      c.threads = fused ? 512 : 256;
      c.vecs_per_thread = fused ? 2 : 4;
      c.grid = RmsGrid::all;
      break;
    default:  // 2048
      c.threads = fused ? 1024 : 512;
      c.vecs_per_thread = fused ? 2 : 4;
      c.grid = RmsGrid::all;
      break;
  }
  return c;
}

RmsNormConfig default_config(int64_t rows, int64_t cols, DType dtype, bool fused, int device,
                             bool allow_staged) {
  check_dtype(dtype);
  rows = std::max<int64_t>(rows, 1);
  const int64_t nvec = std::max<int64_t>(ceil_div(cols, vec_elems(dtype)), 1);
  if (nvec <= 128) {
    // Small rows: 8, 16 or 32 threads per row (warp shuffles only), several rows per block, the
    // weight slice in registers for all the block's rows.
    int tpr = 8;
    while (tpr < 32 && static_cast<int64_t>(tpr) * 4 < nvec) tpr *= 2;
    int nv = 1;
    while (static_cast<int64_t>(tpr) * nv < nvec) nv *= 2;
    const int threads = static_cast<int>(std::min<int64_t>(256, round_up(rows * tpr, 32)));
    return make_config(threads, threads / tpr, nv, true);
  }
  if (cuda_device_properties(device).major == 9) {
    // Rows of exactly 512, 1024 or 2048 vectors: the re-reading kernel (all of a thread's loads of
    // pass 1 in flight at 32 registers, pass 2 from L1). Measured on the H200 (2026-12-01, kernel
    // bench, memset flush, medians of 31; and ncu, caches flushed), bf16, against the previous
    // defaults, fewer rows than multiprocessors:
    //   [1, 4096] 4.54 -> 3.84 us (512 x 1), fused 4.86 -> 4.16 us; [64, 8192] 5.57 -> 4.51 us
    //   (512 x 2), fused 6.27 -> 5.09 us; [1, 16384] 5.76 -> 4.90 us (1024 x 2), fused 6.24 ->
    //   5.73 us;
    // many rows:
    //   plain [2048, 4096]  13.2 -> 11.4 us (256 x 2; ncu 10.14 -> 9.95-10.02),
    //   plain [2048, 8192]  22.8 -> 20.8 us (256 x 4, a block per row; ncu 19.55-20.10 ->
    //     17.38-17.73), plain [2048, 16384] 40.2 -> 36.6 us (512 x 4; ncu 34.21-36.26 ->
    //     31.52-32.58), fused [2048, 8192] 38.2 -> 37.3 us (512 x 2; ncu 34.18-34.85 ->
    //     30.62-31.71), fused [2048, 16384] 72.3 -> 70.0 us (1024 x 2; ncu 67.20-67.94 ->
    //     62.66-63.71); fp32 [2048, 4096] by ncu: staged 17.95-18.72 -> 17.09-17.47 us (256 x 4).
    // Not many fused rows of 512 vectors (above), nor many plain fp32 rows of 1024 vectors: those
    // take the register-resident kernel, 256 threads x 4 vectors and the weight in registers
    // (fp32 [2048, 4096]: 20.00 us against the re-reading kernel's 20.48-20.83, medians of 31 and
    // of 101 in two runs; the staged kernel took 21.9).
    const bool decode = rows < sm_count(device);
    if (dtype == DType::float32 && !fused && !decode && cols == 4096)
      return make_config(256, 1, 4, true);
    if (const std::optional<RmsNormConfig> c = default_reread_config(cols, dtype, fused, decode))
      return *c;
  }
  const int64_t row_bytes = cols * static_cast<int64_t>(element_size(dtype));
  if (fused && row_bytes >= 8192 && rows >= sm_count(device)) {
    // Fused, many rows of at least 8 KB: the lean streaming kernel (pass 1 adds and writes the
    // residual, pass 2 re-reads it from L2), a block per row. Rows of 8 KB: one vector in flight
    // per thread and pass, 256 threads, the L2 hints; longer rows: two vectors, 512 threads.
    // Measured on the H200 at op level (tileops bench, 2026-11-29; one run before, three after),
    // against the previous default (register-resident, or staged from 16 KB): bf16 [2048, 4096]
    // 21.70 -> 19.58-19.71 us, [2048, 8192] 39.74 -> 38.53-38.90 us, [2048, 16384] 75.30 ->
    // 71.46-71.98 us (docs/perf/2026-11-29-h200-norm-lean.md).
    RmsNormConfig c = make_config(row_bytes <= 8192 ? 256 : 512, 1, 0, false);
    c.grid = RmsGrid::all;
    c.streaming_unroll = row_bytes <= 8192 ? 1 : 2;
    c.cache_hint = row_bytes <= 8192 ? 1 : 0;
    return c;
  }
  if (allow_staged && row_bytes >= 16384 && rows >= sm_count(device) &&
      cuda_device_properties(device).major == 9) {
    // Plain, many rows of at least 16 KB: the staged kernel, two blocks of up to 512 threads a
    // multiprocessor with as many stages as fit, else one block of up to 1024 threads when it
    // holds at least 3 stages. Measured on the H200 (2026-11-29, kernel bench, memset flush,
    // medians of 31), against the register-resident default:
    //   plain, two blocks: bf16 [16384, 8192] 165 -> 146 us, fp16 167 -> 146 us, fp32 [16384,
    //   8192] 286 -> 277 us, bf16 [2048, 8192] 27.3 -> 23.1 us, bf16 [2048, 16384] 42.9 -> 40.5
    //   us, fp32 [2048, 4096] 22.6 -> 21.9 us;
    //   fused (before the lean kernel above took those): bf16 [2048, 8192] 41.6 -> 39.7 us
    //   (two blocks of 3 stages), bf16 [2048, 16384] 76.6 -> 75.2 us (one block of 3 stages).
    // Not for rows of 8 KB (bf16 [2048, 4096] 13.4 -> 15.0 us) nor fewer rows than
    // multiprocessors ([64, 8192] 5.73 -> 5.70 us, [1, 4096] 4.54 -> 4.74 us). Plain rows over
    // about 36 KB (one block of 3 stages) have not been measured.
    if (const int stages = rms_norm_staged_max_rows(cols, dtype, fused, 2); stages >= 2)
      return make_staged_config(nvec, 2, stages);
    if (const int stages = rms_norm_staged_max_rows(cols, dtype, fused, 1); stages >= 3)
      return make_staged_config(nvec, 1, stages);
  }
  if (nvec <= 1024) {
    // Rows of up to 1024 vectors (bf16 8192, fp32 4096): 4 vectors a thread, the weight slice in
    // registers, loaded with the first row; for rows of up to 512 vectors also two rows in flight
    // per thread group (the next row's loads issued before this row's reduction and stores).
    // Measured on the H200 (2026-11-29, kernel bench, memset flush, medians of 31):
    //   bf16 [2048, 4096]  15.5 -> 13.2 us (two rows in flight), fused 23.6 -> 22.0 us;
    //   fp32 [2048, 4096]  25.4 -> 22.2 us (256 threads x 4 vectors instead of 128 x 8);
    //   bf16 [1, 4096]      4.77 -> 4.54 us and [64, 8192] 5.79 -> 5.38 us (instead of the
    //   many-thread decode shape below).
    const int tpr = resident_tpr(nvec, 4, 512);
    const int rpb = tpr < 128 && 128 % tpr == 0 ? 128 / tpr : 1;
    RmsNormConfig c = make_config(tpr * rpb, rpb, 4, true);
    if (nvec > 512) return c;
    RmsNormConfig pipelined = c;
    pipelined.rows_in_flight = 2;
    return check_config(pipelined, dtype, cols).empty() ? pipelined : c;
  }
  const int sms = sm_count(device);
  if (rows < sms) {
    // Latency-bound (decode) long rows: many threads with few vectors each; the weight is loaded
    // together with x, so that its latency overlaps x's.
    for (const int nv : {1, 2, 4}) {
      if (const int tpr = resident_tpr(nvec, nv, 512); tpr > 0)
        return make_config(tpr, 1, nv, true);
    }
  }
  // One block per row group (grid=all) rather than a persistent grid: the hardware balances the
  // last wave. bf16 [2048, 16384] 44.4 -> 42.7 us, fused 80.8 -> 76.0 us (same run as above).
  if (const int tpr = resident_tpr(nvec, 8, 512); tpr > 0) {
    const int rpb = tpr < 128 && 128 % tpr == 0 ? 128 / tpr : 1;
    RmsNormConfig c = make_config(tpr * rpb, rpb, 8, false);
    RmsNormConfig all = c;
    all.grid = RmsGrid::all;
    return check_config(all, dtype, cols).empty() ? all : c;
  }
  if (const int tpr = resident_tpr(nvec, 4, 1024); tpr > 0) return make_config(tpr, 1, 4, false);
  // Rows too long for registers: streaming, the second pass from L2.
  return make_config(256, 1, 0, false);
}

}  // namespace

RmsNormConfig rms_norm_default_config(int64_t rows, int64_t cols, DType dtype, bool fused,
                                      int device) {
  return default_config(rows, cols, dtype, fused, device, true);
}

RmsNormConfig rms_norm_fallback_config(int64_t rows, int64_t cols, DType dtype, bool fused,
                                       int device) {
  return default_config(rows, cols, dtype, fused, device, false);
}

std::string rms_norm_staged_refusal(const RmsNormArgs& args, const RmsNormConfig& config) {
  return config.staged_rows == 0 ? std::string() : staged_refusal(args, config);
}

std::vector<RmsNormConfig> rms_norm_tuning_space(int64_t rows, int64_t cols, DType dtype,
                                                 bool fused, int device) {
  std::vector<RmsNormConfig> out;
  const auto add = [&](const RmsNormConfig& c) {
    if (check_config(c, dtype, cols).empty() && std::find(out.begin(), out.end(), c) == out.end())
      out.push_back(c);
  };
  add(rms_norm_default_config(rows, cols, dtype, fused, device));
  add(rms_norm_fallback_config(rows, cols, dtype, fused, device));
  const int64_t nvec = std::max<int64_t>(ceil_div(cols, vec_elems(dtype)), 1);
  if (nvec > 128 && cuda_device_properties(device).major == 9) {
    // The staged kernel with one block a multiprocessor (the most stages) and with two, without
    // and with its L2 policies.
    for (const int hint : {0, 1})
      for (const int per_sm : {1, 2}) {
        if (const int stages = rms_norm_staged_max_rows(cols, dtype, fused, per_sm); stages >= 2) {
          RmsNormConfig c = make_staged_config(nvec, per_sm, stages);
          c.cache_hint = hint;
          add(c);
        }
      }
  }
  if (nvec <= 256) {
    // Several rows per warp or a warp per row.
    for (const int tpr : {8, 16, 32}) {
      int nv = 1;
      while (nv < 8 && static_cast<int64_t>(tpr) * nv < nvec) nv *= 2;
      if (static_cast<int64_t>(tpr) * nv < nvec) continue;
      for (const int threads : {128, 256, 512}) {
        if (threads / tpr > 2 * std::max<int64_t>(rows, 1)) continue;  // mostly idle groups
        for (const bool wreg : {false, true}) add(make_config(threads, threads / tpr, nv, wreg));
      }
    }
  }
  // A row per block (or two), each vector count that fits.
  for (const int nv : {1, 2, 4, 8}) {
    for (const int max_tpr : {512, 1024}) {
      const int tpr = resident_tpr(nvec, nv, max_tpr);
      if (tpr == 0) continue;
      for (const int rpb : {1, 2, 4}) {
        if (tpr * rpb > 1024 || (rpb > 1 && rows < 2 * rpb)) continue;
        for (const bool wreg : {false, true}) add(make_config(tpr * rpb, rpb, nv, wreg));
      }
    }
  }
  for (const int threads : {128, 256, 512}) add(make_config(threads, 1, 0, false));
  if (nvec > 128 && cols % vec_elems(dtype) == 0) {
    // The re-reading kernel, each (threads, vecs_per_thread) that holds the row exactly (fused: at
    // most 2 vectors a thread), on the persistent grid and with a block per row.
    for (const int threads : {256, 512, 1024})
      for (const int nv : {1, 2, 4}) {
        if (fused && nv == 4) continue;
        for (const RmsGrid g : {RmsGrid::persistent, RmsGrid::all}) {
          RmsNormConfig c = make_config(threads, 1, nv, false);
          c.reread = true;
          c.grid = g;
          add(c);
        }
      }
  }
  if (nvec > 128) {
    // The lean streaming kernels with a block per row: one or two vectors in flight, each cache
    // hint, 256 and 512 threads; fused, also recomputing the sum in pass 2.
    for (const bool recompute : {false, true})
      for (const int unroll : {1, 2})
        for (const int hint : {0, 1, 2, 3})
          for (const int threads : {256, 512}) {
            if (recompute && !fused) continue;
            RmsNormConfig c = make_config(threads, 1, 0, false);
            c.grid = RmsGrid::all;
            c.streaming_unroll = unroll;
            c.cache_hint = hint;
            c.fused_recompute = recompute;
            add(c);
          }
    // The variants: the default with the other grids; each variant kernel with the fewest threads
    // per row that hold the row (blocks of at least 128 threads), pipelined ones also on the
    // balanced grid, unhinted single-row ones also with a block per row group.
    const RmsNormConfig def = rms_norm_fallback_config(rows, cols, dtype, fused, device);
    for (const RmsGrid g : {RmsGrid::balanced, RmsGrid::all}) {
      RmsNormConfig c = def;
      c.grid = g;
      add(c);
    }
    static const KernelKey variants[] = {
#define TILEOPS_RMS_KEY(NV, W, P, C, H) KernelKey{NV, W, P, C, H},
        TILEOPS_RMS_VARIANTS(TILEOPS_RMS_KEY)
#undef TILEOPS_RMS_KEY
    };
    for (const KernelKey& k : variants) {
      const int tpr = resident_tpr(ceil_div(nvec, k.cluster), k.nv, kernel_max_threads(k));
      if (tpr == 0) continue;
      const int base_rpb = tpr < 128 && 128 % tpr == 0 ? 128 / tpr : 1;
      for (const int rpb : {base_rpb, 2 * base_rpb}) {
        if (rpb != base_rpb && !(k.nv == 16 && tpr == 32)) continue;  // warp rows: 4 and 8 a block
        RmsNormConfig c = make_config(tpr * rpb, rpb, k.nv, k.weight_in_regs);
        c.rows_in_flight = k.pipe;
        c.cluster_size = k.cluster;
        c.cache_hint = k.hint;
        add(c);
        if (k.pipe == 2) {
          c.grid = RmsGrid::balanced;
          add(c);
        } else if (k.hint == 0) {
          c.grid = RmsGrid::all;
          add(c);
        }
      }
    }
  }
  return out;
}

void launch_rms_norm(const RmsNormArgs& a, const RmsNormConfig& config, void* stream) {
  const DType dtype = a.dtype;
  check_dtype(dtype);
  if (a.rows < 0 || a.cols < 0)
    throw SignatureError("rms_norm (CUDA): negative shape [" + std::to_string(a.rows) + ", " +
                         std::to_string(a.cols) + "]");
  if (a.cols > INT_MAX / 2)
    throw SignatureError("rms_norm (CUDA): cols too large: " + std::to_string(a.cols));
  if (const std::string why = check_config(config, dtype, a.cols); !why.empty())
    throw SignatureError("rms_norm (CUDA): config {" + config.str() +
                         "} cannot serve cols = " + std::to_string(a.cols) + ": " + why);
  if (config.fused_recompute && a.residual == nullptr)
    throw SignatureError("rms_norm (CUDA): config {" + config.str() +
                         "}: fused_recompute needs a fused launch (a residual)");
  if (config.reread && config.vecs_per_thread == 4 && a.residual != nullptr)
    throw SignatureError("rms_norm (CUDA): config {" + config.str() +
                         "}: reread with a residual takes vecs_per_thread 1 or 2 (4 vectors of x "
                         "and 4 of the residual do not fit 32 registers)");
  if (a.rows == 0 || a.cols == 0) return;
  const bool fused = a.residual != nullptr;
  if (a.x == nullptr || a.weight == nullptr || a.y == nullptr)
    throw SignatureError("rms_norm (CUDA): x, weight and y must not be null");
  if (a.rows > 1 && (a.x_row_stride < a.cols || a.y_row_stride < a.cols ||
                     (fused && a.residual_row_stride < a.cols)))
    throw SignatureError("rms_norm (CUDA): a row stride is smaller than cols");
  const auto es = static_cast<int64_t>(element_size(dtype));
  if (!aligned_to(a.x, es) || !aligned_to(a.y, es) || !aligned_to(a.weight, es) ||
      (fused && !aligned_to(a.residual, es)))
    throw SignatureError("rms_norm (CUDA): a pointer is not aligned to its element size");
  if (config.staged_rows != 0) {
    launch_staged(a, config, stream);
    return;
  }

  // 16-byte vectors only when every row of every tensor starts on a 16-byte boundary; otherwise
  // the scalar streaming kernel, with the same threads per row (at most 512).
  const int64_t vec = 16 / es;
  const bool strides_ok = a.rows == 1 || (a.x_row_stride % vec == 0 && a.y_row_stride % vec == 0 &&
                                          (!fused || a.residual_row_stride % vec == 0));
  const bool vector_path = config.vec_bytes == 16 && strides_ok && aligned_to(a.x, 16) &&
                           aligned_to(a.y, 16) && aligned_to(a.weight, 16) &&
                           (!fused || aligned_to(a.residual, 16));
  int tpr = config.threads / config.rows_per_block;
  int rows_per_block = config.rows_per_block;
  KernelKey key = kernel_key(config);
  if (!vector_path) {
    key = KernelKey{};  // scalar streaming, one block per row group
    tpr = std::min(tpr, kStreamingMaxThreads);
    rows_per_block = std::max(1, std::min(rows_per_block, kStreamingMaxThreads / tpr));
  }
  const int threads = tpr * rows_per_block;
  const int cluster = key.cluster;
  const KernelFn fn = key.reread ? reread_kernel(dtype, fused, threads, key.nv)
                                 : pick_kernel(dtype, fused, vector_path, key);
  if (fn == nullptr) throw SignatureError("rms_norm (CUDA): no kernel for {" + config.str() + "}");

  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess)
    throw_cuda(err, "cudaGetDevice");
  const int sms = sm_count(device);
  int per_sm = config.blocks_per_sm;
  if (per_sm == 0) per_sm = std::max(1, max_blocks_per_sm(fn, threads, device));
  // Row groups go to blocks, or to clusters of `cluster` blocks that share them.
  const int64_t groups = ceil_div(a.rows, rows_per_block);
  const int64_t slots = std::max<int64_t>(1, static_cast<int64_t>(sms) * per_sm / cluster);
  int64_t units = std::min(groups, slots);
  if (config.grid == RmsGrid::balanced) {
    units = ceil_div(groups, ceil_div(groups, slots));
  } else if (config.grid == RmsGrid::all) {
    units = std::min<int64_t>(groups, INT_MAX / 2);
  }
  const int grid = static_cast<int>(units * cluster);

  const RmsParams p = make_params(a, tpr, rows_per_block);
  if (cluster == 1) {
    fn<<<grid, threads, 0, static_cast<cudaStream_t>(stream)>>>(p);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
      throw_cuda(err, "kernel launch");
  } else {
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3(static_cast<unsigned>(grid));
    lc.blockDim = dim3(static_cast<unsigned>(threads));
    lc.dynamicSmemBytes = 0;
    lc.stream = static_cast<cudaStream_t>(stream);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = static_cast<unsigned>(cluster);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    lc.attrs = attr;
    lc.numAttrs = 1;
    if (const cudaError_t err = cudaLaunchKernelEx(&lc, fn, p); err != cudaSuccess)
      throw_cuda(err, "kernel launch (cluster)");
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
      throw_cuda(err, "kernel launch (cluster)");
  }
}

}  // namespace tileops::cuda_kernels
