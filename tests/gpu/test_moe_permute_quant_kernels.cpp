// GPU tests of the pre-permute fused with per-token-group FP8 quantization
// (launch_moe_pre_permute with PrePermuteArgs::permuted_q:
// src/kernels/moe/moe_gather_quant_cuda.cu, or with the token scratch the tokens quantized first
// and their rows gathered, where top_k > 1, and the ranking on many blocks): offsets and inverse
// equal to the CPU pre-permute's,
// and codes and scales equal bit for bit to the CPU quantization of the CPU pre-permute's rows
// (MoEPrePermuteFwdOp then PerTokenGroupQuantFP8FwdOp on the CPU), dropped pairs and zero rows
// included; the layouts it refuses. Outputs are poisoned with 0xAB bytes. Skipped without CUDA or
// without a device.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "gpu/kernel_test_util.h"
#include "kernels/moe/moe_permute_cuda.h"
#include "kernels/moe/moe_permute_rank.h"
#include "ops/moe_test_inputs.h"
#include "tileops/core/error.h"
#include "tileops/ops/moe.h"
#include "tileops/ops/quant.h"
#endif

namespace {

#if TILEOPS_WITH_CUDA

using tileops::DType;
using tileops::Tensor;
namespace ck = tileops::cuda_kernels;
using namespace tileops::kernel_test;  // NOLINT: the shared kernel-test helpers

struct FusedCase {
  int64_t T, K, E, H, group;
  DType dtype;
  bool mapped;  // an expert map that drops the pairs of 7 experts in 8
  double eps = 1e-10;
};

std::string name_of(const FusedCase& c) {
  return dtype_str(c.dtype) + " T " + std::to_string(c.T) + " K " + std::to_string(c.K) + " E " +
         std::to_string(c.E) + " H " + std::to_string(c.H) + " group " + std::to_string(c.group) +
         (c.mapped ? " mapped" : "") + " eps " + std::to_string(c.eps);
}

template <typename U>
std::vector<U> bytes_of(const Tensor& t) {
  std::vector<U> v(t.nbytes() / sizeof(U));
  if (!v.empty()) std::memcpy(v.data(), t.data_ptr(), t.nbytes());
  return v;
}

/// Device copy of a CPU tensor's bytes.
void* upload(DeviceBuffer& buf, const Tensor& t) {
  if (buf.ptr != nullptr && t.nbytes() > 0) {
    cudaMemcpy(buf.ptr, t.data_ptr(), t.nbytes(), cudaMemcpyHostToDevice);
  }
  return buf.ptr;
}

/// One launch, quantizing each pair's row as it is gathered or (`tokens_first`, with the scratch
/// of PrePermuteArgs::token_q, where the launch takes it) each token once and gathering its codes
/// and scales.
void check_fused(const FusedCase& c, Tensor x, bool tokens_first) {
  const std::string what = name_of(c) + (tokens_first ? " tokens first" : " fused");
  const int64_t global = c.mapped ? 8 * c.E : c.E;
  Tensor map;
  if (c.mapped) {
    map = Tensor::empty({global}, DType::int32);
    for (int64_t g = 0; g < global; ++g) map.set_at({g}, g % 8 == 0 ? g / 8 : -1);
  }
  const Tensor ids = tileops::moe_test::distinct_ids(c.T, c.K, global, 6 + c.T);
  tileops::MoEPrePermuteFwdOp permute({.num_experts = c.E});
  const auto [xp, off, inv] = permute(x, ids, map);
  tileops::PerTokenGroupQuantFP8FwdOp quant({.group_size = c.group, .eps = c.eps});
  const auto [q, scales] = quant(xp);

  DeviceBuffer dx(x.nbytes()), dids(ids.nbytes()), dmap(map.defined() ? map.nbytes() : 4);
  DeviceBuffer doff(static_cast<size_t>(c.E + 1) * 4), dinv(ids.nbytes());
  DeviceBuffer dq(q.nbytes()), ds(scales.nbytes());
  DeviceBuffer token_q(static_cast<size_t>(c.T * c.H) + 16);
  DeviceBuffer token_s(static_cast<size_t>(c.T * (c.H / c.group)) * 4 + 16);
  DeviceBuffer rank_scratch(static_cast<size_t>(ck::moe_rank_scratch_ints(c.T * c.K, c.E)) * 4);
  ASSERT_TRUE(dx.ptr && dids.ptr && dmap.ptr && doff.ptr && dinv.ptr && dq.ptr && ds.ptr &&
              token_q.ptr && token_s.ptr)
      << what;
  upload(dx, x);
  upload(dids, ids);
  if (c.mapped) upload(dmap, map);
  for (DeviceBuffer* b : {&doff, &dinv, &dq, &ds, &token_q, &token_s})
    CUDA_OK(cudaMemset(b->ptr, 0xAB, b->bytes));
  ck::PrePermuteArgs a;
  a.x = dx.ptr;
  a.x_row_stride = c.H;
  a.topk_ids = dids.at<int32_t>(0);
  a.expert_map = c.mapped ? dmap.at<int32_t>(0) : nullptr;
  a.map_size = c.mapped ? global : 0;
  a.permuted = nullptr;
  a.expert_offsets = doff.at<int32_t>(0);
  a.inverse = dinv.at<int32_t>(0);
  a.tokens = c.T;
  a.hidden = c.H;
  a.top_k = c.K;
  a.num_experts = c.E;
  a.dtype = c.dtype;
  a.permuted_q = dq.ptr;
  a.permuted_scales = ds.at<float>(0);
  a.quant_group_size = c.group;
  a.quant_eps = c.eps;
  if (tokens_first) {  // as the op runs it: the ranking's scratch too
    a.token_q = token_q.ptr;
    a.token_scales = token_s.at<float>(0);
    a.rank_scratch = rank_scratch.at<int32_t>(0);
  }
  try {
    ck::launch_moe_pre_permute(a, nullptr);
  } catch (const std::exception& e) {
    FAIL() << what << ": launch threw: " << e.what();
  }
  CUDA_OK(cudaDeviceSynchronize());
  const auto download = [](const DeviceBuffer& b, size_t bytes) {
    std::vector<unsigned char> v(bytes);
    if (bytes > 0) cudaMemcpy(v.data(), b.ptr, bytes, cudaMemcpyDeviceToHost);
    return v;
  };
  EXPECT_EQ(download(doff, off.nbytes()), bytes_of<unsigned char>(off)) << what << ": offsets";
  EXPECT_EQ(download(dinv, inv.nbytes()), bytes_of<unsigned char>(inv)) << what << ": inverse";
  const auto got_q = download(dq, q.nbytes());
  const auto want_q = bytes_of<unsigned char>(q);
  int64_t bad = 0;
  size_t first = 0;
  for (size_t i = 0; i < got_q.size(); ++i) {
    if (got_q[i] != want_q[i] && bad++ == 0) first = i;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " codes differ, first at " << first << " ("
                    << static_cast<int>(got_q[first]) << " vs " << static_cast<int>(want_q[first])
                    << ")";
  EXPECT_EQ(download(ds, scales.nbytes()), bytes_of<unsigned char>(scales)) << what << ": scales";
}

Tensor random_rows(int64_t T, int64_t H, DType dtype, uint64_t seed) {
  Tensor x = Tensor::randn({T, H}, DType::float32, seed);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      x.set_at({t, h}, x.item_at({t, h}) * std::ldexp(1.0, static_cast<int>((t + h / 64) % 7) - 3));
    }
  }
  return x.to(dtype);
}

