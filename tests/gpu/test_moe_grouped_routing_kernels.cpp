// GPU tests of group-limited (grouped) top-k routing in the CUDA routing kernel
// (src/kernels/moe/moe_routing_cuda.cu), DeepSeek-V3's rule: against a double reference of the
// grouped rule written here and against the CPU implementation (MoETopKRoutingFwdOp on the CPU).
// Skipped without CUDA or without a device.
//
// Every launch writes into outputs poisoned with 0xFF bytes. Random inputs are regenerated where
// the top k + 1 selection scores, or the group scores at the kept/dropped boundary, come within
// 1e-5 relative of each other without being equal; then the ids must equal both the reference's
// and the CPU's, and the weights lie within 1e-5 relative of the reference (the plain kernel's
// test tolerance: float32 scores against double). Hand-built inputs check exact ties between and
// within groups, the two group scores, and NaN (ranked above everything, as the plain kernel
// and the CPU implementation do).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "gpu/kernel_test_util.h"
#include "kernels/moe/moe_routing_cuda.h"
#include "tileops/core/dtype.h"
#include "tileops/core/error.h"
#include "tileops/ops/moe.h"
#endif

namespace {

#if TILEOPS_WITH_CUDA

using tileops::DType;
namespace ck = tileops::cuda_kernels;
using tileops::MoEScoring;

using namespace tileops::kernel_test;  // NOLINT: the shared kernel-test helpers

struct RouteRef {
  std::vector<int32_t> ids;
  std::vector<double> weights;
  bool ok = true;  // false: a near-tie where the selection decides
};

struct GroupedCase {
  std::string name;
  DType dtype = DType::float32;
  int64_t T = 1, E = 256, K = 8, n_group = 8, topk_group = 4;
  MoEScoring scoring = MoEScoring::sigmoid;
  bool bias = true;
  bool renormalize = true;
  float scaling = 2.5f;
  uint64_t seed = 1;
};

/// The selection order of the kernels: NaN above every number, -0 equal to +0, then the smaller
/// index first.
bool ranks_before(double a, int64_t ia, double b, int64_t ib) {
  const bool na = std::isnan(a);
  const bool nb = std::isnan(b);
  if (na != nb) return na;
  if (!na && a != b) return a > b;
  return ia < ib;
}

/// Whether two distinct finite values come within 1e-5 relative of each other.
bool near_tie(double x, double y) {
  return std::isfinite(x) && std::isfinite(y) && x != y &&
         std::fabs(x - y) < 1e-5 * std::max(std::fabs(x), std::fabs(y));
}

// Double reference of one token under the grouped rule (scores from the rounded logits).
RouteRef route_grouped_token(const std::vector<float>& logits, const std::vector<float>& bias,
                             const GroupedCase& c) {
  const auto E = static_cast<size_t>(c.E);
  std::vector<double> s(E);
  if (c.scoring == MoEScoring::softmax) {
    double mx = -INFINITY;
    for (const float v : logits) mx = std::max(mx, static_cast<double>(v));
    double sum = 0.0;
    for (size_t e = 0; e < E; ++e) sum += s[e] = std::exp(static_cast<double>(logits[e]) - mx);
    for (double& v : s) v /= sum;
  } else {
    for (size_t e = 0; e < E; ++e) s[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[e])));
  }
  std::vector<double> sel(E);
  for (size_t e = 0; e < E; ++e) sel[e] = s[e] + (c.bias ? bias[e] : 0.0);
  const int64_t size = c.E / c.n_group;
  std::vector<double> score(static_cast<size_t>(c.n_group));
  for (int64_t g = 0; g < c.n_group; ++g) {
    std::vector<int64_t> m(static_cast<size_t>(size));
    std::iota(m.begin(), m.end(), g * size);
    std::sort(m.begin(), m.end(), [&](int64_t a, int64_t b) {
      return ranks_before(sel[static_cast<size_t>(a)], a, sel[static_cast<size_t>(b)], b);
    });
    const double first = sel[static_cast<size_t>(m[0])];
    const double second = size > 1 ? sel[static_cast<size_t>(m[1])] : -INFINITY;
    score[static_cast<size_t>(g)] = c.bias ? first + second : first;
  }
  std::vector<int64_t> groups(static_cast<size_t>(c.n_group));
  std::iota(groups.begin(), groups.end(), 0);
  std::sort(groups.begin(), groups.end(), [&](int64_t a, int64_t b) {
    return ranks_before(score[static_cast<size_t>(a)], a, score[static_cast<size_t>(b)], b);
  });
  RouteRef r;
  if (c.topk_group < c.n_group &&
      near_tie(score[static_cast<size_t>(groups[static_cast<size_t>(c.topk_group - 1)])],
               score[static_cast<size_t>(groups[static_cast<size_t>(c.topk_group)])]))
    r.ok = false;
  std::vector<int64_t> order;
  for (int64_t i = 0; i < c.topk_group; ++i) {
    for (int64_t e = 0; e < size; ++e) order.push_back(groups[static_cast<size_t>(i)] * size + e);
  }
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return ranks_before(sel[static_cast<size_t>(a)], a, sel[static_cast<size_t>(b)], b);
  });
  const auto K = static_cast<size_t>(c.K);
  for (size_t i = 0; i + 1 < std::min(K + 1, order.size()); ++i) {
    if (near_tie(sel[static_cast<size_t>(order[i])], sel[static_cast<size_t>(order[i + 1])]))
      r.ok = false;
  }
  double sum = 0.0;
  for (size_t k = 0; k < K; ++k) {
    r.ids.push_back(static_cast<int32_t>(order[k]));
    r.weights.push_back(s[static_cast<size_t>(order[k])]);
    sum += s[static_cast<size_t>(order[k])];
  }
  for (double& w : r.weights) w = (c.renormalize ? w / sum : w) * c.scaling;
  return r;
}

