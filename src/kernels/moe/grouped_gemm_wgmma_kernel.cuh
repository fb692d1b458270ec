// Internal: the kernel of the Hopper grouped GEMM (wgmma fed by TMA) and its device helpers; the
// host launch and the configurations are in grouped_gemm_wgmma_cuda.cu, the only file that
// includes this header (its kernels have internal linkage).
//
// Block: one producer warpgroup (its first warp issues the TMA loads; the other three only join
// the final zero fill) and block_m / 64 consumer warpgroups, each computing 64 x block_n with
// wgmma.mma_async m64n{block_n}k16 (fp32 accumulators in registers, A and B from shared memory).
// Per k step of 64 elements a stage holds the A tile [block_m][64] and the B tile [block_n][64],
// both written by TMA with the 128-byte swizzle (rows of 128 bytes, 8-row groups of 1024 bytes:
// the wgmma descriptors use that layout, stride 1024 bytes between 8-row groups, and advance by
// 32 bytes per k16 step). The stages form a ring guarded by mbarriers: full[s] (the producer's
// arrive.expect_tx + the TMA transaction bytes) and empty[s] (one arrival per consumer warp once
// its wgmma reading the stage has completed, wgmma.wait_group 1 keeping one k step in flight).
//
// Rows past an expert's end and B rows past N read the next expert's data (finite, and only in
// rows / columns the epilogue masks); past the tensors' ends and past K the TMA fills zeros, so
// the K tail needs nothing else. Gated activations: the B tile's first block_n / 2 rows are the
// gate rows j0 .. and the next block_n / 2 the up rows N/2 + j0 .., loaded by two TMA boxes, so
// accumulator column groups i and i + block_n / 16 of a thread are gate and up of the same output
// columns. Persistent grid over the shared tile scheduler (the producer warp and every consumer
// warp run the same cursor). The epilogue stores straight from the accumulators, or (TS, the
// tma_store configurations) writes each consumer warpgroup's 64-row half that lies within one
// expert to shared memory in chunks of 64 columns and stores them with TMA, asynchronously: the
// warpgroup starts its next tile while the stores drain (two 8 KB buffers per warpgroup).
//
// cluster_m = 2 (opt-in): clusters of 2 blocks; the scheduler's units are pairs of consecutive
// m-tiles of one expert and one n-tile (cursor over tiles of 2 * block_m rows), cluster c walks
// units c, c + clusters, ... and block rank r takes m-tile r of the pair (r = 1 past the expert's
// last m-tile: its producer loads the first block's rows, its consumers take part in the pipeline
// without MMAs and it stores nothing). Each producer loads
// its own A tile and B half r (the gate / up half when gated) with a TMA multicast into both
// blocks, so the B tile comes from L2 once per pair. A stage's full barrier expects the whole
// stage (A + both halves, from the two producers); its empty barrier takes one arrival per
// consumer warp of both blocks (a block's producer overwrites the other block's stage too).
// Cluster barriers after the barrier init and before exit.
#pragma once

#include "kernels/moe/grouped_gemm_epilogue.cuh"

#include "kernels/common/arch.cuh"
#include "kernels/common/cluster.cuh"
#include "kernels/common/mbarrier.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/common/wgmma.cuh"

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

