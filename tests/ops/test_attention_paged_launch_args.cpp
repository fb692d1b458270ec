// The paged attention's CUDA launchers refuse bad arguments before they touch a device: every
// check of launch_attention_paged (the split-KV kernel) and launch_attention_paged_tma (the varlen
// TMA pipeline over pages) raises SignatureError naming the rule, so these tests run in any CUDA
// build, with or without a GPU. No pointer below is dereferenced.
#if TILEOPS_WITH_CUDA

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <functional>
#include <string>

#include "kernels/attention/attention_paged_cuda.h"
#include "tileops/core/error.h"

namespace tileops {
namespace {

using cuda_kernels::AttentionPagedArgs;
using cuda_kernels::AttentionPagedPlan;
using testing::HasSubstr;

/// 16-byte aligned storage standing in for device buffers (never read or written).
alignas(16) unsigned char g_storage[64];

/// A valid decode call: 2 sequences, 32 / 8 heads, D 128, pages of 16, a table 4 pages wide.
AttentionPagedArgs valid_args() {
  AttentionPagedArgs a;
  a.q = g_storage;
  a.k_cache = g_storage;
  a.v_cache = g_storage;
  a.out = g_storage;
  a.lse = reinterpret_cast<float*>(g_storage);
  a.cu_seqlens_q = reinterpret_cast<const std::int32_t*>(g_storage);
  a.seqused_k = reinterpret_cast<const std::int32_t*>(g_storage);
  a.block_table = reinterpret_cast<const std::int32_t*>(g_storage);
  a.total_q = 2;
  a.batch = 2;
  a.width = 4;
  a.num_blocks = 8;
  a.page_size = 16;
  a.heads_q = 32;
  a.heads_kv = 8;
  a.head_dim = 128;
  a.dtype = DType::bfloat16;
  return a;
}

/// The message of the SignatureError `launch` raises ("no SignatureError" when it raises none;
/// another exception type fails the test as it propagates).
std::string signature_error_of(const std::function<void()>& launch) {
  try {
    launch();
  } catch (const SignatureError& e) {
    return e.what();
  }
  return "no SignatureError";
}

/// Both launchers (the split kernel with one split) raise SignatureError containing `text`.
void expect_both_refuse(const AttentionPagedArgs& a, const std::string& text) {
  EXPECT_THAT(signature_error_of(
                  [&] { cuda_kernels::launch_attention_paged(a, AttentionPagedPlan{}, nullptr); }),
              HasSubstr(text))
      << "split kernel";
  EXPECT_THAT(
      signature_error_of([&] { cuda_kernels::launch_attention_paged_tma(a, nullptr, nullptr); }),
      HasSubstr(text))
      << "TMA pipeline";
}

TEST(AttentionPagedLaunchArgs, KernelLimitsAreSignatureErrorsNamingTheRule) {
  AttentionPagedArgs a = valid_args();
  a.dtype = DType::float32;
  expect_both_refuse(a, "dtype must be float16 or bfloat16, got float32");
  a = valid_args();
  a.head_dim = 96;
  expect_both_refuse(a, "head_dim must be 64, 128 or 256, got 96");
  a = valid_args();
  a.page_size = 24;
  expect_both_refuse(a, "page_size must be 16, 32, 64 or 128, got 24");
  a = valid_args();
  a.heads_q = 12;
  expect_both_refuse(a, "heads_q (12) must be a positive multiple of heads_kv (8)");
  a = valid_args();
  a.width = -1;
  expect_both_refuse(a, "negative total_q, batch, width or num_blocks");
  a = valid_args();
  a.total_q = std::int64_t{1} << 26;  // 2^26 tokens x 32 heads: 2^31 (token, head) pairs
  a.batch = 1;
  expect_both_refuse(a, "more than 2^30 query rows or (token, head) pairs");
}

TEST(AttentionPagedLaunchArgs, QueriesWithoutSequencesAndBadPointersAreRefused) {
  AttentionPagedArgs a = valid_args();
  a.batch = 0;
  expect_both_refuse(a, "queries without sequences (batch 0)");
  a = valid_args();
  a.seqused_k = nullptr;
  expect_both_refuse(a, "a tensor pointer is null");
  a = valid_args();
  a.q = g_storage + 8;
  expect_both_refuse(a, "q, k_cache, v_cache and out must be 16-byte aligned, lse 4-byte");
  a = valid_args();
  a.lse = reinterpret_cast<float*>(g_storage + 2);
  expect_both_refuse(a, "q, k_cache, v_cache and out must be 16-byte aligned, lse 4-byte");
}

TEST(AttentionPagedLaunchArgs, EachLaunchersOwnRules) {
  AttentionPagedArgs a = valid_args();
  // The split kernel: the plan's shape, and a workspace for more than one split.
  const auto split_refuses = [&](const AttentionPagedPlan& plan, const std::string& text) {
    EXPECT_THAT(signature_error_of([&] { cuda_kernels::launch_attention_paged(a, plan, nullptr); }),
                HasSubstr(text));
  };
  split_refuses(AttentionPagedPlan{32, 1}, "rows_per_tile must be 16 or 64, got 32");
  split_refuses(AttentionPagedPlan{16, 0}, "splits must be in [1, 128], got 0");
  split_refuses(AttentionPagedPlan{16, 2}, "a plan of 2 splits needs a 16-byte aligned workspace");
  // One block per (row tile slot, KV head, split) in a one-dimensional grid: at most 2^31 - 1.
  // 300 one-query sequences of 65535 heads (group 1): ceil(300 / 16) + 300 = 319 slots.
  a.total_q = 300;
  a.batch = 300;
  a.heads_q = 65535;
  a.heads_kv = 65535;
  a.workspace = reinterpret_cast<float*>(g_storage);
  split_refuses(AttentionPagedPlan{16, 128},
                "too many row tiles x KV heads x splits (319 x 65535 x 128), at most 2^31 - 1");
  a = valid_args();
  // The TMA pipeline: cache rows are int32 row coordinates, with room for a box past the cache.
  a.num_blocks = (INT_MAX - 100) / 16;
  EXPECT_THAT(
      signature_error_of([&] { cuda_kernels::launch_attention_paged_tma(a, nullptr, nullptr); }),
      HasSubstr("2^31 - 129 cache rows"));
}

TEST(AttentionPagedLaunchArgs, ContiguousKeysNeedNoTableLengthsOrPageSize) {
  // cu_seqlens_k set (the varlen op's keys): seqused_k, the table and the page size are unused,
  // and K / V may be null without rows; the split kernel's other rules stand, and the TMA
  // pipeline over pages refuses them. The split launcher's checks are called directly: a launch
  // past them would reach a device with these fake pointers.
  const auto split_error = [](const AttentionPagedArgs& a) {
    return signature_error_of([&] {
      cuda_kernels::check_attention_paged_args(a);
      cuda_kernels::check_attention_paged_pointers(a);
    });
  };
  AttentionPagedArgs a = valid_args();
  a.cu_seqlens_k = reinterpret_cast<const std::int32_t*>(g_storage);
  a.seqused_k = nullptr;
  a.block_table = nullptr;
  a.width = 0;
  a.page_size = 0;
  a.num_blocks = 0;
  a.k_cache = nullptr;
  a.v_cache = nullptr;
  EXPECT_EQ(split_error(a), "no SignatureError");
  EXPECT_THAT(
      signature_error_of([&] { cuda_kernels::launch_attention_paged_tma(a, nullptr, nullptr); }),
      HasSubstr("contiguous keys (cu_seqlens_k) are the varlen launch's, not pages"));
  a.num_blocks = 5;  // rows to read: K and V must be there
  EXPECT_THAT(split_error(a), HasSubstr("a tensor pointer is null"));
  a.k_cache = g_storage;
  a.v_cache = g_storage + 8;
  EXPECT_THAT(split_error(a),
              HasSubstr("q, k_cache, v_cache and out must be 16-byte aligned, lse 4-byte"));
  a.v_cache = g_storage;
  a.num_blocks = std::int64_t{1} << 30;  // one "page" of 2^30 rows: fewer rows than that
  EXPECT_THAT(split_error(a), HasSubstr("more than 2^30 query rows or (token, head) pairs"));
  a.num_blocks = 5;
  a.head_dim = 96;
  EXPECT_THAT(split_error(a), HasSubstr("head_dim must be 64, 128 or 256, got 96"));
  a.head_dim = 128;
  // Their kernel instances take the decode-shaped calls' 16-row tiles only.
  AttentionPagedPlan plan;
  plan.rows_per_tile = 64;
  EXPECT_THAT(signature_error_of([&] { cuda_kernels::launch_attention_paged(a, plan, nullptr); }),
              HasSubstr("contiguous keys (cu_seqlens_k) take 16-row tiles, got 64"));
  a.cu_seqlens_k = nullptr;  // pages again: their rules are back
  EXPECT_THAT(split_error(a), HasSubstr("page_size must be 16, 32, 64 or 128, got 0"));
}

TEST(AttentionPagedLaunchArgs, NoQueriesIsNoLaunch) {
  // Nothing to compute: both return before looking for a device, whatever the pointers.
  AttentionPagedArgs a = valid_args();
  a.total_q = 0;
  a.q = nullptr;
  a.out = nullptr;
  EXPECT_NO_THROW(cuda_kernels::launch_attention_paged(a, AttentionPagedPlan{}, nullptr));
  EXPECT_NO_THROW(cuda_kernels::launch_attention_paged_tma(a, nullptr, nullptr));
}

}  // namespace
}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
