// RMSNormFwdOp and FusedAddRMSNormFwdOp: host side. Both present their tensors as rows and call
// the rms_norm interface; the implementation is selected per call spec by the base class.
#include <fmt/format.h>

#include "kernels/norm/rms_norm_impls.h"
#include "ops/rows_view.h"
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

std::vector<InterfaceInfo> RMSNormFwdOp::interfaces() {
  return {interface<RMSNormInterface>()};
}
std::vector<ImplementationInfo> RMSNormFwdOp::kernel_types() {
  return rms_norm_implementations();
}

void RMSNormFwdOp::forward(const SignatureCall& call, const Tensor& x, const Tensor& weight,
                           const Tensor& y) {
  const std::int64_t cols = product(params().normalized_shape);
  const std::int64_t rows = x.numel() / cols;
  RMSNormCall spec;
  spec.device = call.device;
  spec.rows = rows;
  spec.cols = cols;
  spec.dtype = x.dtype();
  auto& kernel = kernel_for<RMSNormInterface>(spec);
  const Tensor x_rows = detail::rows_or_copy(x, rows, cols);
  const Tensor w = weight_row(weight, cols);
  write_rows(y, rows, cols, [&](const Tensor& y_rows) {
    kernel.forward(x_rows, nullptr, w, y_rows, params().eps);
  });
}

std::vector<InterfaceInfo> FusedAddRMSNormFwdOp::interfaces() {
  return {interface<RMSNormInterface>()};
}
std::vector<ImplementationInfo> FusedAddRMSNormFwdOp::kernel_types() {
  return rms_norm_implementations();
}

void FusedAddRMSNormFwdOp::forward(const SignatureCall& call, const Tensor& x,
                                   const Tensor& residual, const Tensor& weight, const Tensor& y) {
  const std::int64_t cols = product(params().normalized_shape);
  const std::int64_t rows = x.numel() / cols;
  RMSNormCall spec;
  spec.device = call.device;
  spec.rows = rows;
  spec.cols = cols;
  spec.dtype = x.dtype();
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

}  // namespace tileops
