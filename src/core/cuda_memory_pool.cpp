// tileops' stream-ordered memory pool per CUDA device, which keeps freed memory cached (the
// driver's default pool returns it at every synchronisation), and its statistics and release.
#include <array>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>

#include "tileops/core/cuda.h"
#include "tileops/core/error.h"

#if TILEOPS_WITH_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda_internal.h"
#endif

namespace tileops {

#if TILEOPS_WITH_CUDA

namespace {

struct PoolSlot {
  std::once_flag once;
  cudaMemPool_t pool = nullptr;
};
std::array<PoolSlot, kMaxCudaDevices> g_pools;

std::int64_t pool_attribute(cudaMemPool_t pool, cudaMemPoolAttr attr, const char* what) {
  std::uint64_t value = 0;
  check_cuda(cudaMemPoolGetAttribute(pool, attr, &value), what);
  return static_cast<std::int64_t>(value);
}

}  // namespace

namespace detail {

cudaMemPool_t memory_pool(int device) {
  PoolSlot& slot = g_pools[static_cast<std::size_t>(device)];
  std::call_once(slot.once, [&] {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    check_cuda(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate");
    std::uint64_t keep_all = std::numeric_limits<std::uint64_t>::max();
    const cudaError_t status =
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all);
    if (status != cudaSuccess) {
      cudaMemPoolDestroy(pool);
      check_cuda(status, "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)");
    }
    slot.pool = pool;  // never destroyed: tensors may outlive static destruction
  });
  return slot.pool;
}

}  // namespace detail

CudaMemoryStats cuda_memory_stats(int device) {
  detail::check_device_index(device, "cuda_memory_stats");
  cudaMemPool_t pool = detail::memory_pool(device);
  return {pool_attribute(pool, cudaMemPoolAttrReservedMemCurrent, "cuda_memory_stats"),
          pool_attribute(pool, cudaMemPoolAttrUsedMemCurrent, "cuda_memory_stats")};
}

void cuda_release_cached_memory(int device) {
  detail::check_device_index(device, "cuda_release_cached_memory");
  detail::CudaDeviceGuard guard(device);
  check_cuda(cudaDeviceSynchronize(), "cuda_release_cached_memory: cudaDeviceSynchronize");
  check_cuda(cudaMemPoolTrimTo(detail::memory_pool(device), 0),
             "cuda_release_cached_memory: cudaMemPoolTrimTo");
}

#else  // !TILEOPS_WITH_CUDA

CudaMemoryStats cuda_memory_stats(int) {
  throw UsageError("cuda_memory_stats: tileops was built without CUDA");
}

void cuda_release_cached_memory(int) {
  throw UsageError("cuda_release_cached_memory: tileops was built without CUDA");
}

#endif

}  // namespace tileops