TEST(MoEPrePermuteQuantKernel, MatchesTheCpuCompositionBitForBit) {
  SKIP_WITHOUT_GPU();
  for (const FusedCase& c : std::vector<FusedCase>{
           {1, 8, 256, 7168, 128, DType::bfloat16, false},
           {37, 8, 256, 1024, 128, DType::bfloat16, false},
           {64, 8, 256, 7168, 128, DType::bfloat16, true},
           {1100, 8, 256, 1024, 128, DType::bfloat16, true},  // many ranking blocks
           // Tokens first (no map, >= 4096 pairs), with eps / 448 rounding to 0 in one.
           {600, 8, 64, 512, 128, DType::bfloat16, false},
           {520, 8, 16, 256, 128, DType::float32, false, 1e-45},
           {33, 2, 8, 512, 64, DType::float32, false},
           {17, 4, 16, 256, 128, DType::float16, true},
           {5, 1, 4, 96, 32, DType::bfloat16, false},
           {9, 3, 8, 64, 8, DType::bfloat16, true},
           {12, 2, 4, 256, 128, DType::float32, true, 1e-45}}) {
    for (const bool tokens_first : {false, true}) {
      ASSERT_NO_FATAL_FAILURE(
          check_fused(c, random_rows(c.T, c.H, c.dtype, 30 + c.T), tokens_first));
    }
  }
}

// NaN, infinities and zero rows go through the same arithmetic as the quantization kernel's.
TEST(MoEPrePermuteQuantKernel, SpecialValuesMatchTheCpuComposition) {
  SKIP_WITHOUT_GPU();
  const FusedCase c{6, 2, 4, 256, 128, DType::bfloat16, false};
  Tensor x = random_rows(c.T, c.H, DType::float32, 71);
  x.set_at({0, 3}, std::numeric_limits<double>::quiet_NaN());
  x.set_at({1, 130}, std::numeric_limits<double>::infinity());
  x.set_at({2, 7}, -std::numeric_limits<double>::infinity());
  for (int64_t h = 0; h < c.H; ++h) x.set_at({4, h}, 0.0);
  for (const bool tokens_first : {false, true}) {
    ASSERT_NO_FATAL_FAILURE(check_fused(c, x.to(c.dtype), tokens_first));
  }
}

TEST(MoEPrePermuteQuantKernel, RefusesLayoutsItDoesNotTake) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(1 << 20);
  ASSERT_NE(buf.ptr, nullptr);
  ck::PrePermuteArgs a;
  a.x = buf.at(0);
  a.x_row_stride = 256;
  a.topk_ids = buf.at<int32_t>(65536);
  a.expert_offsets = buf.at<int32_t>(69632);
  a.inverse = buf.at<int32_t>(73728);
  a.tokens = 4;
  a.hidden = 256;
  a.top_k = 2;
  a.num_experts = 4;
  a.permuted_q = buf.at(131072);
  a.permuted_scales = buf.at<float>(262144);
  const auto refused = [&](ck::PrePermuteArgs bad, const std::string& why) {
    try {
      ck::launch_moe_pre_permute(bad, nullptr);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const tileops::SignatureError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  auto bad = a;
  bad.quant_group_size = 100;
  refused(bad, "fused FP8 quantization needs quant_group_size >= 1 dividing hidden");
  bad = a;
  bad.quant_group_size = 48;
  bad.hidden = 192;
  bad.x_row_stride = 192;
  refused(bad, "needs quant_group_size / 8 to be a power of two up to 128, got 48");
  bad = a;
  bad.x = buf.at(2);
  refused(bad, "needs x 16-byte aligned");
  bad = a;
  bad.permuted_scales = nullptr;
  refused(bad, "needs permuted_scales");
  bad = a;
  bad.quant_eps = 0.0;
  refused(bad, "needs quant_eps > 0");
  CUDA_OK(cudaDeviceSynchronize());
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
