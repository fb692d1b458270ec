// The attention ops through the whole Op path on CUDA against their CPU implementations on the
// same inputs: the KV-cache write (bit for bit: slots in any order, padding, slots outside the
// cache skipped, unaligned rows), the state merge (every dtype, vector and scalar rows, -inf on
// either side), and the varlen attention for every head dim, dtype and mask kind. Skipped without
// a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <tuple>

#include "gpu/gpu_op_test_util.h"
#include "ops/attention_test_util.h"
#include "tileops/core/cuda.h"
#include "tileops/core/error.h"
#include "tileops/ops/attention.h"

namespace tileops {
namespace {

using attention_test::int32_values;
using attention_test::int64_values;
using attention_test::offsets_of;
using gpu_test::expect_close;
using gpu_test::kGpu;
using gpu_test::poisoned;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// Same shape and values (compared exactly; NaN never equal).
void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_EQ(got.to(Device::cpu()).to_vector(), want.to(Device::cpu()).to_vector()) << what;
}

/// A contiguous tensor on the GPU whose data starts `offset` elements into its storage (so that
/// it is aligned to the element size only, when offset is odd).
Tensor on_gpu_at(const Tensor& t, std::int64_t offset) {
  const Tensor flat = Tensor::zeros({offset + t.numel()}, t.dtype(), kGpu);
  Tensor view = flat.slice(0, offset, offset + t.numel()).view(t.sizes());
  view.copy_(t.to(kGpu));
  return view;
}

// ---- KVCacheWriteFwdOp ----------------------------------------------------------------------

struct CacheCase {
  DType dtype;
  std::int64_t tokens, heads_kv, dim, blocks, page;
  std::int64_t offset = 0;  // elements: an odd offset makes every pointer unaligned to 16 bytes
};

TEST(AttentionKVCacheWriteGpu, MatchesTheCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  const std::vector<CacheCase> cases = {
      {DType::bfloat16, 4096, 8, 128, 512, 16},  // Llama-3-8B prefill
      {DType::float16, 37, 8, 128, 20, 16},      // a partial last page
      {DType::bfloat16, 100, 2, 256, 4, 64},    {DType::float32, 50, 3, 64, 9, 7},  // odd page size
      {DType::bfloat16, 33, 1, 7, 12, 5},    // rows of 14 bytes: 2-byte copies
      {DType::float16, 19, 4, 64, 8, 4, 1},  // unaligned pointers
      {DType::float32, 19, 2, 6, 8, 4, 1},   // rows of 24 bytes, 4-byte aligned
      {DType::bfloat16, 1, 8, 128, 1, 16},   // one decode token
      {DType::float32, 9, 16, 256, 4, 4},    // rows of 16 KB: bulk copies one token per block
      {DType::float32, 3, 32, 640, 2, 2},    // rows of 80 KB: past the bulk copies, 16-byte units
  };
  for (const CacheCase& c : cases) {
    const std::string what =
        fmt::format("{} T {} Hkv {} D {} blocks {} page {} offset {}", dtype_name(c.dtype),
                    c.tokens, c.heads_kv, c.dim, c.blocks, c.page, c.offset);
    const Tensor key = Tensor::randn({c.tokens, c.heads_kv, c.dim}, c.dtype, 1);
    const Tensor value = Tensor::randn({c.tokens, c.heads_kv, c.dim}, c.dtype, 2);
    const Tensor k_cache = Tensor::randn({c.blocks, c.page, c.heads_kv, c.dim}, c.dtype, 3);
    const Tensor v_cache = Tensor::randn({c.blocks, c.page, c.heads_kv, c.dim}, c.dtype, 4);
    // Distinct slots in a scrambled order (a step coprime to the slot count); every 7th token
    // padding.
    const std::int64_t slots = c.blocks * c.page;
    ASSERT_LE(c.tokens, slots) << what;
    std::int64_t step = 5;
    while (std::gcd(step, slots) != 1) ++step;
    std::vector<std::int64_t> mapping(static_cast<std::size_t>(c.tokens));
    for (std::int64_t t = 0; t < c.tokens; ++t) {
      mapping[static_cast<std::size_t>(t)] = t % 7 == 3 ? -1 : (t * step + 3) % slots;
    }
    std::vector<std::int64_t> sorted = mapping;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_TRUE(std::adjacent_find(sorted.begin(), sorted.end(),
                                   [](auto a, auto b) { return a >= 0 && a == b; }) == sorted.end())
        << what;
    KVCacheWriteFwdOp cpu_op;
    KVCacheWriteFwdOp gpu_op;
    const Tensor k_cpu = k_cache.clone();
    const Tensor v_cpu = v_cache.clone();
    cpu_op(key, value, k_cpu, v_cpu, int64_values(mapping));
    const Tensor k_gpu = on_gpu_at(k_cache, c.offset);
    const Tensor v_gpu = on_gpu_at(v_cache, c.offset);
    gpu_op(on_gpu_at(key, c.offset), on_gpu_at(value, c.offset), k_gpu, v_gpu,
           int64_values(mapping, kGpu));
    expect_same(k_gpu, k_cpu, what + " k_cache");
    expect_same(v_gpu, v_cpu, what + " v_cache");
  }
}

TEST(AttentionKVCacheWriteGpu, SlotsOutsideTheCacheAreSkipped) {
  SKIP_WITHOUT_GPU();
  // The CPU raises SignatureError for slot 40 of 32; CUDA skips it (and any negative slot) and
  // writes nothing outside the caches, whose neighbours in one allocation stay untouched.
  const std::int64_t blocks = 4, page = 8, hkv = 2, dim = 64;
  const std::int64_t cache = blocks * page * hkv * dim;
  const Tensor arena = Tensor::zeros({3 * cache}, DType::bfloat16, kGpu);
  const Tensor k_cache = arena.slice(0, 0, cache).view({blocks, page, hkv, dim});
  const Tensor v_cache = arena.slice(0, cache, 2 * cache).view({blocks, page, hkv, dim});
  const Tensor key = Tensor::randn({5, hkv, dim}, DType::bfloat16, 1);
  const std::vector<std::int64_t> mapping{31, 40, -1, 32, 0};
  KVCacheWriteFwdOp gpu_op;
  gpu_op(key.to(kGpu), key.to(kGpu), k_cache, v_cache, int64_values(mapping, kGpu));
  cuda_synchronize(0);
  KVCacheWriteFwdOp cpu_op;
  const Tensor want = Tensor::zeros({blocks, page, hkv, dim}, DType::bfloat16);
  cpu_op(key, key, want, want.clone(), int64_values({31, -1, -1, -1, 0}));
  expect_same(k_cache, want, "k_cache");
  expect_same(v_cache, want, "v_cache");
  expect_same(arena.slice(0, 2 * cache, 3 * cache), Tensor::zeros({cache}, DType::bfloat16),
              "after the caches");
  EXPECT_THROW(cpu_op(key, key, want, want.clone(), int64_values(mapping)), SignatureError);
}

// ---- AttentionMergeStatesFwdOp --------------------------------------------------------------

TEST(AttentionMergeStatesGpu, MatchesTheCpuImplementation) {
  SKIP_WITHOUT_GPU();
  for (const DType dtype : {DType::bfloat16, DType::float16, DType::float32}) {
    for (const auto& [tokens, heads, dim] :
         {std::tuple{4096, 32, 128}, std::tuple{64, 32, 128}, std::tuple{37, 16, 256},
          std::tuple{5, 8, 64}, std::tuple{9, 3, 40}, std::tuple{7, 2, 7}}) {
      const std::string what =
          fmt::format("{} T {} H {} D {}", dtype_name(dtype), tokens, heads, dim);
      const Tensor a = Tensor::randn({tokens, heads, dim}, dtype, 1);
      const Tensor b = Tensor::randn({tokens, heads, dim}, dtype, 2);
      Tensor la = Tensor::randn({heads, tokens}, DType::float32, 3, Device::cpu(), 6.0, 3.0);
      Tensor lb = Tensor::randn({heads, tokens}, DType::float32, 4, Device::cpu(), 6.0, 3.0);
      for (std::int64_t e = 0; e < la.numel(); e += 5) la.data<float>()[e] = kNegInf;
      for (std::int64_t e = 0; e < lb.numel(); e += 3) lb.data<float>()[e] = kNegInf;
      AttentionMergeStatesFwdOp cpu_op;
      AttentionMergeStatesFwdOp gpu_op;
      const auto [want, want_lse] = cpu_op(a, la, b, lb);
      const Tensor out = poisoned({tokens, heads, dim}, dtype);
      const auto [got, got_lse] = gpu_op(a.to(kGpu), la.to(kGpu), b.to(kGpu), lb.to(kGpu), out);
      expect_close(got, want, what + " out");
      expect_close(got_lse, want_lse, what + " lse");
      // entry 0 is -inf on both sides: out 0, lse -inf
      EXPECT_EQ(got_lse.to(Device::cpu()).data<float>()[0], kNegInf) << what;
    }
  }
  // Unaligned rows take the scalar path.
  const Tensor a = Tensor::randn({6, 4, 64}, DType::bfloat16, 5);
  const Tensor l = Tensor::randn({4, 6}, DType::float32, 6);
  AttentionMergeStatesFwdOp op;
  const auto [want, want_lse] = op(a, l, a, l);
  const auto [got, got_lse] = op(on_gpu_at(a, 1), l.to(kGpu), on_gpu_at(a, 3), l.to(kGpu));
  expect_close(got, want, "unaligned out_a / out_b");
  expect_close(got_lse, want_lse, "unaligned lse");
}

// ---- GroupedQueryAttentionVarlenFwdOp -------------------------------------------------------

using VarlenParams = GroupedQueryAttentionVarlenFwdOp::Params;

TEST(AttentionVarlenGpu, EveryHeadDimDTypeAndMaskMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  // Sequences: sq == sk (prefill), sq < sk (chunked prefill), sq > sk (queries that see no key),
  // one query (decode), empty sequences, and lengths off every tile size.
  const std::vector<std::int32_t> q_lengths{150, 64, 100, 1, 0, 77, 0, 129};
  const std::vector<std::int32_t> k_lengths{150, 500, 30, 400, 0, 77, 9, 129};
  const auto masks = attention_test::mask_kinds<VarlenParams>();
  const auto cu_q = offsets_of(q_lengths);
  const auto cu_k = offsets_of(k_lengths);
  for (const std::int64_t dim : {64, 128, 256}) {
    for (const DType dtype : {DType::bfloat16, DType::float16}) {
      for (const auto& [hq, hkv] : {std::pair{32, 8}, std::pair{8, 8}, std::pair{6, 1}}) {
        const Tensor q = Tensor::randn({cu_q.back(), hq, dim}, dtype, 1);
        const Tensor k = Tensor::randn({cu_k.back(), hkv, dim}, dtype, 2);
        const Tensor v = Tensor::randn({cu_k.back(), hkv, dim}, dtype, 3);
        const Tensor q_gpu = q.to(kGpu), k_gpu = k.to(kGpu), v_gpu = v.to(kGpu);
        for (const auto& [name, params] : masks) {
          const std::string what =
              fmt::format("D {} {} Hq {} Hkv {} {}", dim, dtype_name(dtype), hq, hkv, name);
          GroupedQueryAttentionVarlenFwdOp cpu_op(params);
          GroupedQueryAttentionVarlenFwdOp gpu_op(params);
          const auto [want, want_lse] = cpu_op(q, k, v, int32_values(cu_q), int32_values(cu_k));
          const Tensor out = poisoned({cu_q.back(), hq, dim}, dtype);
          const auto [got, got_lse] =
              gpu_op(q_gpu, k_gpu, v_gpu, int32_values(cu_q, kGpu), int32_values(cu_k, kGpu), out);
          expect_close(got, want, what + " out");
          expect_close(got_lse, want_lse, what + " lse");
        }
      }
    }
  }
}

// A sequence's output depends on its own keys only: NaN and infinite keys and values in the middle
// sequence (its first rows lie inside the first sequence's last key block, whose scores for them
// are masked) leave the other sequences equal to the CPU's, finite. P = 0 times a NaN or infinite
// V row of another sequence is NaN in a GEMM unless those rows are kept out of the tile.
TEST(AttentionVarlenGpu, NonFiniteKeysOfOneSequenceStayInIt) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::int32_t> lengths{70, 50, 90};
  const auto cu = offsets_of(lengths);
  for (const std::int64_t dim : {64, 128, 256}) {
    for (const DType dtype : {DType::bfloat16, DType::float16}) {
      const Tensor q = Tensor::randn({cu.back(), 8, dim}, dtype, 1);
      Tensor k = Tensor::randn({cu.back(), 2, dim}, dtype, 2);
      Tensor v = Tensor::randn({cu.back(), 2, dim}, dtype, 3);
      const Tensor nan = Tensor::full({2, dim}, std::numeric_limits<double>::quiet_NaN(), dtype);
      const Tensor inf = Tensor::full({2, dim}, std::numeric_limits<double>::infinity(), dtype);
      v.select(0, cu[1]).copy_(nan);      // the middle sequence's first key
      v.select(0, cu[1] + 1).copy_(inf);  // and its second
      k.select(0, cu[1] + 2).copy_(nan);
      for (const bool causal : {true, false}) {
        const std::string what =
            fmt::format("D {} {} {}", dim, dtype_name(dtype), causal ? "causal" : "non-causal");
        GroupedQueryAttentionVarlenFwdOp cpu_op({.causal = causal});
        GroupedQueryAttentionVarlenFwdOp gpu_op({.causal = causal});
        const auto [want, want_lse] = cpu_op(q, k, v, int32_values(cu), int32_values(cu));
        const auto [got, got_lse] = gpu_op(q.to(kGpu), k.to(kGpu), v.to(kGpu),
                                           int32_values(cu, kGpu), int32_values(cu, kGpu));
        const Tensor got_cpu = got.to(Device::cpu());
        for (const std::size_t b : {std::size_t{0}, std::size_t{2}}) {
          expect_close(got_cpu.slice(0, cu[b], cu[b + 1]), want.slice(0, cu[b], cu[b + 1]),
                       fmt::format("{}: sequence {}", what, b));
        }
      }
    }
  }
}

