// Internal: the kernels of each RMSNorm family as launch functions for launch_rms_norm
// (rms_norm_launch_cuda.cu), and the host helpers the family files share. Include only from .cu
// files.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kernels/norm/rms_norm_cuda.h"
#include "kernels/norm/rms_norm_device.cuh"
#include "kernels/norm/rms_norm_limits.h"
#include "tileops/core/dtype.h"

namespace tileops::cuda_kernels::rms {

/// rms_norm_resident_cuda.cu: nv 1, 2, 4 (with or without the weight in registers) or 8
/// (without); nullptr for any other combination or dtype.
KernelFn resident_kernel(DType dtype, bool fused, int nv, bool weight_in_regs);

/// rms_norm_resident_pipelined_cuda.cu: the instantiation of TILEOPS_RMS_PIPELINED_VARIANTS that
/// matches `c`; nullptr when there is none.
KernelFn resident_pipelined_kernel(DType dtype, bool fused, const RMSNormResidentConfig& c);

/// rms_norm_streaming_cuda.cu: the two-pass kernel with 16-byte vectors (`vector`) or scalar
/// accesses.
KernelFn streaming_kernel(DType dtype, bool fused, bool vector);

/// rms_norm_streaming_cuda.cu: the high-occupancy streaming kernel with `vectors_in_flight` (1 or
/// 2) and `cache_hint` (0 to 3); nullptr for other values.
KernelFn high_occupancy_streaming_kernel(DType dtype, bool fused, int vectors_in_flight,
                                         int cache_hint);

/// rms_norm_reread_cuda.cu: the re-reading kernel for blocks of `threads` threads (256, 512 or
/// 1024) and `nv` 16-byte vectors a thread (1, 2 or 4; fused: 1 or 2); nullptr for any other
/// combination. It takes RMSNormParams with tpr == threads and rows_per_block == 1.
KernelFn reread_kernel(DType dtype, bool fused, int threads, int nv);

/// rms_norm_staged_cuda.cu: launches the staged kernel after launch_rms_norm's common checks.
void launch_staged(const RMSNormArgs& a, const RMSNormStagedConfig& config, void* stream);

// Shared host helpers (rms_norm_launch_cuda.cu).

/// Raises UsageError naming the CUDA error.
[[noreturn]] void throw_cuda(cudaError_t err, const char* what);
/// The multiprocessor count, from the properties read once per device.
int sm_count(int device);
/// The kernels' parameters for `a`, with tpr threads on each of rows_per_block rows of a block.
RMSNormParams make_params(const RMSNormArgs& a, int tpr, int rows_per_block);

constexpr int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace tileops::cuda_kernels::rms
