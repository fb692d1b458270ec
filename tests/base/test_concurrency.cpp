// Concurrent calls on one instance while a call fails: a failed call that selected the target
// undoes the binding group, and calls on other threads that already hold a kernel entry from
// kernel_for must finish on it (a call pins what it runs; the undo drops only the caches'
// references). Run under AddressSanitizer and ThreadSanitizer by scripts/sanitize.sh.
#include <gtest/gtest.h>

#include <barrier>
#include <random>
#include <thread>

#include "base/toy_op.h"

namespace toy {
namespace {

thread_local bool t_fails = false;  // the calls of this thread throw after kernel_for

void spin_until(const std::function<bool()>& done) {
  while (!done()) std::this_thread::yield();
}

int wrong_results(const Tensor& x, const Tensor& y, double scale) {
  int wrong = 0;
  for (std::int64_t k = 0; k < x.numel(); ++k) {
    if (std::abs(y.item_at({k}) - scale * x.item_at({k})) > 1e-5) ++wrong;
  }
  return wrong;
}

// The failing call selects the target and builds the entry; four calls on other threads take
// that entry from the cache and wait inside forward until the failure has undone the binding,
// then launch it.
TEST(Concurrency, AnUndoDoesNotFreeKernelsThatOtherCallsRun) {
  constexpr int kOthers = 4;
  constexpr int kTrials = 50;
  g_dead_launches = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    Op1 op({.scale = 3.0});
    std::atomic<bool> failing_inside{false};
    std::atomic<int> others_inside{0};
    std::atomic<bool> undone{false};
    op.before_kernel = [&] {
      if (t_fails) {
        failing_inside = true;
        spin_until([&] { return others_inside.load() == kOthers; });
        throw std::runtime_error("kernel failed");
      }
      ++others_inside;
      spin_until([&] { return undone.load(); });
    };
    std::thread failing([&] {
      t_fails = true;
      EXPECT_THROW(op(Tensor::randn({4}, DType::float32, 1)), std::runtime_error);
      undone = true;
    });
    spin_until([&] { return failing_inside.load(); });
    std::atomic<int> wrong{0};
    std::vector<std::thread> others;
    for (int t = 0; t < kOthers; ++t) {
      others.emplace_back([&, t] {
        const Tensor x = Tensor::randn({4}, DType::float32, static_cast<std::uint64_t>(t + 2));
        wrong += wrong_results(x, op(x), 3.0);
      });
    }
    failing.join();
    for (auto& th : others) th.join();
    ASSERT_EQ(wrong.load(), 0) << "trial " << trial;
    ASSERT_EQ(g_dead_launches.load(), 0) << "trial " << trial << ": a launch ran a freed kernel";
    // The failure undid the binding; the next call selects and builds again.
    EXPECT_FALSE(op.serving_target().has_value());
    EXPECT_TRUE(op.built_entries("toy_scale").empty());
    op.before_kernel = nullptr;
    const Tensor x = Tensor::randn({3}, DType::float32, 9);
    EXPECT_EQ(wrong_results(x, op(x), 3.0), 0);
    EXPECT_EQ(op.serving_target(), "BUILTIN");
  }
}

// Unordered: fresh instances whose first calls start together on eight threads while a third of
// the calls fail, so that undos race with selection, building and launches.
TEST(Concurrency, FailingAndSucceedingFirstCallsRace) {
  constexpr int kThreads = 8;
  constexpr int kTrials = 40;
  g_dead_launches = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    Op1 op({.scale = -2.0});
    op.before_kernel = [] {
      if (t_fails) throw std::runtime_error("kernel failed");
    };
    std::barrier start(kThreads);
    std::atomic<int> wrong{0};
    std::atomic<int> failed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(trial * kThreads + t));
        start.arrive_and_wait();
        for (int i = 0; i < 20; ++i) {
          t_fails = rng() % 3 == 0;
          const Tensor x = Tensor::randn({(t % 3) + 1}, DType::float32, rng());
          try {
            wrong += wrong_results(x, op(x), -2.0);
          } catch (const std::runtime_error&) {
            ++failed;
          }
        }
        t_fails = false;
      });
    }
    for (auto& th : threads) th.join();
    ASSERT_EQ(wrong.load(), 0) << "trial " << trial;
    ASSERT_EQ(g_dead_launches.load(), 0) << "trial " << trial;
    EXPECT_GT(failed.load(), 0);
  }
}

}  // namespace
}  // namespace toy
