// The quantization family (manifest/quant.yaml): activations to FP8 with per-token-group scales.
// Its kernel contract is tileops/kernel/quant.h.
//
//   tileops::PerTokenGroupQuantFP8FwdOp quant({.group_size = 128});
//   const auto [q, scales] = quant(x);  // x [M, K] bf16 -> q [M, K] e4m3, scales [M, K / 128]
#pragma once

#include <vector>

#include "tileops/base/op.h"
#include "tileops/gen/quant.h"
#include "tileops/kernel/quant.h"

namespace tileops {

/// (q, scales) = op(x): one float32 scale per group_size columns of a row.
class PerTokenGroupQuantFP8FwdOp final
    : public gen::PerTokenGroupQuantFP8FwdOpBase<PerTokenGroupQuantFP8FwdOp> {
 public:
  using PerTokenGroupQuantFP8FwdOpBase::PerTokenGroupQuantFP8FwdOpBase;
  void forward(const Indices& call, const Tensor& x, const Tensor& q, const Tensor& scales);
};

}  // namespace tileops
