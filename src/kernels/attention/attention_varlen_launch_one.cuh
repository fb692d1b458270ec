// Internal: the launch of one instance of the varlen attention kernel, included by the
// per-head-dim files (attention_varlen_d{64,128,256}_cuda.cu, and for paged keys
// attention_paged_tma_d{64,128,256}_cuda.cu) only.
#pragma once

#include "kernels/attention/attention_varlen_instances.cuh"
#include "kernels/attention/attention_varlen_kernel.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tileops::cuda_kernels::attention_detail {
namespace {

template <typename T, int D, int BN, int STAGES, int QSTAGES, bool TRANSFORM, bool PAGED,
          int V_ROWS>
void launch_instance(const VarlenLaunch& l) {
  using S = VarlenShape<D, BN, STAGES, QSTAGES>;
  const auto kernel = attention_varlen_kernel<T, D, BN, STAGES, QSTAGES, TRANSFORM, PAGED, V_ROWS>;
  if (const cudaError_t err =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmem);
      err != cudaSuccess)
    throw_varlen_cuda(err, "cudaFuncSetAttribute (shared memory)");
  kernel<<<static_cast<unsigned>(l.blocks), S::kThreads, S::kSmem, l.stream>>>(l.map_q, l.map_k,
                                                                               l.map_v, l.params);
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    throw_varlen_cuda(err, "attention_varlen kernel launch");
}

// The instance of head dim D with block_n BN, STAGES K/V stages and QSTAGES Q stages for l's
// dtype and score path, over contiguous or (PAGED) paged keys, V in page-major stages of V_ROWS
// rows per page (0: chunk-major; attention_varlen_kernel.cuh); false when (BN, STAGES) is not
// l's.
template <int D, int BN, int STAGES, int QSTAGES, bool PAGED = false, int V_ROWS = 0>
bool launch_if(const VarlenLaunch& l) {
  if (l.block_n != BN || l.stages != STAGES) return false;
  if (l.dtype == DType::bfloat16) {
    if (l.transform) {
      launch_instance<__nv_bfloat16, D, BN, STAGES, QSTAGES, true, PAGED, V_ROWS>(l);
    } else {
      launch_instance<__nv_bfloat16, D, BN, STAGES, QSTAGES, false, PAGED, V_ROWS>(l);
    }
  } else {
    if (l.transform) {
      launch_instance<__half, D, BN, STAGES, QSTAGES, true, PAGED, V_ROWS>(l);
    } else {
      launch_instance<__half, D, BN, STAGES, QSTAGES, false, PAGED, V_ROWS>(l);
    }
  }
  return true;
}

}  // namespace
}  // namespace tileops::cuda_kernels::attention_detail
