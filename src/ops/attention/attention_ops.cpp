// The attention ops: host side (the call specs filled, the kernels called on contiguous tensors).
// Their double-precision references are in attention_references.cpp, their workload inputs in
// attention_workloads.cpp.
#include <cmath>
#include <cstdint>

#include "kernels/attention/attention_impls.h"
#if TILEOPS_WITH_CUDA
#include "kernels/attention/attention_paged_cuda_impls.h"
#include "kernels/attention/attention_varlen_cuda_impls.h"
#endif
#include "ops/write_contiguous.h"
#include "tileops/ops/attention.h"

namespace tileops {
namespace {

/// The varlen and paged ops' parameters resolved for a head dim (softmax_scale omitted is
/// 1 / sqrt(head_dim)).
template <class Params>
AttentionScores scores_of(const Params& params, std::int64_t head_dim) {
  AttentionScores scores;
  scores.softmax_scale = static_cast<float>(
      params.softmax_scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim))));
  scores.causal = params.causal;
  scores.window_left = params.window_left;
  scores.softcap = static_cast<float>(params.softcap);
  return scores;
}

/// The facts the varlen and paged call specs share: the device, dtype, heads and head dim of the
/// call's solved indices, and the mask kind of the resolved scores.
template <class Call, class Indices>
void fill_call(Call& spec, const Indices& call, const AttentionScores& scores) {
  spec.device = call.device;
  spec.dtype = call.T;
  spec.heads_q = call.Hq;
  spec.heads_kv = call.Hkv;
  spec.head_dim = call.D;
  spec.causal = scores.causal;
  spec.windowed = scores.window_left >= 0;
  spec.softcapped = scores.softcap > 0.0f;
  spec.queries_per_sequence = call.B > 0 ? (call.Tq + call.B - 1) / call.B : 0;
}

}  // namespace

// ---- GroupedQueryAttentionVarlenFwdOp ---------------------------------------------------------

std::vector<ImplementationInfo> gen::GroupedQueryAttentionVarlenFwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table;
  table.push_back(implementation<AttentionVarlenCpu>("attention_varlen_cpu", "AttentionVarlenCpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(
      implementation<AttentionVarlenCuda>("attention_varlen_cuda", "AttentionVarlenCuda"));
  table.push_back(implementation<AttentionVarlenSplitCuda>("attention_varlen_split_cuda",
                                                           "AttentionVarlenSplitCuda"));
#endif
  return table;
}

AttentionScores GroupedQueryAttentionVarlenFwdOp::scores_for(std::int64_t head_dim) const {
  return scores_of(params(), head_dim);
}

void GroupedQueryAttentionVarlenFwdOp::forward(const Indices& call, const Tensor& q,
                                               const Tensor& k, const Tensor& v,
                                               const Tensor& cu_seqlens_q,
                                               const Tensor& cu_seqlens_k, const Tensor& out,
                                               const Tensor& lse) {
  const AttentionScores scores = scores_for(call.D);
  AttentionVarlenCall spec;
  fill_call(spec, call, scores);
  auto& kernel = kernel_for<AttentionVarlenInterface>(spec);
  const Tensor q_c = q.contiguous();
  const Tensor k_c = k.contiguous();
  const Tensor v_c = v.contiguous();
  const Tensor cu_q = cu_seqlens_q.contiguous();
  const Tensor cu_k = cu_seqlens_k.contiguous();
  detail::write_contiguous(
      out, [&](const Tensor& o) { kernel.forward(q_c, k_c, v_c, cu_q, cu_k, o, lse, scores); });
}

TILEOPS_REGISTER_OP(GroupedQueryAttentionVarlenFwdOp)

// ---- GroupedQueryAttentionPagedFwdOp ----------------------------------------------------------

