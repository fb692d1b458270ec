// LongRoPEFwdOp: host side. Derives inv_freq and the amplitude at construction, keeps one copy
// of inv_freq per call device, and calls the long_rope interface. Then its double-precision
// reference (tests and `tileops bench` check against it).
#include <fmt/format.h>
#include <cmath>
#include <numbers>
#include <variant>

#include "kernels/rope/long_rope_impls.h"
#include "tileops/base/reference.h"
#include "tileops/core/value.h"
#include "tileops/ops/rope.h"

namespace tileops {

double long_rope_default_scaling(std::int64_t max_position_embeddings,
                                 std::int64_t original_max_position_embeddings) {
  if (max_position_embeddings <= original_max_position_embeddings) return 1.0;
  const double scale = static_cast<double>(max_position_embeddings) /
                       static_cast<double>(original_max_position_embeddings);
  return std::sqrt(1.0 + std::log(scale) /
                             std::log(static_cast<double>(original_max_position_embeddings)));
}

LongRoPEFwdOp::LongRoPEFwdOp(Params params, Target target)
    : LongRoPEFwdOpBase(std::move(params), std::move(target)) {
  // Derived attributes, after the base class checked the parameters.
  const std::vector<double> factors = this->params().rescale_factors.to_vector();
  const auto half = static_cast<std::int64_t>(factors.size());
  const double head_dim = 2.0 * static_cast<double>(half);
  inv_freq_ = Tensor::empty({half}, DType::float64);
  auto* inv = inv_freq_.data<double>();
  for (std::int64_t i = 0; i < half; ++i) {
    inv[i] = 1.0 / (factors[static_cast<std::size_t>(i)] *
                    std::pow(this->params().base, 2.0 * static_cast<double>(i) / head_dim));
  }
  attention_scaling_ = this->params().attention_scaling.value_or(long_rope_default_scaling(
      this->params().max_position_embeddings, this->params().original_max_position_embeddings));
}

std::vector<ImplementationInfo> gen::LongRoPEFwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table;
  table.push_back(implementation<LongRoPECpu>("long_rope_cpu", "LongRoPECpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(implementation<LongRoPECuda>("long_rope_cuda", "LongRoPECuda"));
#endif
  return table;
}

const Tensor& LongRoPEFwdOp::inv_freq_on(const Device& device) {
  if (device.is_cpu()) return inv_freq_;
  std::lock_guard lock(device_copies_mutex_);
  auto [it, inserted] = inv_freq_by_device_.try_emplace(device.str());
  if (inserted) it->second = inv_freq_.to(device);
  return it->second;
}

void LongRoPEFwdOp::forward(const Indices& call, const Tensor& x, const Tensor& positions,
                            const Tensor& y) {
  // The 'sd' layout solves no B or H: one sequence of one head.
  const std::int64_t batch = call.B.value_or(1);
  const std::int64_t seq = call.S;
  const std::int64_t heads = call.H.value_or(1);
  LongRoPECall spec;
  spec.device = call.device;
  spec.dtype = call.T;
  spec.has_positions = positions.defined();
  spec.positions_dtype = call.P.value_or(DType::int64);
  spec.half_dim = inv_freq_.numel();
  auto& kernel = kernel_for<LongRoPEInterface>(spec);
  const Tensor x_c = x.contiguous();
  const Tensor pos_c = positions.defined() ? positions.contiguous() : Tensor();
  const Tensor& inv = inv_freq_on(call.device);
  if (y.is_contiguous()) {
    kernel.forward(x_c, pos_c.defined() ? &pos_c : nullptr, inv, y, batch, seq, heads,
                   attention_scaling_);
  } else {
    const Tensor scratch = Tensor::empty(y.sizes(), y.dtype(), y.device());
    kernel.forward(x_c, pos_c.defined() ? &pos_c : nullptr, inv, scratch, batch, seq, heads,
                   attention_scaling_);
    y.copy_(scratch);
  }
}

TILEOPS_REGISTER_OP(LongRoPEFwdOp)

// ---- the double-precision reference ---------------------------------------------------------

namespace {

std::vector<Tensor> long_rope_reference(std::span<const Tensor> inputs, const ParamMap& params) {
  const Tensor x = inputs[0].to(Device::cpu());
  const Tensor positions =
      inputs.size() > 1 && inputs[1].defined() ? inputs[1].to(Device::cpu()) : Tensor();
  const std::vector<double> factors =
      std::get<Tensor>(params.at("rescale_factors")).to(Device::cpu()).to_vector();
  const double base = std::get<double>(params.at("base"));
  const auto max_pos = std::get<std::int64_t>(params.at("max_position_embeddings"));
  const auto orig_pos = std::get<std::int64_t>(params.at("original_max_position_embeddings"));
  const Value& given = params.at("attention_scaling");
  const double scale = std::holds_alternative<double>(given)
                           ? std::get<double>(given)
                           : long_rope_default_scaling(max_pos, orig_pos);
  const bool bshd = std::get<std::string>(params.at("layout")) == "bshd";
  const std::int64_t half = static_cast<std::int64_t>(factors.size());
  const std::int64_t batch = bshd ? x.size(0) : 1;
  const std::int64_t seq = bshd ? x.size(1) : x.size(0);
  const std::int64_t heads = bshd ? x.size(2) : 1;
  const std::vector<double> xv = x.to_vector();
  const std::vector<double> pv =
      positions.defined() ? positions.to_vector() : std::vector<double>{};
  Tensor y = Tensor::empty(x.sizes(), DType::float32);
  float* yp = y.data<float>();
  for (std::int64_t token = 0; token < batch * seq; ++token) {
    const double p = positions.defined() ? pv[static_cast<std::size_t>(token)]
                                         : static_cast<double>(token % seq);
    for (std::int64_t i = 0; i < half; ++i) {
      const double inv_freq =
          1.0 / (factors[i] *
                 std::pow(base, 2.0 * static_cast<double>(i) / (2.0 * static_cast<double>(half))));
      const double theta = p * inv_freq;
      const double c = std::cos(theta) * scale;
      const double s = std::sin(theta) * scale;
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t at = (token * heads + h) * 2 * half;
        const double a = xv[at + i];
        const double b = xv[at + i + half];
        yp[at + i] = static_cast<float>(a * c - b * s);
        yp[at + i + half] = static_cast<float>(b * c + a * s);
      }
    }
  }
  return {y};
}

}  // namespace

TILEOPS_REGISTER_REFERENCE(LongRoPEFwdOp, long_rope_reference)

}  // namespace tileops
