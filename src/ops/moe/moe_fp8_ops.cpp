// MoEGroupedGemmFP8FwdOp and MoEGroupedGemmFP8MaskedFwdOp: hand contiguous tensors to the FP8
// grouped GEMM interfaces, served by the CPU implementations and on CUDA by the Hopper kernel
// (kernels/moe/grouped_gemm_fp8_impls.h), which refuses what it cannot compute (the kernel table
// then raises DispatchError with the reason).
// Then its double-precision reference: every e4m3 code decoded from the format's definition
// (ops/quant/e4m3_reference.h), times its float32 scale in double, the products summed in
// double and the activation applied in double; the result is handed over as float32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/moe/grouped_gemm_fp8_impls.h"
#include "ops/moe/grouped_gemm_fp8_reference.h"
#include "ops/moe/moe_reference_math.h"
#include "ops/quant/e4m3_reference.h"
#include "tileops/base/reference.h"
#include "tileops/core/value.h"
#include "tileops/ops/moe.h"

namespace tileops {

std::vector<ImplementationInfo> gen::MoEGroupedGemmFP8FwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table{
      implementation<GroupedGemmFP8Cpu>("moe_grouped_gemm_fp8_cpu", "GroupedGemmFP8Cpu")};
#if TILEOPS_WITH_CUDA
  table.push_back(
      implementation<GroupedGemmFP8Cuda>("moe_grouped_gemm_fp8_cuda", "GroupedGemmFP8Cuda"));
#endif
  return table;
}

void MoEGroupedGemmFP8FwdOp::forward(const Indices& call, const Tensor& a, const Tensor& a_scales,
                                     const Tensor& expert_offsets, const Tensor& b,
                                     const Tensor& b_scales, const Tensor& c) {
  GroupedGemmFP8Call spec;
  spec.device = call.device;
  spec.rows = call.M;
  spec.k = call.K;
  spec.experts = call.E;
  spec.n = call.N;
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

std::vector<ImplementationInfo> gen::MoEGroupedGemmFP8MaskedFwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table{implementation<GroupedGemmFP8MaskedCpu>(
      "moe_grouped_gemm_fp8_masked_cpu", "GroupedGemmFP8MaskedCpu")};
#if TILEOPS_WITH_CUDA
  table.push_back(implementation<GroupedGemmFP8MaskedCuda>("moe_grouped_gemm_fp8_masked_cuda",
                                                           "GroupedGemmFP8MaskedCuda"));
#endif
  return table;
}

void MoEGroupedGemmFP8MaskedFwdOp::forward(const Indices& call, const Tensor& a,
                                           const Tensor& a_scales, const Tensor& counts,
                                           const Tensor& b, const Tensor& b_scales,
                                           const Tensor& c) {
  GroupedGemmFP8Call spec;
  spec.device = call.device;
  spec.experts = call.E;
  spec.max_m = call.max_m;
  spec.rows = call.E * call.max_m;
  spec.k = call.K;
  spec.n = call.N;
  spec.block_n = params().block_n;
  spec.block_k = params().block_k;
  spec.activation = moe_activation(params().activation);
  auto& kernel = kernel_for<GroupedGemmFP8MaskedInterface>(spec);
  if (c.numel() == 0) return;
  const Tensor out = c.is_contiguous() ? c : Tensor::empty(c.sizes(), c.dtype(), c.device());
  kernel.forward(a.contiguous(), a_scales.contiguous(), counts.contiguous(), b.contiguous(),
                 b_scales.contiguous(), out);
  if (!c.is_contiguous()) c.copy_(out);
}

TILEOPS_REGISTER_OP(MoEGroupedGemmFP8FwdOp)
TILEOPS_REGISTER_OP(MoEGroupedGemmFP8MaskedFwdOp)

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