std::vector<ImplementationInfo> gen::GroupedQueryAttentionPagedFwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table;
  table.push_back(implementation<AttentionPagedCpu>("attention_paged_cpu", "AttentionPagedCpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(implementation<AttentionPagedCuda>("attention_paged_cuda", "AttentionPagedCuda"));
  table.push_back(
      implementation<AttentionPagedTmaCuda>("attention_paged_tma_cuda", "AttentionPagedTmaCuda"));
#endif
  return table;
}

AttentionScores GroupedQueryAttentionPagedFwdOp::scores_for(std::int64_t head_dim) const {
  return scores_of(params(), head_dim);
}

void GroupedQueryAttentionPagedFwdOp::forward(const Indices& call, const Tensor& q,
                                              const Tensor& k_cache, const Tensor& v_cache,
                                              const Tensor& cu_seqlens_q, const Tensor& seqused_k,
                                              const Tensor& block_table, const Tensor& out,
                                              const Tensor& lse) {
  const AttentionScores scores = scores_for(call.D);
  AttentionPagedCall spec;
  fill_call(spec, call, scores);
  spec.page_size = call.page_size;
  auto& kernel = kernel_for<AttentionPagedInterface>(spec);
  // The caches are contiguous (declared so); q is often a view of a fused projection's output.
  const Tensor q_c = q.contiguous();
  const Tensor cu_q = cu_seqlens_q.contiguous();
  const Tensor used = seqused_k.contiguous();
  const Tensor table = block_table.contiguous();
  detail::write_contiguous(out, [&](const Tensor& o) {
    kernel.forward(q_c, k_cache, v_cache, cu_q, used, table, o, lse, scores);
  });
}

TILEOPS_REGISTER_OP(GroupedQueryAttentionPagedFwdOp)

// ---- KVCacheWriteFwdOp --------------------------------------------------------------------------

std::vector<ImplementationInfo> gen::KVCacheWriteFwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table;
  table.push_back(implementation<KVCacheWriteCpu>("kv_cache_write_cpu", "KVCacheWriteCpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(implementation<KVCacheWriteCuda>("kv_cache_write_cuda", "KVCacheWriteCuda"));
#endif
  return table;
}

void KVCacheWriteFwdOp::forward(const Indices& call, const Tensor& key, const Tensor& value,
                                const Tensor& k_cache, const Tensor& v_cache,
                                const Tensor& slot_mapping) {
  KVCacheWriteCall spec;
  spec.device = call.device;
  spec.dtype = call.KV;
  spec.heads_kv = call.Hkv;
  spec.head_dim = call.D;
  spec.page_size = call.page_size;
  auto& kernel = kernel_for<KVCacheWriteInterface>(spec);
  // The caches are contiguous (declared so); key and value are often views of a fused
  // projection's output.
  kernel.forward(key.contiguous(), value.contiguous(), k_cache, v_cache, slot_mapping.contiguous());
}

TILEOPS_REGISTER_OP(KVCacheWriteFwdOp)

// ---- AttentionMergeStatesFwdOp ------------------------------------------------------------------

std::vector<ImplementationInfo> gen::AttentionMergeStatesFwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table;
  table.push_back(implementation<AttentionMergeStatesCpu>("attention_merge_states_cpu",
                                                          "AttentionMergeStatesCpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(implementation<AttentionMergeStatesCuda>("attention_merge_states_cuda",
                                                           "AttentionMergeStatesCuda"));
#endif
  return table;
}

void AttentionMergeStatesFwdOp::forward(const Indices& call, const Tensor& out_a,
                                        const Tensor& lse_a, const Tensor& out_b,
                                        const Tensor& lse_b, const Tensor& out, const Tensor& lse) {
  AttentionMergeCall spec;
  spec.device = call.device;
  spec.dtype = call.X;
  spec.heads = call.H;
  spec.head_dim = call.D;
  auto& kernel = kernel_for<AttentionMergeInterface>(spec);
  const Tensor a = out_a.contiguous();
  const Tensor b = out_b.contiguous();
  const Tensor la = lse_a.contiguous();
  const Tensor lb = lse_b.contiguous();
  detail::write_contiguous(out, [&](const Tensor& o) { kernel.forward(a, la, b, lb, o, lse); });
}

TILEOPS_REGISTER_OP(AttentionMergeStatesFwdOp)

}  // namespace tileops
