// MoEGroupedGemmFP8FwdOp: hands contiguous tensors to the FP8 grouped GEMM interface. Only a CPU
// implementation exists so far; on CUDA the kernel table reports that no in-tree kernel runs
// there (OpNotAvailableError), as for PerTokenGroupQuantFP8FwdOp.
// Then its double-precision reference: every e4m3 code decoded from the format's definition
// (ops/quant/e4m3_reference.h), times its float32 scale in double, the products summed in
// double and the activation applied in double; the result is handed over as float32.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/moe/grouped_gemm_fp8_impls.h"
#include "ops/moe/moe_reference_math.h"
#include "ops/quant/e4m3_reference.h"
#include "tileops/base/reference.h"
#include "tileops/core/value.h"
#include "tileops/ops/moe.h"

namespace tileops {

std::vector<InterfaceInfo> MoEGroupedGemmFP8FwdOp::interfaces() {
  return {interface<GroupedGemmFP8Interface>()};
}

std::vector<ImplementationInfo> MoEGroupedGemmFP8FwdOp::kernel_types() {
  return {implementation<GroupedGemmFP8Cpu>("moe_grouped_gemm_fp8_cpu", "GroupedGemmFP8Cpu")};
}

std::string MoEGroupedGemmFP8FwdOp::roof_key() const {
  return "tensor_core.fp8";
}

void MoEGroupedGemmFP8FwdOp::forward(const SignatureCall& call, const Tensor& a,
                                     const Tensor& a_scales, const Tensor& expert_offsets,
                                     const Tensor& b, const Tensor& b_scales, const Tensor& c) {
  GroupedGemmFP8Call spec;
  spec.device = call.device;
  spec.rows = a.size(0);
  spec.k = a.size(1);
  spec.experts = b.size(0);
  spec.n = b.size(1);
  spec.block_n = params().block_n;
  spec.block_k = params().block_k;
  spec.activation = moe_activation(params().activation);
  auto& kernel = kernel_for<GroupedGemmFP8Interface>(spec);
  if (c.numel() == 0) return;
  // An `out` buffer may be a strided view: the kernel writes a contiguous scratch, copied in.
  const Tensor out = c.is_contiguous() ? c : Tensor::empty(c.sizes(), c.dtype(), c.device());
  kernel.forward(a.contiguous(), a_scales.contiguous(), expert_offsets.contiguous(), b.contiguous(),
                 b_scales.contiguous(), out);
  if (!c.is_contiguous()) c.copy_(out);
}

TILEOPS_REGISTER_OP(MoEGroupedGemmFP8FwdOp)

// ---- the double-precision reference ---------------------------------------------------------

namespace {

/// The values of an e4m3 tensor, decoded in double.
std::vector<double> e4m3_values(const Tensor& t) {
  const Tensor host = t.to(Device::cpu()).contiguous();
  const auto* codes = static_cast<const std::uint8_t*>(host.data_ptr());
  std::vector<double> v(static_cast<std::size_t>(host.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = reference_fp8::e4m3_value(codes[i]);
  return v;
}

std::vector<Tensor> grouped_gemm_fp8_reference(std::span<const Tensor> in, const ParamMap& p) {
  const std::int64_t rows = in[0].size(0);
  const std::int64_t k = in[0].size(1);
  const std::int64_t experts = in[3].size(0);
  const std::int64_t n = in[3].size(1);
  const std::int64_t block_n = std::get<std::int64_t>(p.at("block_n"));
  const std::int64_t block_k = std::get<std::int64_t>(p.at("block_k"));
  const std::string act = std::get<std::string>(p.at("activation"));
  const std::int64_t kblocks = k / block_k;
  const std::int64_t nblocks = (n + block_n - 1) / block_n;
  const std::vector<double> a = e4m3_values(in[0]);
  const std::vector<double> as = in[1].to(Device::cpu()).to_vector();
  const std::vector<double> offsets = in[2].to(Device::cpu()).to_vector();
  const std::vector<double> b = e4m3_values(in[3]);
  const std::vector<double> bs = in[4].to(Device::cpu()).to_vector();
  // Dequantized, as the manifest's sum reads them: a[r, k] * a_scales[r, k / block_k] ...
  std::vector<double> ad(a.size());
  for (std::int64_t i = 0; i < rows * k; ++i)
    ad[i] = a[i] * as[(i / k) * kblocks + i % k / block_k];
  // ... and b[e, j, k] * b_scales[e, j / block_n, k / block_k].
  std::vector<double> bd(b.size());
  for (std::int64_t i = 0; i < experts * n * k; ++i) {
    const std::int64_t e = i / (n * k);
    const std::int64_t j = i / k % n;
    bd[i] = b[i] * bs[(e * nblocks + j / block_n) * kblocks + i % k / block_k];
  }
  const std::int64_t n_out = act == "none" ? n : n / 2;
  Tensor c = Tensor::zeros({rows, n_out}, DType::float32);
  float* cp = c.data<float>();
  for (std::int64_t e = 0; e < experts; ++e) {
    for (auto r = static_cast<std::int64_t>(offsets[e]); r < offsets[e + 1]; ++r) {
      const std::vector<double> row =
          moe_reference::gemm_row(ad.data() + r * k, bd.data() + e * n * k, n, k, act);
      for (std::int64_t j = 0; j < n_out; ++j) cp[r * n_out + j] = static_cast<float>(row[j]);
    }
  }
  return {c};
}

}  // namespace

TILEOPS_REGISTER_REFERENCE(MoEGroupedGemmFP8FwdOp, grouped_gemm_fp8_reference)

}  // namespace tileops
