#if TILEOPS_WITH_CUDA

#include <cstdint>

#include "kernels/attention/attention_paged_cuda.h"
#include "kernels/attention/attention_paged_cuda_impls.h"
#include "kernels/attention/attention_varlen_cuda_impls.h"

namespace tileops {

std::optional<std::string> AttentionVarlenSplitCuda::refusal(const AttentionVarlenCall& call) {
  if (auto why = AttentionVarlenCuda::refusal(call)) return why;
  const std::int64_t group = call.heads_q / call.heads_kv;
  const std::int64_t rows = call.queries_per_sequence * group;
  if (rows > cuda_kernels::kAttentionPagedDecodeRows)
    return "prefill-shaped: " + std::to_string(rows) + " query rows per sequence (" +
           std::to_string(call.queries_per_sequence) + " queries x " + std::to_string(group) +
           " heads per KV head) is over " +
           std::to_string(cuda_kernels::kAttentionPagedDecodeRows) +
           ": the varlen kernel's 128-query tiles serve it";
  return std::nullopt;
}

std::string AttentionVarlenSplitCuda::config() const {
  return "split-KV over contiguous keys, 64 keys per stage, 128 threads; splits from each call's "
         "shapes";
}

void AttentionVarlenSplitCuda::forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& cu_seqlens_q, const Tensor& cu_seqlens_k,
                                       const Tensor& out, const Tensor& lse,
                                       const AttentionScores& scores) {
  const std::int64_t batch = cu_seqlens_q.size(0) - 1;
  if (q.size(0) == 0 || batch == 0) return;  // nothing to compute (out and lse are empty)
  cuda_kernels::AttentionPagedArgs args;
  args.q = q.data_ptr();
  args.k_cache = k.data_ptr();
  args.v_cache = v.data_ptr();
  args.out = out.data_ptr();
  args.lse = static_cast<float*>(lse.data_ptr());
  args.cu_seqlens_q = static_cast<const std::int32_t*>(cu_seqlens_q.data_ptr());
  args.cu_seqlens_k = static_cast<const std::int32_t*>(cu_seqlens_k.data_ptr());
  args.total_q = q.size(0);
  args.batch = batch;
  args.num_blocks = k.size(0);  // the key rows: one "page" per sequence
  args.heads_q = call_.heads_q;
  args.heads_kv = call_.heads_kv;
  args.head_dim = call_.head_dim;
  args.dtype = call_.dtype;
  args.scores = scores;
  detail::launch_attention_split(args, call_.device.index);
}

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
