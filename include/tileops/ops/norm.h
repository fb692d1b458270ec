// The normalization family: RMSNormFwdOp and FusedAddRMSNormFwdOp (manifest/norm.yaml). Their
// kernel contract is tileops/kernel/norm.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tileops/base/op.h"
#include "tileops/gen/norm.h"
#include "tileops/kernel/norm.h"

namespace tileops {

/// y = x * rsqrt(mean(x^2) + eps) * weight over the trailing `normalized_shape` dims.
///
///   tileops::RMSNormFwdOp op({.normalized_shape = {4096}, .eps = 1e-6});
///   tileops::Tensor y = op(x, weight);
class RMSNormFwdOp final : public gen::RMSNormFwdOpBase<RMSNormFwdOp> {
 public:
  using RMSNormFwdOpBase::RMSNormFwdOpBase;
  void forward(const Indices& call, const Tensor& x, const Tensor& weight, const Tensor& y);
};

/// residual <- T(x + residual) in place, then y = RMSNorm(residual) * weight.
class FusedAddRMSNormFwdOp final : public gen::FusedAddRMSNormFwdOpBase<FusedAddRMSNormFwdOp> {
 public:
  using FusedAddRMSNormFwdOpBase::FusedAddRMSNormFwdOpBase;
  void forward(const Indices& call, const Tensor& x, const Tensor& residual, const Tensor& weight,
               const Tensor& y);
};

}  // namespace tileops
