// Internal: the fused quantizing gather of the pre-permute (moe_gather_quant_cuda.cu), which
// launch_moe_pre_permute runs after its ranking kernel when PrePermuteArgs::permuted_q is set.
#pragma once

#include "kernels/moe/moe_permute_cuda.h"

namespace tileops::cuda_kernels {

/// Raises SignatureError for a layout the kernel does not take (moe_permute_cuda.h says which); the
/// ranking kernel's offsets and inverse must be on the same stream before it.
void check_moe_gather_quant_fp8(const PrePermuteArgs& args);
void launch_moe_gather_quant_fp8(const PrePermuteArgs& args, void* stream);

}  // namespace tileops::cuda_kernels
