// GroupedQueryAttentionPagedFwdOp on CUDA through the whole Op path against its CPU
// implementation on the same inputs (outputs poisoned with NaN first): every page size (16, 32,
// 64, 128), head dim (64, 128, 256), dtype and mask kind, decode-shaped calls (the split kernel,
// 16-row tiles, one split and several) and prefill-shaped and mixed ones (the TMA kernel); the
// TMA kernel called directly on every shape, chunked prefill included; NaN in every cache row no
// sequence uses and garbage in the table entries past each sequence's pages; a CUDA graph
// captured once and replayed after seqused_k, the block table and q changed; the refusal of
// other page sizes. Skipped without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gpu/cuda_graph_test_util.h"
#include "gpu/gpu_op_test_util.h"
#include "kernels/attention/attention_paged_cuda.h"
#if TILEOPS_WITH_CUDA
#include "kernels/attention/attention_paged_cuda_impls.h"
#endif
#include "ops/attention_test_util.h"
#include "tileops/core/cuda.h"
#include "tileops/core/error.h"
#include "tileops/ops/attention.h"

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace tileops {
namespace {

using attention_test::int32_values;
using attention_test::offsets_of;
using attention_test::PagedCache;
using attention_test::to_pages;
using gpu_test::expect_close;
using gpu_test::kGpu;
using gpu_test::poisoned;
using Params = GroupedQueryAttentionPagedFwdOp::Params;

using Batch = attention_test::NamedBatch;

// Decoding (the split kernel, 16-row tiles, several splits): lengths off every page size, a
// sequence of one key, an empty one. Mixed (the TMA kernel): decoding queries beside prefill
// chunks, a whole prefill, queries over no key (sq > sk), an empty sequence. Chunked (the TMA
// kernel): chunks over longer prefixes (sq < sk, more than one 128-query tile), partial last pages.
const Batch kDecode{"decode", {1, 1, 1, 1, 1, 0}, {300, 1, 129, 64, 1000, 0}};
const Batch kMixed{"mixed", {1, 40, 1, 77, 0, 5, 1}, {700, 300, 16, 77, 0, 2, 129}};
const Batch kChunked{"chunked", {130, 0, 33, 1, 17}, {300, 0, 40, 129, 200}};

struct Case {
  std::int64_t heads_q = 8;
  std::int64_t heads_kv = 2;
  std::int64_t dim = 128;
  std::int64_t page = 16;
  DType dtype = DType::bfloat16;
  Params params = {};
  std::uint64_t seed = 1;
};

std::string describe(const Case& c, const Batch& b, const char* mask) {
  return fmt::format("{} D {} page {} {} Hq {} Hkv {} {}", b.name, c.dim, c.page,
                     dtype_name(c.dtype), c.heads_q, c.heads_kv, mask);
}

/// What runs on the GPU: the op (its selection), or the TMA kernel's adapter called directly.
enum class Via { op, tma_kernel };

/// The CUDA op (or the TMA kernel) against the CPU op on the same q and paged cache (two spare
/// table entries per sequence, set to `unused_entry`; cache rows no sequence uses set to
/// `unused_value` when given).
void expect_matches_cpu(const Case& c, const Batch& b, const std::string& what,
                        std::int32_t unused_entry = -1,
                        std::optional<double> unused_value = std::nullopt, Via via = Via::op) {
  const auto cu_q = offsets_of(b.q_lengths);
  const auto cu_k = offsets_of(b.k_lengths);
  const Tensor q = Tensor::randn({cu_q.back(), c.heads_q, c.dim}, c.dtype, c.seed);
  const Tensor k = Tensor::randn({cu_k.back(), c.heads_kv, c.dim}, c.dtype, c.seed + 1);
  const Tensor v = Tensor::randn({cu_k.back(), c.heads_kv, c.dim}, c.dtype, c.seed + 2);
  std::int64_t width = 0;
  for (const std::int32_t l : b.k_lengths)
    width = std::max<std::int64_t>(width, (l + c.page - 1) / c.page);
  const PagedCache cpu = to_pages(k, v, b.k_lengths, c.page, width + 2, 3, c.seed + 3,
                                  Device::cpu(), unused_entry, unused_value);
  GroupedQueryAttentionPagedFwdOp cpu_op(c.params);
  GroupedQueryAttentionPagedFwdOp gpu_op(c.params);
  const auto [want, want_lse] =
      cpu_op(q, cpu.k_cache, cpu.v_cache, int32_values(cu_q), cpu.seqused_k, cpu.block_table);
  const Tensor out = poisoned({cu_q.back(), c.heads_q, c.dim}, c.dtype);
  if (via == Via::op) {
    const auto [got, got_lse] =
        gpu_op(q.to(kGpu), cpu.k_cache.to(kGpu), cpu.v_cache.to(kGpu), int32_values(cu_q, kGpu),
               cpu.seqused_k.to(kGpu), cpu.block_table.to(kGpu), out);
    expect_close(got, want, what + " out");
    expect_close(got_lse, want_lse, what + " lse");
    return;
  }
#if TILEOPS_WITH_CUDA
  AttentionPagedCall call;
  call.device = kGpu;
  call.dtype = c.dtype;
  call.heads_q = c.heads_q;
  call.heads_kv = c.heads_kv;
  call.head_dim = c.dim;
  call.page_size = c.page;
  const Tensor lse = poisoned({c.heads_q, cu_q.back()}, DType::float32);
  AttentionPagedTmaCuda kernel(call);
  kernel.forward(q.to(kGpu), cpu.k_cache.to(kGpu), cpu.v_cache.to(kGpu), int32_values(cu_q, kGpu),
                 cpu.seqused_k.to(kGpu), cpu.block_table.to(kGpu), out, lse,
                 gpu_op.scores_for(c.dim));
  cuda_synchronize(0);
  expect_close(out, want, what + " TMA kernel out");
  expect_close(lse, want_lse, what + " TMA kernel lse");
#endif
}

TEST(AttentionPagedGpu, EveryPageSizeHeadDimAndDTypeMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const std::int64_t page : {16, 32, 64, 128}) {
    for (const std::int64_t dim : {64, 128, 256}) {
      for (const DType dtype : {DType::bfloat16, DType::float16}) {
        for (const Batch* b : {&kDecode, &kMixed}) {
          const Case c{.dim = dim, .page = page, .dtype = dtype};
          expect_matches_cpu(c, *b, describe(c, *b, "causal"));
        }
      }
    }
  }
}

TEST(AttentionPagedGpu, EveryMaskKindAndHeadGroupMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const auto masks = attention_test::mask_kinds<Params>();
  for (const auto& [hq, hkv] : {std::pair{32, 8}, std::pair{8, 8}, std::pair{6, 1}}) {
    for (const std::int64_t page : {16, 64}) {
      for (const auto& [name, params] : masks) {
        for (const Batch* b : {&kDecode, &kMixed}) {
          const Case c{.heads_q = hq, .heads_kv = hkv, .page = page, .params = params};
          expect_matches_cpu(c, *b, describe(c, *b, name));
        }
      }
    }
  }
}

TEST(AttentionPagedGpu, LargeBatchesOneSplitAndManySplits) {
  SKIP_WITHOUT_GPU();
  // 64 sequences decoding over 4k keys (one split: enough blocks), one over 4k (many splits), 4
  // chunks of 256 queries over 2k (64-row tiles), Llama-3-8B heads. The chunks' 256 tiles give
  // each block of the TMA kernel more than two, so its two tile slots are reused (racecheck runs
  // this test: scripts/gpu-sanitize.sh).
  const Batch many{"decode 64 x 4k", std::vector<std::int32_t>(64, 1),
                   std::vector<std::int32_t>(64, 4096)};
  const Batch one{"decode 1 x 4k", {1}, {4096}};
  const Batch chunks{"chunks 4 x 256 over 2k", std::vector<std::int32_t>(4, 256),
                     std::vector<std::int32_t>(4, 2048)};
  const Case c{.heads_q = 32, .heads_kv = 8};
  for (const Batch* b : {&many, &one, &chunks}) expect_matches_cpu(c, *b, describe(c, *b, ""));
  // One KV head over 32k keys: the plan's most splits (128; tests/ops/test_attention_paged.cpp),
  // every one merged through its lse.
  const Batch longest{"decode 1 x 32k", {1}, {32768}};
  const Case one_head{.heads_q = 4, .heads_kv = 1};
  expect_matches_cpu(one_head, longest, describe(one_head, longest, ""));
}

TEST(AttentionPagedGpu, DecodeTilesWhoseSlotIsNotTheirSequence) {
  SKIP_WITHOUT_GPU();
  // 16-row tiles (4 query rows per sequence on average) whose block slots are not their
  // sequences: an empty sequence first, one of 5 queries (20 rows, two tiles), another empty one,
  // so that every later slot maps to a later sequence; one sequence of 20000 keys (1250 pages of
  // 16, splits far into its table row).
  const Batch shifted{
      "decode, slots shifted", {0, 5, 1, 0, 1, 1, 1, 1}, {0, 300, 129, 5, 20000, 64, 17, 4096}};
  for (const std::int64_t page : {16, 64}) {
    const Case c{.page = page, .seed = 11};
    expect_matches_cpu(c, shifted, describe(c, shifted, "causal"));
  }
}

TEST(AttentionPagedGpu, UnusedCacheRowsAndTableEntriesAreNeverRead) {
  SKIP_WITHOUT_GPU();
  // NaN in every cache row no sequence uses (the rest of each last page included) and garbage in
  // the table entries past each sequence's pages: neither reaches out or lse.
  for (const std::int32_t garbage : {-1, 1 << 30}) {
    for (const std::int64_t dim : {64, 128, 256}) {
      for (const Batch* b : {&kDecode, &kMixed}) {
        const Case c{.dim = dim, .page = 32, .seed = 7};
        expect_matches_cpu(c, *b, describe(c, *b, "NaN rows") + fmt::format(" entries {}", garbage),
                           garbage, std::numeric_limits<double>::quiet_NaN());
      }
    }
  }
}

// Few tokens per head dim and tile shape, with splits: the case scripts/gpu-sanitize.sh runs
// under racecheck and synccheck.
TEST(AttentionPagedGpu, SmallCasesEveryHeadDim) {
  SKIP_WITHOUT_GPU();
  const Batch decode{"small decode", {1, 1, 0}, {70, 5, 0}};
  const Batch mixed{"small mixed", {1, 40, 3}, {150, 40, 0}};  // 64-row tiles
  for (const std::int64_t dim : {64, 128, 256}) {
    for (const Batch* b : {&decode, &mixed}) {
      const Case c{
          .heads_q = 4, .heads_kv = 2, .dim = dim, .page = 16, .params = {.softcap = 20.0}};
      expect_matches_cpu(c, *b, describe(c, *b, "softcap 20"));
    }
  }
}

TEST(AttentionPagedGpu, TmaKernelEveryPageSizeHeadDimAndDTypeMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const std::int64_t page : {16, 32, 64, 128}) {
    for (const std::int64_t dim : {64, 128, 256}) {
      for (const DType dtype : {DType::bfloat16, DType::float16}) {
        for (const Batch* b : {&kChunked, &kMixed, &kDecode}) {
          const Case c{.dim = dim, .page = page, .dtype = dtype};
          expect_matches_cpu(c, *b, describe(c, *b, "causal"), -1, std::nullopt, Via::tma_kernel);
        }
      }
    }
  }
}

