// Internal: what the launcher (attention_paged_launch_cuda.cu) hands the per-head-dim files
// (attention_paged_d{64,128,256}_cuda.cu), each of which instantiates the paged kernels for its
// head dim (both dtypes, both tile shapes). Split by head dim so the instances compile in
// parallel.
#pragma once

#include <cuda_runtime.h>

#include "kernels/attention/attention_paged_kernel.cuh"
#include "kernels/attention/attention_paged_merge_kernel.cuh"
#include "tileops/core/dtype.h"

namespace tileops::cuda_kernels::paged_detail {

struct PagedLaunch {
  PagedParams params;
  DType dtype;
  int rows_per_tile;  // 16 or 64
  unsigned blocks;    // row tile slots (at least the tiles of any packing of the queries) x
                      // KV heads x splits, below 2^31
  cudaStream_t stream;
};

/// Launches the split kernel and, with more than one split, the merge kernel (as a programmatic
/// dependent where the runtime takes it). Throws UsageError when the CUDA runtime reports an
/// error.
void launch_paged_d64(const PagedLaunch& l);
void launch_paged_d128(const PagedLaunch& l);
void launch_paged_d256(const PagedLaunch& l);

/// Blocks of the split kernel of head dim 64 / 128 / 256, `dtype` and `rows_per_tile` one
/// multiprocessor holds at once.
int paged_blocks_per_sm_d64(DType dtype, int rows_per_tile);
int paged_blocks_per_sm_d128(DType dtype, int rows_per_tile);
int paged_blocks_per_sm_d256(DType dtype, int rows_per_tile);

/// [[noreturn]] UsageError naming the CUDA error and what failed.
[[noreturn]] void throw_paged_cuda(cudaError_t err, const char* what);

}  // namespace tileops::cuda_kernels::paged_detail