/// c [rows, n_out] (float32 of double): expert e's rows [first[e], first[e] + count[e]) of a
/// (flattened to rows of K) times its weights; the other rows 0. in: a, a_scales, (offsets or
/// counts), b, b_scales.
Tensor fp8_gemm_rows(std::span<const Tensor> in, const ParamMap& p,
                     const std::vector<std::int64_t>& first,
                     const std::vector<std::int64_t>& count) {
  const std::int64_t k = in[0].sizes().back();
  std::int64_t rows = 1;  // the leading dimensions of a (K may be 0)
  for (std::size_t d = 0; d + 1 < in[0].sizes().size(); ++d) rows *= in[0].sizes()[d];
  const std::int64_t experts = in[3].size(0);
  const std::int64_t n = in[3].size(1);
  const std::int64_t block_n = std::get<std::int64_t>(p.at("block_n"));
  const std::int64_t block_k = std::get<std::int64_t>(p.at("block_k"));
  const std::string act = std::get<std::string>(p.at("activation"));
  const std::int64_t kblocks = k / block_k;
  const std::int64_t nblocks = (n + block_n - 1) / block_n;
  const std::vector<double> a = e4m3_values(in[0]);
  const std::vector<double> as = in[1].to(Device::cpu()).to_vector();
  const std::vector<double> b = e4m3_values(in[3]);
  const std::vector<double> bs = in[4].to(Device::cpu()).to_vector();
  // Dequantized, as the manifest's sum reads them: a[r, k] * a_scales[r, k / block_k] ...
  std::vector<double> ad(a.size());
  for (std::int64_t i = 0; i < rows * k; ++i) {
    ad[i] = a[i] * as[(i / k) * kblocks + i % k / block_k];
  }
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
    for (std::int64_t r = first[e]; r < first[e] + count[e]; ++r) {
      const std::vector<double> row =
          moe_reference::gemm_row(ad.data() + r * k, bd.data() + e * n * k, n, k, act);
      for (std::int64_t j = 0; j < n_out; ++j) cp[r * n_out + j] = static_cast<float>(row[j]);
    }
  }
  return c;
}

}  // namespace

std::vector<Tensor> fp8_gemm_reference::grouped_gemm_fp8_reference(std::span<const Tensor> in,
                                                                   const ParamMap& p) {
  const std::vector<double> offsets = in[2].to(Device::cpu()).to_vector();
  std::vector<std::int64_t> first;
  std::vector<std::int64_t> count;
  for (std::size_t e = 0; e + 1 < offsets.size(); ++e) {
    first.push_back(static_cast<std::int64_t>(offsets[e]));
    count.push_back(static_cast<std::int64_t>(offsets[e + 1] - offsets[e]));
  }
  return {fp8_gemm_rows(in, p, first, count)};
}

namespace {

/// Expert e's rows start at e * max_m; counts outside [0, max_m] are refused as by the op.
std::vector<Tensor> grouped_gemm_fp8_masked_reference(std::span<const Tensor> in,
                                                      const ParamMap& p) {
  const std::int64_t max_m = in[0].size(1);
  const std::vector<double> counts = in[2].to(Device::cpu()).to_vector();
  std::vector<std::int64_t> first;
  std::vector<std::int64_t> count;
  for (std::size_t e = 0; e < counts.size(); ++e) {
    if (counts[e] < 0 || counts[e] > static_cast<double>(max_m)) {
      throw SignatureError("MoEGroupedGemmFP8MaskedFwdOp reference: a count is outside [0, max_m]");
    }
    first.push_back(static_cast<std::int64_t>(e) * max_m);
    count.push_back(static_cast<std::int64_t>(counts[e]));
  }
  const Tensor c = fp8_gemm_rows(in, p, first, count);
  return {c.reshape({in[0].size(0), max_m, c.size(1)})};
}

}  // namespace

