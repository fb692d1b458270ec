// How many clusters of a kernel can be resident at once (cluster_launch.h).
#if TILEOPS_WITH_CUDA

#include "kernels/common/cluster_launch.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "tileops/core/error.h"

namespace tileops::cuda_kernels::hopper {

int max_active_clusters(const void* fn, int cluster, int threads, int smem_bytes, int sms) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int>, int> cache;
  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) {
    throw UsageError(std::string("cluster launch (CUDA): cudaGetDevice: ") + cudaGetErrorName(err) +
                     ": " + cudaGetErrorString(err));
  }
  const auto key = std::make_tuple(fn, device);
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  const ClusterLaunch launch(static_cast<long long>(std::max(sms / cluster, 1)) * cluster, threads,
                             smem_bytes, cluster, nullptr);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, fn, launch.config()) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky; the caller falls back to the multiprocessor count
    clusters = 0;
  }
  std::lock_guard<std::mutex> lock(mutex);
  cache[key] = clusters;
  return clusters;
}

}  // namespace tileops::cuda_kernels::hopper

#endif  // TILEOPS_WITH_CUDA
