// Internal: the PTX wrappers of the Hopper tensor memory accelerator: 2D tile loads into shared
// memory that complete on an mbarrier (plain, or multicast to the blocks of a cluster), 2D tile
// stores from shared memory in bulk-async groups, and the fences and waits around them. The
// tensor maps: tma_map.h; the mbarriers and the 1D bulk copy: mbarrier.cuh. Shared-memory addresses
// are 32-bit offsets (__cvta_generic_to_shared). Include only from .cu files; the wrappers exist
// where TILEOPS_SM90A_BODY (arch.cuh) is set, so callers guard their kernel bodies with it.
#pragma once

#include "kernels/common/arch.cuh"

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tileops::cuda_kernels::hopper {

#if TILEOPS_SM90A_BODY

__device__ __forceinline__ void tma_prefetch(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// 2D tile load: box at (c0 = inner / k coordinate, c1 = row) into `dst`, completing on `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// tma_load_2d into the same shared offset of every block in `mask` (bit i: cluster rank i), each
// destination's mbarrier at offset `bar` receiving the bytes it gets.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const CUtensorMap* map, int c0,
                                                      int c1, uint32_t bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::"
      "cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}

// TMA store epilogue: a 2D box from shared memory to the tensor at (c0 = column, c1 = row), in
// the bulk-async group of the issuing thread; clipped at the tensor's bounds.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, uint32_t src, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(c0), "r"(c1), "r"(src)
      : "memory");
}

// 1D bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) from this block's
// shared memory at `src` to global memory, in the bulk-async group of the issuing thread.
__device__ __forceinline__ void bulk_store(void* dst, uint32_t src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// Waits until at most N of this thread's bulk groups still read their shared-memory source.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

// Waits until all of this thread's bulk groups have completed (their writes done).
__device__ __forceinline__ void bulk_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// Makes this thread's shared-memory writes visible to the async proxy (the TMA store).
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#endif  // TILEOPS_SM90A_BODY

}  // namespace tileops::cuda_kernels::hopper
