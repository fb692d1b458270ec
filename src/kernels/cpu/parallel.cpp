#include "kernels/cpu/parallel.h"

#include <sched.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace tileops::cpu {
namespace {

using Body = std::function<void(std::int64_t, std::int64_t)>;

// Set in a child process after fork(): the parent's workers do not exist there, so its loops run
// inline (docs/design/cpu-kernels.md).
std::atomic<bool> forked{false};
// Set on the pool's own threads, and on a caller for the length of its loop: a loop started from
// inside a chunk runs inline.
thread_local bool inside_loop = false;

std::int64_t usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// Worker threads started once and kept: starting a thread per loop cost tens of µs per call.
// One loop at a time; its chunks are taken from a shared counter by the calling thread and by the
// workers woken for it, so the caller never waits for a worker that has not started (a worker
// kept off the cores by other threads, torch's OpenMP pool among them, takes nothing).
class WorkerPool {
 public:
  explicit WorkerPool(std::int64_t workers) {
    for (std::int64_t i = 0; i < workers; ++i) workers_.push_back(std::make_unique<Worker>());
    for (auto& w : workers_) w->thread = std::thread([this, &w] { serve(*w); });
  }

  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  ~WorkerPool() {
    stop_.store(true);
    for (auto& w : workers_) {
      { const std::lock_guard lock(w->mutex); }  // a worker between its check and its sleep
      w->wake.notify_one();
    }
    for (auto& w : workers_) w->thread.join();
  }

  /// The lock a caller holds for the whole loop (loops from several threads take turns).
  std::mutex& caller_mutex() { return caller_mutex_; }

  /// Runs body over `chunks` chunks of `per` indices of [0, n), with up to `helpers` workers;
  /// rethrows the first exception a chunk threw.
  void run(std::int64_t n, std::int64_t per, std::int64_t chunks, std::int64_t helpers,
           const Body& body) {
    // Close the last loop's counter before this loop's fields change: a worker late for it may
    // hold its final state and, reading this loop's chunk count, would otherwise take a chunk
    // that does not exist (TSan saw it read per_ while it was written here). The release store
    // of chunks_ makes the closing visible to whoever reads the new count.
    next_.store(((loop_ + 1) & 0xffffffffu) << 32 | 0xffffffffu, std::memory_order_relaxed);
    body_ = &body;
    n_ = n;
    per_ = per;
    chunks_.store(chunks, std::memory_order_release);
    error_ = nullptr;
    finished_.store(0, std::memory_order_relaxed);
    ++loop_;
    next_.store((loop_ & 0xffffffffu) << 32, std::memory_order_release);
    for (std::int64_t i = 0; i < helpers; ++i) {
      Worker& w = *workers_[static_cast<std::size_t>(i)];
      {
        const std::lock_guard lock(w.mutex);  // a worker about to sleep sees its job
        w.job.store(loop_, std::memory_order_release);
      }
      w.wake.notify_one();
    }
    work(loop_);
    // Only chunks a worker has started remain.
    for (int spin = 0; finished_.load(std::memory_order_acquire) != chunks; ++spin) {
      if (spin < kCallerSpins) {
        cpu_relax();
      } else {
        std::this_thread::yield();
      }
    }
    body_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  struct Worker {
    alignas(64) std::atomic<std::uint64_t> job{0};  // the last loop it was woken for
    std::mutex mutex;
    std::condition_variable wake;
    std::thread thread;
  };

  static constexpr int kCallerSpins = 1 << 14;
  // How long a worker spins for its next job before it sleeps: loops come in bursts, and a
  // sleeping thread takes tens of µs to wake; longer would take cores from other threads' work.
  static constexpr std::chrono::microseconds kWorkerSpin{30};

  static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  // Takes and runs chunks of loop `loop` until none is left. next_ holds (loop << 32) | the next
  // chunk, so a worker late for a loop that has ended takes nothing from the next one.
  void work(std::uint64_t loop) {
    for (;;) {
      std::uint64_t state = next_.load(std::memory_order_acquire);
      std::int64_t c = 0;
      do {
        c = static_cast<std::int64_t>(state & 0xffffffffu);
        if ((state >> 32) != (loop & 0xffffffffu) || c >= chunks_.load(std::memory_order_acquire))
          return;
      } while (!next_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel));
      const std::int64_t begin = c * per_;
      try {
        (*body_)(begin, std::min(n_, begin + per_));
      } catch (...) {
        const std::lock_guard lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
      }
      finished_.fetch_add(1, std::memory_order_acq_rel);
    }
  }

  void serve(Worker& w) {
    inside_loop = true;
    std::uint64_t done = 0;
    for (;;) {
      const auto until = std::chrono::steady_clock::now() + kWorkerSpin;
      bool given = false;
      for (int spin = 1; !given; ++spin) {
        given = w.job.load(std::memory_order_acquire) != done;
        if (!given && spin % 64 == 0 && std::chrono::steady_clock::now() > until) break;
        cpu_relax();
      }
      if (!given) {
        std::unique_lock lock(w.mutex);
        w.wake.wait(lock,
                    [&] { return stop_.load() || w.job.load(std::memory_order_acquire) != done; });
      }
      if (stop_.load()) return;
      done = w.job.load(std::memory_order_acquire);
      work(done);
    }
  }

  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> stop_{false};
  std::mutex caller_mutex_;
  // The loop: written by the caller before it publishes next_, read by the chunks' takers after.
  std::uint64_t loop_ = 0;
  const Body* body_ = nullptr;
  std::int64_t n_ = 0;
  std::int64_t per_ = 0;
  std::atomic<std::int64_t> chunks_{0};  // read by a worker late for a loop, too
  std::atomic<std::uint64_t> next_{0};
  std::atomic<std::int64_t> finished_{0};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

WorkerPool& pool() {
  static WorkerPool instance(cpu_threads() - 1);
  return instance;
}

}  // namespace

std::int64_t cpu_threads_setting(const char* text, std::int64_t cores) {
  if (text == nullptr) return cores;
  const std::string_view s(text);
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  return error == std::errc() && end == s.data() + s.size() && value > 0 ? value : cores;
}

std::int64_t cpu_threads() {
  static const std::int64_t count = [] {
    pthread_atfork(nullptr, nullptr, [] { forked.store(true); });
    return cpu_threads_setting(std::getenv("TILEOPS_CPU_THREADS"), usable_cores());
  }();
  return count;
}

void parallel_for(std::int64_t n, std::int64_t work, const Body& body) {
  constexpr std::int64_t kInlineWork = 1 << 18;
  if (n <= 0) return;
  constexpr std::int64_t kChunksPerThread = 4;
  const std::int64_t threads = std::min(n, cpu_threads());
  if (work < kInlineWork || threads <= 1 || inside_loop || forked.load(std::memory_order_relaxed)) {
    body(0, n);
    return;
  }
  WorkerPool& workers = pool();
  std::unique_lock turn(workers.caller_mutex(), std::try_to_lock);
  if (!turn.owns_lock()) {
    body(0, n);  // another thread's loop holds the workers
    return;
  }
  inside_loop = true;
  const struct Reset {
    ~Reset() { inside_loop = false; }
  } reset;
  // A few chunks per thread, so that threads that start late still find work.
  const std::int64_t per = std::max<std::int64_t>(1, n / (kChunksPerThread * threads));
  const std::int64_t chunks = (n + per - 1) / per;
  workers.run(n, per, chunks, std::min(threads, chunks) - 1, body);
}

}  // namespace tileops::cpu
