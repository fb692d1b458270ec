// Internal: the Hopper PTX wrappers the attention kernels need beyond the shared ones
// (kernels/common/tma.cuh and wgmma.cuh: TMA prefetch, wgmma fences and waits, K-major
// descriptors, the accumulator operand lists; kernels/common/mbarrier.cuh: mbarriers): 3D TMA
// loads, the MN-major shared-memory descriptor of V, wgmma with B from shared memory for N = 64,
// 80, 128 and with A from registers (P) and a transposed (MN-major) B for N = 64, 128, 256, named
// barriers and register reallocation. Compiled only where TILEOPS_SM90A_BODY is 1 (host and
// sm_90a).
#pragma once

#include "kernels/common/arch.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/common/wgmma.cuh"

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace tileops::cuda_kernels::attention_detail {
namespace {

#if TILEOPS_SM90A_BODY

// 3D tile load: box at (c0 = head-dim column, c1 = head, c2 = token) into `dst`, completing on
// `bar`; elements past the tensor's bounds are zero-filled (and counted in the transaction bytes).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// 4D tile load (a make_tma_map_row_chunks map): box at (c0 = column, c1 = row, c2 = chunk,
// c3 = head) into `dst`, completing on `bar`; zero fill past the bounds as tma_load_3d.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, int c3, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

// Shared-memory descriptor of an MN-major operand in the 128-byte swizzle: rows of 64 elements
// (128 bytes) along N, one row per k, 8-row groups of 1024 bytes along k (stride byte offset), and
// the next 64 columns of N `lbo` bytes further (leading byte offset).
__device__ __forceinline__ uint64_t smem_desc_mn(uint32_t addr, uint32_t lbo) {
  uint64_t d = static_cast<uint64_t>((addr & 0x3ffffu) >> 4);
  d |= static_cast<uint64_t>((lbo >> 4) & 0x3fffu) << 16;
  d |= static_cast<uint64_t>(1024 >> 4) << 32;
  d |= static_cast<uint64_t>(1) << 62;  // 128-byte swizzle
  return d;
}

// Named barrier `id` over `count` threads: wait for all, or arrive without waiting.
__device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// Register reallocation of the whole warpgroup (every warp executes the same one).
template <int N>
__device__ __forceinline__ void regs_increase() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void regs_decrease() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float fast_rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// tanh(x) = 1 - 2 / (exp(2x) + 1): absolute error a few ulp of 1 (no cancellation problem for
// the scores, which use tanh times the cap), saturating to +-1.
__device__ __forceinline__ float tanh_abs_accurate(float x) {
  const float e = fast_exp2(x * 2.8853900817779268f);  // exp(2x) = exp2(2x log2 e)
  return 1.0f - 2.0f * fast_rcp(e + 1.0f);
}

// Keeps the compiler from moving register-A operands across the asynchronous wgmma window.
template <int R>
__device__ __forceinline__ void fence_u32(uint32_t (&a)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// ---------------------------------------------------------------------------------------------
// wgmma m64nNk16, fp32 accumulators. SS: A and B from shared-memory descriptors, both K-major.
// RS: A from 4 registers per thread (the accumulator layout of a previous wgmma, packed in pairs),
// B MN-major (imm-trans-b = 1). SCALE_D 0 overwrites the accumulators, 1 adds to them.

#define TILEOPS_ATT_PH32                                                        \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, " \
  "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define TILEOPS_ATT_PH40 TILEOPS_ATT_PH32 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define TILEOPS_ATT_PH128                                                                    \
  TILEOPS_WGMMA_R64                                                                          \
  ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, "  \
  "%81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, "    \
  "%98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, " \
  "%113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define TILEOPS_ATT_ACC32 \
  TILEOPS_WGMMA_D8(0), TILEOPS_WGMMA_D8(8), TILEOPS_WGMMA_D8(16), TILEOPS_WGMMA_D8(24)
#define TILEOPS_ATT_ACC40 TILEOPS_ATT_ACC32, TILEOPS_WGMMA_D8(32)
#define TILEOPS_ATT_ACC128                                                                      \
  TILEOPS_WGMMA_D64, TILEOPS_WGMMA_D8(64), TILEOPS_WGMMA_D8(72), TILEOPS_WGMMA_D8(80),          \
      TILEOPS_WGMMA_D8(88), TILEOPS_WGMMA_D8(96), TILEOPS_WGMMA_D8(104), TILEOPS_WGMMA_D8(112), \
      TILEOPS_WGMMA_D8(120)

// The specializations of WgmmaSS<T, N>::run<SCALE_D>(d, desc_a, desc_b) and
// WgmmaRS<T, N>::run(d, a, desc_b) (always adding). The operand numbers after the N / 2
// accumulators are spelled out: SS desc a, desc b, scale-d; RS a0..a3, desc b.
template <typename T, int N>
struct WgmmaSS;
template <typename T, int N>
struct WgmmaRS;

#define TILEOPS_ATT_SS_SPEC(CT, TY, N, R, PH, ACC, OA, OB, OS)                               \
  template <>                                                                                \
  struct WgmmaSS<CT, N> {                                                                    \
    template <int SCALE_D>                                                                   \
    static __device__ __forceinline__ void run(float (&d)[R], uint64_t da, uint64_t db) {    \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " OS                                    \
                   ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" PH \
                   "}, " OA ", " OB ", p, 1, 1, 0, 0;\n}\n"                                  \
                   : ACC                                                                     \
                   : "l"(da), "l"(db), "r"(SCALE_D));                                        \
    }                                                                                        \
  }

#define TILEOPS_ATT_RS_SPEC(CT, TY, N, R, PH, ACC, OA, OB, OS)                               \
  template <>                                                                                \
  struct WgmmaRS<CT, N> {                                                                    \
    static __device__ __forceinline__ void run(float (&d)[R], const uint32_t (&a)[4],        \
                                               uint64_t db) {                                \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " OS                                    \
                   ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" PH \
                   "}, {" OA "}, " OB ", p, 1, 1, 1;\n}\n"                                   \
                   : ACC                                                                     \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));           \
    }                                                                                        \
  }

