#if TILEOPS_WITH_CUDA

#include <cuda_runtime.h>

#include <fmt/format.h>
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string_view>

#include "kernels/common/cuda_tuning.h"
#include "tileops/core/cuda.h"

namespace tileops {
namespace {

std::string device_key(int device) {
  const auto& props = cuda_device_properties(device);
  int driver = 0;
  cudaDriverGetVersion(&driver);
  return fmt::format("{}|driver {}|tileops {}", props.name, driver, TILEOPS_VERSION_STRING);
}

// The two events of a timing, destroyed on every path out.
class EventPair {
 public:
  EventPair() {
    check_cuda(cudaEventCreate(&start_), "cudaEventCreate");
    const cudaError_t status = cudaEventCreate(&stop_);
    if (status != cudaSuccess) {
      cudaEventDestroy(start_);
      check_cuda(status, "cudaEventCreate");
    }
  }
  ~EventPair() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  cudaEvent_t start() const { return start_; }
  cudaEvent_t stop() const { return stop_; }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

float time_candidate(const std::function<void(std::size_t)>& launch, std::size_t i,
                     cudaStream_t stream) {
  constexpr int kWarmup = 3;
  constexpr int kRuns = 15;
  for (int w = 0; w < kWarmup; ++w) launch(i);
  const EventPair events;
  std::vector<float> times;
  for (int r = 0; r < kRuns; ++r) {
    check_cuda(cudaEventRecord(events.start(), stream), "cudaEventRecord");
    launch(i);
    check_cuda(cudaEventRecord(events.stop(), stream), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(events.stop()), "cudaEventSynchronize");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, events.start(), events.stop()), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  std::nth_element(times.begin(), times.begin() + kRuns / 2, times.end());
  return times[kRuns / 2];
}

// $TILEOPS_TUNE_LOG set and not "0": every timed candidate and the winner go to stderr.
bool tune_log_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("TILEOPS_TUNE_LOG");
    return v != nullptr && *v != '\0' && std::string_view(v) != "0";
  }();
  return enabled;
}

}  // namespace

std::string tuning_key(std::string_view kernel, std::string_view identity) {
  return fmt::format("{}|{}", kernel, identity);
}

std::size_t tune_by_timing(const std::string& key, const std::vector<std::string>& candidates,
                           int device, void* stream,
                           const std::function<void(std::size_t)>& launch) {
  if (candidates.empty()) return 0;
  const std::string full_key = device_key(device) + "|" + key;
  if (const auto stored = tuning_db::lookup(full_key)) {
    const auto it = std::find(candidates.begin(), candidates.end(), *stored);
    if (it != candidates.end()) return static_cast<std::size_t>(it - candidates.begin());
  }
  auto* s = static_cast<cudaStream_t>(stream);
  std::size_t best = 0;
  float best_ms = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const float ms = time_candidate(launch, i, s);
    if (tune_log_enabled())
      std::cerr << fmt::format("tileops: tune {}: {} {:.4f} ms\n", key, candidates[i], ms);
    if (i == 0 || ms < best_ms) {
      best = i;
      best_ms = ms;
    }
  }
  if (tune_log_enabled())
    std::cerr << fmt::format("tileops: tune {}: chose {}\n", key, candidates[best]);
  tuning_db::store(full_key, candidates[best]);
  return best;
}

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
