// The CPU implementation of the quantizing pre-permute: the CPU pre-permute into a scratch of x's
// dtype, then the CPU per-token-group quantization of all its rows, so that the values are those
// of MoEPrePermuteFwdOp followed by PerTokenGroupQuantFP8FwdOp by construction.
#include "kernels/moe/moe_impls.h"
#include "kernels/quant/token_group_quant_impls.h"

namespace tileops {

void MoEPrePermuteQuantCpu::forward(const Tensor& x, const Tensor& ids, const Tensor* map,
                                    const Tensor& q, const Tensor& scales, const Tensor& offsets,
                                    const Tensor& inverse, double eps) {
  MoEPermuteCall permute;
  permute.device = call_.device;
  permute.tokens = call_.tokens;
  permute.hidden = call_.hidden;
  permute.top_k = call_.top_k;
  permute.num_experts = call_.num_experts;
  permute.dtype = call_.dtype;
  permute.has_map = call_.has_map;
  const Tensor permuted =
      Tensor::empty({call_.tokens * call_.top_k, call_.hidden}, call_.dtype, call_.device);
  MoEPrePermuteCpu(permute, "MoEPrePermuteQuantFP8FwdOp")
      .forward(x, ids, map, permuted, offsets, inverse);
  if (permuted.numel() == 0) return;
  TokenGroupQuantCall quant;
  quant.device = call_.device;
  quant.rows = permuted.size(0);
  quant.cols = call_.hidden;
  quant.group_size = call_.group_size;
  quant.dtype = call_.dtype;
  TokenGroupQuantCpu(quant).forward(permuted, q, scales, eps);
}

}  // namespace tileops
