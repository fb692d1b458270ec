// Internal: the PTX wrappers of the Hopper (sm_90) asynchronous pipelines the kernels share:
// mbarriers in shared memory (init, arrive, arrive with an expected transaction count, wait on a
// phase parity; arrive on another block's barrier and wait at cluster scope, for clusters) and
// the 1D bulk copy (cp.async.bulk, the TMA engine) that completes on one (the 2D tile copies:
// tma.cuh).
// Shared-memory addresses are 32-bit offsets (__cvta_generic_to_shared). Include only from .cu
// files, and call only from code compiled for sm_90 (the callers guard their kernel bodies).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tileops::cuda_kernels::mbarrier {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// Initializes the barrier at `bar` for `count` arrivals per phase.
__device__ __forceinline__ void init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/// Makes initialized barriers visible to the async proxy (the copies' complete_tx) and the cluster.
__device__ __forceinline__ void fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/// One arrival, and `bytes` more transaction bytes the phase waits for.
__device__ __forceinline__ void arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

/// One arrival.
__device__ __forceinline__ void arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/// Waits for the completion of the phase of parity `parity` (acquire: what the phase's copies
/// wrote is then visible to the waiting thread).
__device__ __forceinline__ void wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}

/// One arrival on the barrier at the shared offset `bar` of block `cta` of the cluster (release
/// at cluster scope).
__device__ __forceinline__ void arrive_cluster(uint32_t bar, uint32_t cta) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(bar),
      "r"(cta)
      : "memory");
}

/// wait with cluster-scope acquire (for a barrier that also receives another block's arrivals).
__device__ __forceinline__ void wait_cluster(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}

/// A 4-byte asynchronous copy from global memory into shared memory at `dst`; zeros where !valid
/// (nothing is read then). arrive_on_copies tracks its completion.
__device__ __forceinline__ void copy4_async(uint32_t dst, const void* src, bool valid) {
  const int size = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(size)
               : "memory");
}

/// One arrival on `bar` once every earlier cp.async copy of this thread has completed; the
/// arrival is one of the barrier's expected count (.noinc), so init counts it.
__device__ __forceinline__ void arrive_on_copies(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

/// 1D bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) from global memory
/// into this block's shared memory at `dst`, completing on the barrier `bar`.
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes,
                                          uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

/// bulk_load whose L2 lines get the priority `policy` (a createpolicy result).
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes,
                                          uint32_t bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], "
      "[%1], %2, [%3], %4;\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(policy)
      : "memory");
}

}  // namespace tileops::cuda_kernels::mbarrier
