// Internal: the PTX wrappers of Hopper thread-block clusters: this block's rank in its cluster,
// the cluster's index and count along x, and the barrier over every thread of the cluster (the
// mbarrier operations on another block of the cluster: mbarrier.cuh; the TMA multicast: tma.cuh).
// Include only from .cu files; the wrappers exist where TILEOPS_SM90A_BODY (arch.cuh) is set.
#pragma once

#include "kernels/common/arch.cuh"

#include <cuda_runtime.h>

#include <cstdint>

namespace tileops::cuda_kernels::hopper {

#if TILEOPS_SM90A_BODY

__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

__device__ __forceinline__ uint32_t cluster_id_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
  return r;
}

__device__ __forceinline__ uint32_t cluster_count_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%nclusterid.x;\n" : "=r"(r));
  return r;
}

// Every thread of every block of the cluster (release / acquire at cluster scope).
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release;\n"
      "barrier.cluster.wait.acquire;\n" ::
          : "memory");
}

#endif  // TILEOPS_SM90A_BODY

}  // namespace tileops::cuda_kernels::hopper
