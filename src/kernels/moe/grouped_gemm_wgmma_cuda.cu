// Grouped GEMM, Hopper variant: warpgroup MMA (wgmma) fed by TMA (see grouped_gemm_cuda.h for the
// semantics; the kernel and its pipeline: grouped_gemm_wgmma_kernel.cuh). sm_90a only. This file
// is the host side: tensor maps, the launch (persistent grid, or clusters of 2 blocks) and the
// table of instantiated configurations.
#include "kernels/common/cluster_launch.h"
#include "kernels/common/tma_map.h"
#include "kernels/moe/grouped_gemm_wgmma_kernel.cuh"

#include <algorithm>
#include <string>
#include <vector>

#include "tileops/core/error.h"

namespace tileops::cuda_kernels::moe_detail {
namespace {

// A 2D map over [rows, K] (K contiguous), boxes of 64 x box_rows, 128-byte swizzle, zero fill.
CUtensorMap make_map(const void* base, DType dtype, int64_t rows, int64_t K, int box_rows) {
  return hopper::make_tma_map_2d(
      base,
      dtype == DType::bfloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      2, rows, K, 64, box_rows);
}

using Launcher = void (*)(const GemmParams&, DType, int blocks_per_sm, int sms, long long max_tiles,
                          cudaStream_t);

template <typename T, int BM, int BN, int STAGES, int CL, bool TS>
void run(const GemmParams& p, DType dtype, int blocks_per_sm, int sms, long long max_tiles,
         cudaStream_t stream) {
  if constexpr (TS) {
    // The TMA store needs a 16-byte aligned c with rows of a multiple of 16 bytes; else the
    // same kernel with stores from registers.
    if ((reinterpret_cast<uintptr_t>(p.c) & 15u) != 0 || p.n_out % 8 != 0) {
      run<T, BM, BN, STAGES, CL, false>(p, dtype, blocks_per_sm, sms, max_tiles, stream);
      return;
    }
  }
  using S = WgShape<BM, BN, STAGES, TS>;
  const auto kernel = grouped_gemm_wgmma_kernel<T, BM, BN, STAGES, CL, TS>;
  const void* fn = reinterpret_cast<const void*>(kernel);
  allow_smem(fn, S::kSmem);
  const CUtensorMap map_a = make_map(p.a, dtype, p.M, p.K, BM);
  const CUtensorMap map_b = make_map(p.b, dtype, p.N * p.E, p.K, BN / 2);
  // c as [M, n_out] in boxes of 64 x 64 (unused without TS).
  const CUtensorMap map_c = TS ? make_map(p.c, dtype, p.M, p.n_out, 64) : map_a;
  if constexpr (CL == 1) {
    const long long grid =
        persistent_grid(fn, S::kThreads, S::kSmem, blocks_per_sm, sms, max_tiles);
    kernel<<<static_cast<unsigned>(grid), S::kThreads, S::kSmem, stream>>>(map_a, map_b, map_c, p);
  } else {
    // Persistent grid of clusters: as many as can be resident (or blocks_per_sm x
    // multiprocessors / CL), at most one per unit (CL m-tiles x one n-tile).
    long long clusters;
    if (blocks_per_sm > 0) {
      clusters = static_cast<long long>(sms) * blocks_per_sm / CL;
    } else {
      clusters = hopper::max_active_clusters(fn, CL, S::kThreads, S::kSmem, sms);
      if (clusters <= 0) clusters = sms / CL;
    }
    const long long units =
        ((p.M + BM * CL - 1) / (BM * CL) + p.E) * static_cast<long long>(p.n_tiles);
    clusters = std::max<long long>(1, std::min(clusters, std::max(units, 1LL)));
    (void)max_tiles;
    const hopper::ClusterLaunch launch(clusters * CL, S::kThreads, S::kSmem, CL, stream);
    if (const cudaError_t err = cudaLaunchKernelEx(launch.config(), kernel, map_a, map_b, map_c, p);
        err != cudaSuccess)
      throw_cuda(err, "cudaLaunchKernelEx (cluster)");
  }
}

using Entry = VariantEntry<Launcher>;

template <int BM, int BN, int STAGES, int CL = 1, bool TS = false>
constexpr Entry entry() {
  // block_m / 64 consumer warpgroups
  GroupedGemmConfig c = tensor_core_config(GroupedGemmVariant::wgmma, BM, BN, BM / 64, 1, STAGES);
  c.cluster_m = CL;
  c.tma_store = TS;
  return Entry{c, run<__nv_bfloat16, BM, BN, STAGES, CL, TS>, run<__half, BM, BN, STAGES, CL, TS>};
}

// The cluster_m = 2 entries come after the others (grouped_gemm_cuda.cu looks the defaults up
// among cluster_m = 1 only).
const Entry kEntries[] = {
    entry<128, 256, 4>(),  // 2 consumer warpgroups of 64 x 256, 192 KB
    entry<128, 256, 3>(),  // 144 KB
    entry<128, 128, 6>(),  // 192 KB
    entry<64, 256, 5>(),   // one consumer warpgroup (few rows per expert), 200 KB
    entry<64, 128, 8>(),   // 192 KB
    // The TMA store epilogue (full 64-row halves of a tile through two 8 KB buffers per consumer
    // warpgroup): the same tiles and stages, 16 KB more per consumer warpgroup.
    entry<128, 256, 4, 1, true>(),  // 224 KB
    entry<128, 256, 3, 1, true>(),  // 176 KB
    entry<128, 128, 6, 1, true>(),
    entry<64, 256, 5, 1, true>(),
    // Clusters of 2 blocks on consecutive m-tiles of one expert and n-tile: each block loads
    // half of the B tile and multicasts it to both (half the B traffic from L2).
    entry<128, 256, 4, 2>(),
    entry<128, 128, 6, 2>(),
    entry<64, 256, 5, 2>(),
};

}  // namespace

std::vector<GroupedGemmConfig> wgmma_configs() {
  return configs_of(kEntries);
}

void launch_wgmma(const GemmParams& p, const GroupedGemmConfig& config, DType dtype, int sms,
                  long long max_tiles, cudaStream_t stream) {
  launcher_of(kEntries, config, dtype, "wgmma")(p, dtype, config.blocks_per_sm, sms, max_tiles,
                                                stream);
}

}  // namespace tileops::cuda_kernels::moe_detail
