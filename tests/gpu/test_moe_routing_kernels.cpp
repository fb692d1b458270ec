// GPU tests of the CUDA top-k routing kernel of the MoE family (src/kernels/moe/*), against a
// CPU reference written here. Skipped without CUDA or without a device.
//
// Every launch writes into outputs poisoned with 0xFF bytes (NaN for the floating types, -1 for
// int32). Inputs are random and never zero.
// - Routing: ids exactly (inputs are regenerated where the top k + 1 selection scores come within
//   1e-5 relative of each other without being equal), weights within 1e-5 relative of a double
//   reference.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

#include "gpu/kernel_test_util.h"
#include "kernels/moe/moe_routing_cuda.h"
#include "tileops/core/dtype.h"
#include "tileops/core/error.h"
#endif

namespace {

#if TILEOPS_WITH_CUDA

using tileops::DType;
namespace ck = tileops::cuda_kernels;
using tileops::MoEScoring;

using namespace tileops::kernel_test;  // NOLINT: the shared kernel-test helpers

// =============================================================================================
// Top-k routing

struct RouteCase {
  std::string name;
  DType dtype = DType::float32;
  int64_t T = 1, E = 8, K = 2;
  MoEScoring scoring = MoEScoring::softmax;
  bool bias = false;
  bool renormalize = false;
  float scaling = 1.0f;
  uint64_t seed = 1;
};

struct RouteRef {
  std::vector<int32_t> ids;
  std::vector<double> weights;
  bool ok = true;  // false: a near-tie among the top k + 1 selection scores
};

// Double reference of one token (scores from the rounded logits).
RouteRef route_token(const std::vector<float>& logits, const std::vector<float>& bias,
                     const RouteCase& c) {
  const auto E = static_cast<size_t>(c.E);
  std::vector<double> s(E);
  if (c.scoring == MoEScoring::softmax) {
    double mx = -INFINITY;
    for (const float v : logits) mx = std::max(mx, static_cast<double>(v));
    double sum = 0.0;
    for (size_t e = 0; e < E; ++e) {
      s[e] = std::exp(static_cast<double>(logits[e]) - mx);
      sum += s[e];
    }
    for (double& v : s) v /= sum;
  } else {
    for (size_t e = 0; e < E; ++e) s[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[e])));
  }
  std::vector<double> sel(E);
  for (size_t e = 0; e < E; ++e) sel[e] = s[e] + (c.bias ? bias[e] : 0.0);
  std::vector<int32_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return sel[static_cast<size_t>(a)] > sel[static_cast<size_t>(b)];
  });
  RouteRef r;
  const size_t K = static_cast<size_t>(c.K);
  for (size_t i = 0; i + 1 < std::min(K + 1, E); ++i) {
    const double x = sel[static_cast<size_t>(order[i])];
    const double y = sel[static_cast<size_t>(order[i + 1])];
    if (x != y && x - y < 1e-5 * std::fabs(x)) r.ok = false;
  }
  // Exact ties in the fp32 scores (same logit and bias) are fine: both sides pick the smaller e.
  double sum = 0.0;
  for (size_t k = 0; k < K; ++k) {
    r.ids.push_back(order[k]);
    r.weights.push_back(s[static_cast<size_t>(order[k])]);
    sum += s[static_cast<size_t>(order[k])];
  }
  for (double& w : r.weights) w = (c.renormalize ? w / sum : w) * c.scaling;
  return r;
}

