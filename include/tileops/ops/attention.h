// The attention family (manifest/attention.yaml): the varlen and the paged grouped-query
// attention forwards, the paged KV-cache write and the merge of two partial attention states.
// The exact semantics of every op are in its manifest entry; the kernel contract is
// tileops/kernel/attention.h and the decisions are in docs/design/attention.md.
//
//   tileops::KVCacheWriteFwdOp write;  // the new keys and values into the paged caches
//   write(key, value, k_cache, v_cache, slot_mapping);
//   tileops::GroupedQueryAttentionPagedFwdOp attn;  // causal, 1 / sqrt(D)
//   auto [out, lse] = attn(q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table);
//   tileops::GroupedQueryAttentionVarlenFwdOp varlen({.causal = true});
//   auto [o, l] = varlen(q, k, v, cu_seqlens_q, cu_seqlens_k);  // packed keys
//   tileops::AttentionMergeStatesFwdOp merge;
//   auto [merged, merged_lse] = merge(out, lse, o, l);
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

/// (out, lse) = op(q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table): the varlen
/// forward over each sequence's first seqused_k[b] keys of a paged KV cache (pages
/// [num_blocks, page_size, Hkv, D] as KVCacheWriteFwdOp fills them, addressed through
/// block_table), for decoding, chunked prefill and batches mixing both. The CPU implementation
/// checks cu_seqlens_q, seqused_k and the used block table entries (SignatureError naming the
/// entry); on CUDA they are the caller's.
class GroupedQueryAttentionPagedFwdOp final
    : public gen::GroupedQueryAttentionPagedFwdOpBase<GroupedQueryAttentionPagedFwdOp> {
 public:
  using GroupedQueryAttentionPagedFwdOpBase::GroupedQueryAttentionPagedFwdOpBase;
  /// The defaults: causal, softmax_scale 1 / sqrt(D), no window, no cap.
  GroupedQueryAttentionPagedFwdOp() : GroupedQueryAttentionPagedFwdOp(Params{}) {}
  /// The parameters resolved for a head dim: softmax_scale omitted is 1 / sqrt(head_dim).
  AttentionScores scores_for(std::int64_t head_dim) const;
  void forward(const Indices& call, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const Tensor& cu_seqlens_q, const Tensor& seqused_k, const Tensor& block_table,
               const Tensor& out, const Tensor& lse);
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
