// The kernel contract of the dense GEMM family: the interface every FP8 block-scaled dense GEMM
// implementation serves. Its request is the FP8 grouped GEMM's call spec (tileops/kernel/moe.h)
// with one expert owning every row: the same kernels serve both ops, and a tuned configuration of
// the dense call is the grouped GEMM's for that one group. Kernel code includes this header,
// never the op header.
#pragma once

#include <string_view>

#include "tileops/core/tensor.h"
#include "tileops/dispatch/kernel.h"
#include "tileops/kernel/moe.h"

namespace tileops {

/// a [rows, k] e4m3; a_scales [rows, k / block_k] float32; b [n, k] e4m3; b_scales
/// [ceil(n / block_n), k / block_k] float32; c [rows, n] bfloat16; all contiguous, on the call's
/// device (manifest/gemm.yaml, FP8BlockScaledGemmFwdOp, defines the values). The request has
/// experts = 1, max_m = 0 and activation none.
class FP8BlockScaledGemmInterface {
 public:
  static constexpr std::string_view name = "fp8_block_scaled_gemm";
  using Request = GroupedGemmFP8Call;
  virtual ~FP8BlockScaledGemmInterface() = default;
  virtual void forward(const Tensor& a, const Tensor& a_scales, const Tensor& b,
                       const Tensor& b_scales, const Tensor& c) = 0;
};

}  // namespace tileops