TEST(AttentionPagedGpu, TmaKernelEveryMaskKindAndHeadGroupMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const auto masks = attention_test::mask_kinds<Params>();
  for (const auto& [name, params] : masks) {
    // Groups 4, 8 and 16 packed (their query heads share a tile), 1 and 6 not.
    for (const auto& [hq, hkv] :
         {std::pair{32, 8}, std::pair{16, 2}, std::pair{16, 1}, std::pair{8, 8}, std::pair{6, 1}}) {
      for (const std::int64_t page : {16, 64}) {
        const Case c{.heads_q = hq, .heads_kv = hkv, .page = page, .params = params};
        for (const Batch* b : {&kChunked, &kMixed}) {
          expect_matches_cpu(c, *b, describe(c, *b, name), -1, std::nullopt, Via::tma_kernel);
        }
      }
    }
    for (const std::int64_t dim : {64, 256}) {  // the other head dims' instances (TRANSFORM too)
      const Case c{.dim = dim, .params = params};
      expect_matches_cpu(c, kChunked, describe(c, kChunked, name), -1, std::nullopt,
                         Via::tma_kernel);
    }
  }
}

TEST(AttentionPagedGpu, TmaKernelNeverReadsUnusedRowsOrEntries) {
  SKIP_WITHOUT_GPU();
  // NaN in every cache row no sequence uses (the rest of each last page: V rows zeroed in shared
  // memory before P V) and garbage in the table entries past each sequence's pages (never read).
  for (const std::int32_t garbage : {-1, 1 << 30}) {
    for (const std::int64_t page : {16, 32, 64, 128}) {
      for (const std::int64_t dim : {64, 128, 256}) {
        for (const Batch* b : {&kChunked, &kMixed}) {
          const Case c{.dim = dim, .page = page, .params = {.causal = page != 32}, .seed = 7};
          expect_matches_cpu(c, *b,
                             describe(c, *b, "NaN rows") + fmt::format(" entries {}", garbage),
                             garbage, std::numeric_limits<double>::quiet_NaN(), Via::tma_kernel);
        }
      }
    }
  }
}

