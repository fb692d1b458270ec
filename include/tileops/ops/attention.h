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
  static std::vector<InterfaceInfo> interfaces();
  static std::vector<ImplementationInfo> kernel_types();
  /// Sequences of equal length (Tq / B queries over Tk / B keys each, the remainder spread over
  /// the first ones), as the roofline assumes.
  static std::vector<Tensor> workload_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                             Device device);
  /// The parameters resolved for a head dim: softmax_scale omitted is 1 / sqrt(head_dim).
  AttentionScores scores_for(std::int64_t head_dim) const;
  void forward(const SignatureCall& call, const Tensor& q, const Tensor& k, const Tensor& v,
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
  static std::vector<InterfaceInfo> interfaces();
  static std::vector<ImplementationInfo> kernel_types();
  /// Every sequence over the whole width of its block table (seqused_k = max_blocks_per_seq *
  /// page_size, as the roofline assumes), its pages a random choice of the cache's blocks (as a
  /// serving engine hands them out; shared round-robin when the cache has fewer blocks than the
  /// tables). Queries: Tq / B per sequence when B divides Tq (decoding when Tq = B); otherwise a
  /// mixed batch: one query per sequence, the others filling the last sequences 511 at a time
  /// (prefill chunks of 512 queries).
  static std::vector<Tensor> workload_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                             Device device);
  /// The parameters resolved for a head dim: softmax_scale omitted is 1 / sqrt(head_dim).
  AttentionScores scores_for(std::int64_t head_dim) const;
  void forward(const SignatureCall& call, const Tensor& q, const Tensor& k_cache,
               const Tensor& v_cache, const Tensor& cu_seqlens_q, const Tensor& seqused_k,
               const Tensor& block_table, const Tensor& out, const Tensor& lse);
};

/// op(key, value, k_cache, v_cache, slot_mapping): writes each token's key and value rows into
/// the paged caches at its slot (vLLM's reshape_and_cache_flash); negative slots are skipped.
class KVCacheWriteFwdOp final : public gen::KVCacheWriteFwdOpBase<KVCacheWriteFwdOp> {
 public:
  using KVCacheWriteFwdOpBase::KVCacheWriteFwdOpBase;
  KVCacheWriteFwdOp() : KVCacheWriteFwdOp(Params{}) {}
  static std::vector<InterfaceInfo> interfaces();
  static std::vector<ImplementationInfo> kernel_types();
  /// Tokens filling pages in order, the pages a random choice of the cache's blocks (as a serving
  /// engine hands them out): distinct slots, all within the cache.
  static std::vector<Tensor> workload_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                             Device device);
  void forward(const SignatureCall& call, const Tensor& key, const Tensor& value,
               const Tensor& k_cache, const Tensor& v_cache, const Tensor& slot_mapping);
};

/// (out, lse) = op(out_a, lse_a, out_b, lse_b): two partial attention states over disjoint key
/// sets merged into the state over their union; a side whose lse is -inf contributes nothing.
class AttentionMergeStatesFwdOp final
    : public gen::AttentionMergeStatesFwdOpBase<AttentionMergeStatesFwdOp> {
 public:
  using AttentionMergeStatesFwdOpBase::AttentionMergeStatesFwdOpBase;
  AttentionMergeStatesFwdOp() : AttentionMergeStatesFwdOp(Params{}) {}
  static std::vector<InterfaceInfo> interfaces();
  static std::vector<ImplementationInfo> kernel_types();
  /// Random states with some -inf lse on either side and on both (queries that saw no key).
  static std::vector<Tensor> workload_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                             Device device);
  void forward(const SignatureCall& call, const Tensor& out_a, const Tensor& lse_a,
               const Tensor& out_b, const Tensor& lse_b, const Tensor& out, const Tensor& lse);
};

}  // namespace tileops
