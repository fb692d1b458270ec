// Grouped GEMM, tensor-core variant through mma.sync (see grouped_gemm_cuda.h for the semantics).
//
// A persistent block walks the linear tile index (grouped_gemm_common.cuh). Per tile: block_m
// rows of A x block_n rows of B, k steps of 64 elements (128 bytes a row) through a STAGES-deep
// cp.async pipeline in shared memory (one barrier per k step; the load of step kt + STAGES - 1 is
// issued before the math of step kt). Rows are stored 128 bytes each with the 16-byte chunks
// XOR-swizzled by (row & 7), so both the cp.async writes and the ldmatrix reads are free of bank
// conflicts. Rows past the expert's end, B rows past N and k chunks past K are zero-filled
// (cp.async src-size 0). Each warp computes a (block_m / warps_m) x (block_n / warps_n) tile with
// mma.sync m16n8k16 (fp32 accumulators), A and B fragments from ldmatrix.x4.
//
// Gated activations: the warp tile's first WN/2 B rows are gate rows j and the next WN/2 the up
// rows N/2 + j of the same j, so every thread holds gate and up accumulators of the same output
// columns and the activation is applied in registers. The next tile's prologue loads are issued
// before the current tile's epilogue (stores straight from the accumulators, bf16x2 / half2).
#include "kernels/moe/grouped_gemm_common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/common/mma.cuh"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels::moe_detail {
namespace {

using mma::cp_async16;
using mma::cp_async_commit;
using mma::cp_async_wait;
using mma::ldmatrix_x4;
using mma::mma16816;

// Byte offset of 16-byte chunk `chunk` of tile row `row` (rows of 128 bytes, XOR swizzle).
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
  return static_cast<uint32_t>(row * 128 + ((chunk ^ (row & 7)) << 4));
}

template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
struct MmaShape {
  static constexpr int kThreads = 32 * WARPS_M * WARPS_N;
  static constexpr int kWM = BM / WARPS_M;
  static constexpr int kWN = BN / WARPS_N;
  static constexpr int kMF = kWM / 16;
  static constexpr int kNF = kWN / 8;
  static constexpr int kABytes = BM * 128;
  static constexpr int kStageBytes = (BM + BN) * 128;
  static constexpr int kSmem = STAGES * kStageBytes;
  static constexpr int kRowsPerPass = kThreads / 8;  // rows one sweep of 16-byte chunks covers
  static constexpr int kAChunks = BM / kRowsPerPass;
  static constexpr int kBChunks = BN / kRowsPerPass;
  static_assert(kWM % 16 == 0 && kWN % 16 == 0, "warp tile must be a multiple of 16 x 16");
  static_assert(BM % kRowsPerPass == 0 && BN % kRowsPerPass == 0, "tile rows vs threads");
  static_assert(STAGES >= 2, "at least two stages");
};

