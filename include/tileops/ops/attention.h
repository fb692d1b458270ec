// The attention family (manifest/attention.yaml): the varlen grouped-query attention forward, the
// paged KV-cache write and the merge of two partial attention states. The exact semantics of
// every op are in its manifest entry; the kernel contract is tileops/kernel/attention.h and the
// decisions are in docs/design/attention.md.
//
//   tileops::GroupedQueryAttentionVarlenFwdOp attn({.causal = true});
//   auto [out, lse] = attn(q, k, v, cu_seqlens_q, cu_seqlens_k);  // q [Tq, Hq, D], k/v [Tk, Hkv,
//   D] tileops::KVCacheWriteFwdOp write({}); write(key, value, k_cache, v_cache, slot_mapping); //
//   fills the paged caches tileops::AttentionMergeStatesFwdOp merge({}); auto [merged, merged_lse]
//   = merge(out_a, lse_a, out_b, lse_b);
#pragma once

#include <cstdint>
#include <vector>

#include "tileops/base/op.h"
#include "tileops/base/schema.h"
#include "tileops/gen/attention.h"
#include "tileops/kernel/attention.h"

namespace tileops {

/// (out, lse) = op(q, k, v, cu_seqlens_q, cu_seqlens_k): FlashAttention's varlen forward with
/// GQA, bottom-right causal mask, left window and score cap. The CPU implementation checks the
/// cu_seqlens contents (SignatureError naming the entry); on CUDA they are the caller's.
class GroupedQueryAttentionVarlenFwdOp final
    : public gen::GroupedQueryAttentionVarlenFwdOpBase<GroupedQueryAttentionVarlenFwdOp> {
 public:
  using GroupedQueryAttentionVarlenFwdOpBase::GroupedQueryAttentionVarlenFwdOpBase;
  /// The defaults: causal, softmax_scale 1 / sqrt(D), no window, no cap.
  GroupedQueryAttentionVarlenFwdOp() : GroupedQueryAttentionVarlenFwdOp(Params{}) {}
  /// The parameters resolved for a head dim: softmax_scale omitted is 1 / sqrt(head_dim).
  AttentionScores scores_for(std::int64_t head_dim) const;
  void forward(const Indices& call, const Tensor& q, const Tensor& k, const Tensor& v,
               const Tensor& cu_seqlens_q, const Tensor& cu_seqlens_k, const Tensor& out,
               const Tensor& lse);
};

/// op(key, value, k_cache, v_cache, slot_mapping): writes each token's key and value rows into
/// the paged caches at its slot (vLLM's reshape_and_cache_flash); negative slots are skipped.
class KVCacheWriteFwdOp final : public gen::KVCacheWriteFwdOpBase<KVCacheWriteFwdOp> {
 public:
  using KVCacheWriteFwdOpBase::KVCacheWriteFwdOpBase;
  KVCacheWriteFwdOp() : KVCacheWriteFwdOp(Params{}) {}
  void forward(const Indices& call, const Tensor& key, const Tensor& value, const Tensor& k_cache,
               const Tensor& v_cache, const Tensor& slot_mapping);
};

/// (out, lse) = op(out_a, lse_a, out_b, lse_b): two partial attention states over disjoint key
/// sets merged into the state over their union; a side whose lse is -inf contributes nothing.
class AttentionMergeStatesFwdOp final
    : public gen::AttentionMergeStatesFwdOpBase<AttentionMergeStatesFwdOp> {
 public:
  using AttentionMergeStatesFwdOpBase::AttentionMergeStatesFwdOpBase;
  AttentionMergeStatesFwdOp() : AttentionMergeStatesFwdOp(Params{}) {}
  void forward(const Indices& call, const Tensor& out_a, const Tensor& lse_a, const Tensor& out_b,
               const Tensor& lse_b, const Tensor& out, const Tensor& lse);
};

}  // namespace tileops
