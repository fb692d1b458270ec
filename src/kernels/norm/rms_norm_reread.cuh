// Internal: the re-reading RMSNorm kernels (RmsNormConfig::reread, rms_norm_reread_cuda.cu), as
// launch functions for launch_rms_norm. Include only from .cu files.
#pragma once

#include "kernels/norm/rms_norm_device.cuh"
#include "tileops/core/dtype.h"

namespace tileops::cuda_kernels::rms {

/// The re-reading kernel for blocks of `threads` threads (256, 512 or 1024) and `nv` 16-byte
/// vectors a thread (1, 2 or 4; fused: 1 or 2), of float32, float16 or bfloat16; nullptr for any
/// other combination. It takes RmsParams with tpr == threads and rows_per_block == 1.
KernelFn reread_kernel(DType dtype, bool fused, int threads, int nv);

}  // namespace tileops::cuda_kernels::rms