void check_route(const RouteCase& c) {
  const std::string where = c.name + " " + dtype_str(c.dtype) + " T " + std::to_string(c.T) +
                            " E " + std::to_string(c.E) + " K " + std::to_string(c.K) +
                            (c.scoring == MoEScoring::softmax ? " softmax" : " sigmoid") +
                            (c.bias ? " bias" : "") + (c.renormalize ? " renorm" : "");
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
      r = route_token(row, bias, c);
      if (r.ok) break;
    }
    ASSERT_TRUE(r.ok) << where << ": could not draw logits without near-ties";
    ref_ids.insert(ref_ids.end(), r.ids.begin(), r.ids.end());
    ref_w.insert(ref_w.end(), r.weights.begin(), r.weights.end());
  }
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
  try {
    ck::launch_moe_topk_routing(a, nullptr);
  } catch (const std::exception& e) {
    FAIL() << where << ": launch threw: " << e.what();
  }
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaGetLastError());
  std::vector<int32_t> ids(static_cast<size_t>(c.T * c.K));
  std::vector<float> w(static_cast<size_t>(c.T * c.K));
  CUDA_OK(cudaMemcpy(ids.data(), did.ptr, ids.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(w.data(), dw.ptr, w.size() * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(ids, ref_ids) << where << ": ids";
  int64_t bad = 0;
  std::string first;
  for (size_t i = 0; i < w.size(); ++i) {
    const double err = std::fabs(w[i] - ref_w[i]);
    if (!(err <= 1e-5 * std::fabs(ref_w[i]) + 1e-12) && bad++ == 0) {
      std::ostringstream os;
      os << "weight[" << i << "] = " << w[i] << ", reference " << ref_w[i];
      first = os.str();
    }
  }
  EXPECT_EQ(bad, 0) << where << ": " << bad << " wrong weights, first " << first;
}

TEST(MoETopKRouting, Cases) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 700;
  for (const DType dtype : {DType::float32, DType::float16, DType::bfloat16})
    for (const MoEScoring scoring : {MoEScoring::softmax, MoEScoring::sigmoid})
      for (const bool bias : {false, true})
        for (const bool renorm : {false, true})
          for (const auto& ek : std::vector<std::pair<int64_t, int64_t> >{
                   {8, 2}, {64, 6}, {256, 8}, {384, 8}, {512, 1}, {33, 33}, {1000, 16}}) {
            RouteCase c;
            c.name = "grid";
            c.dtype = dtype;
            c.T = ek.first >= 512 ? 17 : 37;
            c.E = ek.first;
            c.K = ek.second;
            c.scoring = scoring;
            c.bias = bias;
            c.renormalize = renorm;
            c.scaling = renorm ? 2.5f : 1.0f;
            c.seed = ++seed;
            ASSERT_NO_FATAL_FAILURE(check_route(c));
          }
}

TEST(MoETopKRouting, LargeAndSpecial) {
  SKIP_WITHOUT_GPU();
  // DeepSeek-V3-like (sigmoid, bias, renormalize, scaling) and Qwen3-like (softmax, renormalize).
  ASSERT_NO_FATAL_FAILURE(check_route(
      {"deepseek", DType::float32, 4096, 256, 8, MoEScoring::sigmoid, true, true, 2.5f, 801}));
  ASSERT_NO_FATAL_FAILURE(check_route(
      {"qwen3", DType::bfloat16, 4096, 128, 8, MoEScoring::softmax, false, true, 1.0f, 802}));
  // More experts than 48 KB of shared memory holds for one warp (opt-in path), and k = 1.
  ASSERT_NO_FATAL_FAILURE(check_route(
      {"e8192", DType::float32, 5, 8192, 4, MoEScoring::softmax, true, false, 1.0f, 803}));
  ASSERT_NO_FATAL_FAILURE(
      check_route({"k1", DType::float16, 100, 64, 1, MoEScoring::sigmoid, false, true, 1.0f, 804}));
}

// Equal logits: ties go to the smaller expert; softmax weights 1/E each.
TEST(MoETopKRouting, Ties) {
  SKIP_WITHOUT_GPU();
  const int64_t T = 3;
  const int64_t E = 40;
  const int64_t K = 5;
  std::vector<float> logits(static_cast<size_t>(T * E), 0.75f);
  DeviceBuffer dl(logits.size() * 4);
  DeviceBuffer dw(static_cast<size_t>(T * K) * 4);
  DeviceBuffer did(static_cast<size_t>(T * K) * 4);
  ASSERT_TRUE(dl.ptr && dw.ptr && did.ptr);
  CUDA_OK(cudaMemcpy(dl.ptr, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dw.ptr, 0xFF, dw.bytes));
  CUDA_OK(cudaMemset(did.ptr, 0xFF, did.bytes));
  ck::TopKRoutingArgs a;
  a.logits = dl.ptr;
  a.topk_weights = dw.at<float>(0);
  a.topk_ids = did.at<int32_t>(0);
  a.tokens = T;
  a.num_experts = E;
  a.top_k = K;
  ASSERT_NO_THROW(ck::launch_moe_topk_routing(a, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<int32_t> ids(static_cast<size_t>(T * K));
  std::vector<float> w(static_cast<size_t>(T * K));
  CUDA_OK(cudaMemcpy(ids.data(), did.ptr, ids.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(w.data(), dw.ptr, w.size() * 4, cudaMemcpyDeviceToHost));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      EXPECT_EQ(ids[static_cast<size_t>(t * K + k)], k);
      EXPECT_NEAR(w[static_cast<size_t>(t * K + k)], 1.0 / E, 1e-7);
    }
}

TEST(MoETopKRouting, InvalidArguments) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(1 << 16);
  ASSERT_NE(buf.ptr, nullptr);
  ck::TopKRoutingArgs a;
  a.logits = buf.at(0);
  a.topk_weights = buf.at<float>(4096);
  a.topk_ids = buf.at<int32_t>(8192);
  a.tokens = 2;
  a.num_experts = 8;
  a.top_k = 2;
  ck::TopKRoutingArgs bad = a;
  bad.top_k = 0;
  EXPECT_THROW(ck::launch_moe_topk_routing(bad, nullptr), tileops::SignatureError);
  bad.top_k = 9;
  EXPECT_THROW(ck::launch_moe_topk_routing(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.logits_dtype = DType::int32;
  EXPECT_THROW(ck::launch_moe_topk_routing(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.topk_ids = nullptr;
  EXPECT_THROW(ck::launch_moe_topk_routing(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.tokens = 0;
  EXPECT_NO_THROW(ck::launch_moe_topk_routing(bad, nullptr));
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