template <typename T, int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
__global__ void __launch_bounds__(32 * WARPS_M * WARPS_N, 1)
    grouped_gemm_mma_kernel(const GemmParams p) {
  using S = MmaShape<BM, BN, WARPS_M, WARPS_N, STAGES>;
  constexpr int MF = S::kMF;
  constexpr int NF = S::kNF;
  constexpr int WM = S::kWM;
  constexpr int WN = S::kWN;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t smem_base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int wm = warp / WARPS_N;
  const int wn = warp % WARPS_N;
  const int chunk = tid & 7;  // the 16-byte k chunk this thread loads
  const int lrow = tid >> 3;  // the first tile row this thread loads
  const T* A = static_cast<const T*>(p.a);
  const T* B = static_cast<const T*>(p.b);
  T* C = static_cast<T*>(p.c);
  const int K = static_cast<int>(p.K);
  const int KT = (K + 63) / 64;
  const bool is_gated = p.act != MoEActivation::none;
  const int half_n = static_cast<int>(p.N / 2);
  const int N = static_cast<int>(p.N);

  // Load state of the tile being loaded: row offsets (elements, -1: zero-fill) from the tile's
  // A rows and the expert's B.
  const T* a_tile = A;
  const T* b_tile = B;
  int a_off[S::kAChunks];
  int b_off[S::kBChunks];

  const auto setup = [&](const TileInfo& ti) {
    a_tile = A + static_cast<int64_t>(ti.row0) * K;
    b_tile = B + static_cast<int64_t>(ti.expert) * p.N * K;
#pragma unroll
    for (int j = 0; j < S::kAChunks; ++j) {
      const int r = lrow + j * S::kRowsPerPass;
      a_off[j] = r < ti.rows ? r * K : -1;
    }
#pragma unroll
    for (int j = 0; j < S::kBChunks; ++j) {
      const int r = lrow + j * S::kRowsPerPass;
      int n;
      bool ok;
      if (is_gated) {
        const int w = r % WN;
        const int jj = (r / WN) * (WN / 2) + w % (WN / 2);
        const int col = ti.n_tile * (BN / 2) + jj;
        ok = col < half_n;
        n = (w >= WN / 2 ? half_n : 0) + col;
      } else {
        n = ti.n_tile * BN + r;
        ok = n < N;
      }
      b_off[j] = ok ? n * K : -1;
    }
  };

  const auto load_stage = [&](int stage, int kt) {
    const int k = kt * 64 + chunk * 8;
    const bool kok = k < K;
    const uint32_t sa = smem_base + static_cast<uint32_t>(stage * S::kStageBytes);
    const uint32_t sb = sa + S::kABytes;
#pragma unroll
    for (int j = 0; j < S::kAChunks; ++j) {
      const int r = lrow + j * S::kRowsPerPass;
      const bool ok = kok && a_off[j] >= 0;
      cp_async16(sa + swz(r, chunk), ok ? a_tile + a_off[j] + k : A, ok);
    }
#pragma unroll
    for (int j = 0; j < S::kBChunks; ++j) {
      const int r = lrow + j * S::kRowsPerPass;
      const bool ok = kok && b_off[j] >= 0;
      cp_async16(sb + swz(r, chunk), ok ? b_tile + b_off[j] + k : B, ok);
    }
  };

  const auto prologue = [&]() {
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < KT) load_stage(s, s);
      cp_async_commit();
    }
  };

  float acc[MF][NF][4];

  const auto compute_stage = [&](int stage) {
    const uint32_t sa = smem_base + static_cast<uint32_t>(stage * S::kStageBytes);
    const uint32_t sb = sa + S::kABytes;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t af[MF][4];
      uint32_t bfr[NF / 2][4];
#pragma unroll
      for (int mf = 0; mf < MF; ++mf) {
        const int row = wm * WM + mf * 16 + (lane & 15);
        ldmatrix_x4(af[mf], sa + swz(row, ks * 2 + (lane >> 4)));
      }
#pragma unroll
      for (int nf = 0; nf < NF / 2; ++nf) {
        const int row = wn * WN + nf * 16 + ((lane >> 4) << 3) + (lane & 7);
        ldmatrix_x4(bfr[nf], sb + swz(row, ks * 2 + ((lane >> 3) & 1)));
      }
#pragma unroll
      for (int mf = 0; mf < MF; ++mf)
#pragma unroll
        for (int nf = 0; nf < NF; ++nf)
          mma16816<T>(acc[mf][nf], af[mf], bfr[nf / 2][(nf & 1) * 2],
                      bfr[nf / 2][(nf & 1) * 2 + 1]);
    }
  };

  const bool pair = (reinterpret_cast<uintptr_t>(C) & 3u) == 0 && (p.n_out & 1) == 0;
  const auto epilogue = [&](const TileInfo& ti) {
#pragma unroll
    for (int mf = 0; mf < MF; ++mf) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wm * WM + mf * 16 + (lane >> 2) + h * 8;
        if (r >= ti.rows) continue;
        T* crow = C + static_cast<int64_t>(ti.row0 + r) * p.n_out;
        if (is_gated) {
#pragma unroll
          for (int nf = 0; nf < NF / 2; ++nf) {
            const int64_t col = static_cast<int64_t>(ti.n_tile) * (BN / 2) + wn * (WN / 2) +
                                nf * 8 + 2 * (lane & 3);
            const float v0 = gated(p.act, acc[mf][nf][2 * h], acc[mf][nf + NF / 2][2 * h]);
            const float v1 = gated(p.act, acc[mf][nf][2 * h + 1], acc[mf][nf + NF / 2][2 * h + 1]);
            store_pair<T>(crow, col, p.n_out, pair, v0, v1);
          }
        } else {
#pragma unroll
          for (int nf = 0; nf < NF; ++nf) {
            const int64_t col =
                static_cast<int64_t>(ti.n_tile) * BN + wn * WN + nf * 8 + 2 * (lane & 3);
            store_pair<T>(crow, col, p.n_out, pair, acc[mf][nf][2 * h], acc[mf][nf][2 * h + 1]);
          }
        }
      }
    }
  };

  TileCursor cursor;
  TileInfo ti;
  long long t = blockIdx.x;
  bool have = cursor.find(p, BM, t, ti);
  if (have) {
    setup(ti);
    prologue();
  }
  while (have) {
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int nf = 0; nf < NF; ++nf)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[mf][nf][q] = 0.f;
    int stage = 0;
    int load = STAGES - 1;
    for (int kt = 0; kt < KT; ++kt) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      if (kt + STAGES - 1 < KT) load_stage(load, kt + STAGES - 1);
      cp_async_commit();
      compute_stage(stage);
      stage = stage + 1 == STAGES ? 0 : stage + 1;
      load = load + 1 == STAGES ? 0 : load + 1;
    }
    __syncthreads();  // every warp is done with the stages: the next tile may load
    TileInfo next;
    t += gridDim.x;
    const bool have_next = cursor.find(p, BM, t, next);
    if (have_next) {
      setup(next);
      prologue();
    }
    epilogue(ti);
    ti = next;
    have = have_next;
  }
  cp_async_wait<0>();
  zero_uncovered<T>(p, static_cast<long long>(blockIdx.x) * S::kThreads + tid,
                    static_cast<long long>(gridDim.x) * S::kThreads);
}

