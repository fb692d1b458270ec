// Internal: the device helpers the Hopper grouped GEMM kernels share (bf16/fp16:
// grouped_gemm_wgmma_kernel.cuh, e4m3: grouped_gemm_fp8_kernel.cuh): TMA loads and stores, the
// wgmma fences and shared-memory descriptors (K-major, 128-byte swizzle), the accumulator operand
// lists of the wgmma asm statements, and the TMA store epilogue of one 64 x 64 chunk of a
// warpgroup's accumulators. Include only from the .cu files of those kernels.
#pragma once

#include "kernels/moe/grouped_gemm_common.cuh"

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

// The kernel body and its PTX wrappers exist for the host pass and for sm_90a; any other device
// target (such as the compute_90 PTX nvcc -arch=sm_90a also embeds) gets a trapping stub.
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TILEOPS_MOE_WGMMA_BODY 1
#else
#define TILEOPS_MOE_WGMMA_BODY 0
#endif

namespace tileops::cuda_kernels::moe_detail {
namespace {

#if TILEOPS_MOE_WGMMA_BODY
// ---------------------------------------------------------------------------------------------
// TMA (the mbarriers: kernels/cuda_mbarrier.cuh).

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

// TMA store epilogue: a 2D box from shared memory to the tensor at (c0 = column, c1 = row), in
// the bulk-async group of the issuing thread; clipped at the tensor's bounds.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, uint32_t src, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(c0), "r"(c1), "r"(src)
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

// Barrier `id` (1 + consumer warpgroup) over the 128 threads of one warpgroup.
__device__ __forceinline__ void warpgroup_bar(int id) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}

__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(float v0, float v1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(v0, v1);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(v0, v1);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator accesses across the asynchronous wgmma window.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Shared-memory matrix descriptor: K-major, 128-byte swizzle, 8-row groups 1024 bytes apart.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  uint64_t d = static_cast<uint64_t>((addr & 0x3ffffu) >> 4);
  d |= static_cast<uint64_t>(1) << 16;          // leading byte offset (unused here): 16 bytes
  d |= static_cast<uint64_t>(1024 >> 4) << 32;  // stride byte offset: 1024 bytes
  d |= static_cast<uint64_t>(1) << 62;          // swizzle mode: 128 bytes
  return d;
}

// The wgmma accumulator operands: N/2 fp32 registers per thread for m64nNk16, written as
// "+f"(d[i]) in order, and their "%i" placeholders in the instruction text.
#define TILEOPS_WGMMA_D8(i)                                                                   \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define TILEOPS_WGMMA_D64                                                               \
  TILEOPS_WGMMA_D8(0), TILEOPS_WGMMA_D8(8), TILEOPS_WGMMA_D8(16), TILEOPS_WGMMA_D8(24), \
      TILEOPS_WGMMA_D8(32), TILEOPS_WGMMA_D8(40), TILEOPS_WGMMA_D8(48), TILEOPS_WGMMA_D8(56)
#define TILEOPS_WGMMA_R64                                                                      \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
  "%56, %57, %58, %59, %60, %61, %62, %63"

// TMA store epilogue, one chunk of 64 output columns of a consumer warpgroup's 64 x block_n tile:
// the fragment values (activation applied when GATED) go to the store buffer `buf` in the 128-byte
// swizzle (16-byte unit u of row r at unit u ^ (r % 8): the 8 rows x 4 lanes of a store
// instruction hit 32 distinct banks), then the warpgroup's first thread stores the chunk with TMA
// at (col, row) and goes on without waiting. Before `buf` is written again its previous store
// must have read it: `reuse` says whether that store exists (waited for by the issuing thread,
// then a warpgroup barrier).
template <typename T, int BN, bool GATED>
__device__ __forceinline__ void store_chunk(const float (&acc)[BN / 2], int chunk, uint32_t buf,
                                            bool reuse, const CUtensorMap* map, int col, int row,
                                            int act, int bar_id, int wt) {
  const int lane = wt & 31;
  const int w4 = wt >> 5;
  if (reuse) {
    if (wt == 0) bulk_wait_read<1>();
    warpgroup_bar(bar_id);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = w4 * 16 + (lane >> 2) + 8 * h;
    const uint32_t row_addr = buf + static_cast<uint32_t>(r * 128 + 4 * (lane & 3));
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int i = 8 * chunk + u;  // the fragment's column group
      float v0;
      float v1;
      if constexpr (GATED) {
        v0 = gated(act, acc[4 * i + 2 * h], acc[4 * (i + BN / 16) + 2 * h]);
        v1 = gated(act, acc[4 * i + 2 * h + 1], acc[4 * (i + BN / 16) + 2 * h + 1]);
      } else {
        v0 = acc[4 * i + 2 * h];
        v1 = acc[4 * i + 2 * h + 1];
      }
      st_shared_u32(row_addr + static_cast<uint32_t>((u ^ (r & 7)) << 4), pack2<T>(v0, v1));
    }
  }
  fence_proxy_async_smem();
  warpgroup_bar(bar_id);
  if (wt == 0) {
    tma_store_2d(map, buf, col, row);
    bulk_commit();
  }
}

#endif  // TILEOPS_MOE_WGMMA_BODY

}  // namespace
}  // namespace tileops::cuda_kernels::moe_detail
