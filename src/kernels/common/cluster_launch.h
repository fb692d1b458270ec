// Internal: host side of thread-block cluster launches (Hopper): the launch configuration of a
// grid in clusters along x, and how many clusters of a kernel can be resident at once. CUDA
// builds only (include from .cu files or TILEOPS_WITH_CUDA code).
#pragma once

#include <cuda_runtime.h>

namespace tileops::cuda_kernels::hopper {

/// The cudaLaunchKernelEx configuration of `blocks` blocks (a multiple of `cluster`) of `threads`
/// threads and `smem_bytes` dynamic shared memory on `stream`, in clusters of `cluster` blocks
/// along x. The configuration points into the object: use it where it is made.
class ClusterLaunch {
 public:
  ClusterLaunch(long long blocks, int threads, int smem_bytes, int cluster, cudaStream_t stream) {
    attr_[0].id = cudaLaunchAttributeClusterDimension;
    attr_[0].val.clusterDim.x = static_cast<unsigned>(cluster);
    attr_[0].val.clusterDim.y = 1;
    attr_[0].val.clusterDim.z = 1;
    config_.gridDim = dim3(static_cast<unsigned>(blocks), 1, 1);
    config_.blockDim = dim3(static_cast<unsigned>(threads), 1, 1);
    config_.dynamicSmemBytes = static_cast<size_t>(smem_bytes);
    config_.stream = stream;
    config_.attrs = attr_;
    config_.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;

  const cudaLaunchConfig_t* config() const { return &config_; }

 private:
  cudaLaunchAttribute attr_[1] = {};
  cudaLaunchConfig_t config_ = {};
};

/// Clusters of `cluster` blocks of `fn` (`threads` threads, `smem_bytes` dynamic shared memory)
/// that can be resident at once on the current device, cached per kernel and device; 0 when the
/// runtime cannot tell (then a caller falls back to multiprocessors / cluster). UsageError when
/// the current device cannot be read.
int max_active_clusters(const void* fn, int cluster, int threads, int smem_bytes, int sms);

}  // namespace tileops::cuda_kernels::hopper
