// Internal CUDA helpers of src/core (not installed): a scoped current-device guard.
#pragma once

#if TILEOPS_WITH_CUDA
#include <cuda_runtime_api.h>

#include "tileops/core/cuda.h"

namespace tileops::detail {

/// Makes `device` current for the scope and restores the previous device afterwards.
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
    changed_ = previous_ != device;
  }
  ~CudaDeviceGuard() {
    if (changed_) cudaSetDevice(previous_);
  }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

/// UsageError("<what>: CUDA device <n> does not exist (<count> devices available)") unless
/// 0 <= device < cuda_device_count().
void check_device_index(int device, const char* what);

/// tileops' memory pool of `device` (created on first use, thread-safe; see cuda_memory_stats in
/// tileops/core/cuda.h). The device index must exist.
cudaMemPool_t memory_pool(int device);

inline cudaStream_t stream_of(int device) {
  return static_cast<cudaStream_t>(cuda_current_stream(device));
}

}  // namespace tileops::detail

#endif
