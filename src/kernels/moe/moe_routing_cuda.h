// Internal: the CUDA top-k routing of the MoE family with a plain launch API (no CUDA headers
// here; the stream is passed as void* and is a cudaStream_t; nullptr is the legacy default
// stream): softmax / sigmoid scores, optional correction bias, top-k (plain or group-limited).
//
// Every launcher raises SignatureError for arguments (or a configuration) the kernels cannot take
// and UsageError when the CUDA runtime reports an error.
#pragma once

#include <cstdint>

#include "tileops/core/dtype.h"
#include "tileops/kernel/moe.h"

namespace tileops::cuda_kernels {

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
