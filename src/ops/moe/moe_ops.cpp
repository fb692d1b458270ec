// The kernel ops of the MoE family: routing, pre-permute (plain and quantizing), grouped GEMM and
// post-permute. Each one
// hands contiguous tensors to its kernel interface; the implementation is selected per call spec.
#include <fmt/format.h>

#include "kernels/moe/grouped_gemm_impls.h"
#include "kernels/moe/moe_permute_impls.h"
#include "kernels/moe/moe_routing_impls.h"
#include "ops/write_contiguous.h"
#include "tileops/ops/moe.h"

namespace tileops {

using detail::write_contiguous;

// ---- MoETopKRoutingFwdOp -------------------------------------------------------------------

std::vector<ImplementationInfo> gen::MoETopKRoutingFwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table;
  table.push_back(implementation<MoERoutingCpu>("moe_routing_cpu", "MoERoutingCpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(implementation<MoERoutingCuda>("moe_routing_cuda", "MoERoutingCuda"));
#endif
  return table;
}

void MoETopKRoutingFwdOp::forward(const Indices& call, const Tensor& logits,
                                  const Tensor& correction_bias, const Tensor& topk_weights,
                                  const Tensor& topk_ids) {
  MoERoutingCall spec;
  spec.device = call.device;
  spec.tokens = call.M;
  spec.experts = call.E;
  spec.top_k = params().top_k;
  spec.logits_dtype = call.L;
  spec.scoring = moe_scoring(params().scoring);
  spec.renormalize = params().renormalize;
  spec.has_bias = correction_bias.defined();
  spec.n_group = params().n_group;
  spec.topk_group = params().topk_group;
  auto& kernel = kernel_for<MoERoutingInterface>(spec);
  if (spec.tokens == 0) return;
  const Tensor bias = spec.has_bias ? correction_bias.contiguous() : Tensor();
  kernel.forward(logits.contiguous(), spec.has_bias ? &bias : nullptr, topk_weights, topk_ids,
                 params().routed_scaling_factor);
}

// ---- MoEPrePermuteFwdOp --------------------------------------------------------------------

std::vector<ImplementationInfo> gen::MoEPrePermuteFwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table;
  table.push_back(implementation<MoEPrePermuteCpu>("moe_pre_permute_cpu", "MoEPrePermuteCpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(implementation<MoEPrePermuteCuda>("moe_pre_permute_cuda", "MoEPrePermuteCuda"));
#endif
  return table;
}

void MoEPrePermuteFwdOp::forward(const Indices& call, const Tensor& x, const Tensor& topk_ids,
                                 const Tensor& expert_map, const Tensor& permuted_x,
                                 const Tensor& expert_offsets, const Tensor& inverse) {
  MoEPermuteCall spec;
  spec.device = call.device;
  spec.tokens = call.M;
  spec.hidden = call.H;
  spec.top_k = call.K;
  spec.num_experts = params().num_experts;
  spec.dtype = call.T;
  spec.has_map = expert_map.defined();
  auto& kernel = kernel_for<MoEPrePermuteInterface>(spec);
  const Tensor map = spec.has_map ? expert_map.contiguous() : Tensor();
  kernel.forward(x.contiguous(), topk_ids.contiguous(), spec.has_map ? &map : nullptr, permuted_x,
                 expert_offsets, inverse);
}

// ---- MoEPrePermuteQuantFP8FwdOp ------------------------------------------------------------

std::vector<ImplementationInfo> gen::MoEPrePermuteQuantFP8FwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table;
  table.push_back(implementation<MoEPrePermuteQuantCpu>("moe_pre_permute_quant_fp8_cpu",
                                                        "MoEPrePermuteQuantCpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(implementation<MoEPrePermuteQuantCuda>("moe_pre_permute_quant_fp8_cuda",
                                                         "MoEPrePermuteQuantCuda"));
  table.push_back(implementation<MoEPrePermuteQuantUnfusedCuda>(
      "moe_pre_permute_quant_fp8_unfused_cuda", "MoEPrePermuteQuantUnfusedCuda"));
#endif
  return table;
}

void MoEPrePermuteQuantFP8FwdOp::forward(const Indices& call, const Tensor& x,
                                         const Tensor& topk_ids, const Tensor& expert_map,
                                         const Tensor& permuted_q, const Tensor& permuted_scales,
                                         const Tensor& expert_offsets, const Tensor& inverse) {
  MoEPrePermuteQuantCall spec;
  spec.device = call.device;
  spec.tokens = call.M;
  spec.hidden = call.H;
  spec.top_k = call.K;
  spec.num_experts = params().num_experts;
  spec.group_size = params().group_size;
  spec.dtype = call.T;
  spec.has_map = expert_map.defined();
  auto& kernel = kernel_for<MoEPrePermuteQuantInterface>(spec);
  const Tensor map = spec.has_map ? expert_map.contiguous() : Tensor();
  kernel.forward(x.contiguous(), topk_ids.contiguous(), spec.has_map ? &map : nullptr, permuted_q,
                 permuted_scales, expert_offsets, inverse, params().eps);
}

// ---- MoEPrePermuteQuantFP8MaskedFwdOp ------------------------------------------------------

std::vector<ImplementationInfo> gen::MoEPrePermuteQuantFP8MaskedFwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table;
  table.push_back(implementation<MoEPrePermuteQuantMaskedCpu>(
      "moe_pre_permute_quant_fp8_masked_cpu", "MoEPrePermuteQuantMaskedCpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(implementation<MoEPrePermuteQuantMaskedCuda>(
      "moe_pre_permute_quant_fp8_masked_cuda", "MoEPrePermuteQuantMaskedCuda"));
#endif
  return table;
}

void MoEPrePermuteQuantFP8MaskedFwdOp::forward(const Indices& call, const Tensor& x,
                                               const Tensor& topk_ids, const Tensor& expert_map,
                                               const Tensor& a, const Tensor& a_scales,
                                               const Tensor& counts, const Tensor& inverse) {
  MoEPrePermuteQuantMaskedCall spec;
  spec.device = call.device;
  spec.tokens = call.M;
  spec.hidden = call.H;
  spec.top_k = call.K;
  spec.num_experts = params().num_experts;
  spec.max_m = params().max_m;
  spec.group_size = params().group_size;
  spec.dtype = call.T;
  spec.has_map = expert_map.defined();
  auto& kernel = kernel_for<MoEPrePermuteQuantMaskedInterface>(spec);
  const Tensor map = spec.has_map ? expert_map.contiguous() : Tensor();
  kernel.forward(x.contiguous(), topk_ids.contiguous(), spec.has_map ? &map : nullptr, a, a_scales,
                 counts, inverse, params().eps);
}

// ---- MoEGroupedGemmFwdOp -------------------------------------------------------------------

std::vector<ImplementationInfo> gen::MoEGroupedGemmFwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table;
  table.push_back(implementation<GroupedGemmCpu>("moe_grouped_gemm_cpu", "GroupedGemmCpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(implementation<GroupedGemmCuda>("moe_grouped_gemm_cuda", "GroupedGemmCuda"));
#endif
  return table;
}

void MoEGroupedGemmFwdOp::forward(const Indices& call, const Tensor& a,
                                  const Tensor& expert_offsets, const Tensor& b, const Tensor& c) {
  GroupedGemmCall spec;
  spec.device = call.device;
  spec.rows = call.M;
  spec.k = call.K;
  spec.experts = call.E;
  spec.n = call.N;
  spec.dtype = call.T;
  spec.activation = moe_activation(params().activation);
  auto& kernel = kernel_for<GroupedGemmInterface>(spec);
  if (c.numel() == 0) return;
  write_contiguous(c, [&](const Tensor& out) {
    kernel.forward(a.contiguous(), expert_offsets.contiguous(), b.contiguous(), out);
  });
}

// ---- MoEPostPermuteFwdOp -------------------------------------------------------------------

std::vector<ImplementationInfo> gen::MoEPostPermuteFwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table;
  table.push_back(implementation<MoEPostPermuteCpu>("moe_post_permute_cpu", "MoEPostPermuteCpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(
      implementation<MoEPostPermuteCuda>("moe_post_permute_cuda", "MoEPostPermuteCuda"));
#endif
  return table;
}

void MoEPostPermuteFwdOp::forward(const Indices& call, const Tensor& expert_out,
                                  const Tensor& topk_weights, const Tensor& inverse,
                                  const Tensor& y) {
  MoEPermuteCall spec;
  spec.device = call.device;
  spec.tokens = call.M;
  spec.top_k = call.K;
  spec.hidden = call.H;
  spec.rows = call.R;
  spec.dtype = call.T;
  auto& kernel = kernel_for<MoEPostPermuteInterface>(spec);
  if (y.numel() == 0) return;
  write_contiguous(y, [&](const Tensor& out) {
    kernel.forward(expert_out.contiguous(), topk_weights.contiguous(), inverse.contiguous(), out,
                   params().scale);
  });
}

TILEOPS_REGISTER_OP(MoETopKRoutingFwdOp)
TILEOPS_REGISTER_OP(MoEPrePermuteFwdOp)
TILEOPS_REGISTER_OP(MoEPrePermuteQuantFP8FwdOp)
TILEOPS_REGISTER_OP(MoEPrePermuteQuantFP8MaskedFwdOp)
TILEOPS_REGISTER_OP(MoEGroupedGemmFwdOp)
TILEOPS_REGISTER_OP(MoEPostPermuteFwdOp)

}  // namespace tileops
