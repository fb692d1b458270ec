// GPU tests of the CUDA pre-permute and post-permute kernels of the MoE family
// (src/kernels/moe/*), against CPU references written here. Skipped without CUDA or without a
// device.
//
// Every launch writes into outputs poisoned with 0xFF bytes (NaN for the floating types, -1 for
// int32). Inputs are random and never zero.
// - Pre-permute: offsets, inverse and every byte of permuted exactly, ranked by one block and (with
//   the ranking's scratch) by many.
// - Post-permute: |got - ref| / (1 + |ref|) <= 1e-5 (fp32), 2e-3 (fp16), 1.6e-2 (bf16) against a
//   double reference, and bit-exact against an fp32 emulation of the kernel's arithmetic.
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
#include "kernels/moe/moe_permute_cuda.h"
#include "kernels/moe/moe_permute_rank.h"
#include "tileops/core/dtype.h"
#include "tileops/core/error.h"
#endif

namespace {

#if TILEOPS_WITH_CUDA

using tileops::DType;
namespace ck = tileops::cuda_kernels;

using namespace tileops::kernel_test;  // NOLINT: the shared kernel-test helpers

// =============================================================================================
// Pre-permute

struct PermuteCase {
  std::string name;
  DType dtype = DType::bfloat16;
  int64_t T = 1, K = 1, E = 1, H = 1;
  int64_t x_stride = 0;          // 0: H
  int64_t x_offset = 0;          // elements (misaligned when odd)
  int64_t id_lo = 0, id_hi = 1;  // ids uniform in [id_lo, id_hi)
  int64_t map_size = 0;          // > 0: an expert map of this size (local ids and -1)
  uint64_t seed = 1;
};

/// One launch; `many_blocks`: with the ranking's scratch (blocks of pairs ranked in parallel
/// where the pairs are many enough).
void check_permute(const PermuteCase& c, bool many_blocks) {
  const std::string where = c.name + " " + dtype_str(c.dtype) + " T " + std::to_string(c.T) +
                            " K " + std::to_string(c.K) + " E " + std::to_string(c.E) + " H " +
                            std::to_string(c.H) + (many_blocks ? " many blocks" : " one block");
  const int64_t xs = c.x_stride > 0 ? c.x_stride : c.H;
  const size_t es = tileops::element_size(c.dtype);
  const int64_t P = c.T * c.K;
  Rng rng(c.seed);
  HostTensor x(c.dtype,
               static_cast<size_t>(c.x_offset + std::max<int64_t>(c.T - 1, 0) * xs + c.H + 8));
  fill_random(x, rng, -3.0f, 3.0f);
  std::vector<int32_t> ids(static_cast<size_t>(P));
  for (auto& id : ids) id = static_cast<int32_t>(c.id_lo + rng.below(c.id_hi - c.id_lo));
  std::vector<int32_t> map(static_cast<size_t>(c.map_size));
  for (auto& m : map) m = rng.below(3) == 0 ? -1 : static_cast<int32_t>(rng.below(c.E + 2)) - 1;

  // Reference.
  std::vector<int64_t> local(static_cast<size_t>(P));
  for (int64_t p = 0; p < P; ++p) {
    const int64_t g = ids[static_cast<size_t>(p)];
    int64_t e = g;
    if (c.map_size > 0) e = (g >= 0 && g < c.map_size) ? map[static_cast<size_t>(g)] : -1;
    local[static_cast<size_t>(p)] = (e >= 0 && e < c.E) ? e : -1;
  }
  std::vector<int64_t> order;
  for (int64_t p = 0; p < P; ++p)
    if (local[static_cast<size_t>(p)] >= 0) order.push_back(p);
  std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) {
    return local[static_cast<size_t>(l)] < local[static_cast<size_t>(r)];
  });
  std::vector<int32_t> ref_off(static_cast<size_t>(c.E + 1), 0);
  for (const int64_t p : order) ++ref_off[static_cast<size_t>(local[static_cast<size_t>(p)] + 1)];
  for (int64_t e = 0; e < c.E; ++e)
    ref_off[static_cast<size_t>(e + 1)] += ref_off[static_cast<size_t>(e)];
  std::vector<int32_t> ref_inv(static_cast<size_t>(P), -1);
  std::vector<unsigned char> ref_perm(static_cast<size_t>(P * c.H) * es, 0);
  for (size_t i = 0; i < order.size(); ++i) {
    const int64_t p = order[i];
    ref_inv[static_cast<size_t>(p)] = static_cast<int32_t>(i);
    const int64_t t = p / c.K;
    std::memcpy(&ref_perm[i * static_cast<size_t>(c.H) * es],
                &x.bytes[static_cast<size_t>(c.x_offset + t * xs) * es],
                static_cast<size_t>(c.H) * es);
  }

  DeviceBuffer dx(x.bytes.size());
  DeviceBuffer dids(ids.size() * 4);
  DeviceBuffer dmap(map.size() * 4);
  DeviceBuffer dperm(static_cast<size_t>(P * c.H) * es);
  DeviceBuffer doff(static_cast<size_t>(c.E + 1) * 4);
  DeviceBuffer dinv(static_cast<size_t>(P) * 4);
  DeviceBuffer scratch(static_cast<size_t>(ck::moe_rank_scratch_ints(P, c.E)) * 4);
  ASSERT_TRUE(dx.ptr && dids.ptr && dmap.ptr && dperm.ptr && doff.ptr && dinv.ptr && scratch.ptr);
  CUDA_OK(cudaMemset(scratch.ptr, 0xFF, scratch.bytes));
  CUDA_OK(cudaMemcpy(dx.ptr, x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice));
  if (P > 0) CUDA_OK(cudaMemcpy(dids.ptr, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  if (!map.empty())
    CUDA_OK(cudaMemcpy(dmap.ptr, map.data(), map.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dperm.ptr, 0xFF, dperm.bytes));
  CUDA_OK(cudaMemset(doff.ptr, 0xFF, doff.bytes));
  CUDA_OK(cudaMemset(dinv.ptr, 0xFF, dinv.bytes));

  ck::PrePermuteArgs a;
  a.x = dx.at(static_cast<size_t>(c.x_offset) * es);
  a.x_row_stride = xs;
  a.topk_ids = dids.at<int32_t>(0);
  a.expert_map = c.map_size > 0 ? dmap.at<int32_t>(0) : nullptr;
  a.map_size = c.map_size;
  a.permuted = dperm.ptr;
  a.expert_offsets = doff.at<int32_t>(0);
  a.inverse = dinv.at<int32_t>(0);
  a.tokens = c.T;
  a.hidden = c.H;
  a.top_k = c.K;
  a.num_experts = c.E;
  a.dtype = c.dtype;
  if (many_blocks) a.rank_scratch = scratch.at<int32_t>(0);
  try {
    ck::launch_moe_pre_permute(a, nullptr);
  } catch (const std::exception& e) {
    FAIL() << where << ": launch threw: " << e.what();
  }
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaGetLastError());

  std::vector<int32_t> off(ref_off.size());
  std::vector<int32_t> inv(static_cast<size_t>(P));
  std::vector<unsigned char> perm(ref_perm.size());
  CUDA_OK(cudaMemcpy(off.data(), doff.ptr, off.size() * 4, cudaMemcpyDeviceToHost));
  if (P > 0) CUDA_OK(cudaMemcpy(inv.data(), dinv.ptr, inv.size() * 4, cudaMemcpyDeviceToHost));
  if (!perm.empty())
    CUDA_OK(cudaMemcpy(perm.data(), dperm.ptr, perm.size(), cudaMemcpyDeviceToHost));
  EXPECT_EQ(off, ref_off) << where << ": offsets";
  EXPECT_EQ(inv, ref_inv) << where << ": inverse";
  if (perm != ref_perm) {
    size_t first = 0;
    while (first < perm.size() && perm[first] == ref_perm[first]) ++first;
    ADD_FAILURE() << where << ": permuted differs, first at byte " << first << " (row "
                  << first / std::max<size_t>(1, static_cast<size_t>(c.H) * es) << ")";
  }
}