// ---------------------------------------------------------------------------------------------
// Host side: the instantiated shapes.

using Launcher = void (*)(const GemmParams&, int blocks_per_sm, int sms, long long max_tiles,
                          cudaStream_t);

template <typename T, int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
void run(const GemmParams& p, int blocks_per_sm, int sms, long long max_tiles,
         cudaStream_t stream) {
  using S = MmaShape<BM, BN, WARPS_M, WARPS_N, STAGES>;
  const auto kernel = grouped_gemm_mma_kernel<T, BM, BN, WARPS_M, WARPS_N, STAGES>;
  const void* fn = reinterpret_cast<const void*>(kernel);
  allow_smem(fn, S::kSmem);
  const long long grid = persistent_grid(fn, S::kThreads, S::kSmem, blocks_per_sm, sms, max_tiles);
  kernel<<<static_cast<unsigned>(grid), S::kThreads, S::kSmem, stream>>>(p);
}

using Entry = VariantEntry<Launcher>;

template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
constexpr Entry entry() {
  return Entry{tensor_core_config(GroupedGemmVariant::mma, BM, BN, WARPS_M, WARPS_N, STAGES),
               run<__nv_bfloat16, BM, BN, WARPS_M, WARPS_N, STAGES>,
               run<__half, BM, BN, WARPS_M, WARPS_N, STAGES>};
}

const Entry kEntries[] = {
    entry<128, 256, 2, 4, 3>(),  // warp tile 64 x 64, 144 KB
    entry<128, 256, 2, 4, 4>(),  // 192 KB
    entry<256, 128, 4, 2, 3>(),  // warp tile 64 x 64
    entry<128, 128, 2, 2, 4>(),  // 4 warps, warp tile 64 x 64, 128 KB
    entry<128, 128, 2, 4, 3>(),  // warp tile 64 x 32, 96 KB
    entry<64, 128, 2, 2, 4>(),   // warp tile 32 x 64 (few rows per expert)
    entry<32, 128, 1, 4, 6>(),   // warp tile 32 x 32 (decode-sized experts)
};

}  // namespace

std::vector<GroupedGemmConfig> mma_configs() {
  return configs_of(kEntries);
}

void launch_mma(const GemmParams& p, const GroupedGemmConfig& config, DType dtype, int sms,
                long long max_tiles, cudaStream_t stream) {
  launcher_of(kEntries, config, dtype, "mma")(p, config.blocks_per_sm, sms, max_tiles, stream);
}

}  // namespace tileops::cuda_kernels::moe_detail
