// FP8BlockScaledGemmFwdOp: hands contiguous tensors to the dense FP8 GEMM interface, served by
// the FP8 grouped GEMM's CPU implementation and Hopper kernel over one group of every row
// (kernels/moe/grouped_gemm_fp8_impls.h; the CUDA one refuses what the kernel cannot compute and
// the kernel table then raises DispatchError with the reason).
// Then its double-precision reference and row-sampled reference: MoEGroupedGemmFP8FwdOp's for one
// expert owning every row (the same decoding of e4m3 codes, products and sums in double), and the
// inputs of its workloads (values and scales as the grouped op's).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/moe/grouped_gemm_fp8_impls.h"
#include "ops/moe/grouped_gemm_fp8_reference.h"
#include "tileops/base/reference.h"
#include "tileops/core/value.h"
#include "tileops/ops/gemm.h"

namespace tileops {

std::vector<ImplementationInfo> gen::FP8BlockScaledGemmFwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table{
      implementation<FP8BlockScaledGemmCpu>("fp8_block_scaled_gemm_cpu", "FP8BlockScaledGemmCpu")};
#if TILEOPS_WITH_CUDA
  table.push_back(implementation<FP8BlockScaledGemmCuda>("fp8_block_scaled_gemm_cuda",
                                                         "FP8BlockScaledGemmCuda"));
#endif
  return table;
}

void FP8BlockScaledGemmFwdOp::forward(const Indices& call, const Tensor& a, const Tensor& a_scales,
                                      const Tensor& b, const Tensor& b_scales, const Tensor& c) {
  GroupedGemmFP8Call spec;
  spec.device = call.device;
  spec.rows = call.M;
  spec.k = call.K;
  spec.experts = 1;
  spec.n = call.N;
  spec.block_n = params().block_n;
  spec.block_k = params().block_k;
  auto& kernel = kernel_for<FP8BlockScaledGemmInterface>(spec);
  if (c.numel() == 0) return;
  // Strided scales (DeepGEMM's transposed a_scales) and a strided `out` go through row-major
  // copies: the kernels read and write rows.
  const Tensor out = c.is_contiguous() ? c : Tensor::empty(c.sizes(), c.dtype(), c.device());
  kernel.forward(a.contiguous(), a_scales.contiguous(), b.contiguous(), b_scales.contiguous(), out);
  if (!c.is_contiguous()) c.copy_(out);
}

TILEOPS_REGISTER_OP(FP8BlockScaledGemmFwdOp)

namespace {

/// The grouped GEMM's inputs and parameters for one expert owning the M rows: a, a_scales,
/// offsets {0, M}, b [1, N, K], b_scales [1, ceil(N / block_n), K / block_k]; activation none.
struct OneGroup {
  std::vector<Tensor> in;
  ParamMap params;
};

OneGroup one_group(std::span<const Tensor> in, const ParamMap& p) {
  Tensor offsets = Tensor::empty({2}, DType::int32);
  offsets.data<std::int32_t>()[0] = 0;
  offsets.data<std::int32_t>()[1] = static_cast<std::int32_t>(in[0].size(0));
  OneGroup g{{in[0], in[1], offsets, in[2].unsqueeze(0), in[3].unsqueeze(0)}, p};
  g.params["activation"] = std::string("none");
  return g;
}

std::vector<Tensor> fp8_block_scaled_gemm_reference(std::span<const Tensor> in, const ParamMap& p) {
  const OneGroup g = one_group(in, p);
  return fp8_gemm_reference::grouped_gemm_fp8_reference(g.in, g.params);
}

std::vector<Tensor> fp8_block_scaled_gemm_sampled(std::span<const Tensor> in, const ParamMap& p,
                                                  std::span<const std::int64_t> rows) {
  const OneGroup g = one_group(in, p);
  return fp8_gemm_reference::grouped_gemm_fp8_sampled(g.in, g.params, rows);
}

const InstantiatedCase::InputSpec& spec(const InstantiatedCase& c, std::size_t i) {
  return *c.inputs.at(i);
}

/// e4m3 values in [-2, 2), activation scales in [0.5, 1) and weight scales in [0.5, 1) / sqrt(K),
/// as MoEGroupedGemmFP8FwdOp's workloads: outputs of about unit size, far from bfloat16's limits.
std::vector<Tensor> fp8_block_scaled_gemm_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                                 Device device) {
  const double k = static_cast<double>(std::max<std::int64_t>(1, spec(c, 0).shape[1]));
  const auto uniform = [&](std::size_t i, double lo, double hi) {
    return Tensor::rand(spec(c, i).shape, spec(c, i).dtype, seed + i, device, lo, hi);
  };
  return {uniform(0, -2.0, 2.0), uniform(1, 0.5, 1.0), uniform(2, -2.0, 2.0),
          uniform(3, 0.5 / std::sqrt(k), 1.0 / std::sqrt(k))};
}

}  // namespace

TILEOPS_REGISTER_REFERENCE(FP8BlockScaledGemmFwdOp, fp8_block_scaled_gemm_reference)
TILEOPS_REGISTER_SAMPLED_REFERENCE(FP8BlockScaledGemmFwdOp, fp8_block_scaled_gemm_sampled)
TILEOPS_REGISTER_WORKLOAD_INPUTS(FP8BlockScaledGemmFwdOp, fp8_block_scaled_gemm_inputs)

}  // namespace tileops