TEST(MoEPrePermute, Cases) {
  SKIP_WITHOUT_GPU();
  std::vector<PermuteCase> cases;
  uint64_t seed = 300;
  const auto add = [&](PermuteCase c) {
    c.seed = ++seed;
    cases.push_back(c);
  };
  for (const DType dtype : {DType::bfloat16, DType::float16, DType::float32}) {
    add({"basic", dtype, 37, 4, 8, 128, 0, 0, 0, 8, 0});
    add({"dropped_ids_odd_hidden_strided", dtype, 53, 3, 6, 77, 91, 0, -2, 9, 0});
    add({"expert_map", dtype, 40, 6, 4, 64, 0, 0, -2, 20, 16});
    add({"misaligned_x", dtype, 19, 2, 5, 96, 101, 1, 0, 5, 0});
    add({"top_k_1", dtype, 100, 1, 3, 8, 0, 0, 0, 3, 0});
  }
  add({"deepseek_like", DType::bfloat16, 4096, 8, 256, 2048, 0, 0, 0, 256, 0});
  add({"e512", DType::bfloat16, 4096, 8, 512, 256, 0, 0, 0, 512, 0});
  add({"e1000", DType::float16, 300, 6, 1000, 40, 0, 0, -5, 1010, 0});
  add({"e20000_optin_smem", DType::bfloat16, 100, 3, 20000, 16, 0, 0, 0, 20000, 0});
  add({"expert_parallel_map", DType::bfloat16, 512, 8, 32, 512, 0, 0, 0, 256, 256});
  add({"no_tokens", DType::bfloat16, 0, 8, 16, 64, 0, 0, 0, 16, 0});
  add({"no_experts", DType::bfloat16, 9, 2, 0, 32, 0, 0, 0, 4, 0});
  add({"hidden_0", DType::bfloat16, 9, 2, 4, 0, 0, 0, 0, 4, 0});
  // Past the 8192 pairs below which one block ranks, with dropped ids and a map; and a partial
  // last block (of 2048 pairs).
  add({"blocks_map", DType::bfloat16, 2800, 3, 20, 64, 0, 0, -2, 30, 40});
  add({"blocks_partial", DType::float16, 1500, 7, 64, 32, 0, 0, 0, 64, 0});
  for (const PermuteCase& c : cases) {
    for (const bool many_blocks : {false, true}) {
      ASSERT_NO_FATAL_FAILURE(check_permute(c, many_blocks));
    }
  }
}

