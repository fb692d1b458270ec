// Internal: a parallel loop over [0, n) for the CPU kernels, cheap when the work is small.
#pragma once

#include <cstdint>
#include <functional>

namespace tileops::cpu {

/// The threads a parallel loop uses: TILEOPS_CPU_THREADS when it is a positive integer, else the
/// cores this process may run on (its affinity mask). Read once.
std::int64_t cpu_threads();

/// The thread count a TILEOPS_CPU_THREADS value names: `text` when it is a positive decimal
/// integer (nothing else in it), else `cores` (also for a missing value, nullptr).
std::int64_t cpu_threads_setting(const char* text, std::int64_t cores);

/// Runs body(begin, end) over chunks of [0, n). Runs inline when `work` (an estimate of the
/// elements touched) is below a threshold, when there is one thread, when called from inside
/// another loop's chunk or while another thread's loop holds the workers, and in a child process
/// after fork(); otherwise splits the range into cpu_threads() chunks, the first on the calling
/// thread and the others on worker threads started once. The first exception a chunk throws is
/// rethrown after every chunk has finished.
void parallel_for(std::int64_t n, std::int64_t work,
                  const std::function<void(std::int64_t, std::int64_t)>& body);

}  // namespace tileops::cpu
