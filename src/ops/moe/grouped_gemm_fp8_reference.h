// Internal: the double-precision references of the FP8 block-scaled grouped GEMM (contiguous
// layout; src/ops/moe/moe_fp8_ops.cpp), shared with the dense FP8 GEMM, whose values are one
// expert's owning every row (src/ops/gemm/gemm_ops.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tileops/core/tensor.h"
#include "tileops/core/value.h"

namespace tileops::fp8_gemm_reference {

/// MoEGroupedGemmFP8FwdOp's reference: in = a, a_scales, expert_offsets, b, b_scales; params
/// activation, block_n, block_k. c [M, N or N / 2] float32 (of the double result).
std::vector<Tensor> grouped_gemm_fp8_reference(std::span<const Tensor> in, const ParamMap& p);

/// Its row-sampled reference: the rows `rows` of the above, computed from those rows alone.
std::vector<Tensor> grouped_gemm_fp8_sampled(std::span<const Tensor> in, const ParamMap& p,
                                             std::span<const std::int64_t> rows);

}  // namespace tileops::fp8_gemm_reference
