// The index arithmetic of expert-parallel dispatch and combine (src/comm/expert_parallel_plan.h)
// on small cases checked by hand: placement and expert maps, send counts and order, the rows each
// token combines, tokens with no expert on a rank, every token on one rank, a hot expert.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "comm/expert_parallel_plan.h"
#include "ops/ops_test_util.h"

namespace tileops {
namespace {

using expert_parallel::combine_rows;
using expert_parallel::DispatchPlan;
using expert_parallel::plan_dispatch;
using testing::ElementsAre;
using testing::HasSubstr;
using testing_util::message_of;

using Ids = std::vector<std::int32_t>;

TEST(ExpertPlacement, ContiguousBlocksAndTheLocalExpertMap) {
  const ExpertPlacement p{.num_experts = 8, .world_size = 4, .rank = 2};
  p.validate();
  EXPECT_EQ(p.experts_per_rank(), 2);
  EXPECT_EQ(p.owner(0), 0);
  EXPECT_EQ(p.owner(5), 2);
  EXPECT_EQ(p.owner(7), 3);
  EXPECT_THAT(p.expert_map(), ElementsAre(-1, -1, -1, -1, 0, 1, -1, -1));
  EXPECT_THAT((ExpertPlacement{.num_experts = 3, .world_size = 1, .rank = 0}.expert_map()),
              ElementsAre(0, 1, 2));
}

TEST(ExpertPlacement, UnevenSplitsAndBadRanksAreUsageErrors) {
  EXPECT_THAT(message_of([] { ExpertPlacement{.num_experts = 6, .world_size = 4}.validate(); }),
              HasSubstr("6 experts cannot be split evenly over 4 ranks"));
  EXPECT_THROW((ExpertPlacement{.num_experts = 8, .world_size = 4, .rank = 4}.validate()),
               UsageError);
  EXPECT_THROW((ExpertPlacement{.num_experts = 8, .world_size = 0, .rank = 0}.validate()),
               UsageError);
}

// E = 4 over 2 ranks (experts 0-1 on rank 0, 2-3 on rank 1), top_k = 2.
TEST(ExpertParallelPlan, OneRowPerTokenAndRankInRankThenTokenOrder) {
  const ExpertPlacement p{.num_experts = 4, .world_size = 2, .rank = 0};
  const Ids ids = {0, 1,   // t0: rank 0 only (two experts there, sent once)
                   2, 0,   // t1: both ranks
                   3, 2,   // t2: rank 1 only (no expert on rank 0)
                   1, 3};  // t3: both ranks
  const DispatchPlan plan = plan_dispatch(ids, 4, 2, p);
  EXPECT_THAT(plan.send_counts, ElementsAre(3, 3));
  EXPECT_THAT(plan.send_offsets, ElementsAre(0, 3, 6));
  EXPECT_THAT(plan.send_tokens, ElementsAre(0, 1, 3, 1, 2, 3));
  EXPECT_THAT(plan.token_offsets, ElementsAre(0, 1, 3, 4, 6));
  // t0 <- row 0; t1 <- rows 1 (rank 0) and 3 (rank 1); t2 <- row 4; t3 <- rows 2 and 5.
  EXPECT_THAT(plan.token_rows, ElementsAre(0, 1, 3, 4, 2, 5));
}

TEST(ExpertParallelPlan, EveryTokenToOneRank) {
  // E = 8 over 4 ranks: experts 2 and 3 live on rank 1.
  const ExpertPlacement p{.num_experts = 8, .world_size = 4, .rank = 3};
  const Ids ids = {2, 3, 3, 2, 2, 3};
  const DispatchPlan plan = plan_dispatch(ids, 3, 2, p);
  EXPECT_THAT(plan.send_counts, ElementsAre(0, 3, 0, 0));
  EXPECT_THAT(plan.send_offsets, ElementsAre(0, 0, 3, 3, 3));
  EXPECT_THAT(plan.send_tokens, ElementsAre(0, 1, 2));
  EXPECT_THAT(plan.token_rows, ElementsAre(0, 1, 2));
}

TEST(ExpertParallelPlan, AHotExpertReceivesEveryToken) {
  // E = 8 over 2 ranks; expert 5 (rank 1) is in every token's top-2.
  const ExpertPlacement p{.num_experts = 8, .world_size = 2, .rank = 0};
  const Ids ids = {5, 0, 7, 5, 5, 3, 1, 5};
  const DispatchPlan plan = plan_dispatch(ids, 4, 2, p);
  EXPECT_THAT(plan.send_counts, ElementsAre(3, 4));  // t1's other expert (7) is on rank 1 too
  EXPECT_THAT(plan.send_tokens, ElementsAre(0, 2, 3, 0, 1, 2, 3));
  EXPECT_THAT(plan.token_offsets, ElementsAre(0, 2, 3, 5, 7));
  EXPECT_THAT(plan.token_rows, ElementsAre(0, 3, 4, 1, 5, 2, 6));
}

TEST(ExpertParallelPlan, NoTokensAndBadIds) {
  const ExpertPlacement p{.num_experts = 4, .world_size = 2, .rank = 1};
  const DispatchPlan empty = plan_dispatch({}, 0, 2, p);
  EXPECT_THAT(empty.send_counts, ElementsAre(0, 0));
  EXPECT_THAT(empty.token_offsets, ElementsAre(0));
  const Ids bad = {0, 4};
  EXPECT_THROW(plan_dispatch(bad, 1, 2, p), SignatureError);
  EXPECT_THAT(message_of([&] { plan_dispatch(bad, 1, 2, p); }),
              HasSubstr("topk_ids[0, 1] = 4 is not an expert id in [0, 4)"));
}

TEST(ExpertParallelPlan, CombineSumsEachTokensReturnedRowsInRankOrder) {
  const ExpertPlacement p{.num_experts = 4, .world_size = 2, .rank = 0};
  const Ids ids = {0, 1, 2, 0, 3, 2, 1, 3};
  const DispatchPlan plan = plan_dispatch(ids, 4, 2, p);
  // Returned rows at their send rows' indices (hidden 2): row i holds (i, 10 i).
  std::vector<float> returned;
  for (int i = 0; i < 6; ++i) returned.insert(returned.end(), {float(i), 10.0f * float(i)});
  std::vector<float> out(8, -1.0f);
  combine_rows(returned, 2, plan, out);
  // t0 = row 0; t1 = rows 1 + 3; t2 = row 4; t3 = rows 2 + 5.
  EXPECT_THAT(out, ElementsAre(0, 0, 4, 40, 4, 40, 7, 70));
}

}  // namespace
}  // namespace tileops
