// Internal: the launch of the paged kernels of one head dim, included by the per-head-dim files
// (attention_paged_d{64,128,256}_cuda.cu) only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/attention/attention_paged_instances.cuh"

namespace tileops::cuda_kernels::paged_detail {
namespace {

template <typename T, int D, int ROWS, bool CONTIGUOUS>
void launch_split(const PagedLaunch& l) {
  using S = PagedShape<D, ROWS>;
  const auto kernel = attention_paged_kernel<T, D, ROWS, CONTIGUOUS>;
  if (const cudaError_t err =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmem);
      err != cudaSuccess)
    throw_paged_cuda(err, "cudaFuncSetAttribute (shared memory)");
  // One block per (slot, KV head, split), the split fastest (the launcher bounds the count).
  kernel<<<l.blocks, kThreads, S::kSmem, l.stream>>>(l.params);
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    throw_paged_cuda(err, "attention_paged kernel launch");
}

// The merge of the splits, launched as a programmatic dependent of the split kernel (its blocks
// start while the split kernel's last ones run, and wait for its completion in the kernel); a
// plain launch when the runtime refuses the attribute.
template <typename T, int D>
void launch_merge(const PagedLaunch& l) {
  const auto kernel = attention_paged_merge_kernel<T, D>;
  cudaLaunchConfig_t config = {};
  // One block per (token, head): total_q * heads_q < 2^31 (the launch checks bound total_q).
  config.gridDim =
      dim3(static_cast<unsigned>(static_cast<long long>(l.params.total_q) * l.params.heads_q));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = 0;
  config.stream = l.stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  if (cudaLaunchKernelEx(&config, kernel, l.params) != cudaSuccess) {
    (void)cudaGetLastError();  // not a sticky error: launch without the attribute
    config.numAttrs = 0;
    if (const cudaError_t err = cudaLaunchKernelEx(&config, kernel, l.params); err != cudaSuccess)
      throw_paged_cuda(err, "attention_paged merge kernel launch");
  }
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    throw_paged_cuda(err, "attention_paged merge kernel launch");
}

template <typename T, int D>
void launch_typed(const PagedLaunch& l) {
  // Contiguous keys come from decode-shaped calls only: 16-row tiles (the launcher checks).
  if (l.params.cu_k != nullptr) {
    launch_split<T, D, 16, true>(l);
  } else if (l.rows_per_tile == 64) {
    launch_split<T, D, 64, false>(l);
  } else {
    launch_split<T, D, 16, false>(l);
  }
  if (l.params.splits > 1) launch_merge<T, D>(l);
}

template <int D>
void launch_dim(const PagedLaunch& l) {
  if (l.dtype == DType::bfloat16) {
    launch_typed<__nv_bfloat16, D>(l);
  } else {
    launch_typed<__half, D>(l);
  }
}

// The paged instance's occupancy stands for the contiguous one's: the same shared memory, which
// bounds both (2 blocks per multiprocessor at D 128, 4 by registers).
template <typename T, int D, int ROWS>
int blocks_per_sm() {
  int blocks = 0;
  const auto kernel = attention_paged_kernel<T, D, ROWS, false>;
  if (const cudaError_t err = cudaFuncSetAttribute(
          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, PagedShape<D, ROWS>::kSmem);
      err != cudaSuccess)
    throw_paged_cuda(err, "cudaFuncSetAttribute (shared memory)");
  if (const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &blocks, kernel, kThreads, PagedShape<D, ROWS>::kSmem);
      err != cudaSuccess)
    throw_paged_cuda(err, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  return blocks < 1 ? 1 : blocks;
}

template <int D>
int blocks_per_sm_dim(DType dtype, int rows_per_tile) {
  if (dtype == DType::bfloat16) {
    return rows_per_tile == 64 ? blocks_per_sm<__nv_bfloat16, D, 64>()
                               : blocks_per_sm<__nv_bfloat16, D, 16>();
  }
  return rows_per_tile == 64 ? blocks_per_sm<__half, D, 64>() : blocks_per_sm<__half, D, 16>();
}

}  // namespace
}  // namespace tileops::cuda_kernels::paged_detail
