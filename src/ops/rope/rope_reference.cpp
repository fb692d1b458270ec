// Double-precision reference of LongRoPE (tests and `tileops bench` check against it).
#include <cmath>
#include <numbers>
#include <variant>

#include "tileops/base/reference.h"
#include "tileops/core/value.h"
#include "tileops/ops/rope.h"

namespace tileops {
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