// The TMA kernel's case for racecheck and memcheck: few tokens, every head dim, a partial last
// page (its V rows zeroed by the producer), NaN in the unused rows.
TEST(AttentionPagedGpu, TmaKernelSmallCasesEveryHeadDim) {
  SKIP_WITHOUT_GPU();
  const Batch small{"small chunked", {20, 3, 0}, {150, 40, 0}};
  for (const std::int64_t dim : {64, 128, 256}) {
    const Case c{.heads_q = 4, .heads_kv = 2, .dim = dim, .page = 16, .params = {.softcap = 20.0}};
    expect_matches_cpu(c, small, describe(c, small, "softcap 20"), -1,
                       std::numeric_limits<double>::quiet_NaN(), Via::tma_kernel);
  }
}

TEST(AttentionPagedGpu, PlansComeFromStaticShapes) {
  SKIP_WITHOUT_GPU();
#if TILEOPS_WITH_CUDA
  // The plan the adapter uses for the decode cases on this device: what the split count
  // is, recorded in the test log (the perf note cites it).
  cuda_kernels::AttentionPagedArgs a;
  a.heads_q = 32;
  a.heads_kv = 8;
  a.head_dim = 128;
  a.page_size = 16;
  for (const auto& [batch, keys] : {std::pair{64, 4096}, std::pair{8, 32768}, std::pair{1, 4096}}) {
    a.total_q = batch;
    a.batch = batch;
    a.width = keys / 16;
    a.num_blocks = batch * a.width;
    const cuda_kernels::AttentionPagedPlan plan = cuda_kernels::attention_paged_plan_for(a);
    std::printf("plan for %d x %d: %s\n", batch, keys, plan.str().c_str());
    EXPECT_EQ(plan.rows_per_tile, 16);
    EXPECT_GE(plan.splits, 1);
    EXPECT_LE(plan.splits, cuda_kernels::kAttentionPagedMaxSplits);
  }
#endif
}

