// Internal: the CUDA pre-permute (dispatch: group the (token, k) pairs by expert and gather the
// token rows, optionally quantizing them to FP8, contiguous or in the masked layout) and
// post-permute (combine: weighted sum of the expert outputs back to the tokens) of the MoE family,
// with a plain launch API (no CUDA headers here; the stream is passed as void* and is a
// cudaStream_t; nullptr is the legacy default stream). The pre-permute's ranking:
// moe_permute_rank.h; its fused quantizing gather: moe_permute_gather_quant.h.
//
// Every launcher raises SignatureError for arguments (or a configuration) the kernels cannot take
// and UsageError when the CUDA runtime reports an error.
// Empty problems launch nothing, except where an output must still be written (the pre-permute
// offsets).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tileops/core/dtype.h"

namespace tileops::cuda_kernels {

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
  /// Optional scratch of moe_rank_scratch_ints(T * K, E) int32 (moe_permute_rank.h): the ranking
  /// runs on many blocks instead of one.
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

}  // namespace tileops::cuda_kernels