struct RoutedOutputs {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

/// Launches the routing kernel on `logits` (and `bias` when c.bias) with poisoned outputs.
void launch_grouped(const GroupedCase& c, const HostTensor& logits, const std::vector<float>& bias,
                    RoutedOutputs& out, bool plain = false) {
  DeviceBuffer dl(logits.bytes.size());
  DeviceBuffer db(bias.size() * 4);
  DeviceBuffer dw(static_cast<size_t>(c.T * c.K) * 4);
  DeviceBuffer did(static_cast<size_t>(c.T * c.K) * 4);
  ASSERT_TRUE(dl.ptr && db.ptr && dw.ptr && did.ptr);
  CUDA_OK(cudaMemcpy(dl.ptr, logits.bytes.data(), logits.bytes.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(db.ptr, bias.data(), bias.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dw.ptr, 0xFF, dw.bytes));
  CUDA_OK(cudaMemset(did.ptr, 0xFF, did.bytes));
  ck::TopKRoutingArgs a;
  a.logits = dl.ptr;
  a.correction_bias = c.bias ? db.at<float>(0) : nullptr;
  a.topk_weights = dw.at<float>(0);
  a.topk_ids = did.at<int32_t>(0);
  a.tokens = c.T;
  a.num_experts = c.E;
  a.top_k = c.K;
  a.scoring = c.scoring;
  a.renormalize = c.renormalize;
  a.routed_scaling_factor = c.scaling;
  a.logits_dtype = c.dtype;
  a.n_group = plain ? 1 : c.n_group;
  a.topk_group = plain ? 1 : c.topk_group;
  try {
    ck::launch_moe_topk_routing(a, nullptr);
  } catch (const std::exception& e) {
    FAIL() << c.name << ": launch threw: " << e.what();
  }
  CUDA_OK(cudaDeviceSynchronize());
  out.ids.resize(static_cast<size_t>(c.T * c.K));
  out.weights.resize(static_cast<size_t>(c.T * c.K));
  CUDA_OK(cudaMemcpy(out.ids.data(), did.ptr, out.ids.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(out.weights.data(), dw.ptr, out.weights.size() * 4, cudaMemcpyDeviceToHost));
}

/// The CPU implementation's ids for the case (MoETopKRoutingFwdOp on the CPU).
std::vector<int32_t> cpu_grouped_ids(const GroupedCase& c, const HostTensor& logits,
                                     const std::vector<float>& bias) {
  using tileops::Tensor;
  Tensor lt = Tensor::empty({c.T, c.E}, c.dtype);
  std::memcpy(lt.data_ptr(), logits.bytes.data(), logits.bytes.size());
  Tensor bt;
  if (c.bias) {
    bt = Tensor::empty({c.E}, DType::float32);
    std::memcpy(bt.data_ptr(), bias.data(), bias.size() * 4);
  }
  tileops::MoETopKRoutingFwdOp op(
      {.top_k = c.K,
       .scoring = c.scoring == MoEScoring::sigmoid ? "sigmoid" : "softmax",
       .renormalize = c.renormalize,
       .routed_scaling_factor = c.scaling,
       .n_group = c.n_group,
       .topk_group = c.topk_group});
  const auto [w, ids] = op(lt, bt);
  (void)w;
  const std::vector<double> v = ids.to_vector();
  return {v.begin(), v.end()};
}

std::string where_of(const GroupedCase& c) {
  return c.name + " " + dtype_str(c.dtype) + " T " + std::to_string(c.T) + " E " +
         std::to_string(c.E) + " K " + std::to_string(c.K) + " groups " +
         std::to_string(c.topk_group) + "/" + std::to_string(c.n_group) +
         (c.scoring == MoEScoring::softmax ? " softmax" : " sigmoid") + (c.bias ? " bias" : "") +
         (c.renormalize ? " renorm" : "");
}

void check_grouped(const GroupedCase& c) {
  const std::string where = where_of(c);
  Rng rng(c.seed);
  HostTensor logits(c.dtype, static_cast<size_t>(c.T * c.E));
  std::vector<float> bias(static_cast<size_t>(c.E));
  for (auto& b : bias) b = rng.uniform(-0.1f, 0.1f);
  std::vector<int32_t> ref_ids;
  std::vector<double> ref_w;
  std::vector<float> row(static_cast<size_t>(c.E));
  for (int64_t t = 0; t < c.T; ++t) {
    RouteRef r;
    for (int attempt = 0; attempt < 100; ++attempt) {
      for (int64_t e = 0; e < c.E; ++e) {
        const size_t i = static_cast<size_t>(t * c.E + e);
        logits.set(i, rng.uniform(-4.0f, 4.0f));
        row[static_cast<size_t>(e)] = logits.get(i);
      }
      r = route_grouped_token(row, bias, c);
      if (r.ok) break;
    }
    ASSERT_TRUE(r.ok) << where << ": could not draw logits without near-ties";
    ref_ids.insert(ref_ids.end(), r.ids.begin(), r.ids.end());
    ref_w.insert(ref_w.end(), r.weights.begin(), r.weights.end());
  }
  RoutedOutputs got;
  ASSERT_NO_FATAL_FAILURE(launch_grouped(c, logits, bias, got));
  EXPECT_EQ(got.ids, ref_ids) << where << ": ids against the double reference";
  EXPECT_EQ(got.ids, cpu_grouped_ids(c, logits, bias)) << where << ": ids against the CPU";
  int64_t bad = 0;
  std::string first;
  for (size_t i = 0; i < got.weights.size(); ++i) {
    const double err = std::fabs(got.weights[i] - ref_w[i]);
    if (!(err <= 1e-5 * std::fabs(ref_w[i]) + 1e-12) && bad++ == 0) {
      std::ostringstream os;
      os << "weight[" << i << "] = " << got.weights[i] << ", reference " << ref_w[i];
      first = os.str();
    }
  }
  EXPECT_EQ(bad, 0) << where << ": " << bad << " wrong weights, first " << first;
}

TEST(MoEGroupedTopKRouting, Cases) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    int64_t E, n_group, topk_group, K;
  };
  // DeepSeek-V3, small groups, one group kept, every group kept, more groups than lanes (48),
  // groups of one expert (without a bias only: the two-largest score needs two).
  const Shape shapes[] = {{256, 8, 4, 8}, {16, 4, 2, 3},   {12, 3, 1, 4},   {64, 8, 8, 8},
                          {32, 4, 3, 5},  {128, 16, 2, 6}, {384, 48, 5, 8}, {8, 8, 2, 2}};
  struct Scoring {
    MoEScoring scoring;
    bool bias, renormalize;
    float scaling;
  };
  const Scoring scorings[] = {{MoEScoring::sigmoid, true, true, 2.5f},
                              {MoEScoring::softmax, false, false, 1.0f},
                              {MoEScoring::sigmoid, false, true, 1.0f}};
  uint64_t seed = 1100;
  for (const DType dtype : {DType::float32, DType::float16, DType::bfloat16})
    for (const auto& sc : scorings)
      for (const auto& sh : shapes)
        for (const int64_t T : {1, 37}) {
          if (sc.bias && sh.E / sh.n_group < 2) continue;
          GroupedCase c;
          c.name = "grid";
          c.dtype = dtype;
          c.T = T;
          c.E = sh.E;
          c.n_group = sh.n_group;
          c.topk_group = sh.topk_group;
          c.K = sh.K;
          c.scoring = sc.scoring;
          c.bias = sc.bias;
          c.renormalize = sc.renormalize;
          c.scaling = sc.scaling;
          c.seed = ++seed;
          ASSERT_NO_FATAL_FAILURE(check_grouped(c));
        }
}

TEST(MoEGroupedTopKRouting, DeepSeekV3DecodeAndPrefill) {
  SKIP_WITHOUT_GPU();
  for (const int64_t T : {64, 4096}) {
    for (const DType dtype : {DType::float32, DType::bfloat16}) {
      GroupedCase c;
      c.name = "deepseek-v3";
      c.dtype = dtype;
      c.T = T;
      c.seed = 1200 + static_cast<uint64_t>(T);
      ASSERT_NO_FATAL_FAILURE(check_grouped(c));
    }
  }
}

// Keeping every group selects exactly what plain top-k selects: the same ids and weights bits.
TEST(MoEGroupedTopKRouting, KeepingEveryGroupIsPlainTopK) {
  SKIP_WITHOUT_GPU();
  GroupedCase c;
  c.name = "all-kept";
  c.T = 301;
  c.topk_group = 8;
  Rng rng(1300);
  HostTensor logits(c.dtype, static_cast<size_t>(c.T * c.E));
  fill_random(logits, rng, -4.0f, 4.0f);
  std::vector<float> bias(static_cast<size_t>(c.E));
  for (auto& b : bias) b = rng.uniform(-0.1f, 0.1f);
  RoutedOutputs grouped, plain;
  ASSERT_NO_FATAL_FAILURE(launch_grouped(c, logits, bias, grouped));
  ASSERT_NO_FATAL_FAILURE(launch_grouped(c, logits, bias, plain, /*plain=*/true));
  EXPECT_EQ(grouped.ids, plain.ids);
  EXPECT_EQ(0, std::memcmp(grouped.weights.data(), plain.weights.data(), plain.weights.size() * 4));
}

// Hand-built: 8 groups of 4 experts, 4 kept, sigmoid scores p from logits log(p / (1 - p)) (equal
// p, equal bits), every other expert 0.05. Group 1 holds 0.9 (expert 5), group 6 the same (26),
// groups 2 and 5 the pairs 0.55 (8, 11 and 21, 22), group 7 0.8 (31) and 0.5 (28).
//   A (zero) bias, two-largest scores: 7 (1.3), 2 and 5 (1.1), then 1 and 6 tie (0.95) at the
//   boundary: group 1 is kept. Top 6: 5, 31, then the four 0.55 by id: 8, 11, 21, 22.
//   No bias, largest: 1 and 6 (0.9), 7 (0.8), then 2 and 5 tie (0.55): group 2. Top 6: 5 and 26
//   (equal: by id), 31, 8, 11, 28.
TEST(MoEGroupedTopKRouting, TiesBetweenAndWithinGroups) {
  SKIP_WITHOUT_GPU();
  const auto logit = [](double p) { return static_cast<float>(std::log(p / (1 - p))); };
  GroupedCase c;
  c.name = "ties";
  c.T = 3;
  c.E = 32;
  c.n_group = 8;
  c.topk_group = 4;
  c.K = 6;
  c.renormalize = false;
  c.scaling = 1.0f;
  HostTensor logits(DType::float32, static_cast<size_t>(c.T * c.E));
  for (int64_t t = 0; t < c.T; ++t) {
    for (int64_t e = 0; e < c.E; ++e) logits.set(static_cast<size_t>(t * c.E + e), logit(0.05));
    const auto set = [&](int64_t e, double p) {
      logits.set(static_cast<size_t>(t * c.E + e), logit(p));
    };
    set(4 + 1, 0.9);   // group 1
    set(24 + 2, 0.9);  // group 6
    set(8 + 0, 0.55);  // group 2
    set(8 + 3, 0.55);
    set(20 + 1, 0.55);  // group 5
    set(20 + 2, 0.55);
    set(28 + 3, 0.8);  // group 7
    set(28 + 0, 0.5);
  }
  const std::vector<float> zero_bias(static_cast<size_t>(c.E), 0.0f);
  for (const bool bias : {true, false}) {
    c.bias = bias;
    RoutedOutputs got;
    ASSERT_NO_FATAL_FAILURE(launch_grouped(c, logits, zero_bias, got));
    const std::vector<int32_t> want = bias ? std::vector<int32_t>{5, 31, 8, 11, 21, 22}
                                           : std::vector<int32_t>{5, 26, 31, 8, 11, 28};
    for (int64_t t = 0; t < c.T; ++t) {
      const std::vector<int32_t> ids(got.ids.begin() + t * c.K, got.ids.begin() + (t + 1) * c.K);
      EXPECT_EQ(ids, want) << (bias ? "bias" : "no bias") << " token " << t;
    }
    EXPECT_EQ(got.ids, cpu_grouped_ids(c, logits, zero_bias)) << (bias ? "bias" : "no bias");
  }
}

// A NaN logit makes its score and choice NaN: its group's score is NaN, which ranks above every
// group, and the expert is selected first (as the plain kernel ranks NaN); with renormalize every
// weight of the token is NaN. The other tokens are untouched.
TEST(MoEGroupedTopKRouting, NaNRanksFirst) {
  SKIP_WITHOUT_GPU();
  GroupedCase c;
  c.name = "nan";
  c.T = 5;
  Rng rng(1400);
  HostTensor logits(c.dtype, static_cast<size_t>(c.T * c.E));
  fill_random(logits, rng, -4.0f, 4.0f);
  std::vector<float> bias(static_cast<size_t>(c.E));
  for (auto& b : bias) b = rng.uniform(-0.1f, 0.1f);
  // Token 1: one NaN in group 6 (expert 200); token 3: NaN in groups 0 and 7 (3, 250).
  logits.set(1 * 256 + 200, NAN);
  logits.set(3 * 256 + 3, NAN);
  logits.set(3 * 256 + 250, NAN);
  RoutedOutputs got;
  ASSERT_NO_FATAL_FAILURE(launch_grouped(c, logits, bias, got));
  std::vector<float> row(static_cast<size_t>(c.E));
  for (int64_t t = 0; t < c.T; ++t) {
    for (int64_t e = 0; e < c.E; ++e)
      row[static_cast<size_t>(e)] = logits.get(static_cast<size_t>(t * c.E + e));
    const RouteRef r = route_grouped_token(row, bias, c);
    const std::vector<int32_t> ids(got.ids.begin() + t * c.K, got.ids.begin() + (t + 1) * c.K);
    EXPECT_EQ(ids, r.ids) << "token " << t;
    for (int64_t k = 0; k < c.K; ++k) {
      const float w = got.weights[static_cast<size_t>(t * c.K + k)];
      if (t == 1 || t == 3) {
        EXPECT_TRUE(std::isnan(w)) << "token " << t << " k " << k;
      } else {
        EXPECT_NEAR(w, r.weights[static_cast<size_t>(k)], 1e-5 * r.weights[static_cast<size_t>(k)]);
      }
    }
  }
  EXPECT_EQ(got.ids[1 * 8], 200);
  EXPECT_EQ(got.ids[3 * 8], 3);
  EXPECT_EQ(got.ids[3 * 8 + 1], 250);
  EXPECT_EQ(got.ids, cpu_grouped_ids(c, logits, bias));
}

TEST(MoEGroupedTopKRouting, InvalidArguments) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(1 << 16);
  ASSERT_NE(buf.ptr, nullptr);
  ck::TopKRoutingArgs a;
  a.logits = buf.at(0);
  a.topk_weights = buf.at<float>(4096);
  a.topk_ids = buf.at<int32_t>(8192);
  a.tokens = 2;
  a.num_experts = 16;
  a.top_k = 4;
  a.n_group = 4;
  a.topk_group = 2;
  EXPECT_NO_THROW(ck::launch_moe_topk_routing(a, nullptr));
  const auto refused = [&](ck::TopKRoutingArgs bad, const std::string& why) {
    try {
      ck::launch_moe_topk_routing(bad, nullptr);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const tileops::SignatureError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  auto bad = a;
  bad.n_group = 3;
  refused(bad, "n_group must be >= 1 and divide the 16 experts, got 3");
  bad = a;
  bad.n_group = 0;
  refused(bad, "n_group must be >= 1");
  bad = a;
  bad.topk_group = 5;
  refused(bad, "topk_group must be in [1, n_group = 4], got 5");
  bad = a;
  bad.topk_group = 1;
  bad.top_k = 5;
  refused(bad, "top_k 5 exceeds the 4 experts of the kept groups");
  CUDA_OK(cudaDeviceSynchronize());
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
