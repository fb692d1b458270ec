#if TILEOPS_WITH_CUDA

#include "kernels/attention/attention_impls.h"
#include "kernels/attention/attention_merge_cuda.h"
#include "tileops/core/cuda.h"

namespace tileops {

AttentionMergeStatesCuda::AttentionMergeStatesCuda(const AttentionMergeCall& call)
    : call_(call), config_(cuda_kernels::attention_merge_config(call.head_dim, call.dtype)) {}

void AttentionMergeStatesCuda::forward(const Tensor& out_a, const Tensor& lse_a,
                                       const Tensor& out_b, const Tensor& lse_b, const Tensor& out,
                                       const Tensor& lse) {
  cuda_kernels::AttentionMergeArgs args;
  args.out_a = out_a.data_ptr();
  args.lse_a = static_cast<const float*>(lse_a.data_ptr());
  args.out_b = out_b.data_ptr();
  args.lse_b = static_cast<const float*>(lse_b.data_ptr());
  args.out = out.data_ptr();
  args.lse = static_cast<float*>(lse.data_ptr());
  args.tokens = out_a.size(0);
  args.heads = call_.heads;
  args.head_dim = call_.head_dim;
  args.dtype = call_.dtype;
  cuda_kernels::launch_attention_merge(args, cuda_current_stream(call_.device.index));
}

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
