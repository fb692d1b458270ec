// Internal: what the paged attention kernel adds to the shared mma.sync PTX
// (kernels/common/mma.cuh): the XOR swizzle of its shared-memory rows and programmatic dependent
// launch. Device code only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/mma.cuh"
#include "kernels/common/vectors.cuh"

namespace tileops::cuda_kernels::paged_detail {

using mma::cp_async16;
using mma::cp_async_commit;
using mma::cp_async_wait;
using mma::ldmatrix_x4;
using mma::ldmatrix_x4_trans;
using mma::mma16816;
using vec::pack2;

/// Element offset of 16-byte chunk `chunk` of row `row` in a tile of rows of D elements: the
/// chunks XOR-swizzled by (row & 7), so that 8 rows read at one chunk (ldmatrix) and the
/// cp.async writes hit distinct banks. D >= 64 (8 chunks).
template <int D>
__device__ __forceinline__ int swizzled(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

/// Lets the dependent grid (launched with programmatic stream serialization) start launching.
__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/// Waits until the grid this one depends on has completed and its memory is visible (a no-op
/// when it was launched without a programmatic dependency).
__device__ __forceinline__ void wait_for_dependency() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace tileops::cuda_kernels::paged_detail
