// Register-resident RMSNorm kernel: each thread keeps NV 16-byte vectors of its row in registers
// (as packed T), so x (and the residual) are read from device memory once. The default for rows
// of 129 to 4096 vectors that no other rule takes (rms_norm_policy.cpp).
//
// The last cols % VEC elements (the tail) are one scalar per thread of the first threads of the
// row. A row is handled by threads_per_row threads (8, 16, 32 or a multiple of 32); a block holds
// threads / threads_per_row rows at once.
#include "kernels/norm/rms_norm_kernels.cuh"

namespace tileops::cuda_kernels::rms {
namespace {

template <typename T, int NV, bool kFused, bool kWeightInRegs>
__global__ void __launch_bounds__(resident_max_threads(NV, kWeightInRegs))
    rms_norm_resident_kernel(const RMSNormParams p) {
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  using V = Raw<T, VEC>;
  __shared__ float red[2][32];

  const int tpr = p.tpr;
  const int group = static_cast<int>(threadIdx.x) / tpr;
  const int lt = static_cast<int>(threadIdx.x) - group * tpr;
  const int first_warp = (group * tpr) >> 5;
  const int cols = static_cast<int>(p.cols);
  const int nvec = cols / VEC;
  const int tail_col = nvec * VEC + lt;
  const bool has_tail = tail_col < cols;  // lt < cols % VEC (tpr >= 8 >= VEC)
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
      const T* xr = static_cast<const T*>(p.x) + row * p.x_row_stride;
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int j = lt + k * tpr;
        if (j < nvec) v[k] = load_once<T, VEC>(xr + j * VEC);
      }
      if (has_tail) vt = scalar_once(xr + tail_col);
      if constexpr (kFused) {
        T* rr = static_cast<T*>(p.residual) + row * p.residual_row_stride;
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
      T* yr = static_cast<T*>(p.y) + row * p.y_row_stride;
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

template <typename T, bool kFused>
KernelFn resident_kernel_of(int nv, bool weight_in_regs) {
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

template <typename T>
KernelFn resident_kernel_of(bool fused, int nv, bool weight_in_regs) {
  return fused ? resident_kernel_of<T, true>(nv, weight_in_regs)
               : resident_kernel_of<T, false>(nv, weight_in_regs);
}

}  // namespace

KernelFn resident_kernel(DType dtype, bool fused, int nv, bool weight_in_regs) {
  switch (dtype) {
    case DType::float32:
      return resident_kernel_of<float>(fused, nv, weight_in_regs);
    case DType::float16:
      return resident_kernel_of<__half>(fused, nv, weight_in_regs);
    case DType::bfloat16:
      return resident_kernel_of<__nv_bfloat16>(fused, nv, weight_in_regs);
    default:
      return nullptr;
  }
}

}  // namespace tileops::cuda_kernels::rms
