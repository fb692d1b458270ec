// The normalization family: RMSNormFwdOp and FusedAddRMSNormFwdOp (manifest/norm.yaml), their
// kernel interface and call spec.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tileops/gen/norm.h"
#include "tileops/kernel/kernel.h"
#include "tileops/op/op.h"

namespace tileops {

/// The call spec of the RMSNorm kernels: rows × cols with one weight of cols, plain or with the
/// fused residual add.
struct RmsNormCall : CallSpec {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  DType dtype = DType::float32;
  bool fused_add = false;
  friend bool operator==(const RmsNormCall&, const RmsNormCall&) = default;
  std::size_t hash() const;
  std::string str() const;
};

/// The kernel interface both norm ops call. Contract:
///  - x: [rows, cols], dtype `dtype`, inner stride 1 (rows may be strided), on `device`;
///  - residual: nullptr for plain RMSNorm; else [rows, cols] like x, read and written in place
///    (residual <- T(x + residual), then normalized);
///  - weight: [cols], contiguous; y: [rows, cols], inner stride 1; y may be x (same memory).
class RmsNormInterface {
 public:
  static constexpr std::string_view name = "rms_norm";
  using Request = RmsNormCall;
  virtual ~RmsNormInterface() = default;
  virtual void forward(const Tensor& x, const Tensor* residual, const Tensor& weight,
                       const Tensor& y, double eps) = 0;
};

/// y = x * rsqrt(mean(x^2) + eps) * weight over the trailing `normalized_shape` dims.
///
///   tileops::RMSNormFwdOp op({.normalized_shape = {4096}, .eps = 1e-6});
///   tileops::Tensor y = op(x, weight);
class RMSNormFwdOp final : public gen::RMSNormFwdOpBase<RMSNormFwdOp> {
 public:
  using RMSNormFwdOpBase::RMSNormFwdOpBase;
  static std::vector<InterfaceInfo> interfaces();
  static std::vector<ImplementationInfo> kernel_types();
  void forward(const SignatureCall& call, const Tensor& x, const Tensor& weight, const Tensor& y);
};

/// residual <- T(x + residual) in place, then y = RMSNorm(residual) * weight.
class FusedAddRMSNormFwdOp final : public gen::FusedAddRMSNormFwdOpBase<FusedAddRMSNormFwdOp> {
 public:
  using FusedAddRMSNormFwdOpBase::FusedAddRMSNormFwdOpBase;
  static std::vector<InterfaceInfo> interfaces();
  static std::vector<ImplementationInfo> kernel_types();
  void forward(const SignatureCall& call, const Tensor& x, const Tensor& residual,
               const Tensor& weight, const Tensor& y);
};

}  // namespace tileops
