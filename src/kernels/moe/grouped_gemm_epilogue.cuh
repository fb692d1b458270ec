// Internal: the TMA store epilogue the Hopper grouped GEMM kernels share (bf16/fp16:
// grouped_gemm_wgmma_kernel.cuh, e4m3: grouped_gemm_fp8_kernel.cuh): one 64 x 64 chunk of a
// consumer warpgroup's accumulators, the gated activation applied, through shared memory to a TMA
// store. Include only from the .cu files of those kernels.
#pragma once

#include "kernels/common/arch.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/common/vectors.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/moe/grouped_gemm_common.cuh"

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace tileops::cuda_kernels::moe_detail {
namespace {

// The Hopper wrappers (kernels/common: tma.cuh, wgmma.cuh), unqualified in the grouped GEMM
// kernels that include this header.
using namespace ::tileops::cuda_kernels::hopper;

#if TILEOPS_SM90A_BODY

using vec::pack2;

// TMA store epilogue, one chunk of 64 output columns of a consumer warpgroup's 64 x block_n tile:
// the fragment values (activation applied when GATED) go to the store buffer `buf` in the 128-byte
// swizzle (16-byte unit u of row r at unit u ^ (r % 8): the 8 rows x 4 lanes of a store
// instruction hit 32 distinct banks), then the warpgroup's first thread stores the chunk with TMA
// at (col, row) and goes on without waiting. Before `buf` is written again its previous store
// must have read it: `reuse` says whether that store exists (waited for by the issuing thread,
// allowing PENDING later stores still reading, then a warpgroup barrier).
template <typename T, int BN, bool GATED, int PENDING = 1>
__device__ __forceinline__ void store_chunk(const float (&acc)[BN / 2], int chunk, uint32_t buf,
                                            bool reuse, const CUtensorMap* map, int col, int row,
                                            MoEActivation act, int bar_id, int wt) {
  const int lane = wt & 31;
  const int w4 = wt >> 5;
  if (reuse) {
    if (wt == 0) bulk_wait_read<PENDING>();
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

#endif  // TILEOPS_SM90A_BODY

}  // namespace
}  // namespace tileops::cuda_kernels::moe_detail
