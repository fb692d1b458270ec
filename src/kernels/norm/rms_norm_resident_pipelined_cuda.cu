// Register-resident RMSNorm kernel with two rows in flight (PIPE == 2: the loads of a group's next
// row are issued before it reduces and stores the current one) or a row split over the two blocks
// of a thread-block cluster (CL == 2). The default for rows of 129 to 512 vectors (two rows in
// flight); the clusters are in the tuning space (rms_norm_policy.cpp).
//
// PIPE == 2 keeps two rows in registers (buffers A and B, the loop unrolled by two so that no
// register move waits on a load in flight). CL == 2: vector j of the row belongs to the thread
// with cluster lane j % (2 * tpr); each block's partial sum of squares is read by the other one
// from its shared memory after a cluster barrier.
#include "kernels/norm/rms_norm_kernels.cuh"

#include <cooperative_groups.h>

namespace tileops::cuda_kernels::rms {
namespace {

template <typename T, int NV, bool kFused>
struct RowRegs {
  Raw<T, 16 / sizeof(T)> v[NV];
  Raw<T, 16 / sizeof(T)> r[kFused ? NV : 1];
  float vt;
  float rt;
};

template <typename T, int NV, bool kFused, bool kWeightInRegs, int PIPE, int CL>
__global__ void __launch_bounds__(pipelined_max_threads(NV, kFused, kWeightInRegs, PIPE))
    rms_norm_resident_pipelined_kernel(const RMSNormParams p) {
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
  const int cols = static_cast<int>(p.cols);
  const int nvec = cols / VEC;
  const int tail_col = nvec * VEC + lt;
  const bool has_tail = tail_col < cols;  // rank 0 and lt < cols % VEC (tpr >= 8 >= VEC)
  const T* __restrict__ w = static_cast<const T*>(p.weight);

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
    const T* xr = static_cast<const T*>(p.x) + row * p.x_row_stride;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int j = lt + k * stride;
      if (j < nvec) b.v[k] = load_once<T, VEC>(xr + j * VEC);
    }
    b.vt = has_tail ? scalar_once(xr + tail_col) : 0.f;
    if constexpr (kFused) {
      const T* rr = static_cast<const T*>(p.residual) + row * p.residual_row_stride;
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int j = lt + k * stride;
        if (j < nvec) b.r[k] = load_once<T, VEC>(rr + j * VEC);
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
        T* rr = static_cast<T*>(p.residual) + row * p.residual_row_stride;
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
            store<T, VEC>(rr + j * VEC, b.v[k]);
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
      T* yr = static_cast<T*>(p.y) + row * p.y_row_stride;
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
          store<T, VEC>(yr + j * VEC, pack<T, VEC>(f));
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

template <typename T, bool kFused>
KernelFn pipelined_kernel_of(const RMSNormResidentConfig& c) {
#define TILEOPS_RMS_PICK(NV, W, P, C)                                                   \
  if (c.vecs_per_thread == NV && c.weight_in_registers == W && c.rows_in_flight == P && \
      c.cluster_size == C)                                                              \
    return rms_norm_resident_pipelined_kernel<T, NV, kFused, W, P, C>;
  TILEOPS_RMS_PIPELINED_VARIANTS(TILEOPS_RMS_PICK)
#undef TILEOPS_RMS_PICK
  return nullptr;
}

template <typename T>
KernelFn pipelined_kernel_of(bool fused, const RMSNormResidentConfig& c) {
  return fused ? pipelined_kernel_of<T, true>(c) : pipelined_kernel_of<T, false>(c);
}

}  // namespace

KernelFn resident_pipelined_kernel(DType dtype, bool fused, const RMSNormResidentConfig& c) {
  switch (dtype) {
    case DType::float32:
      return pipelined_kernel_of<float>(fused, c);
    case DType::float16:
      return pipelined_kernel_of<__half>(fused, c);
    case DType::bfloat16:
      return pipelined_kernel_of<__nv_bfloat16>(fused, c);
    default:
      return nullptr;
  }
}

}  // namespace tileops::cuda_kernels::rms
