// Internal: a parallel loop over [0, n) for the CPU kernels, cheap when the work is small.
#pragma once

#include <cstdint>
#include <functional>

namespace tileops::cpu {

/// Runs body(begin, end) over chunks of [0, n). Runs inline when `work` (an estimate of the
/// elements touched) is below a threshold or there is one hardware thread; otherwise splits
/// the range over the hardware threads. Exceptions from a chunk are rethrown.
void parallel_for(std::int64_t n, std::int64_t work,
                  const std::function<void(std::int64_t, std::int64_t)>& body);

}  // namespace tileops::cpu
