// The dense GEMM family: FP8BlockScaledGemmFwdOp (manifest/gemm.yaml). Its kernel contract is
// tileops/kernel/gemm.h.
//
//   tileops::FP8BlockScaledGemmFwdOp gemm({.block_n = 128, .block_k = 128});
//   // a [M, K] e4m3, a_scales [M, K / 128], b [N, K] e4m3, b_scales [ceil(N / 128), K / 128]
//   tileops::Tensor c = gemm(a, a_scales, b, b_scales);  // [M, N] bfloat16
#pragma once

#include "tileops/base/op.h"
#include "tileops/gen/gemm.h"
#include "tileops/kernel/gemm.h"

namespace tileops {

/// c = op(a, a_scales, b, b_scales): the FP8 block-scaled dense GEMM (DeepGEMM's
/// gemm_fp8_fp8_bf16_nt), computed as MoEGroupedGemmFP8FwdOp computes one expert owning every
/// row, by the same CPU implementation and Hopper kernel. On CUDA the kernel serves 128 x 128
/// weight blocks; other blocks run on the CPU, a CUDA call with them raises DispatchError naming
/// the reason. Scale tensors of any strides are accepted (DeepGEMM's transposed, TMA-aligned
/// a_scales included) and copied to row-major when they are not.
class FP8BlockScaledGemmFwdOp final
    : public gen::FP8BlockScaledGemmFwdOpBase<FP8BlockScaledGemmFwdOp> {
 public:
  using FP8BlockScaledGemmFwdOpBase::FP8BlockScaledGemmFwdOpBase;
  void forward(const Indices& call, const Tensor& a, const Tensor& a_scales, const Tensor& b,
               const Tensor& b_scales, const Tensor& c);
};

}  // namespace tileops
