// Expert-parallel MoE simulated in one process (src/comm/loopback_transport.h): one thread per
// rank, each with its own routing and experts ops holding its E / world_size experts, against the
// single-device FusedMoEFwdOp on the same global batch; the receive layout; configuration
// mismatches at setup; a failing rank making the others raise, not hang.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "comm/loopback_transport.h"
#include "ops/moe_test_inputs.h"
#include "ops/ops_test_util.h"
#include "tileops/ops/moe.h"
#include "tileops/ops/moe_expert_parallel.h"

namespace tileops {
namespace {

using testing::HasSubstr;
using testing_util::message_of;
using namespace moe_test;  // NOLINT: the tests' inputs

// Generous: only the failure tests wait for it, and they assert on the message, not the time.
constexpr std::chrono::milliseconds kNoTimeout{60'000};

/// Runs body(rank) on one thread per rank; returns each rank's exception (null when none). With
/// `group`, a rank that throws aborts it first, as a launcher's error handler would.
std::vector<std::exception_ptr> run_ranks(std::int64_t ranks,
                                          const std::function<void(std::int64_t)>& body,
                                          LoopbackGroup* group = nullptr) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (std::int64_t r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
        if (group != nullptr) group->abort(r, e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

/// "ok", or the exception's type ("comm", "config", "other") and message.
std::string outcome(const std::exception_ptr& e) {
  if (!e) return "ok";
  try {
    std::rethrow_exception(e);
  } catch (const ExpertParallelCommError& err) {
    return std::string("comm: ") + err.what();
  } catch (const ExpertParallelConfigError& err) {
    return std::string("config: ") + err.what();
  } catch (const std::exception& err) {
    return std::string("other: ") + err.what();
  }
}

double max_abs(const Tensor& t) {
  const Tensor f = t.to(DType::float32);
  double m = 0;
  for (std::int64_t i = 0; i < f.numel(); ++i)
    m = std::max(m, std::abs(double(f.data<float>()[i])));
  return m;
}

// ---- the receive layout ------------------------------------------------------------------------

TEST(ExpertParallel, RanksReceiveRowsInSourceRankThenTokenOrder) {
  // E = 4 over 2 ranks. Rank 0's tokens: t0 -> {0, 1} (rank 0), t1 -> {2, 3} (rank 1); rank 1's
  // token: t0 -> {1, 2} (both ranks). Token rows hold 10 * rank + token.
  const std::vector<std::vector<std::int32_t>> ids = {{0, 1, 2, 3}, {1, 2}};
  LoopbackGroup group(2, kNoTimeout);
  std::vector<MoEPreparedTokens> got(2);
  const auto errors = run_ranks(2, [&](std::int64_t r) {
    ExpertParallelPrepareFinalize pf(group.transport(r), {4, 2, 3, DType::float32});
    const auto m = static_cast<std::int64_t>(ids[r].size() / 2);
    const Tensor x = Tensor::empty({m, 3}, DType::float32);
    for (std::int64_t t = 0; t < m; ++t) {
      for (std::int64_t h = 0; h < 3; ++h) x.set_at({t, h}, double(10 * r + t));
    }
    got[r] =
        pf.prepare(x, Tensor::full({m, 2}, 0.5, DType::float32), int_tensor(ids[r]).view({m, 2}));
    pf.finalize(Tensor::zeros({got[r].x.size(0), 3}, DType::float32),
                Tensor::empty({m, 3}, DType::float32));
  });
  for (const auto& e : errors) ASSERT_EQ(outcome(e), "ok");
  // Rank 0 receives rank 0's t0, then rank 1's t0; rank 1 receives rank 0's t1, then rank 1's t0.
  const std::vector<std::vector<double>> rows = {{0, 10}, {1, 10}};
  const std::vector<std::vector<double>> first_ids = {{0, 1}, {2, 1}};
  for (std::size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(got[r].x.size(0), 2);
    for (std::int64_t i = 0; i < 2; ++i) {
      EXPECT_EQ(got[r].x.item_at({i, 2}), rows[r][i]) << "rank " << r << " row " << i;
      EXPECT_EQ(got[r].topk_ids.item_at({i, 0}), first_ids[r][i]) << "rank " << r << " row " << i;
      EXPECT_EQ(got[r].topk_weights.item_at({i, 1}), 0.5);
    }
    EXPECT_EQ(got[r].expert_map.item_at({2 * std::int64_t(r)}), 0);
    EXPECT_EQ(got[r].expert_map.item_at({2 - 2 * std::int64_t(r)}), -1);
  }
}

// ---- float32 through a synthetic expert --------------------------------------------------------

TEST(ExpertParallel, Float32RowsIdsAndWeightsTravelAndCombineInTokenOrder) {
  // The expert of id e multiplies its row by (e + 1) / E: the combined y[t] is then
  // sum_k w[t, k] (ids[t, k] + 1) / E x[t], whichever rank computed each term. Summed in float32
  // in another association than the double expectation: 3 terms of magnitude <= |x|, so the error
  // is a few float32 ulps of |x| (<= 4 * 2^-24 * 4), under the float32 tolerance 1e-5 (1 + |ref|).
  // Hidden 5: packed rows whose ids are not 4-byte aligned.
  const std::int64_t experts = 8, top_k = 3, hidden = 5, m = 6;
  for (const std::int64_t ranks : {2, 4}) {
    LoopbackGroup group(ranks, kNoTimeout);
    std::vector<Tensor> x(ranks), w(ranks), ids(ranks), y(ranks);
    for (std::int64_t r = 0; r < ranks; ++r) {
      x[r] = Tensor::randn({m, hidden}, DType::float32, 100 + r);
      w[r] = Tensor::rand({m, top_k}, DType::float32, 200 + r, Device::cpu(), 0.0, 1.0);
      ids[r] = distinct_ids(m, top_k, experts, 300 + r);
      y[r] = Tensor::empty({m, hidden}, DType::float32);
    }
    const auto errors = run_ranks(ranks, [&](std::int64_t r) {
      ExpertParallelPrepareFinalize pf(group.transport(r),
                                       {experts, top_k, hidden, DType::float32});
      const MoEPreparedTokens in = pf.prepare(x[r], w[r], ids[r]);
      const Tensor out = Tensor::zeros({in.x.size(0), hidden}, DType::float32);
      for (std::int64_t row = 0; row < in.x.size(0); ++row) {
        for (std::int64_t k = 0; k < top_k; ++k) {
          const auto e = static_cast<std::int64_t>(in.topk_ids.item_at({row, k}));
          if (in.expert_map.item_at({e}) < 0) continue;
          const double scale = in.topk_weights.item_at({row, k}) * double(e + 1) / double(experts);
          for (std::int64_t h = 0; h < hidden; ++h) {
            out.set_at({row, h}, out.item_at({row, h}) + scale * in.x.item_at({row, h}));
          }
        }
      }
      pf.finalize(out, y[r]);
    });
    for (const auto& e : errors) ASSERT_EQ(outcome(e), "ok");
    for (std::int64_t r = 0; r < ranks; ++r) {
      const Tensor expected = Tensor::zeros({m, hidden}, DType::float64);
      for (std::int64_t t = 0; t < m; ++t) {
        for (std::int64_t k = 0; k < top_k; ++k) {
          const double scale =
              w[r].item_at({t, k}) * (ids[r].item_at({t, k}) + 1) / double(experts);
          for (std::int64_t h = 0; h < hidden; ++h) {
            expected.set_at({t, h}, expected.item_at({t, h}) + scale * x[r].item_at({t, h}));
          }
        }
      }
      EXPECT_LE(max_relative_error(y[r], expected), 1e-5) << "world " << ranks << " rank " << r;
    }
  }
}

// ---- against the single-device FusedMoE ------------------------------------------------------

struct Layer {
  std::int64_t experts = 16, top_k = 4, hidden = 32, ffn = 16, tokens_per_rank = 6;
  DType dtype = DType::bfloat16;
};

enum class Routing { random, hot_expert, first_experts };

struct Batch {
  Tensor x, logits, w13, w2;
};

/// The global batch. hot_expert: the last expert is in every token's top-k; first_experts: every
/// token picks experts [0, top_k), so the ranks after the first few receive no rows.
Batch global_batch(const Layer& l, std::int64_t ranks, Routing routing, std::uint64_t seed) {
  const std::int64_t m = l.tokens_per_rank * ranks;
  Batch b{Tensor::randn({m, l.hidden}, l.dtype, seed),
          Tensor::randn({m, l.experts}, DType::float32, seed + 1),
          weight({l.experts, 2 * l.ffn, l.hidden}, l.dtype, seed + 2),
          weight({l.experts, l.hidden, l.ffn}, l.dtype, seed + 3)};
  float* logits = b.logits.data<float>();
  for (std::int64_t t = 0; t < m; ++t) {
    if (routing == Routing::hot_expert) logits[t * l.experts + l.experts - 1] += 8.0f;
    if (routing == Routing::first_experts) {
      for (std::int64_t e = 0; e < l.top_k; ++e) logits[t * l.experts + e] += 8.0f;
    }
  }
  return b;
}

const FusedMoEFwdOp::Params kParams{.top_k = 4, .renormalize = true};

/// One rank's MoE layer as FusedMoEFwdOp::forward runs it (routing, prepare, experts, finalize),
/// with this rank's expert weights only. Returns y and the largest |partial| the rank computed.
std::pair<Tensor, double> rank_layer(const Layer& l, const Batch& b, LoopbackGroup& group,
                                     std::int64_t rank, std::int64_t ranks) {
  const std::int64_t m = l.tokens_per_rank, per_rank = l.experts / ranks;
  ExpertParallelPrepareFinalize pf(group.transport(rank), {l.experts, l.top_k, l.hidden, l.dtype});
  MoETopKRoutingFwdOp routing({.top_k = l.top_k, .renormalize = true});
  FusedMoEExpertsFwdOp experts({});
  const Tensor x = b.x.slice(0, rank * m, (rank + 1) * m);
  const auto [w, ids] = routing(b.logits.slice(0, rank * m, (rank + 1) * m), Tensor());
  const MoEPreparedTokens in = pf.prepare(x, w, ids);
  const Tensor partials = experts(
      in.x, in.topk_weights, in.topk_ids, b.w13.slice(0, rank * per_rank, (rank + 1) * per_rank),
      b.w2.slice(0, rank * per_rank, (rank + 1) * per_rank), in.expert_map);
  const Tensor y = Tensor::empty({m, l.hidden}, l.dtype);
  pf.finalize(partials, y);
  return {y, max_abs(partials)};
}

/// Unit roundoff of the activation dtype.
double unit_roundoff(DType dtype) {
  return dtype == DType::bfloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
}

TEST(ExpertParallel, WorldSizeOneEqualsTheSingleDeviceFusedMoEExactly) {
  // One rank: every token is sent once to itself in token order, with the identity expert map, so
  // the experts see the single-device inputs and the combine sums one partial (exact).
  for (const DType dtype : {DType::bfloat16, DType::float16}) {
    const Layer l{.dtype = dtype};
    const Batch b = global_batch(l, 1, Routing::random, 7);
    FusedMoEFwdOp single(kParams);
    const Tensor ref = single(b.x, b.logits, b.w13, b.w2);
    LoopbackGroup group(1, kNoTimeout);
    auto pf = std::make_shared<ExpertParallelPrepareFinalize>(
        group.transport(0), ExpertParallelConfig{l.experts, l.top_k, l.hidden, dtype});
    FusedMoEFwdOp ep(kParams, {},
                     std::make_shared<FusedMoEExpertsFwdOp>(FusedMoEExpertsFwdOp::Params{}), pf);
    EXPECT_EQ(ep.prepare_finalize().name(), "expert_parallel");
    const Tensor y = ep(b.x, b.logits, b.w13, b.w2);
    EXPECT_EQ(max_relative_error(y, ref), 0.0) << dtype_name(dtype);
  }
}

// Tolerance. The single-device layer rounds once: y = T(sum_k w_k h_k) (float32 sum). With P
// ranks, rank r's post-permute rounds its partial p_r = sum_{k on r} w_k h_k to T, and the combine
// rounds sum_r T(p_r) once more; the experts see the same rows in the same order (a rank receives
// in source-rank then token order, which is the global token order), so h is identical. With unit
// roundoff u (2^-8 bf16, 2^-11 fp16) and S = sum_r |p_r| <= min(top_k, P) * max |T(p_r)| (1 + u):
//   |y_ep - y_sd| <= u S (partials) + 2 u (1 + u) S (two final roundings) + float32 reassociation,
// bounded below by 3.1 u min(top_k, P) max |T(p_r)| per element.
TEST(ExpertParallel, SimulatedRanksMatchTheSingleDeviceFusedMoE) {
  for (const DType dtype : {DType::bfloat16, DType::float16}) {
    for (const Routing routing : {Routing::random, Routing::hot_expert, Routing::first_experts}) {
      for (const std::int64_t ranks : {2, 4, 8}) {
        const Layer l{.dtype = dtype};
        const Batch b = global_batch(l, ranks, routing, 11 + ranks);
        FusedMoEFwdOp single(kParams);
        const Tensor ref = single(b.x, b.logits, b.w13, b.w2);
        LoopbackGroup group(ranks, kNoTimeout);
        std::vector<Tensor> ys(ranks);
        std::vector<double> peaks(ranks);
        const auto errors = run_ranks(
            ranks,
            [&](std::int64_t r) { std::tie(ys[r], peaks[r]) = rank_layer(l, b, group, r, ranks); },
            &group);
        const std::string what = fmt::format("{} routing {} ranks {}", dtype_name(dtype),
                                             static_cast<int>(routing), ranks);
        for (const auto& e : errors) ASSERT_EQ(outcome(e), "ok") << what;
        const double peak = *std::max_element(peaks.begin(), peaks.end());
        const double bound = 3.1 * unit_roundoff(dtype) * double(std::min(l.top_k, ranks)) * peak;
        double worst = 0;
        for (std::int64_t r = 0; r < ranks; ++r) {
          const std::int64_t m = l.tokens_per_rank;
          for (std::int64_t t = 0; t < m; ++t) {
            for (std::int64_t h = 0; h < l.hidden; ++h) {
              worst =
                  std::max(worst, std::abs(ys[r].item_at({t, h}) - ref.item_at({r * m + t, h})));
            }
          }
        }
        EXPECT_LE(worst, bound) << what;
        EXPECT_GT(peak, 0.0) << what;
      }
    }
  }
}

TEST(ExpertParallel, FP8ExpertsAfterTheDispatchMatchTheSingleDeviceFusedMoE) {
  // FP8 weights (128 x 128 block scales): the ranks dispatch bf16 rows and their experts quantize
  // after the dispatch, per row, so each rank's rows are computed as on one device; world size 1
  // is exact, more ranks are within the bound above (same h, partials rounded per rank).
  const Layer l{.hidden = 128, .ffn = 128};
  const auto scales = [&](std::int64_t n, std::int64_t k, std::uint64_t seed) {
    return Tensor::rand({l.experts, n / 128, k / 128}, DType::float32, seed, Device::cpu(), 0.02,
                        0.05);
  };
  const Tensor w13_scales = scales(2 * l.ffn, l.hidden, 31);
  const Tensor w2_scales = scales(l.hidden, l.ffn, 32);
  for (const std::int64_t ranks : {1, 2, 4}) {
    Batch b = global_batch(l, ranks, Routing::random, 21 + ranks);
    b.w13 = Tensor::randn(b.w13.sizes(), DType::float8_e4m3fn, 33);
    b.w2 = Tensor::randn(b.w2.sizes(), DType::float8_e4m3fn, 34);
    FusedMoEFwdOp single(kParams);
    const Tensor ref = single(b.x, b.logits, b.w13, b.w2, Tensor(), w13_scales, w2_scales);
    LoopbackGroup group(ranks, kNoTimeout);
    std::vector<Tensor> ys(ranks);
    std::vector<double> peaks(ranks);
    const auto errors = run_ranks(
        ranks,
        [&](std::int64_t r) {
          auto pf = std::make_shared<ExpertParallelPrepareFinalize>(
              group.transport(r), ExpertParallelConfig{l.experts, l.top_k, l.hidden, l.dtype});
          FusedMoEExpertsFwdOp experts({});
          MoETopKRoutingFwdOp routing({.top_k = l.top_k, .renormalize = true});
          const std::int64_t m = l.tokens_per_rank, per_rank = l.experts / ranks;
          const auto mine = [&](const Tensor& t) {
            return t.slice(0, r * per_rank, (r + 1) * per_rank);
          };
          const auto [w, ids] = routing(b.logits.slice(0, r * m, (r + 1) * m), Tensor());
          const MoEPreparedTokens in = pf->prepare(b.x.slice(0, r * m, (r + 1) * m), w, ids);
          const Tensor partials =
              experts(in.x, in.topk_weights, in.topk_ids, mine(b.w13), mine(b.w2), in.expert_map,
                      mine(w13_scales), mine(w2_scales));
          EXPECT_EQ(experts.last_call()->stage("mlp_fp8").size(), 1u);
          ys[r] = Tensor::empty({m, l.hidden}, l.dtype);
          pf->finalize(partials, ys[r]);
          peaks[r] = max_abs(partials);
        },
        &group);
    for (const auto& e : errors) ASSERT_EQ(outcome(e), "ok") << "ranks " << ranks;
    const double peak = *std::max_element(peaks.begin(), peaks.end());
    const double bound =
        ranks == 1 ? 0.0 : 3.1 * unit_roundoff(l.dtype) * double(std::min(l.top_k, ranks)) * peak;
    double worst = 0;
    for (std::int64_t r = 0; r < ranks; ++r) {
      const std::int64_t m = l.tokens_per_rank;
      for (std::int64_t t = 0; t < m; ++t) {
        for (std::int64_t h = 0; h < l.hidden; ++h) {
          worst = std::max(worst, std::abs(ys[r].item_at({t, h}) - ref.item_at({r * m + t, h})));
        }
      }
    }
    EXPECT_LE(worst, bound) << "ranks " << ranks;
    EXPECT_GT(peak, 0.0) << "ranks " << ranks;
  }
}

TEST(ExpertParallel, CallsThatBreakTheGroupsConfigurationAreUsageErrors) {
  LoopbackGroup group(1, kNoTimeout);
  ExpertParallelPrepareFinalize pf(group.transport(0), {4, 2, 8, DType::bfloat16});
  const Tensor y = Tensor::empty({3, 8}, DType::bfloat16);
  EXPECT_THAT(message_of([&] {
                pf.finalize(Tensor::zeros({3, 8}, DType::bfloat16), y);
              }),
              HasSubstr("finalize without a prepare"));
  const Tensor w = Tensor::rand({3, 2}, DType::float32, 2, Device::cpu(), 0.0, 1.0);
  const Tensor ids = distinct_ids(3, 2, 4, 1);
  EXPECT_THAT(message_of([&] {
                pf.prepare(Tensor::randn({3, 16}, DType::bfloat16, 3), w, ids);
              }),
              HasSubstr("x is [3, 16] bfloat16, expected [3, 8] bfloat16"));
  EXPECT_THROW(pf.prepare(Tensor::randn({3, 8}, DType::float16, 3), w, ids), UsageError);
  EXPECT_THAT(message_of([&] {
                pf.prepare(Tensor::randn({3, 8}, DType::bfloat16, 3), w, distinct_ids(3, 1, 4, 1));
              }),
              HasSubstr("topk_ids is [3, 1] int32, expected [3, 2] int32"));
  const MoEPreparedTokens in = pf.prepare(Tensor::randn({3, 8}, DType::bfloat16, 3), w, ids);
  ASSERT_EQ(in.x.size(0), 3);
  EXPECT_THAT(message_of([&] {
                pf.finalize(Tensor::zeros({2, 8}, DType::bfloat16), y);
              }),
              HasSubstr("expert_output is [2, 8] bfloat16, expected [3, 8] bfloat16"));
}

// ---- setup and failure -------------------------------------------------------------------------

TEST(ExpertParallel, MismatchedConfigurationsAreFoundAtSetupOnEveryRank) {
  struct Case {
    ExpertParallelConfig odd;
    const char* message;
  };
  const ExpertParallelConfig base{8, 2, 32, DType::bfloat16};
  const Case cases[] = {
      {{16, 2, 32, DType::bfloat16}, "num_experts is 8 on rank 0 but 16 on rank 2"},
      {{8, 4, 32, DType::bfloat16}, "top_k is 2 on rank 0 but 4 on rank 2"},
      {{8, 2, 64, DType::bfloat16}, "hidden is 32 on rank 0 but 64 on rank 2"},
      {{8, 2, 32, DType::float16}, "dtype is bfloat16 on rank 0 but float16 on rank 2"},
  };
  for (const auto& c : cases) {
    LoopbackGroup group(4, kNoTimeout);
    const auto errors = run_ranks(4, [&](std::int64_t r) {
      ExpertParallelPrepareFinalize pf(group.transport(r), r == 2 ? c.odd : base);
    });
    for (std::int64_t r = 0; r < 4; ++r) {
      EXPECT_THAT(outcome(errors[r]), HasSubstr("config: ")) << r;
      EXPECT_THAT(outcome(errors[r]), HasSubstr(c.message)) << r;
    }
  }
  // Agreeing ranks whose world size does not divide E: a UsageError naming the split.
  LoopbackGroup group(3, kNoTimeout);
  const auto errors = run_ranks(
      3, [&](std::int64_t r) { ExpertParallelPrepareFinalize pf(group.transport(r), base); });
  for (const auto& e : errors) {
    EXPECT_THAT(outcome(e), HasSubstr("8 experts cannot be split evenly over 3 ranks"));
  }
}

TEST(ExpertParallel, ARankThatThrowsMakesTheOthersRaiseACommError) {
  // Rank 2 fails between prepare and finalize; the harness aborts the group (as a launcher's
  // error handler or NCCL's watchdog would). The timeout is a minute, so the others are released
  // by the abort, not by waiting.
  const Layer l;
  const Batch b = global_batch(l, 4, Routing::random, 3);
  LoopbackGroup group(4, kNoTimeout);
  const auto errors = run_ranks(
      4,
      [&](std::int64_t r) {
        if (r == 2) {
          ExpertParallelPrepareFinalize pf(group.transport(r),
                                           {l.experts, l.top_k, l.hidden, l.dtype});
          throw std::runtime_error("out of memory in the experts");
        }
        rank_layer(l, b, group, r, 4);
      },
      &group);
  EXPECT_EQ(outcome(errors[2]), "other: out of memory in the experts");
  for (const std::int64_t r : {0, 1, 3}) {
    EXPECT_THAT(outcome(errors[r]),
                HasSubstr("comm: expert-parallel loopback group: rank 2 failed: out of memory"))
        << r;
  }
}

TEST(ExpertParallel, ARankThatNeverArrivesTimesTheOthersOut) {
  // Rank 1 dies without a word (no abort): the others wait the transport's timeout, then every
  // one raises, naming the missing rank.
  LoopbackGroup group(3, std::chrono::milliseconds(200));
  const auto errors = run_ranks(3, [&](std::int64_t r) {
    if (r == 1) throw std::runtime_error("killed");
    ExpertParallelPrepareFinalize pf(group.transport(r), {8, 2, 32, DType::bfloat16});
  });
  EXPECT_EQ(outcome(errors[1]), "other: killed");
  for (const std::int64_t r : {0, 2}) {
    EXPECT_THAT(outcome(errors[r]), HasSubstr("comm: "));
    EXPECT_THAT(outcome(errors[r]), HasSubstr("in all_gather for rank(s) 1"));
    EXPECT_THAT(outcome(errors[r]), HasSubstr("which never arrived"));
  }
  // The group stays failed: a later collective raises at once.
  EXPECT_THROW(group.transport(0)->exchange_counts(std::vector<std::int64_t>{0, 0, 0}),
               ExpertParallelCommError);
}

}  // namespace
}  // namespace tileops
