// Internal: the measurements behind hardware profiles (not installed).
#pragma once

#include <cstddef>

namespace tileops::perf::detail {

/// CPU: best multi-threaded memcpy bandwidth over `reps` copies of `bytes` (read + written
/// bytes per second).
double measure_cpu_copy_bandwidth(std::size_t bytes, int reps);
/// CPU: multi-threaded fp32 multiply-add rate (flops per second) of a vectorisable loop.
double measure_cpu_fp32_rate(long iterations_per_thread);

#if TILEOPS_WITH_CUDA
/// GPU: best device-to-device copy bandwidth over `reps` copies of `bytes` (read + written).
double measure_cuda_copy_bandwidth(int device, std::size_t bytes, int reps);
/// GPU: fp32 FMA rate of a kernel filling every SM (flops per second), best of `reps`.
double measure_cuda_fp32_rate(int device, int reps);
#endif

}  // namespace tileops::perf::detail
