// Group-limited routing (n_group / topk_group of MoETopKRoutingFwdOp and FusedMoEFwdOp) on the
// CPU: against the double-precision reference on many shapes, hand-built ties between and within
// groups, the two group scores (two largest with a bias, largest without), the equivalence with
// plain top-k when every group is kept, and the shape rules by error type and message.
#include <cmath>
#include <limits>
#include <set>

#include "ops/moe_test_inputs.h"
#include "ops/ops_test_util.h"
#include "tileops/ops/moe.h"

namespace tileops {
namespace {

using testing::HasSubstr;
using testing_util::expect_close;
using testing_util::message_of;
using testing_util::run_reference;
using namespace moe_test;  // NOLINT: the tests' inputs

/// A float32 tensor of `sizes` holding `v`.
Tensor floats(const std::vector<float>& v, Sizes sizes) {
  Tensor t = Tensor::empty(std::move(sizes), DType::float32);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

struct Shape {
  std::int64_t tokens, experts, n_group, topk_group, top_k;
};

TEST(MoEGroupedRouting, MatchesReferenceOnManyShapes) {
  const Shape shapes[] = {{7, 16, 4, 2, 3}, {33, 256, 8, 4, 8}, {5, 12, 3, 1, 4},  {1, 64, 8, 8, 8},
                          {9, 32, 4, 3, 5}, {17, 8, 8, 2, 2},   {4, 128, 16, 2, 6}};
  struct Scoring {
    std::string scoring;
    bool bias;
    DType dtype;
  };
  const Scoring scorings[] = {{"sigmoid", true, DType::float32},
                              {"sigmoid", true, DType::bfloat16},
                              {"softmax", false, DType::float32},
                              {"sigmoid", false, DType::float16}};
  for (const auto& sc : scorings) {
    for (const auto& s : shapes) {
      // One expert per group cannot give a two-largest score: that shape is refused with a bias.
      if (sc.bias && s.experts / s.n_group < 2) continue;
      MoETopKRoutingFwdOp op({.top_k = s.top_k,
                              .scoring = sc.scoring,
                              .renormalize = true,
                              .routed_scaling_factor = 2.5,
                              .n_group = s.n_group,
                              .topk_group = s.topk_group});
      const Tensor logits = Tensor::randn({s.tokens, s.experts}, sc.dtype, 11 + s.tokens);
      const Tensor bias =
          sc.bias ? Tensor::rand({s.experts}, DType::float32, 5, Device::cpu(), 0.0, 0.2)
                  : Tensor();
      const auto [w, ids] = op(logits, bias);
      const auto ref = run_reference("MoETopKRoutingFwdOp", {logits, bias}, op.param_values());
      const std::string what = sc.scoring + " " + std::string(dtype_name(sc.dtype)) + " " +
                               logits.str() + " n_group=" + std::to_string(s.n_group);
      EXPECT_EQ(ids.to_vector(), ref[1].to_vector()) << what;
      expect_close(w, ref[0], what);
      // Every token's experts lie in at most topk_group groups.
      const auto got = ids.to_vector();
      const std::int64_t size = s.experts / s.n_group;
      for (std::int64_t t = 0; t < s.tokens; ++t) {
        std::set<std::int64_t> groups;
        for (std::int64_t k = 0; k < s.top_k; ++k) {
          groups.insert(static_cast<std::int64_t>(got[t * s.top_k + k]) / size);
        }
        EXPECT_LE(static_cast<std::int64_t>(groups.size()), s.topk_group) << what;
      }
    }
  }
}

TEST(MoEGroupedRouting, KeepingEveryGroupIsPlainTopKExactly) {
  for (const bool with_bias : {false, true}) {
    for (const auto& [n_group, experts] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 64}, {8, 64}, {32, 64}, {64, 64}}) {
      if (with_bias && experts / n_group < 2) continue;
      const std::string scoring = with_bias ? "sigmoid" : "softmax";
      MoETopKRoutingFwdOp plain({.top_k = 6, .scoring = scoring, .renormalize = true});
      MoETopKRoutingFwdOp grouped({.top_k = 6,
                                   .scoring = scoring,
                                   .renormalize = true,
                                   .n_group = n_group,
                                   .topk_group = n_group});
      const Tensor logits = Tensor::randn({21, experts}, DType::bfloat16, 3);
      const Tensor bias = with_bias
                              ? Tensor::rand({experts}, DType::float32, 4, Device::cpu(), 0.0, 0.1)
                              : Tensor();
      const auto [pw, pids] = plain(logits, bias);
      const auto [gw, gids] = grouped(logits, bias);
      EXPECT_EQ(gids.to_vector(), pids.to_vector()) << n_group;
      EXPECT_EQ(gw.to_vector(), pw.to_vector()) << n_group;  // bit for bit
    }
  }
}

TEST(MoEGroupedRouting, TiedGroupsKeepTheSmallerIndexAndTiedExpertsTheSmallerId) {
  // Every score 0.5 (logit 0); the bias makes c: group 0 {0.5, 0.75}, group 1 {0.75, 0.5},
  // group 2 {1.0, 0.25}, group 3 {0.625, 0.625}: every two-largest sum is 1.25, a four-way
  // tie, so groups 0 and 1 are kept although expert 4 has the largest c.
  const Tensor logits = Tensor::zeros({1, 8}, DType::float32);
  const Tensor bias = floats({0, 0.25f, 0.25f, 0, 0.5f, -0.25f, 0.125f, 0.125f}, {8});
  MoETopKRoutingFwdOp op({.top_k = 2, .scoring = "sigmoid", .n_group = 4, .topk_group = 2});
  const auto [w, ids] = op(logits, bias);
  EXPECT_EQ(ids.to_vector(), (std::vector<double>{1, 2}));  // c 0.75 twice: the smaller id first
  EXPECT_EQ(w.to_vector(), (std::vector<double>{0.5, 0.5}));
  // Keeping one group of the same tie: group 0, its experts by c.
  MoETopKRoutingFwdOp one({.top_k = 2, .scoring = "sigmoid", .n_group = 4, .topk_group = 1});
  EXPECT_EQ(std::get<1>(one(logits, bias)).to_vector(), (std::vector<double>{1, 0}));
}

TEST(MoEGroupedRouting, GroupScoreIsTheTwoLargestWithABiasAndTheLargestWithout) {
  // sigmoid scores: group 0 {0.95, 0.05} (largest 0.95, sum 1.0), group 1 {0.73, 0.73}
  // (largest 0.73, sum 1.46), groups 2 and 3 near 0.
  const Tensor logits = floats({3, -3, 1, 1, -5, -5, -6, -6}, {1, 8});
  MoETopKRoutingFwdOp op({.top_k = 2, .scoring = "sigmoid", .n_group = 4, .topk_group = 1});
  EXPECT_EQ(std::get<1>(op(logits)).to_vector(), (std::vector<double>{0, 1}));
  const Tensor zero_bias = Tensor::zeros({8}, DType::float32);
  EXPECT_EQ(std::get<1>(op(logits, zero_bias)).to_vector(), (std::vector<double>{2, 3}));
}

TEST(MoEGroupedRouting, NaNRanksAboveEveryNumberAndItsWeightsAreNaN) {
  // sigmoid: a NaN logit gives a NaN score and choice, which ranks first (manifest/moe.yaml);
  // its group's score is NaN too, so that group is kept. Token 0: NaN in group 3 (expert 6),
  // whose other expert has the smallest logit; token 1: NaN at experts 5 and 1 (the smaller id
  // first); token 2: no NaN, group 0 and 1 win.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor logits = floats({4, 3,   2, 1, 0, -1,  nan, -9,  //
                                4, nan, 2, 1, 0, nan, -2,  -3,  //
                                4, 3,   2, 1, 0, -1,  -2,  -3},
                               {3, 8});
  const Tensor bias = Tensor::zeros({8}, DType::float32);
  for (const std::int64_t n_group : {1, 4}) {
    MoETopKRoutingFwdOp op({.top_k = 3,
                            .scoring = "sigmoid",
                            .renormalize = true,
                            .n_group = n_group,
                            .topk_group = n_group == 1 ? 1 : 2});
    const auto [w, ids] = op(logits, bias);
    const std::string what = "n_group " + std::to_string(n_group);
    EXPECT_EQ(ids.to_vector(), (std::vector<double>{6, 0, 1, 1, 5, 0, 0, 1, 2})) << what;
    const auto weights = w.to_vector();
    for (std::size_t i = 0; i < 6; ++i) EXPECT_TRUE(std::isnan(weights[i])) << what << " " << i;
    for (std::size_t i = 6; i < 9; ++i) EXPECT_FALSE(std::isnan(weights[i])) << what << " " << i;
    const auto ref = run_reference("MoETopKRoutingFwdOp", {logits, bias}, op.param_values());
    EXPECT_EQ(ids.to_vector(), ref[1].to_vector()) << what;
  }
  // softmax: one NaN logit makes every score of its token NaN: ids in id order.
  MoETopKRoutingFwdOp soft({.top_k = 3, .scoring = "softmax", .n_group = 4, .topk_group = 2});
  EXPECT_EQ(std::get<1>(soft(logits)).to_vector(),
            (std::vector<double>{0, 1, 2, 0, 1, 2, 0, 1, 2}));
}