// Ids all equal, or all distinct: the stable order by pair index.
TEST(MoEPrePermute, Extremes) {
  SKIP_WITHOUT_GPU();
  for (const bool many_blocks : {false, true}) {
    ASSERT_NO_FATAL_FAILURE(check_permute(
        {"all_one_expert", DType::bfloat16, 4500, 2, 7, 64, 0, 0, 3, 4, 0, 1}, many_blocks));
    ASSERT_NO_FATAL_FAILURE(check_permute(
        {"all_dropped", DType::bfloat16, 4200, 2, 7, 64, 0, 0, 7, 100, 0, 2}, many_blocks));
  }
}

// Which path a launch takes (host decisions, no device needed): the ranking on many blocks from
// 8193 pairs while a block's counters of E experts fit 47 KB; the tokens quantized first with
// no expert map, top_k > 1, at least 4096 pairs, a contiguous x and word-aligned code rows.
TEST(MoEPrePermute, PathChoices) {
  EXPECT_EQ(ck::moe_rank_scratch_ints(8192, 256), 0);
  EXPECT_EQ(ck::moe_rank_scratch_ints(8193, 256), 5 * 256);  // blocks of 2048 pairs
  EXPECT_EQ(ck::moe_rank_scratch_ints(32768, 256), 16 * 256);
  EXPECT_EQ(ck::moe_rank_scratch_ints(1 << 20, 1504), 512 * 1504);
  EXPECT_EQ(ck::moe_rank_scratch_ints(1 << 20, 1505), 0);  // 8 warps x 1505 counters > 47 KB
  EXPECT_EQ(ck::moe_rank_scratch_ints(1 << 20, 0), 0);

  ck::PrePermuteArgs a;
  a.permuted_q = reinterpret_cast<void*>(std::uintptr_t{0x1000});
  a.tokens = 512;
  a.top_k = 8;
  a.hidden = 7168;
  a.x_row_stride = 7168;
  EXPECT_TRUE(ck::moe_pre_permute_wants_token_scratch(a));
  const auto with = [&](auto change) {
    ck::PrePermuteArgs b = a;
    change(b);
    return ck::moe_pre_permute_wants_token_scratch(b);
  };
  EXPECT_FALSE(with([](ck::PrePermuteArgs& b) { b.tokens = 511; }));  // 4088 pairs
  EXPECT_FALSE(with([](ck::PrePermuteArgs& b) {
    b.expert_map = reinterpret_cast<const std::int32_t*>(std::uintptr_t{0x2000});
  }));
  EXPECT_FALSE(with([](ck::PrePermuteArgs& b) {
    b.top_k = 1;
    b.tokens = 8192;
  }));
  EXPECT_FALSE(with([](ck::PrePermuteArgs& b) { b.x_row_stride = 7200; }));
  EXPECT_FALSE(with([](ck::PrePermuteArgs& b) { b.hidden = b.x_row_stride = 7170; }));
  EXPECT_FALSE(with([](ck::PrePermuteArgs& b) {
    b.permuted_q = reinterpret_cast<void*>(std::uintptr_t{0x1002});
  }));
  EXPECT_FALSE(with([](ck::PrePermuteArgs& b) { b.permuted_q = nullptr; }));
}