TEST(AttentionPagedGpu, CudaGraphReplaysWithNewLengthsTablesAndQueries) {
  SKIP_WITHOUT_GPU();
#if TILEOPS_WITH_CUDA
  // Captured once (decode-shaped, several splits: a second kernel and a workspace in the graph;
  // and mixed); replayed after seqused_k, the block table, cu_seqlens_q and q changed in place.
  const std::int64_t hq = 8, hkv = 2, dim = 128, page = 16, width = 40, blocks = 200;
  for (const bool mixed : {false, true}) {
    const std::vector<std::int32_t> q_lengths =
        mixed ? std::vector<std::int32_t>{1, 30, 1, 9} : std::vector<std::int32_t>{1, 1, 1, 1};
    const std::int64_t tokens = offsets_of(q_lengths).back();
    const auto inputs = [&](std::vector<std::int32_t> used, std::vector<std::int32_t> qs,
                            std::uint64_t seed) {
      const Tensor q = Tensor::randn({tokens, hq, dim}, DType::bfloat16, seed);
      Tensor table = Tensor::empty({4, width}, DType::int32);
      for (std::int64_t e = 0; e < table.numel(); ++e) {
        table.data<std::int32_t>()[e] = static_cast<std::int32_t>((e * 37 + seed) % blocks);
      }
      return std::vector<Tensor>{q, int32_values(offsets_of(qs)), int32_values(used), table};
    };
    const Tensor k_cache = Tensor::randn({blocks, page, hkv, dim}, DType::bfloat16, 11);
    const Tensor v_cache = Tensor::randn({blocks, page, hkv, dim}, DType::bfloat16, 12);
    const Tensor kc = k_cache.to(kGpu), vc = v_cache.to(kGpu);
    const std::vector<Tensor> first = inputs({100, 640, 33, 9}, q_lengths, 1);
    std::vector<Tensor> dev;
    for (const Tensor& t : first) dev.push_back(t.to(kGpu));
    GroupedQueryAttentionPagedFwdOp op;
    const Tensor out = poisoned({tokens, hq, dim}, DType::bfloat16);
    const Tensor lse = Tensor::full({hq, tokens}, 0.0, DType::float32, kGpu);
    const auto call = [&](cudaStream_t stream) {
      const auto [o, l] = op(dev[0], kc, vc, dev[1], dev[2], dev[3], out);
      ASSERT_EQ(cudaMemcpyAsync(lse.data_ptr(), l.data_ptr(), l.nbytes(), cudaMemcpyDeviceToDevice,
                                stream),
                cudaSuccess);
    };
    gpu_test::CapturedGraph graph;
    ASSERT_TRUE(graph.warm_up(call));
    ASSERT_TRUE(graph.capture(call));
    const std::vector<std::vector<std::int32_t>> lengths = {
        {5, 0, 640, 17}, {1, 1, 1, 1}, {639, 300, 0, 128}};
    std::vector<std::int32_t> qs = q_lengths;
    for (std::size_t round = 0; round < lengths.size(); ++round) {
      if (mixed) std::rotate(qs.begin(), qs.begin() + 1, qs.end());  // another packing
      const std::vector<Tensor> next = inputs(lengths[round], qs, 20 + round);
      for (std::size_t i = 0; i < next.size(); ++i) {
        ASSERT_EQ(cudaMemcpy(dev[i].data_ptr(), next[i].data_ptr(), next[i].nbytes(),
                             cudaMemcpyHostToDevice),
                  cudaSuccess);
      }
      ASSERT_TRUE(graph.replay());
      const std::string what = fmt::format("{} round {}", mixed ? "mixed" : "decode", round);
      GroupedQueryAttentionPagedFwdOp eager;
      const auto [want, want_lse] = eager(dev[0], kc, vc, dev[1], dev[2], dev[3]);
      EXPECT_EQ(out.to(Device::cpu()).to_vector(), want.to(Device::cpu()).to_vector())
          << what << ": replay against eager";
      EXPECT_EQ(lse.to(Device::cpu()).to_vector(), want_lse.to(Device::cpu()).to_vector())
          << what << ": lse";
      GroupedQueryAttentionPagedFwdOp cpu_op;
      const auto [ref, ref_lse] = cpu_op(next[0], k_cache, v_cache, next[1], next[2], next[3]);
      expect_close(out, ref, what + " against the CPU");
      expect_close(lse, ref_lse, what + " lse against the CPU");
    }
  }
#endif
}

TEST(AttentionPagedGpu, OtherPageSizesAreADispatchErrorNamingThem) {
  SKIP_WITHOUT_GPU();
  GroupedQueryAttentionPagedFwdOp op;
  const Tensor q = Tensor::randn({2, 4, 128}, DType::bfloat16, 1, kGpu);
  const Tensor cache = Tensor::randn({4, 24, 2, 128}, DType::bfloat16, 2, kGpu);
  try {
    op(q, cache, cache, int32_values({0, 1, 2}, kGpu), int32_values({30, 5}, kGpu),
       Tensor::zeros({2, 2}, DType::int32, kGpu));
    ADD_FAILURE() << "page size 24 ran on CUDA";
  } catch (const DispatchError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("page_size 24 is not 16, 32, 64 or 128"));
  }
}

}  // namespace
}  // namespace tileops