TEST(MoEGroupedRouting, ShapeRulesAreSignatureErrors) {
  const Tensor logits = Tensor::randn({2, 8}, DType::float32, 1);
  const auto rule_error = [&](const MoETopKRoutingFwdOp::Params& p, const Tensor& bias) {
    try {
      MoETopKRoutingFwdOp op(p);
      op(logits, bias);
    } catch (const SignatureError& e) {
      return std::string(e.what());
    }
    return std::string("no SignatureError");
  };
  const Tensor bias = Tensor::zeros({8}, DType::float32);
  EXPECT_THAT(rule_error({.top_k = 2, .n_group = 3}, {}),
              HasSubstr("shape rule 'E % n_group == 0' does not hold"));
  EXPECT_THAT(rule_error({.top_k = 2, .n_group = 2, .topk_group = 3}, {}),
              HasSubstr("shape rule 'topk_group >= 1 and topk_group <= n_group' does not hold"));
  EXPECT_THAT(rule_error({.top_k = 2, .n_group = 4, .topk_group = 0}, {}),
              HasSubstr("shape rule 'topk_group >= 1 and topk_group <= n_group' does not hold"));
  EXPECT_THAT(rule_error({.top_k = 2, .n_group = 0}, {}),
              HasSubstr("shape rule 'n_group >= 1' does not hold"));
  EXPECT_THAT(rule_error({.top_k = 3, .n_group = 4, .topk_group = 1}, {}),
              HasSubstr("shape rule 'top_k <= topk_group * (E // n_group)' does not hold"));
  EXPECT_THAT(
      rule_error({.top_k = 2, .n_group = 8, .topk_group = 2}, bias),
      HasSubstr("shape rule 'n_group == 1 or not present(correction_bias) or E // n_group >= 2'"));
  // One expert per group without a bias: the largest-score rule needs no second expert.
  EXPECT_EQ(rule_error({.top_k = 2, .n_group = 8, .topk_group = 2}, {}), "no SignatureError");
}

