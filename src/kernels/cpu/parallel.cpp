#include "kernels/cpu/parallel.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tileops::cpu {

void parallel_for(std::int64_t n, std::int64_t work,
                  const std::function<void(std::int64_t, std::int64_t)>& body) {
  constexpr std::int64_t kInlineWork = 1 << 18;
  // Read once: glibc answers hardware_concurrency by reading a sysfs file, several µs per call.
  static const std::int64_t hw = std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t chunks = std::min(n, hw);
  if (n <= 0) return;
  if (work < kInlineWork || chunks <= 1) {
    body(0, n);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mutex;
  std::vector<std::thread> threads;
  const std::int64_t per = (n + chunks - 1) / chunks;
  for (std::int64_t c = 1; c < chunks; ++c) {
    const std::int64_t begin = c * per;
    const std::int64_t end = std::min(n, begin + per);
    if (begin >= end) break;
    threads.emplace_back([&, begin, end] {
      try {
        body(begin, end);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    });
  }
  try {
    body(0, std::min(n, per));
  } catch (...) {
    std::lock_guard lock(error_mutex);
    if (!error) error = std::current_exception();
  }
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace tileops::cpu