/// The row-sampled reference (`tileops bench` checks DeepSeek-sized cases with it): a sampled
/// row reads only its expert's weights, dequantized in double once per expert (rows are sorted,
/// so one expert's rows come together). Each value as fp8_gemm_rows computes it.
std::vector<Tensor> fp8_gemm_reference::grouped_gemm_fp8_sampled(
    std::span<const Tensor> in, const ParamMap& p, std::span<const std::int64_t> rows) {
  const std::int64_t k = in[0].size(1);
  const std::int64_t n = in[3].size(1);
  const std::int64_t block_n = std::get<std::int64_t>(p.at("block_n"));
  const std::int64_t block_k = std::get<std::int64_t>(p.at("block_k"));
  const std::string act = std::get<std::string>(p.at("activation"));
  const std::int64_t kblocks = k / block_k;
  const std::int64_t nblocks = (n + block_n - 1) / block_n;
  const std::int64_t n_out = act == "none" ? n : n / 2;
  const std::vector<double> offsets = in[2].to(Device::cpu()).to_vector();
  const std::vector<double> bs = in[4].to(Device::cpu()).to_vector();
  std::int64_t expert = -1;
  std::vector<double> bd;
  const auto rows_count = static_cast<std::int64_t>(rows.size());
  Tensor c = Tensor::zeros({rows_count, n_out}, DType::float32);
  for (std::int64_t i = 0; i < rows_count; ++i) {
    const std::int64_t r = rows[i];
    std::int64_t e = 0;
    while (e + 1 < static_cast<std::int64_t>(offsets.size()) &&
           !(offsets[e] <= r && r < offsets[e + 1]))
      ++e;
    if (e + 1 >= static_cast<std::int64_t>(offsets.size())) continue;  // outside the groups: 0
    if (e != expert) {
      bd = e4m3_values(in[3].select(0, e));
      for (std::int64_t j = 0; j < n * k; ++j) {
        bd[j] *= bs[(e * nblocks + j / k / block_n) * kblocks + j % k / block_k];
      }
      expert = e;
    }
    const std::int64_t one[] = {r};
    std::vector<double> ad = e4m3_values(gather_rows(in[0], one));
    const std::vector<double> as = gather_rows(in[1], one).to_vector();
    for (std::int64_t j = 0; j < k; ++j) ad[j] *= as[j / block_k];
    const std::vector<double> row = moe_reference::gemm_row(ad.data(), bd.data(), n, k, act);
    for (std::int64_t j = 0; j < n_out; ++j)
      c.data<float>()[i * n_out + j] = static_cast<float>(row[j]);
  }
  return {c};
}

namespace {

/// The masked layout's row-sampled reference: its rows of dimension 0 are experts, each sampled
/// expert's [max_m, N or N / 2] block computed as grouped_gemm_fp8_masked_reference computes it
/// (from that expert's operands alone).
std::vector<Tensor> grouped_gemm_fp8_masked_sampled(std::span<const Tensor> in, const ParamMap& p,
                                                    std::span<const std::int64_t> rows) {
  const std::int64_t max_m = in[0].size(1);
  const std::vector<double> counts = in[2].to(Device::cpu()).to_vector();
  std::vector<Tensor> blocks;
  for (const std::int64_t e : rows) {
    const double count = counts[static_cast<std::size_t>(e)];
    if (count < 0 || count > static_cast<double>(max_m)) {
      throw SignatureError("MoEGroupedGemmFP8MaskedFwdOp reference: a count is outside [0, max_m]");
    }
    const std::vector<Tensor> one = {in[0].select(0, e), in[1].select(0, e), Tensor(),
                                     in[3].slice(0, e, e + 1), in[4].slice(0, e, e + 1)};
    const std::vector<std::int64_t> first{0};
    const std::vector<std::int64_t> count_of{static_cast<std::int64_t>(count)};
    blocks.push_back(fp8_gemm_rows(one, p, first, count_of));
  }
  const std::int64_t n_out = blocks.empty() ? 0 : blocks.front().size(1);
  Tensor c = Tensor::zeros({static_cast<std::int64_t>(rows.size()), max_m, n_out}, DType::float32);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    std::copy_n(blocks[i].data<float>(), max_m * n_out,
                c.data<float>() + static_cast<std::int64_t>(i) * max_m * n_out);
  }
  return {c};
}

}  // namespace

TILEOPS_REGISTER_REFERENCE(MoEGroupedGemmFP8FwdOp, fp8_gemm_reference::grouped_gemm_fp8_reference)
TILEOPS_REGISTER_REFERENCE(MoEGroupedGemmFP8MaskedFwdOp, grouped_gemm_fp8_masked_reference)
TILEOPS_REGISTER_SAMPLED_REFERENCE(MoEGroupedGemmFP8FwdOp,
                                   fp8_gemm_reference::grouped_gemm_fp8_sampled)
TILEOPS_REGISTER_SAMPLED_REFERENCE(MoEGroupedGemmFP8MaskedFwdOp, grouped_gemm_fp8_masked_sampled)

}  // namespace tileops