TEST(FusedMoE, GroupedRoutingEqualsTheStagesRunByHand) {
  const FusedMoEFwdOp::Params p{.top_k = 4,
                                .scoring = "sigmoid",
                                .renormalize = true,
                                .routed_scaling_factor = 2.5,
                                .n_group = 4,
                                .topk_group = 2};
  const std::int64_t experts = 16;
  const std::int64_t tokens = 11;
  const Tensor x = Tensor::randn({tokens, 32}, DType::bfloat16, 1);
  const Tensor logits = Tensor::randn({tokens, experts}, DType::float32, 2);
  const Tensor w13 = weight({experts, 2 * 16, 32}, DType::bfloat16, 3);
  const Tensor w2 = weight({experts, 32, 16}, DType::bfloat16, 4);
  const Tensor bias = Tensor::rand({experts}, DType::float32, 5, Device::cpu(), 0.0, 0.1);
  FusedMoEFwdOp op(p);
  const Tensor y = op(x, logits, w13, w2, bias);

  MoETopKRoutingFwdOp routing({.top_k = p.top_k,
                               .scoring = p.scoring,
                               .renormalize = p.renormalize,
                               .routed_scaling_factor = p.routed_scaling_factor,
                               .n_group = p.n_group,
                               .topk_group = p.topk_group});
  FusedMoEExpertsFwdOp experts_op({.activation = "silu_and_mul"});
  const auto [w, ids] = routing(logits, bias);
  const Tensor by_hand = experts_op(x, w, ids, w13, w2);
  EXPECT_EQ(y.to_vector(), by_hand.to_vector());
  expect_close(y, run_reference("FusedMoEFwdOp", {x, logits, w13, w2, bias}, op.param_values())[0],
               "grouped fused MoE");
  // The grouping changed the routing of some token (else this test would not test it).
  MoETopKRoutingFwdOp plain({.top_k = p.top_k, .scoring = p.scoring, .renormalize = true});
  EXPECT_NE(std::get<1>(plain(logits, bias)).to_vector(), ids.to_vector());
}

}  // namespace
}  // namespace tileops
