#if TILEOPS_WITH_CUDA

#include <cstdint>

#include "kernels/attention/attention_paged_cuda.h"
#include "kernels/attention/attention_paged_cuda_impls.h"
#include "tileops/core/cuda.h"

namespace tileops {

cuda_kernels::AttentionPagedArgs detail::attention_paged_args(
    const AttentionPagedCall& call, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
    const Tensor& cu_seqlens_q, const Tensor& seqused_k, const Tensor& block_table,
    const Tensor& out, const Tensor& lse, const AttentionScores& scores) {
  cuda_kernels::AttentionPagedArgs args;
  args.q = q.data_ptr();
  args.k_cache = k_cache.data_ptr();
  args.v_cache = v_cache.data_ptr();
  args.out = out.data_ptr();
  args.lse = static_cast<float*>(lse.data_ptr());
  args.cu_seqlens_q = static_cast<const std::int32_t*>(cu_seqlens_q.data_ptr());
  args.seqused_k = static_cast<const std::int32_t*>(seqused_k.data_ptr());
  args.block_table = static_cast<const std::int32_t*>(block_table.data_ptr());
  args.total_q = q.size(0);
  args.batch = seqused_k.size(0);
  args.width = block_table.size(1);
  args.num_blocks = k_cache.size(0);
  args.page_size = call.page_size;
  args.heads_q = call.heads_q;
  args.heads_kv = call.heads_kv;
  args.head_dim = call.head_dim;
  args.dtype = call.dtype;
  args.scores = scores;
  return args;
}

std::optional<std::string> AttentionPagedCuda::refusal(const AttentionPagedCall& call) {
  if (call.dtype != DType::float16 && call.dtype != DType::bfloat16)
    return "dtype " + std::string(dtype_name(call.dtype)) + " is not float16 or bfloat16";
  if (call.head_dim != 64 && call.head_dim != 128 && call.head_dim != 256)
    return "head_dim " + std::to_string(call.head_dim) + " is not 64, 128 or 256";
  if (call.page_size != 16 && call.page_size != 32 && call.page_size != 64 && call.page_size != 128)
    return "page_size " + std::to_string(call.page_size) + " is not 16, 32, 64 or 128";
  if (call.heads_q <= 0 || call.heads_kv <= 0 || call.heads_q % call.heads_kv != 0)
    return "heads_q " + std::to_string(call.heads_q) + " is not a positive multiple of heads_kv " +
           std::to_string(call.heads_kv);
  return std::nullopt;
}

std::string AttentionPagedCuda::config() const {
  return "split-KV, 64 keys per stage, 128 threads; rows per tile and splits from each call's "
         "shapes";
}

void detail::launch_attention_split(cuda_kernels::AttentionPagedArgs args, int device) {
  const cuda_kernels::AttentionPagedPlan plan = cuda_kernels::attention_paged_plan_for(args);
  // The splits' partial states: this call's own (stream-ordered, freed after the kernels).
  const std::int64_t floats = cuda_kernels::attention_paged_workspace_floats(
      plan.splits, args.total_q, args.heads_q, args.head_dim);
  Tensor workspace;
  if (floats > 0) {
    workspace = Tensor::empty({floats}, DType::float32, Device::cuda(device));
    args.workspace = static_cast<float*>(workspace.data_ptr());
  }
  cuda_kernels::launch_attention_paged(args, plan, cuda_current_stream(device));
}

void AttentionPagedCuda::forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                 const Tensor& cu_seqlens_q, const Tensor& seqused_k,
                                 const Tensor& block_table, const Tensor& out, const Tensor& lse,
                                 const AttentionScores& scores) {
  detail::launch_attention_split(
      detail::attention_paged_args(call_, q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table,
                                   out, lse, scores),
      call_.device.index);
}

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