TEST(MoEPrePermute, InvalidArguments) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(1 << 16);
  ASSERT_NE(buf.ptr, nullptr);
  ck::PrePermuteArgs a;
  a.x = buf.at(0);
  a.x_row_stride = 16;
  a.topk_ids = buf.at<int32_t>(0);
  a.permuted = buf.at(0);
  a.expert_offsets = buf.at<int32_t>(0);
  a.inverse = buf.at<int32_t>(0);
  a.tokens = 2;
  a.hidden = 16;
  a.top_k = 2;
  a.num_experts = 4;
  ck::PrePermuteArgs bad = a;
  bad.dtype = DType::int32;
  EXPECT_THROW(ck::launch_moe_pre_permute(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.expert_offsets = nullptr;
  EXPECT_THROW(ck::launch_moe_pre_permute(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.topk_ids = nullptr;
  EXPECT_THROW(ck::launch_moe_pre_permute(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.top_k = -1;
  EXPECT_THROW(ck::launch_moe_pre_permute(bad, nullptr), tileops::SignatureError);
}

// =============================================================================================
// Post-permute

struct CombineCase {
  std::string name;
  DType dtype = DType::bfloat16;
  int64_t T = 1, K = 1, H = 1, R = 1;
  int64_t out_offset = 0;  // elements (misaligned when odd: scalar path)
  float scale = 1.0f;
  uint64_t seed = 1;
};

void check_combine(const CombineCase& c) {
  const std::string where = c.name + " " + dtype_str(c.dtype) + " T " + std::to_string(c.T) +
                            " K " + std::to_string(c.K) + " H " + std::to_string(c.H) + " R " +
                            std::to_string(c.R);
  const size_t es = tileops::element_size(c.dtype);
  Rng rng(c.seed);
  HostTensor eo(c.dtype, static_cast<size_t>(c.R * c.H));
  fill_random(eo, rng, -2.0f, 2.0f);
  std::vector<float> w(static_cast<size_t>(c.T * c.K));
  for (auto& v : w) v = rng.uniform(0.01f, 1.0f);
  std::vector<int32_t> inv(static_cast<size_t>(c.T * c.K));
  for (auto& v : inv) {
    const int64_t u = rng.below(10);
    v = u == 0   ? -1
        : u == 1 ? static_cast<int32_t>(c.R + rng.below(3))
                 : static_cast<int32_t>(rng.below(c.R));
  }
  // References: double, and the kernel's fp32 arithmetic (products and sums rounded each).
  HostTensor exact(c.dtype, static_cast<size_t>(c.T * c.H));
  std::vector<double> ref(static_cast<size_t>(c.T * c.H));
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t h = 0; h < c.H; ++h) {
      double s = 0.0;
      float f = 0.0f;
      for (int64_t k = 0; k < c.K; ++k) {
        const int32_t r = inv[static_cast<size_t>(t * c.K + k)];
        if (r < 0 || r >= c.R) continue;
        const float x = eo.get(static_cast<size_t>(r * c.H + h));
        const float wk = w[static_cast<size_t>(t * c.K + k)];
        s += static_cast<double>(wk) * x;
        const float prod = wk * x;
        f = f + prod;
      }
      ref[static_cast<size_t>(t * c.H + h)] = static_cast<double>(c.scale) * s;
      const float scaled = c.scale * f;
      exact.set(static_cast<size_t>(t * c.H + h), scaled);
    }

  DeviceBuffer deo(eo.bytes.size());
  DeviceBuffer dw(w.size() * 4);
  DeviceBuffer dinv(inv.size() * 4);
  const size_t out_elems = static_cast<size_t>(c.out_offset + c.T * c.H + 8);
  DeviceBuffer dout(out_elems * es);
  ASSERT_TRUE(deo.ptr && dw.ptr && dinv.ptr && dout.ptr);
  CUDA_OK(cudaMemcpy(deo.ptr, eo.bytes.data(), eo.bytes.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dw.ptr, w.data(), w.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dinv.ptr, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dout.ptr, 0xFF, dout.bytes));
  ck::PostPermuteArgs a;
  a.expert_out = deo.ptr;
  a.rows = c.R;
  a.topk_weights = dw.at<float>(0);
  a.inverse = dinv.at<int32_t>(0);
  a.out = dout.at(static_cast<size_t>(c.out_offset) * es);
  a.tokens = c.T;
  a.hidden = c.H;
  a.top_k = c.K;
  a.scale = c.scale;
  a.dtype = c.dtype;
  try {
    ck::launch_moe_post_permute(a, nullptr);
  } catch (const std::exception& e) {
    FAIL() << where << ": launch threw: " << e.what();
  }
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaGetLastError());
  HostTensor out(c.dtype, out_elems);
  CUDA_OK(cudaMemcpy(out.bytes.data(), dout.ptr, out.bytes.size(), cudaMemcpyDeviceToHost));
  const double tol = c.dtype == DType::float32 ? 1e-5 : c.dtype == DType::float16 ? 2e-3 : 1.6e-2;
  int64_t bad = 0;
  int64_t inexact = 0;
  int64_t touched = 0;
  std::string first;
  for (size_t i = 0; i < out_elems; ++i) {
    const bool inside =
        i >= static_cast<size_t>(c.out_offset) && i < static_cast<size_t>(c.out_offset + c.T * c.H);
    if (!inside) {
      if (out.bits(i) != (es == 4 ? 0xFFFFFFFFu : 0xFFFFu)) ++touched;
      continue;
    }
    const size_t j = i - static_cast<size_t>(c.out_offset);
    const double got = out.get(i);
    const double err = std::fabs(got - ref[j]) / (1.0 + std::fabs(ref[j]));
    if (!(err <= tol) && bad++ == 0) {
      std::ostringstream os;
      os << "out[" << j << "] = " << got << ", reference " << ref[j];
      first = os.str();
    }
    if (out.bits(i) != exact.bits(j)) ++inexact;
  }
  EXPECT_EQ(bad, 0) << where << ": " << bad << " wrong elements, first " << first;
  EXPECT_EQ(inexact, 0) << where << ": " << inexact
                        << " elements differ from the fp32 emulation of the kernel";
  EXPECT_EQ(touched, 0) << where << ": written outside out";
}

TEST(MoEPostPermute, Cases) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 500;
  for (const DType dtype : {DType::bfloat16, DType::float16, DType::float32}) {
    for (const CombineCase& base : std::vector<CombineCase>{
             {"basic", dtype, 37, 8, 256, 37 * 8, 0, 1.0f, 0},
             {"scaled_k9", dtype, 20, 9, 128, 150, 0, 2.5f, 0},
             {"odd_hidden", dtype, 13, 3, 77, 40, 0, 0.7f, 0},
             {"misaligned_out", dtype, 11, 2, 64, 22, 1, 1.0f, 0},
             {"one_token", dtype, 1, 8, 7168, 8, 0, 1.0f, 0},
             {"k1", dtype, 64, 1, 96, 64, 0, 1.0f, 0},
         }) {
      CombineCase c = base;
      c.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_combine(c));
    }
  }
  ASSERT_NO_FATAL_FAILURE(
      check_combine({"deepseek_like", DType::bfloat16, 512, 8, 7168, 4096, 0, 1.0f, 999}));
}

TEST(MoEPostPermute, InvalidArguments) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(1 << 16);
  ASSERT_NE(buf.ptr, nullptr);
  ck::PostPermuteArgs a;
  a.expert_out = buf.at(0);
  a.rows = 4;
  a.topk_weights = buf.at<float>(0);
  a.inverse = buf.at<int32_t>(0);
  a.out = buf.at(4096);
  a.tokens = 2;
  a.hidden = 8;
  a.top_k = 2;
  ck::PostPermuteArgs bad = a;
  bad.dtype = DType::int8;
  EXPECT_THROW(ck::launch_moe_post_permute(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.out = nullptr;
  EXPECT_THROW(ck::launch_moe_post_permute(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.inverse = nullptr;
  EXPECT_THROW(ck::launch_moe_post_permute(bad, nullptr), tileops::SignatureError);
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