// Few tokens, every head dim and mask kind: the case scripts/gpu-sanitize.sh runs under
// racecheck and synccheck (which slow a kernel a hundredfold).
TEST(AttentionVarlenGpu, SmallCasesEveryHeadDim) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::int32_t> q_lengths{70, 1, 0, 33};
  const std::vector<std::int32_t> k_lengths{70, 130, 5, 20};
  const auto cu_q = offsets_of(q_lengths);
  const auto cu_k = offsets_of(k_lengths);
  const std::vector<std::pair<const char*, VarlenParams>> masks = {
      {"causal", {}},
      {"non-causal", {.causal = false}},
      {"causal window 16", {.window_left = 16}},
      {"causal softcap 20", {.softcap = 20.0}}};
  for (const std::int64_t dim : {64, 128, 256}) {
    const Tensor q = Tensor::randn({cu_q.back(), 4, dim}, DType::bfloat16, 1);
    const Tensor k = Tensor::randn({cu_k.back(), 2, dim}, DType::bfloat16, 2);
    const Tensor v = Tensor::randn({cu_k.back(), 2, dim}, DType::bfloat16, 3);
    for (const auto& [name, params] : masks) {
      const std::string what = fmt::format("D {} {}", dim, name);
      GroupedQueryAttentionVarlenFwdOp cpu_op(params);
      GroupedQueryAttentionVarlenFwdOp gpu_op(params);
      const auto [want, want_lse] = cpu_op(q, k, v, int32_values(cu_q), int32_values(cu_k));
      const auto [got, got_lse] = gpu_op(q.to(kGpu), k.to(kGpu), v.to(kGpu),
                                         int32_values(cu_q, kGpu), int32_values(cu_k, kGpu));
      expect_close(got, want, what + " out");
      expect_close(got_lse, want_lse, what + " lse");
    }
  }
}

TEST(AttentionVarlenGpu, OtherHeadDimsAreADispatchErrorNamingThem) {
  SKIP_WITHOUT_GPU();
  GroupedQueryAttentionVarlenFwdOp op;
  const Tensor q = Tensor::randn({4, 2, 96}, DType::bfloat16, 1, kGpu);
  const Tensor cu = int32_values({0, 4}, kGpu);
  try {
    op(q, q, q, cu, cu);
    ADD_FAILURE() << "head dim 96 ran on CUDA";
  } catch (const DispatchError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("64"));
    EXPECT_THAT(e.what(), testing::HasSubstr("128"));
    EXPECT_THAT(e.what(), testing::HasSubstr("256"));
  }
}

}  // namespace
}  // namespace tileops
