// CPU measurements for the coarse CPU hardware profile.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "perf/probe.h"

namespace tileops::perf::detail {
namespace {

using Clock = std::chrono::steady_clock;

// The threads the CPU kernels use (their parallel loops), so that the profile is of those.
unsigned thread_count() {
  return static_cast<unsigned>(cpu::cpu_threads());
}

/// Runs body(t) on `n` threads (t = 0..n-1) and returns the wall time of the whole.
template <class Body>
double run_parallel(unsigned n, Body body) {
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  threads.reserve(n - 1);
  for (unsigned t = 1; t < n; ++t) threads.emplace_back(body, t);
  body(0u);
  for (auto& th : threads) th.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

double measure_cpu_copy_bandwidth(std::size_t bytes, int reps) {
  const unsigned n = thread_count();
  const std::size_t chunk = (bytes / n) & ~std::size_t{63};
  const std::size_t total = chunk * n;
  if (total == 0) return 0;
  std::unique_ptr<char[]> src(new char[total]);
  std::unique_ptr<char[]> dst(new char[total]);
  // First touch by the threads that copy, so pages are placed near them.
  run_parallel(n, [&](unsigned t) {
    std::memset(src.get() + t * chunk, static_cast<int>(t + 1), chunk);
    std::memset(dst.get() + t * chunk, 0, chunk);
  });
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const double s = run_parallel(
        n, [&](unsigned t) { std::memcpy(dst.get() + t * chunk, src.get() + t * chunk, chunk); });
    if (s > 0) best = std::max(best, 2.0 * static_cast<double>(total) / s);
  }
  return best;
}

double measure_cpu_fp32_rate(long iterations_per_thread) {
  const unsigned n = thread_count();
  constexpr int kLanes = 64;
  std::vector<float> sinks(n, 0.0f);
  volatile float mul_seed = 0.999999f;
  volatile float add_seed = 1e-7f;
  const float mul = mul_seed;
  const float add = add_seed;
  const double s = run_parallel(n, [&](unsigned t) {
    alignas(64) float acc[kLanes];
    for (int j = 0; j < kLanes; ++j) acc[j] = static_cast<float>(t + 1) + 0.01f * j;
    for (long i = 0; i < iterations_per_thread; ++i) {
      for (int j = 0; j < kLanes; ++j) acc[j] = acc[j] * mul + add;
    }
    float sum = 0;
    for (int j = 0; j < kLanes; ++j) sum += acc[j];
    sinks[t] = sum;
  });
  volatile float sink = 0;
  for (float v : sinks) sink = sink + v;
  const double flops = 2.0 * kLanes * static_cast<double>(iterations_per_thread) * n;
  return s > 0 ? flops / s : 0;
}

}  // namespace tileops::perf::detail
