// The CUDA implementation of the routing interface (moe_routing_impls.h): the call spec and
// tensors become TopKRoutingArgs, launched on tileops' current stream of the call's device.
#if TILEOPS_WITH_CUDA

#include "kernels/moe/moe_routing_impls.h"

#include <cstdint>

#include "kernels/moe/moe_routing_cuda.h"
#include "tileops/core/cuda.h"

namespace tileops {

namespace ck = cuda_kernels;

void MoERoutingCuda::forward(const Tensor& logits, const Tensor* bias, const Tensor& weights,
                             const Tensor& ids, double routed_scaling_factor) {
  ck::TopKRoutingArgs args;
  args.logits = logits.data_ptr();
  args.correction_bias = bias != nullptr ? bias->data<float>() : nullptr;
  args.topk_weights = weights.data<float>();
  args.topk_ids = ids.data<std::int32_t>();
  args.tokens = call_.tokens;
  args.num_experts = call_.experts;
  args.top_k = call_.top_k;
  args.scoring = call_.scoring;
  args.renormalize = call_.renormalize;
  args.routed_scaling_factor = static_cast<float>(routed_scaling_factor);
  args.logits_dtype = call_.logits_dtype;
  args.n_group = call_.n_group;
  args.topk_group = call_.topk_group;
  ck::launch_moe_topk_routing(args, cuda_current_stream(call_.device.index));
}

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
