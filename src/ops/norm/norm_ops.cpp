// RMSNormFwdOp and FusedAddRMSNormFwdOp: host side. Both present their tensors as rows and call
// the rms_norm interface; the implementation is selected per call spec by the base class. Then
// their double-precision references (tests and `tileops bench` check against them).
#include <fmt/format.h>
#include <cmath>
#include <variant>

#include "kernels/norm/rms_norm_impls.h"
#include "ops/rows_view.h"
#include "tileops/base/reference.h"
#include "tileops/core/value.h"
#include "tileops/ops/norm.h"

namespace tileops {

namespace {

std::vector<ImplementationInfo> rms_norm_implementations() {
  std::vector<ImplementationInfo> table;
  table.push_back(implementation<RMSNormCpu>("rms_norm_cpu", "RMSNormCpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(implementation<RMSNormCuda>("rms_norm_cuda", "RMSNormCuda"));
#endif
  return table;
}

std::int64_t product(const Sizes& sizes) {
  std::int64_t n = 1;
  for (const auto s : sizes) n *= s;
  return n;
}

/// The weight as one contiguous row of `cols` (no new view when it already is one).
Tensor weight_row(const Tensor& weight, std::int64_t cols) {
  if (weight.dim() == 1 && weight.is_contiguous()) return weight;
  return weight.contiguous().view({cols});
}

/// Runs `body` on a [rows, cols] view of `y`, or on a scratch tensor copied into `y` after.
template <class Body>
void write_rows(const Tensor& y, std::int64_t rows, std::int64_t cols, Body&& body) {
  if (auto view = detail::rows_view(y, rows, cols)) {
    body(*view);
    return;
  }
  const Tensor scratch = Tensor::empty({rows, cols}, y.dtype(), y.device());
  body(scratch);
  y.copy_(scratch.view(y.sizes()));
}

}  // namespace

std::vector<ImplementationInfo> gen::RMSNormFwdOpKernels::kernel_types() {
  return rms_norm_implementations();
}

void RMSNormFwdOp::forward(const Indices& call, const Tensor& x, const Tensor& weight,
                           const Tensor& y) {
  const std::int64_t cols = product(params().normalized_shape);
  const std::int64_t rows = product(call.S);
  RMSNormCall spec;
  spec.device = call.device;
  spec.rows = rows;
  spec.cols = cols;
  spec.dtype = call.T;
  auto& kernel = kernel_for<RMSNormInterface>(spec);
  const Tensor x_rows = detail::rows_or_copy(x, rows, cols);
  const Tensor w = weight_row(weight, cols);
  write_rows(y, rows, cols, [&](const Tensor& y_rows) {
    kernel.forward(x_rows, nullptr, w, y_rows, params().eps);
  });
}

std::vector<ImplementationInfo> gen::FusedAddRMSNormFwdOpKernels::kernel_types() {
  return rms_norm_implementations();
}

void FusedAddRMSNormFwdOp::forward(const Indices& call, const Tensor& x, const Tensor& residual,
                                   const Tensor& weight, const Tensor& y) {
  const std::int64_t cols = product(params().normalized_shape);
  const std::int64_t rows = product(call.S);
  RMSNormCall spec;
  spec.device = call.device;
  spec.rows = rows;
  spec.cols = cols;
  spec.dtype = call.T;
  spec.fused_add = true;
  auto& kernel = kernel_for<RMSNormInterface>(spec);
  const Tensor x_rows = detail::rows_or_copy(x, rows, cols);
  const Tensor w = weight_row(weight, cols);
  // residual is written in place: work on a view of it, or on a copy written back.
  write_rows(residual, rows, cols, [&](const Tensor& r_rows) {
    if (!detail::rows_view(residual, rows, cols)) r_rows.copy_(residual.reshape({rows, cols}));
    write_rows(y, rows, cols, [&](const Tensor& y_rows) {
      kernel.forward(x_rows, &r_rows, w, y_rows, params().eps);
    });
  });
}

TILEOPS_REGISTER_OP(RMSNormFwdOp)
TILEOPS_REGISTER_OP(FusedAddRMSNormFwdOp)

// ---- the double-precision reference ---------------------------------------------------------

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
