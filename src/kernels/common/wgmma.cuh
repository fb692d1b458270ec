// Internal: the PTX wrappers of Hopper warpgroup MMA: the wgmma fences and groups, the
// shared-memory matrix descriptor of K-major tiles in the 128-byte swizzle (what TMA writes with
// tma_map.h's maps), the accumulator operand lists of the wgmma asm statements, the instructions
// the kernels issue (bf16 / fp16 m64nNk16 and e4m3 m64n128k32 / m64n64k32, both operands from
// shared memory, fp32 accumulators), and the warpgroup's named barrier and 32-bit shared store.
// Include only from .cu files; the wrappers exist where TILEOPS_SM90A_BODY (arch.cuh) is set.
#pragma once

#include "kernels/common/arch.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace tileops::cuda_kernels::hopper {

#if TILEOPS_SM90A_BODY

// Barrier `id` over the 128 threads of one warpgroup (id 0 is __syncthreads' barrier).
__device__ __forceinline__ void warpgroup_bar(int id) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}

__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
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
#define TILEOPS_WGMMA_D32 \
  TILEOPS_WGMMA_D8(0), TILEOPS_WGMMA_D8(8), TILEOPS_WGMMA_D8(16), TILEOPS_WGMMA_D8(24)
#define TILEOPS_WGMMA_R32                                                                      \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define TILEOPS_WGMMA_D64                                                               \
  TILEOPS_WGMMA_D8(0), TILEOPS_WGMMA_D8(8), TILEOPS_WGMMA_D8(16), TILEOPS_WGMMA_D8(24), \
      TILEOPS_WGMMA_D8(32), TILEOPS_WGMMA_D8(40), TILEOPS_WGMMA_D8(48), TILEOPS_WGMMA_D8(56)
#define TILEOPS_WGMMA_R64                                                                      \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
  "%56, %57, %58, %59, %60, %61, %62, %63"
#define TILEOPS_WGMMA_D128                                                                      \
  TILEOPS_WGMMA_D64, TILEOPS_WGMMA_D8(64), TILEOPS_WGMMA_D8(72), TILEOPS_WGMMA_D8(80),          \
      TILEOPS_WGMMA_D8(88), TILEOPS_WGMMA_D8(96), TILEOPS_WGMMA_D8(104), TILEOPS_WGMMA_D8(112), \
      TILEOPS_WGMMA_D8(120)
#define TILEOPS_WGMMA_R128                                                                     \
  TILEOPS_WGMMA_R64                                                                            \
  ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, "    \
  "%81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, " \
  "%99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, "  \
  "%114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

// D[64 x N] += A(smem desc) x B(smem desc)^T with fp32 accumulators; TYPE is "bf16" or "f16".
// Operands: the N/2 accumulators, then the two descriptors, then the scale-d flag (1: add).
#define TILEOPS_WGMMA_ASM(N, TYPE, REGS, DESC_A, DESC_B, FLAG, OUTS)                        \
  asm volatile(                                                                             \
      "{\n"                                                                                 \
      ".reg .pred p;\n"                                                                     \
      "setp.ne.b32 p, " FLAG                                                                \
      ", 0;\n"                                                                              \
      "wgmma.mma_async.sync.aligned.m64n" N "k16.f32." TYPE "." TYPE " {" REGS "}, " DESC_A \
      ", " DESC_B                                                                           \
      ", p, 1, 1, 0, 0;\n"                                                                  \
      "}\n"                                                                                 \
      : OUTS                                                                                \
      : "l"(da), "l"(db), "r"(1))

__device__ __forceinline__ void wgmma_n128_bf16(float (&d)[64], uint64_t da, uint64_t db) {
  TILEOPS_WGMMA_ASM("128", "bf16", TILEOPS_WGMMA_R64, "%64", "%65", "%66", TILEOPS_WGMMA_D64);
}
__device__ __forceinline__ void wgmma_n128_f16(float (&d)[64], uint64_t da, uint64_t db) {
  TILEOPS_WGMMA_ASM("128", "f16", TILEOPS_WGMMA_R64, "%64", "%65", "%66", TILEOPS_WGMMA_D64);
}
__device__ __forceinline__ void wgmma_n256_bf16(float (&d)[128], uint64_t da, uint64_t db) {
  TILEOPS_WGMMA_ASM("256", "bf16", TILEOPS_WGMMA_R128, "%128", "%129", "%130", TILEOPS_WGMMA_D128);
}
__device__ __forceinline__ void wgmma_n256_f16(float (&d)[128], uint64_t da, uint64_t db) {
  TILEOPS_WGMMA_ASM("256", "f16", TILEOPS_WGMMA_R128, "%128", "%129", "%130", TILEOPS_WGMMA_D128);
}

// D[64 x BN] += A x B^T for T = __nv_bfloat16 or __half, BN 128 or 256 (one k16 step).
template <typename T, int BN>
__device__ __forceinline__ void wgmma_tile(float (&d)[BN / 2], uint64_t da, uint64_t db) {
  if constexpr (BN == 256) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      wgmma_n256_bf16(d, da, db);
    } else {
      wgmma_n256_f16(d, da, db);
    }
  } else {
    static_assert(BN == 128, "block_n must be 128 or 256");
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      wgmma_n128_bf16(d, da, db);
    } else {
      wgmma_n128_f16(d, da, db);
    }
  }
}

// D[64 x 128] (+)= A(e4m3, smem) x B(e4m3, smem)^T, fp32 accumulators; `accumulate` 0 overwrites.
__device__ __forceinline__ void wgmma_n128_e4m3(float (&d)[64], uint64_t da, uint64_t db,
                                                int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {" TILEOPS_WGMMA_R64
      "}, %64, %65, p, 1, 1;\n"
      "}\n"
      : TILEOPS_WGMMA_D64
      : "l"(da), "l"(db), "r"(accumulate));
}

// D[64 x 64] (+)= A(e4m3, smem) x B(e4m3, smem)^T: the narrow tiles of small-M GEMMs, whose
// weights must be spread over more blocks than 128-column slices give.
__device__ __forceinline__ void wgmma_n64_e4m3(float (&d)[32], uint64_t da, uint64_t db,
                                               int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {" TILEOPS_WGMMA_R32
      "}, %32, %33, p, 1, 1;\n"
      "}\n"
      : TILEOPS_WGMMA_D32
      : "l"(da), "l"(db), "r"(accumulate));
}

#endif  // TILEOPS_SM90A_BODY

}  // namespace tileops::cuda_kernels::hopper
