// CUDA kernels of the MoE family, with a plain launch API (internal header: no CUDA headers here;
// every stream is passed as void* and is a cudaStream_t; nullptr is the legacy default stream).
//
// - launch_grouped_gemm:     C = A x B_e^T per expert over expert-contiguous rows, optionally with
//                            a fused gated activation (silu_and_mul, gelu_and_mul).
// - launch_moe_pre_permute:  groups the (token, k) pairs by expert and gathers the token rows.
// - launch_moe_post_permute: weighted sum of the expert outputs back to the tokens.
// - launch_moe_topk_routing: softmax / sigmoid scores, optional correction bias, top-k (plain or
//                            group-limited).
//
// Every launcher raises SignatureError for arguments (or a configuration) the kernels cannot take
// and UsageError when the CUDA runtime reports an error. Empty problems launch nothing, except
// where an output must still be written (the pre-permute offsets).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tileops/core/dtype.h"

namespace tileops::cuda_kernels {

enum class MoEActivation { none, silu_and_mul, gelu_and_mul };
enum class MoEScoring { softmax, sigmoid };

// ---------------------------------------------------------------------------------------------
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

/// Launches on `stream` on the current device. M == 0 or N == 0 launches nothing.
void launch_grouped_gemm(const GroupedGemmArgs& args, const GroupedGemmConfig& config,
                         void* stream);

// ---------------------------------------------------------------------------------------------
// Pre-permute (dispatch): pair p = t * top_k + k has global id g = topk_ids[t][k] and local id
// e = expert_map ? (0 <= g < map_size ? expert_map[g] : -1) : g; it is kept iff 0 <= e < E.
// Kept pairs are ordered by (e, p); offsets[e] = number of kept pairs with local id < e. The kept
// pair of rank i writes permuted[i] = x[t] (bit copy) and inverse[t][k] = i; a dropped pair
// writes inverse[t][k] = -1; rows permuted[offsets[E] .. T*K-1] are zero-filled. Deterministic.
// A ranking (one block, or three kernels over many blocks with rank_scratch; writes offsets and
// inverse) and a row-copy kernel. num_experts is limited by shared memory (about 50000).
// Fused FP8 quantization (MoEPrePermuteQuantFP8FwdOp): with permuted_q set, the launch writes,
// instead of the copy, exactly what launch_token_group_quant_fp8 (quant_cuda.h) makes of the
// copy: e4m3 codes permuted_q [T*K, H] and float32 scales permuted_scales [T*K,
// H / quant_group_size] (rows past offsets[E]: the quantized zero row, scales
// s = float(quant_eps / 448) and codes of 0 / s: 0, or the NaN code where s is 0), by a gather
// that quantizes or, with token_q, the tokens quantized once and their rows gathered;
// `permuted` is not written and may be null. Needs the vector layout:
// quant_group_size / (16 / element size) a power of two up to 128, x 16-byte aligned with a row
// stride of whole 16-byte vectors, permuted_q aligned to a vector's codes.
struct PrePermuteArgs {
  const void* x = nullptr;
  int64_t x_row_stride = 0;             ///< [T, H] in elements, inner dim contiguous
  const int32_t* topk_ids = nullptr;    ///< [T, K] contiguous
  const int32_t* expert_map = nullptr;  ///< optional [map_size]: global id -> local or -1
  int64_t map_size = 0;
  void* permuted = nullptr;           ///< [T*K, H] contiguous
  int32_t* expert_offsets = nullptr;  ///< [E + 1]
  int32_t* inverse = nullptr;         ///< [T, K]
  int64_t tokens = 0, hidden = 0, top_k = 0, num_experts = 0;
  DType dtype = DType::bfloat16;     ///< float32, float16 or bfloat16
  void* permuted_q = nullptr;        ///< optional [T*K, H] float8_e4m3fn: fused quantization
  float* permuted_scales = nullptr;  ///< [T*K, H / quant_group_size] with permuted_q
  int64_t quant_group_size = 128;
  double quant_eps = 1e-10;
  /// > 0 (with permuted_q): the masked layout of MoEPrePermuteQuantFP8MaskedFwdOp. The ranking
  /// writes masked_counts[e] = the kept pairs of local expert e (never clamped) and inverse =
  /// e * masked_max_m + (rank - offsets[e]), or -1 for a rank at or past masked_max_m; the
  /// gather writes rows of permuted_q [E * masked_max_m, H] only through inverse (no zero rows).
  /// expert_offsets is then a scratch of E + 1 (the contiguous offsets). Needs E * masked_max_m
  /// < 2^31.
  int64_t masked_max_m = 0;
  int32_t* masked_counts = nullptr;  ///< [E] with masked_max_m
  /// Optional scratch with permuted_q: [T, H] float8_e4m3fn and [T, H / quant_group_size]
  /// float32. Where moe_pre_permute_wants_token_scratch, the T tokens are quantized once into it
  /// and their rows of codes and scales gathered (the same bits, 1/top_k of the quantization's
  /// reads and arithmetic); otherwise unused.
  void* token_q = nullptr;
  float* token_scales = nullptr;
  /// Optional scratch of moe_rank_scratch_ints(T * K, E) int32 (moe_rank.h): the ranking runs on
  /// many blocks instead of one.
  int32_t* rank_scratch = nullptr;
};
void launch_moe_pre_permute(const PrePermuteArgs& args, void* stream);

/// Whether the quantizing pre-permute of `args` quantizes the tokens first once given token_q and
/// token_scales (no expert map, top_k > 1, at least 4096 pairs, x contiguous), so that callers
/// allocate the scratch only then.
bool moe_pre_permute_wants_token_scratch(const PrePermuteArgs& args);

/// Why the fused FP8 quantization cannot take rows of `dtype` in groups of `group_size` columns
/// (the vector layout above; the pointer conditions are the caller's), or nullopt.
std::optional<std::string> moe_gather_quant_fp8_refusal(DType dtype, int64_t group_size);

// ---------------------------------------------------------------------------------------------
// Post-permute (combine): out[t][h] = T(scale * sum_k w[t][k] * float(expert_out[inv[t][k]][h]))
// over the k (in order) with 0 <= inv[t][k] < rows; fp32 products and sums (not fused), one
// rounding. 16-byte vector accesses where the pointers and the row length allow it.
struct PostPermuteArgs {
  const void* expert_out = nullptr;  ///< [rows, H] contiguous
  int64_t rows = 0;
  const float* topk_weights = nullptr;  ///< [T, K] contiguous
  const int32_t* inverse = nullptr;     ///< [T, K]
  void* out = nullptr;                  ///< [T, H] contiguous
  int64_t tokens = 0, hidden = 0, top_k = 0;
  float scale = 1.0f;
  DType dtype = DType::bfloat16;  ///< of expert_out and out: float32, float16 or bfloat16
};
void launch_moe_post_permute(const PostPermuteArgs& args, void* stream);

// ---------------------------------------------------------------------------------------------
// Top-k routing: s_e = softmax_e(float(logits[t])) (max subtracted, expf) or
// sigmoid(float(logits[t][e])); selection score c_e = s_e + bias_e (0 without a bias). The top_k
// experts by c descending (ties to the smaller e; NaN above everything; -0 == +0) are written in
// that order; w_k = s_{e_k}; renormalize: w_k = w_k / sum of the selected w (summed in k order);
// then w_k = w_k * routed_scaling_factor. One warp per token; 1 <= top_k <= E; E is limited by
// shared memory (about 29000).
// Group-limited (n_group > 1; DeepSeek-V3's grouped top-k): the experts form n_group groups of
// E / n_group consecutive ids; group g scores first + second (its two largest c) with a bias,
// first without (in float32; the two largest by the same key as the selection, so a NaN c makes
// the score NaN, which ranks above every group; -inf stands in for a missing second); the
// topk_group groups of largest score are kept (ties to the smaller index), and only their experts
// are candidates of the top-k above. Needs E % n_group == 0, 1 <= topk_group <= n_group and
// top_k <= topk_group * E / n_group. n_group == 1 is the plain kernel, unchanged.
struct TopKRoutingArgs {
  const void* logits = nullptr;            ///< [T, E] contiguous
  const float* correction_bias = nullptr;  ///< optional [E]
  float* topk_weights = nullptr;           ///< [T, K]
  int32_t* topk_ids = nullptr;             ///< [T, K]
  int64_t tokens = 0, num_experts = 0, top_k = 0;
  MoEScoring scoring = MoEScoring::softmax;
  bool renormalize = false;
  float routed_scaling_factor = 1.0f;
  DType logits_dtype = DType::float32;  ///< float32, float16 or bfloat16
  int64_t n_group = 1;                  ///< expert groups; 1: plain top-k
  int64_t topk_group = 1;               ///< groups kept per token
};
void launch_moe_topk_routing(const TopKRoutingArgs& args, void* stream);

}  // namespace tileops::cuda_kernels
