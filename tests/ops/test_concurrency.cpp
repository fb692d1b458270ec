// Concurrent calls on one composite instance: the first calls of a fresh FusedMoEExpertsFwdOp
// race to hold the pre_permute sub-op that forward builds per expert count. Every thread must
// run the instance that ends up held, and every result must match the reference. Run under
// AddressSanitizer and ThreadSanitizer by scripts/sanitize.sh.
#include <barrier>
#include <thread>

#include "ops/moe_test_inputs.h"
#include "ops/ops_test_util.h"
#include "tileops/ops/moe.h"

namespace tileops {
namespace {

using testing_util::expect_close;
using testing_util::run_reference;
using namespace moe_test;  // NOLINT: the tests' inputs

struct ExpertsInputs {
  Tensor x, w, ids, w13, w2;
};

ExpertsInputs experts_inputs(std::int64_t experts, std::uint64_t seed) {
  return {Tensor::randn({5, 16}, DType::bfloat16, seed),
          Tensor::rand({5, 2}, DType::float32, seed + 1, Device::cpu(), 0.0, 1.0),
          distinct_ids(5, 2, experts, seed + 2), weight({experts, 2 * 8, 16}, DType::bfloat16, 4),
          weight({experts, 16, 8}, DType::bfloat16, 5)};
}

TEST(Concurrency, FirstCallsOfACompositeRaceToHoldOneSubOp) {
  constexpr int kThreads = 6;
  constexpr int kTrials = 100;
  // Two expert counts, so that two pre_permute sub-ops are raced for in every trial.
  const ExpertsInputs in[2] = {experts_inputs(4, 11), experts_inputs(6, 21)};
  Tensor ref[2];
  for (int e = 0; e < 2; ++e) {
    ref[e] = run_reference("FusedMoEExpertsFwdOp",
                           {in[e].x, in[e].w, in[e].ids, in[e].w13, in[e].w2, Tensor()},
                           FusedMoEExpertsFwdOp({}).param_values())[0];
  }
  for (int trial = 0; trial < kTrials; ++trial) {
    FusedMoEExpertsFwdOp op({});
    std::barrier start(kThreads);
    std::vector<Tensor> results(kThreads);
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const ExpertsInputs& i = in[t % 2];
        start.arrive_and_wait();
        try {
          results[t] = op(i.x, i.w, i.ids, i.w13, i.w2);
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_EQ(errors[t], "") << "trial " << trial << " thread " << t;
      expect_close(results[t], ref[t % 2], "trial " + std::to_string(trial));
    }
    // pre_permute E=4 and E=6 (whichever first), the three MLPs, post_permute: each held once.
    EXPECT_EQ(op.held_delegates().size(), 6u) << "trial " << trial;
  }
}

}  // namespace
}  // namespace tileops
