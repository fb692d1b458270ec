// Internal: the CUDA grouped GEMM of the MoE family with a plain launch API (no CUDA headers here;
// the stream is passed as void* and is a cudaStream_t; nullptr is the legacy default stream):
// C = A x B_e^T per expert over expert-contiguous rows, optionally with a fused gated activation
// (silu_and_mul, gelu_and_mul); three variants (simt, mma, wgmma) behind one launcher.
//
// Every launcher raises SignatureError for arguments (or a configuration) the kernels cannot take
// and UsageError when the CUDA runtime reports an error.
// M == 0 or N == 0 launches nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tileops/core/dtype.h"
#include "tileops/kernel/moe.h"

namespace tileops::cuda_kernels {

// Grouped GEMM over expert-contiguous rows.
//
// The offsets are made safe before use: o_e = max(o_{e-1}, clamp(expert_offsets[e], 0, M)) with
// o_{-1} = 0 (clamped, then a running maximum), so a decreasing pair is an empty group and groups
// never overlap. Expert e owns rows [o_e, o_{e+1}); for those rows, in fp32,
//   acc[r][n] = sum_k float(a[r][k]) * float(b[e][n][k])
//   none:          c[r][n] = T(acc[r][n])                                    (N_out = N)
//   silu_and_mul:  c[r][j] = T(silu(acc[r][j]) * acc[r][j + N/2]),   j < N/2  (N_out = N/2)
//   gelu_and_mul:  c[r][j] = T(gelu_tanh(acc[r][j]) * acc[r][j + N/2])
// with silu(g) = g / (1 + exp(-g)) and gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715
// g^3))), from the fp32 accumulators (no intermediate rounding). Rows outside [o_0, o_E) are
// written with zeros. For trusted (non-decreasing, in-range) offsets this is exactly
// rows [off[e], off[e+1]) for expert e.
struct GroupedGemmArgs {
  const void* a = nullptr;                  ///< [M, K] row-major, contiguous, dtype
  const int32_t* expert_offsets = nullptr;  ///< [E + 1], device memory
  const void* b = nullptr;                  ///< [E, N, K] contiguous (expert weight [N, K], "NT")
  void* c = nullptr;                        ///< [M, N_out] contiguous
  int64_t M = 0, N = 0, K = 0, E = 0;
  MoEActivation activation = MoEActivation::none;
  DType dtype = DType::bfloat16;  ///< bfloat16 or float16 (a, b and c)
};

enum class GroupedGemmVariant {
  /// Plain fp32 FMA kernel (64 x 64 tiles, scalar loads): any K, any alignment. The fallback.
  simt,
  /// Tensor cores through mma.sync m16n8k16 + ldmatrix, cp.async multi-stage pipeline,
  /// persistent grid. Needs K % 8 == 0 and 16-byte aligned a and b (else: simt, by itself).
  mma,
  /// Hopper warpgroup MMA (wgmma m64nNk16) fed by TMA (128-byte swizzle) through an mbarrier
  /// pipeline, one producer warp, persistent grid. Needs sm_90, K % 8 == 0, 16-byte aligned a and
  /// b, E * N < 2^31 (else: mma, by itself, which may in turn fall back to simt).
  wgmma,
};

/// How one grouped GEMM launch is shaped. block_n counts rows of B per tile: with a gated
/// activation a tile covers block_n / 2 output columns (gate and up halves together).
struct GroupedGemmConfig {
  GroupedGemmVariant variant = GroupedGemmVariant::simt;
  int block_m = 64;
  int block_n = 64;
  int block_k = 16;
  /// mma: the warp grid (warp tile (block_m / warps_m) x (block_n / warps_n)); wgmma: warps_m is
  /// the number of consumer warpgroups (block_m / 64) and warps_n is 1; simt: 16 x 16 threads.
  int warps_m = 1;
  int warps_n = 1;
  /// Shared-memory pipeline depth (simt: 1).
  int stages = 1;
  /// Blocks per multiprocessor of the persistent grid; 0: as many as fit (occupancy).
  int blocks_per_sm = 0;
  /// wgmma only: thread-block cluster size along M (1 or 2). With 2, the two blocks of a cluster
  /// take consecutive m-tiles of the same expert and n-tile, and each loads half of the B tile
  /// with a TMA multicast to both. Other variants: 1. str() shows it only when it is not 1.
  int cluster_m = 1;
  /// wgmma only: the epilogue writes the 64-row halves of a tile that lie within one expert
  /// through shared memory with TMA stores (asynchronous, so the next tile's main loop starts
  /// sooner); partial halves, c not 16-byte aligned or N_out % 8 != 0 store from registers.
  /// str() shows it only when set.
  bool tma_store = false;

  std::string str() const;
  friend bool operator==(const GroupedGemmConfig&, const GroupedGemmConfig&) = default;
};

/// A good default for the shape on `device` (wgmma on sm_90 where the shape allows it; the tile
/// height from the mean rows per expert).
GroupedGemmConfig grouped_gemm_default_config(const GroupedGemmArgs& args, int device);

/// The configurations worth timing for `args` on `device`; the default is first. The simt
/// fallback is a member only where no tensor-core variant serves the shape (K % 8 != 0); any
/// configuration (simt included) can be passed to launch_grouped_gemm for any shape.
std::vector<GroupedGemmConfig> grouped_gemm_tuning_space(const GroupedGemmArgs& args, int device);

/// The sizes and activation of a call spec (GroupedGemmCall or GroupedGemmFP8Call) as launch
/// arguments (Args: GroupedGemmArgs or GroupedGemmFP8Args); the pointers are the caller's.
template <class Args, class Call>
Args grouped_gemm_shape(const Call& call) {
  Args args;
  args.M = call.rows;
  args.N = call.n;
  args.K = call.k;
  args.E = call.experts;
  args.activation = call.activation;
  return args;
}

/// Launches on `stream` on the current device. M == 0 or N == 0 launches nothing.
void launch_grouped_gemm(const GroupedGemmArgs& args, const GroupedGemmConfig& config,
                         void* stream);

}  // namespace tileops::cuda_kernels
