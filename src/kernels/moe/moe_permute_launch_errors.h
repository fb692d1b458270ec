// Internal: how the MoE permute and ranking launchers report CUDA runtime errors (UsageError
// naming the operation); include from .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "tileops/core/error.h"

namespace tileops::cuda_kernels::moe_launch {

[[noreturn]] inline void throw_cuda(const char* op, cudaError_t err, const char* what) {
  throw UsageError(std::string(op) + " (CUDA): " + what + ": " + cudaGetErrorName(err) + ": " +
                   cudaGetErrorString(err));
}

/// Raises the error of the last launch, if any.
inline void check_launch(const char* op) {
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    throw_cuda(op, err, "kernel launch");
}

}  // namespace tileops::cuda_kernels::moe_launch
