// Host cost of one cpu::parallel_for loop (src/kernels/cpu/parallel.h) whose chunks do nothing:
// back to back (the workers still spinning from the previous loop) and after an idle gap of
// range(0) µs spent busy on the calling thread (the workers asleep), as between the CPU ops of a
// model layer.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "kernels/cpu/parallel.h"

namespace {

void BM_ParallelForEmptyLoop(benchmark::State& state) {
  const auto gap = std::chrono::microseconds(state.range(0));
  std::atomic<std::int64_t> visited{0};
  const auto body = [&](std::int64_t begin, std::int64_t end) { visited += end - begin; };
  for (auto _ : state) {
    const auto idle_until = std::chrono::steady_clock::now() + gap;
    while (std::chrono::steady_clock::now() < idle_until) {
    }
    const auto start = std::chrono::steady_clock::now();
    tileops::cpu::parallel_for(64, std::int64_t{1} << 24, body);
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  benchmark::DoNotOptimize(visited.load());
}
BENCHMARK(BM_ParallelForEmptyLoop)->Arg(0)->Arg(50)->Arg(200)->Arg(1000)->UseManualTime();

}  // namespace

BENCHMARK_MAIN();
