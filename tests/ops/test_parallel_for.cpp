// cpu::parallel_for (src/kernels/cpu/parallel.h): every index once in chunks that tile the range,
// inline for small work, exceptions rethrown, loops inside loops, loops from several threads at
// once, loops in a forked child, and the TILEOPS_CPU_THREADS setting.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace tileops {
namespace {

constexpr std::int64_t kBigWork = std::int64_t{1} << 24;  // over the inline threshold

// Runs one loop over n indices; returns how often each index was visited and the chunks seen.
std::pair<std::vector<int>, std::vector<std::pair<std::int64_t, std::int64_t>>> visit(
    std::int64_t n, std::int64_t work) {
  std::vector<std::atomic<int>> visits(static_cast<std::size_t>(n));
  std::mutex mutex;
  std::vector<std::pair<std::int64_t, std::int64_t>> chunks;
  cpu::parallel_for(n, work, [&](std::int64_t begin, std::int64_t end) {
    {
      const std::lock_guard lock(mutex);
      chunks.emplace_back(begin, end);
    }
    for (std::int64_t i = begin; i < end; ++i) visits[static_cast<std::size_t>(i)] += 1;
  });
  std::vector<int> counts;
  for (const auto& v : visits) counts.push_back(v.load());
  std::sort(chunks.begin(), chunks.end());
  return {counts, chunks};
}

TEST(ParallelFor, EveryIndexOnceInChunksThatTileTheRange) {
  for (const std::int64_t n : {1, 2, 3, 7, 64, 1000, 100003}) {
    for (int repeat = 0; repeat < 20; ++repeat) {
      const auto [counts, chunks] = visit(n, kBigWork);
      for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(counts[static_cast<std::size_t>(i)], 1) << n;
      std::int64_t next = 0;
      for (const auto& [begin, end] : chunks) {
        ASSERT_EQ(begin, next) << n;
        ASSERT_LT(begin, end) << n;
        next = end;
      }
      ASSERT_EQ(next, n);
    }
  }
}

TEST(ParallelFor, SmallWorkRunsOnceOnTheCallingThread) {
  const auto caller = std::this_thread::get_id();
  int calls = 0;
  cpu::parallel_for(1000, 1000, [&](std::int64_t begin, std::int64_t end) {
    ++calls;
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 1000);
  });
  EXPECT_EQ(calls, 1);
  cpu::parallel_for(0, kBigWork, [&](std::int64_t, std::int64_t) { ++calls; });
  EXPECT_EQ(calls, 1);
}

TEST(ParallelFor, AChunksExceptionIsRethrownAndTheNextLoopRuns) {
  std::atomic<std::int64_t> visited{0};
  const auto throwing = [&](std::int64_t begin, std::int64_t end) {
    visited += end - begin;
    if (begin <= 500 && 500 < end) throw std::runtime_error("index 500 refused");
  };
  EXPECT_THROW(
      {
        try {
          cpu::parallel_for(1000, kBigWork, throwing);
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "index 500 refused");
          throw;
        }
      },
      std::runtime_error);
  EXPECT_EQ(visited.load(), 1000);  // the other chunks ran to the end
  const auto [counts, chunks] = visit(777, kBigWork);
  EXPECT_EQ(std::count(counts.begin(), counts.end(), 1), 777);
}

TEST(ParallelFor, ALoopInsideAChunkRunsInline) {
  std::vector<std::atomic<int>> visits(64 * 100);
  cpu::parallel_for(64, kBigWork, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t outer = begin; outer < end; ++outer) {
      const auto thread = std::this_thread::get_id();
      cpu::parallel_for(100, kBigWork, [&](std::int64_t b, std::int64_t e) {
        EXPECT_EQ(std::this_thread::get_id(), thread);
        for (std::int64_t i = b; i < e; ++i) visits[static_cast<std::size_t>(outer * 100 + i)] += 1;
      });
    }
  });
  for (const auto& v : visits) ASSERT_EQ(v.load(), 1);
}

TEST(ParallelFor, LoopsFromSeveralThreadsAtOnce) {
  constexpr int kThreads = 4;
  constexpr int kLoops = 200;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int loop = 0; loop < kLoops; ++loop) {
        const std::int64_t n = 50 + 37 * t + loop;
        std::atomic<std::int64_t> sum{0};
        cpu::parallel_for(n, kBigWork, [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t i = begin; i < end; ++i) sum += i;
        });
        if (sum.load() != n * (n - 1) / 2) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ParallelFor, LoopsRunInAForkedChild) {
  visit(1000, kBigWork);  // the workers exist in the parent
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const auto [counts, chunks] = visit(100003, kBigWork);
    const bool once = std::all_of(counts.begin(), counts.end(), [](int c) { return c == 1; });
    _exit(once ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ParallelFor, ThreadSettingTakesPositiveIntegersOnly) {
  EXPECT_EQ(cpu::cpu_threads_setting("4", 16), 4);
  EXPECT_EQ(cpu::cpu_threads_setting("1", 16), 1);
  EXPECT_EQ(cpu::cpu_threads_setting("64", 2), 64);
  for (const char* bad : {"", "0", "-2", "four", "4x", " 4", "4.5"}) {
    EXPECT_EQ(cpu::cpu_threads_setting(bad, 16), 16) << '"' << bad << '"';
  }
  EXPECT_EQ(cpu::cpu_threads_setting(nullptr, 3), 3);
  EXPECT_GE(cpu::cpu_threads(), 1);
}

}  // namespace
}  // namespace tileops