namespace tileops::cuda_kernels::moe_detail {
namespace {

// ---------------------------------------------------------------------------------------------
// Kernel.

// The persistent walk over the scheduler's units: per block (CL = 1) or per cluster.
template <int CL>
__device__ __forceinline__ long long first_unit() {
#if TILEOPS_SM90A_BODY
  if constexpr (CL > 1) return cluster_id_x();
#endif
  return blockIdx.x;
}

template <int CL>
__device__ __forceinline__ long long unit_stride() {
#if TILEOPS_SM90A_BODY
  if constexpr (CL > 1) return cluster_count_x();
#endif
  return gridDim.x;
}

template <int BM, int BN, int STAGES, bool TS>
struct WgShape {
  static constexpr int kConsumers = BM / 64;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kABytes = BM * 128;
  static constexpr int kBBytes = BN * 128;
  static constexpr int kStageBytes = kABytes + kBBytes;
  // TS: per consumer warpgroup two store buffers of 64 rows x 64 columns (128-byte swizzle).
  static constexpr int kChunkBytes = 64 * 128;
  static constexpr int kStoreOffset = STAGES * kStageBytes;
  static constexpr int kStoreBytes = TS ? kConsumers * 2 * kChunkBytes : 0;
  static constexpr int kBarOffset = kStoreOffset + kStoreBytes;
  // Stages, store buffers, 2 x STAGES barriers, and slack to align the base to 1024 bytes.
  static constexpr int kSmem = kBarOffset + 16 * STAGES + 1024;
  static_assert(BM == 64 || BM == 128, "block_m must be 64 or 128");
  static_assert(kSmem <= 232448, "over the 227 KB of shared memory a block can have");
};

template <typename T, int BM, int BN, int STAGES, int CL, bool TS>
__global__ void __launch_bounds__(WgShape<BM, BN, STAGES, TS>::kThreads, 1)
    grouped_gemm_wgmma_kernel(const __grid_constant__ CUtensorMap tma_a,
                              const __grid_constant__ CUtensorMap tma_b,
                              const __grid_constant__ CUtensorMap tma_c, const GemmParams p) {
  using S = WgShape<BM, BN, STAGES, TS>;
  static_assert(CL == 1 || CL == 2, "cluster_m must be 1 or 2");
  static_assert(!(TS && CL > 1), "the TMA store epilogue is for cluster_m = 1");
#if !TILEOPS_SM90A_BODY
  // Compiled for a target without the sm_90a features: never launched there (the host checks
  // the device's compute capability).
  __trap();
#else
  constexpr int R = BN / 2;  // accumulators per thread
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023u) & ~1023u;
  const uint32_t full_bar = base + S::kBarOffset;
  const uint32_t empty_bar = full_bar + 8 * STAGES;

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int wg = warp >> 2;
  const int K = static_cast<int>(p.K);
  const int KT = (K + 63) / 64;
  const bool is_gated = p.act != MoEActivation::none;
  // The scheduler's units: CL m-tiles of one expert and one n-tile; with CL = 2 the cluster's
  // blocks take the unit's m-tiles by rank (a missing second m-tile: rows 0, the block's
  // consumers drain the pipeline without MMAs and store nothing).
  int rank = 0;
  if constexpr (CL > 1) rank = static_cast<int>(cluster_ctarank());

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarrier::init(full_bar + 8 * s, 1);
      // CL > 1: the consumers of every block of the cluster release each stage (the other
      // block's producer writes into it).
      mbarrier::init(empty_bar + 8 * s, 4 * S::kConsumers * CL);
    }
    mbarrier::fence_init();
  }
  if constexpr (CL > 1) {
    cluster_sync();
  } else {
    __syncthreads();
  }

  if (wg == 0) {
    if (warp == 0) {
      // Producer: every lane runs the cursor, lane 0 issues (and alone tracks the ring).
      if (lane == 0) {
        tma_prefetch(&tma_a);
        tma_prefetch(&tma_b);
      }
      const int N = static_cast<int>(p.N);
      TileCursor cursor;
      TileInfo ti;
      int stage = 0;
      uint32_t phase = 0;
      for (long long t = first_unit<CL>(); cursor.find(p, BM * CL, t, ti); t += unit_stride<CL>()) {
        const int en = ti.expert * N;
        int b_row0;
        int b_row1;
        if (is_gated) {
          b_row0 = en + ti.n_tile * (BN / 2);
          b_row1 = b_row0 + N / 2;
        } else {
          b_row0 = en + ti.n_tile * BN;
          b_row1 = b_row0 + BN / 2;
        }
        // A block without rows (CL > 1) loads the first block's rows (in range; not stored).
        const int a_row = CL == 1 || rank * BM >= ti.rows ? ti.row0 : ti.row0 + rank * BM;
        if (lane == 0) {
          for (int kt = 0; kt < KT; ++kt) {
            if constexpr (CL == 1) {
              mbarrier::wait(empty_bar + 8 * stage, phase ^ 1u);
            } else {
              mbarrier::wait_cluster(empty_bar + 8 * stage, phase ^ 1u);
            }
            const uint32_t full = full_bar + 8 * stage;
            mbarrier::arrive_expect_tx(full, S::kStageBytes);
            const uint32_t sa = base + static_cast<uint32_t>(stage * S::kStageBytes);
            const uint32_t sb = sa + S::kABytes;
            if constexpr (CL == 1) {
              tma_load_2d(sa, &tma_a, kt * 64, a_row, full);
              tma_load_2d(sb, &tma_b, kt * 64, b_row0, full);
              tma_load_2d(sb + S::kBBytes / 2, &tma_b, kt * 64, b_row1, full);
            } else {
              // Own A; B half `rank` (gate / up halves when gated) to both blocks. The full
              // barrier counts the A bytes and both B halves (one from each block's producer).
              tma_load_2d(sa, &tma_a, kt * 64, a_row, full);
              tma_load_2d_multicast(sb + static_cast<uint32_t>(rank * (S::kBBytes / 2)), &tma_b,
                                    kt * 64, rank == 0 ? b_row0 : b_row1, full,
                                    static_cast<uint16_t>((1u << CL) - 1u));
            }
            if (++stage == STAGES) {
              stage = 0;
              phase ^= 1u;
            }
          }
        }
        __syncwarp();
      }
    }
  } else {
    // Consumers.
    const int cw = wg - 1;
    const int w4 = warp & 3;
    const int wt = tid - 128 * wg;  // thread within the warpgroup
    // TS: this warpgroup's two store buffers and the TMA stores it has issued.
    const uint32_t store_buf =
        base + static_cast<uint32_t>(S::kStoreOffset + cw * 2 * S::kChunkBytes);
    int stores = 0;
    T* C = static_cast<T*>(p.c);
    const bool pair = (reinterpret_cast<uintptr_t>(C) & 3u) == 0 && (p.n_out & 1) == 0;
    float acc[R];
    TileCursor cursor;
    TileInfo ti;
    int stage = 0;
    uint32_t phase = 0;
    for (long long t = first_unit<CL>(); cursor.find(p, BM * CL, t, ti); t += unit_stride<CL>()) {
      int row0 = ti.row0;
      int rows = ti.rows;
      if constexpr (CL > 1) {
        row0 += rank * BM;
        rows -= rank * BM;
        rows = rows < 0 ? 0 : (rows > BM ? BM : rows);
      }
#pragma unroll
      for (int i = 0; i < R; ++i) acc[i] = 0.f;
      // A warpgroup none of whose 64 rows belongs to the expert (the short last m-tile of an
      // expert) takes part in the ring without issuing its MMAs: it releases each stage as soon
      // as it is full, and the other warpgroup has the tensor cores to itself.
      if (rows <= cw * 64) {
        for (int kt = 0; kt < KT; ++kt) {
          mbarrier::wait(full_bar + 8 * stage, phase);
          __syncwarp();
          if constexpr (CL == 1) {
            if (lane == 0) mbarrier::arrive(empty_bar + 8 * stage);
          } else {
            if (lane < CL)
              mbarrier::arrive_cluster(empty_bar + 8 * stage, static_cast<uint32_t>(lane));
          }
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1u;
          }
        }
        continue;
      }
      int prev = -1;
      for (int kt = 0; kt < KT; ++kt) {
        mbarrier::wait(full_bar + 8 * stage, phase);
        const uint32_t sa = base + static_cast<uint32_t>(stage * S::kStageBytes) + cw * 64 * 128;
        const uint32_t sb = base + static_cast<uint32_t>(stage * S::kStageBytes) + S::kABytes;
        fence_regs(acc);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
          wgmma_tile<T, BN>(acc, smem_desc(sa + 32 * ks), smem_desc(sb + 32 * ks));
        wgmma_commit();
        wgmma_wait<1>();
        fence_regs(acc);
        if (prev >= 0) {
          __syncwarp();
          if constexpr (CL == 1) {
            if (lane == 0) mbarrier::arrive(empty_bar + 8 * prev);
          } else {
            if (lane < CL)
              mbarrier::arrive_cluster(empty_bar + 8 * prev, static_cast<uint32_t>(lane));
          }
        }
        prev = stage;
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1u;
        }
      }
      wgmma_wait<0>();
      fence_regs(acc);
      if (prev >= 0) {
        __syncwarp();
        if constexpr (CL == 1) {
          if (lane == 0) mbarrier::arrive(empty_bar + 8 * prev);
        } else {
          if (lane < CL)
            mbarrier::arrive_cluster(empty_bar + 8 * prev, static_cast<uint32_t>(lane));
        }
      }
      // Epilogue: rows cw * 64 + w4 * 16 + lane / 4 (+ 8); column group i holds columns
      // 8 i + 2 (lane % 4) (+ 1).
      // TS: a warpgroup whose 64 rows all belong to the expert stores through the store buffers
      // (chunks of 64 columns, the two buffers alternating); the others store from registers.
      bool stored = false;
      if constexpr (TS) {
        if (rows >= (cw + 1) * 64) {
          const int out_cols = is_gated ? BN / 2 : BN;
          const int col0 = ti.n_tile * out_cols;
          const int row = row0 + cw * 64;
          const int bar_id = 1 + cw;
          if (is_gated) {
#pragma unroll
            for (int ch = 0; ch < BN / 128; ++ch) {
              if (col0 + 64 * ch >= p.n_out) break;
              store_chunk<T, BN, true>(acc, ch, store_buf + (stores & 1) * S::kChunkBytes,
                                       stores >= 2, &tma_c, col0 + 64 * ch, row, p.act, bar_id, wt);
              ++stores;
            }
          } else {
#pragma unroll
            for (int ch = 0; ch < BN / 64; ++ch) {
              if (col0 + 64 * ch >= p.n_out) break;
              store_chunk<T, BN, false>(acc, ch, store_buf + (stores & 1) * S::kChunkBytes,
                                        stores >= 2, &tma_c, col0 + 64 * ch, row, p.act, bar_id,
                                        wt);
              ++stores;
            }
          }
          stored = true;
        }
      }
      if (stored) continue;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = cw * 64 + w4 * 16 + (lane >> 2) + 8 * h;
        if (r >= rows) continue;
        T* crow = C + static_cast<int64_t>(row0 + r) * p.n_out;
        if (is_gated) {
#pragma unroll
          for (int i = 0; i < BN / 16; ++i) {
            const int64_t col = static_cast<int64_t>(ti.n_tile) * (BN / 2) + 8 * i + 2 * (lane & 3);
            const float v0 = gated(p.act, acc[4 * i + 2 * h], acc[4 * (i + BN / 16) + 2 * h]);
            const float v1 =
                gated(p.act, acc[4 * i + 2 * h + 1], acc[4 * (i + BN / 16) + 2 * h + 1]);
            store_pair<T>(crow, col, p.n_out, pair, v0, v1);
          }
        } else {
#pragma unroll
          for (int i = 0; i < BN / 8; ++i) {
            const int64_t col = static_cast<int64_t>(ti.n_tile) * BN + 8 * i + 2 * (lane & 3);
            store_pair<T>(crow, col, p.n_out, pair, acc[4 * i + 2 * h], acc[4 * i + 2 * h + 1]);
          }
        }
      }
    }
    // The TMA stores read their buffers and write c before the block exits.
    if constexpr (TS) {
      if (wt == 0) bulk_wait_all();
    }
  }
  zero_uncovered<T>(p, static_cast<long long>(blockIdx.x) * S::kThreads + tid,
                    static_cast<long long>(gridDim.x) * S::kThreads);
  // CL > 1: no block leaves while the other may still arrive on its barriers.
  if constexpr (CL > 1) cluster_sync();
#endif
}

}  // namespace
}  // namespace tileops::cuda_kernels::moe_detail
