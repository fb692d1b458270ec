// Timers: CPU wall clock, and CUDA events with an L2 flush before every iteration.
#include "tileops/perf/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <utility>

#include "tileops/core/error.h"

#if TILEOPS_WITH_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda_internal.h"
#include "perf/flush.h"
#include "tileops/core/cuda.h"
#endif

namespace tileops::perf {

std::string to_string(L2Flush flush) {
  return flush == L2Flush::kernel ? "kernel" : "memset";
}

L2Flush parse_l2_flush(const std::string& name) {
  if (name == "memset") return L2Flush::memset;
  if (name == "kernel") return L2Flush::kernel;
  throw UsageError("unknown L2 flush '" + name + "': expected memset or kernel");
}

double percentile(std::span<const double> samples, double q) {
  if (samples.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  q = std::clamp(q, 0.0, 1.0);
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

TimingResult summarize(std::vector<double> samples_s, std::string method) {
  TimingResult r;
  r.method = std::move(method);
  r.iterations = static_cast<int>(samples_s.size());
  if (!samples_s.empty()) {
    r.median_s = percentile(samples_s, 0.5);
    r.p90_s = percentile(samples_s, 0.9);
    r.min_s = *std::min_element(samples_s.begin(), samples_s.end());
    r.mean_s = std::accumulate(samples_s.begin(), samples_s.end(), 0.0) /
               static_cast<double>(samples_s.size());
  } else {
    r.median_s = r.p90_s = r.min_s = r.mean_s = std::numeric_limits<double>::quiet_NaN();
  }
  r.samples_s = std::move(samples_s);
  return r;
}

int choose_iterations(double per_call_s, const TimingOptions& options) {
  const int lo = std::max(1, options.min_iters);
  const int hi = std::max(lo, options.max_iters);
  if (!(per_call_s > 0)) return hi;
  const double n = options.budget_ms * 1e-3 / per_call_s;
  if (!(n < static_cast<double>(hi))) return hi;  // also NaN/inf
  return std::clamp(static_cast<int>(n), lo, hi);
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

constexpr int kCalibrationCalls = 3;

TimingResult time_cpu(const std::function<void()>& fn, const TimingOptions& options) {
  fn();  // first call: builds kernels, touches memory
  std::vector<double> calibration;
  const auto calibration_start = Clock::now();
  for (int i = 0; i < kCalibrationCalls; ++i) {
    const auto t0 = Clock::now();
    fn();
    calibration.push_back(seconds_since(t0));
  }
  const double warmup_s = options.warmup_ms * 1e-3 - seconds_since(calibration_start);
  if (warmup_s > 0) {
    const auto warmup_start = Clock::now();
    while (seconds_since(warmup_start) < warmup_s) fn();
  }
  const int iterations = choose_iterations(percentile(calibration, 0.5), options);
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(iterations));
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = Clock::now();
    fn();
    samples.push_back(seconds_since(t0));
  }
  return summarize(std::move(samples), "cpu wall clock");
}

#if TILEOPS_WITH_CUDA

void check(cudaError_t code, const char* what) {
  check_cuda(static_cast<int>(code), what);
}

/// A buffer of twice the L2 size and at least 512 MiB per device, allocated on first use and kept
/// for the process. Overwriting it takes long enough (about 0.15 ms on an H200) for a host to
/// enqueue the timed call behind it, even a Python peer's (bench/peers.py flushes the same bytes),
/// so that no host time is timed.
std::pair<void*, std::size_t> flush_buffer(int device) {
  static std::mutex mutex;
  static std::map<int, std::pair<void*, std::size_t>> buffers;
  std::lock_guard lock(mutex);
  if (auto it = buffers.find(device); it != buffers.end()) return it->second;
  const std::int64_t l2 = cuda_device_properties(device).l2_bytes;
  const std::size_t bytes =
      static_cast<std::size_t>(std::max<std::int64_t>(2 * l2, std::int64_t{512} << 20));
  void* ptr = nullptr;
  check(cudaMalloc(&ptr, bytes), "cudaMalloc (L2 flush buffer)");
  return buffers.emplace(device, std::make_pair(ptr, bytes)).first->second;
}

/// Owns a set of events, destroyed with the object.
class Events {
 public:
  explicit Events(std::size_t n) : events_(n, nullptr) {
    for (auto& e : events_) check(cudaEventCreate(&e), "cudaEventCreate");
  }
  ~Events() {
    for (auto e : events_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  cudaEvent_t operator[](std::size_t i) const { return events_[i]; }

 private:
  std::vector<cudaEvent_t> events_;
};

TimingResult time_cuda(const std::function<void()>& fn, int device, const TimingOptions& options) {
  tileops::detail::CudaDeviceGuard guard(device);
  cudaStream_t stream = tileops::detail::stream_of(device);
  std::pair<void*, std::size_t> flush{nullptr, 0};
  if (options.flush_l2) flush = flush_buffer(device);

  // Runs `n` timed iterations, each preceded by an L2 flush outside the timed region and followed
  // by a wait for its stop event, so that each call is enqueued while the flush runs and none
  // overlaps the next iteration's flush (bench/peers.py times the peers the same way).
  auto timed = [&](int n) {
    Events events(2 * static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      if (flush.first != nullptr && options.flush_method == L2Flush::kernel) {
        detail::fill_bytes_kernel(flush.first, flush.second, static_cast<unsigned char>(i & 0xff),
                                  stream);
      } else if (flush.first != nullptr) {
        check(cudaMemsetAsync(flush.first, i & 0xff, flush.second, stream), "cudaMemsetAsync");
      }
      check(cudaEventRecord(events[2 * i], stream), "cudaEventRecord");
      fn();
      check(cudaEventRecord(events[2 * i + 1], stream), "cudaEventRecord");
      check(cudaEventSynchronize(events[2 * i + 1]), "cudaEventSynchronize");
    }
    std::vector<double> out;
    out.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]), "cudaEventElapsedTime");
      out.push_back(static_cast<double>(ms) * 1e-3);
    }
    return out;
  };

  fn();  // first call: builds kernels
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  const std::vector<double> calibration = timed(kCalibrationCalls);
  const double per_call = percentile(calibration, 0.5);
  if (options.warmup_ms > 0) {
    const double n = per_call > 0 ? options.warmup_ms * 1e-3 / per_call : 1.0;
    const int warmup = std::isfinite(n) ? std::clamp(static_cast<int>(n), 1, 10000) : 1;
    for (int i = 0; i < warmup; ++i) fn();
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  std::vector<double> samples = timed(choose_iterations(per_call, options));
  return summarize(std::move(samples),
                   flush.first != nullptr
                       ? "cuda events, L2 flushed (" + to_string(options.flush_method) + ")"
                       : std::string("cuda events"));
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace

TimingResult time_op(const std::function<void()>& fn, Device device, TimingOptions options) {
  if (device.is_cpu()) return time_cpu(fn, options);
#if TILEOPS_WITH_CUDA
  return time_cuda(fn, device.index, options);
#else
  throw UsageError("time_op on " + device.str() + ": tileops was built without CUDA");
#endif
}

}  // namespace tileops::perf
