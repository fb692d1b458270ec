// Double-precision references of the norm family (tests and `tileops bench` check against them).
#include <cmath>
#include <variant>

#include "tileops/base/reference.h"
#include "tileops/core/value.h"

namespace tileops {
namespace {

std::int64_t normalized_cols(const ParamMap& params) {
  std::int64_t cols = 1;
  for (const auto s : std::get<Sizes>(params.at("normalized_shape"))) cols *= s;
  return cols;
}

/// Rounds a double to what `dtype` holds and back (the fused op rounds the residual sum).
double round_to(double v, DType dtype) {
  const Tensor t = Tensor::full({1}, v, dtype);
  return t.item();
}

std::vector<Tensor> rms_norm_reference(std::span<const Tensor> inputs, const ParamMap& params,
                                       bool fused) {
  const Tensor x = inputs[0].to(Device::cpu());
  const Tensor weight = (fused ? inputs[2] : inputs[1]).to(Device::cpu());
  const double eps = std::get<double>(params.at("eps"));
  const std::int64_t cols = normalized_cols(params);
  const std::vector<double> xv = x.to_vector();
  const std::vector<double> wv = weight.to_vector();
  std::vector<double> rv = fused ? inputs[1].to(Device::cpu()).to_vector() : std::vector<double>{};
  const std::int64_t rows = cols == 0 ? 0 : static_cast<std::int64_t>(xv.size()) / cols;
  Tensor y = Tensor::empty(x.sizes(), DType::float32);
  Tensor residual_out = fused ? Tensor::empty(x.sizes(), DType::float32) : Tensor();
  float* yp = y.data<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<double> row(static_cast<std::size_t>(cols));
    for (std::int64_t c = 0; c < cols; ++c) {
      const auto i = static_cast<std::size_t>(r * cols + c);
      row[c] = fused ? round_to(xv[i] + rv[i], x.dtype()) : xv[i];
      if (fused) residual_out.data<float>()[i] = static_cast<float>(row[c]);
    }
    double sum = 0;
    for (const double v : row) sum += v * v;
    const double inv = 1.0 / std::sqrt(sum / static_cast<double>(cols) + eps);
    for (std::int64_t c = 0; c < cols; ++c) {
      yp[r * cols + c] = static_cast<float>(row[c] * inv * wv[c]);
    }
  }
  if (fused) return {y, residual_out};
  return {y};
}

/// The rows are independent: the reference of the gathered rows (weight whole).
std::vector<Tensor> rms_norm_rows(std::span<const Tensor> inputs, const ParamMap& params,
                                  std::span<const std::int64_t> rows, bool fused) {
  std::vector<Tensor> gathered(inputs.begin(), inputs.end());
  gathered[0] = gather_rows(inputs[0], rows);
  if (fused) gathered[1] = gather_rows(inputs[1], rows);
  return rms_norm_reference(gathered, params, fused);
}

}  // namespace

TILEOPS_REGISTER_SAMPLED_REFERENCE(RMSNormFwdOp,
                                   [](std::span<const Tensor> inputs, const ParamMap& p,
                                      std::span<const std::int64_t> rows) {
                                     return rms_norm_rows(inputs, p, rows, false);
                                   })
TILEOPS_REGISTER_SAMPLED_REFERENCE(FusedAddRMSNormFwdOp,
                                   [](std::span<const Tensor> inputs, const ParamMap& p,
                                      std::span<const std::int64_t> rows) {
                                     return rms_norm_rows(inputs, p, rows, true);
                                   })
TILEOPS_REGISTER_REFERENCE(RMSNormFwdOp, [](std::span<const Tensor> inputs, const ParamMap& p) {
  return rms_norm_reference(inputs, p, false);
})
TILEOPS_REGISTER_REFERENCE(FusedAddRMSNormFwdOp,
                           [](std::span<const Tensor> inputs, const ParamMap& p) {
                             return rms_norm_reference(inputs, p, true);
                           })

}  // namespace tileops