#define TILEOPS_ATT_SPECS(CT, TY)                                                                  \
  TILEOPS_ATT_SS_SPEC(CT, TY, 64, 32, TILEOPS_ATT_PH32, TILEOPS_ATT_ACC32, "%32", "%33", "%34");   \
  TILEOPS_ATT_SS_SPEC(CT, TY, 80, 40, TILEOPS_ATT_PH40, TILEOPS_ATT_ACC40, "%40", "%41", "%42");   \
  TILEOPS_ATT_SS_SPEC(CT, TY, 128, 64, TILEOPS_WGMMA_R64, TILEOPS_WGMMA_D64, "%64", "%65", "%66"); \
  TILEOPS_ATT_RS_SPEC(CT, TY, 64, 32, TILEOPS_ATT_PH32, TILEOPS_ATT_ACC32, "%32, %33, %34, %35",   \
                      "%36", "%37");                                                               \
  TILEOPS_ATT_RS_SPEC(CT, TY, 128, 64, TILEOPS_WGMMA_R64, TILEOPS_WGMMA_D64, "%64, %65, %66, %67", \
                      "%68", "%69");                                                               \
  TILEOPS_ATT_RS_SPEC(CT, TY, 256, 128, TILEOPS_ATT_PH128, TILEOPS_ATT_ACC128,                     \
                      "%128, %129, %130, %131", "%132", "%133")

TILEOPS_ATT_SPECS(__nv_bfloat16, "bf16");
TILEOPS_ATT_SPECS(__half, "f16");

#endif  // TILEOPS_SM90A_BODY

}  // namespace
}  // namespace tileops::cuda_kernels::attention_detail
