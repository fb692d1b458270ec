#if TILEOPS_WITH_CUDA

#include <cstdint>

#include "kernels/attention/attention_paged_cuda.h"
#include "kernels/attention/attention_paged_cuda_impls.h"
#include "tileops/core/cuda.h"

namespace tileops {

std::optional<std::string> AttentionPagedTmaCuda::refusal(const AttentionPagedCall& call) {
  if (auto why = AttentionPagedCuda::refusal(call)) return why;
  const std::int64_t rows = call.queries_per_sequence * (call.heads_q / call.heads_kv);
  if (rows <= cuda_kernels::kAttentionPagedDecodeRows)
    return "decode-shaped: " + std::to_string(rows) + " query rows per sequence (" +
           std::to_string(call.queries_per_sequence) + " queries x " +
           std::to_string(call.heads_q / call.heads_kv) + " heads per KV head) is at most " +
           std::to_string(cuda_kernels::kAttentionPagedDecodeRows) +
           ": a tile of 128 queries of one head would compute mostly padding";
  return std::nullopt;
}

std::string AttentionPagedTmaCuda::config() const {
  return "varlen TMA pipeline over pages, " + std::to_string(call_.head_dim == 256 ? 64 : 128) +
         " keys per stage, " + (call_.head_dim == 128 ? "3" : "2") +
         " stages, 384 threads, persistent";
}

void AttentionPagedTmaCuda::forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                    const Tensor& cu_seqlens_q, const Tensor& seqused_k,
                                    const Tensor& block_table, const Tensor& out, const Tensor& lse,
                                    const AttentionScores& scores) {
  const cuda_kernels::AttentionPagedArgs args = detail::attention_paged_args(
      call_, q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table, out, lse, scores);
  // The kernel's tile counter: this call's own (stream-ordered, freed after the kernel).
  const Tensor counter = Tensor::empty({1}, DType::int32, call_.device);
  cuda_kernels::launch_attention_paged_tma(args, static_cast<std::int32_t*>(counter.data_ptr()),
                                           cuda_current_stream(call_.device.index));
}

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
