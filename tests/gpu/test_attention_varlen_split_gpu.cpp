// GroupedQueryAttentionVarlenFwdOp's decode-shaped calls on CUDA (the paged op's split-KV kernel
// reading the contiguous K / V, AttentionVarlenSplitCuda) against the CPU op on the same inputs
// (outputs poisoned with NaN first): every head dim, dtype, mask kind and head group, through the
// op (its selection) and the adapter called directly; one sequence over 4k and over 32k keys
// (many splits merged through their lse); packings whose tiles are not their sequences; NaN in
// every key row no sequence covers; a CUDA graph captured once and replayed after cu_seqlens and
// q changed. Skipped without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gpu/cuda_graph_test_util.h"
#include "gpu/gpu_op_test_util.h"
#include "ops/attention_test_util.h"
#include "tileops/core/cuda.h"
#include "tileops/ops/attention.h"

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>

#include "kernels/attention/attention_varlen_cuda_impls.h"
#endif

namespace tileops {
namespace {

using attention_test::int32_values;
using attention_test::offsets_of;
using gpu_test::expect_close;
using gpu_test::kGpu;
using gpu_test::poisoned;
using Params = GroupedQueryAttentionVarlenFwdOp::Params;

using Batch = attention_test::NamedBatch;

// Decoding: lengths off the 64-key tile, one key, no key, an empty sequence; a speculative step
// (2 queries per sequence: 4 rows per sequence at group 2, 16 at group 8).
const Batch kDecode{"decode", {1, 1, 1, 1, 1, 0}, {300, 1, 129, 64, 1000, 0}};
const Batch kTwoQueries{"two queries", {2, 2, 0, 2}, {70, 2, 5, 600}};

struct Case {
  std::int64_t heads_q = 8;
  std::int64_t heads_kv = 2;
  std::int64_t dim = 128;
  DType dtype = DType::bfloat16;
  Params params = {};
  std::uint64_t seed = 1;
};

std::string describe(const Case& c, const Batch& b, const char* mask) {
  return fmt::format("{} D {} {} Hq {} Hkv {} {}", b.name, c.dim, dtype_name(c.dtype), c.heads_q,
                     c.heads_kv, mask);
}

/// What runs on the GPU: the op (its selection), or the split adapter called directly.
enum class Via { op, split_kernel };

/// The CUDA op (or the split adapter) against the CPU op on the same inputs. `spare` key rows
/// follow the sequences' (rows no sequence covers), set to `unused_value` when given.
void expect_matches_cpu(const Case& c, const Batch& b, const std::string& what, Via via = Via::op,
                        std::int64_t spare = 0, std::optional<double> unused_value = std::nullopt) {
  const auto cu_q = offsets_of(b.q_lengths);
  const auto cu_k = offsets_of(b.k_lengths);
  const std::int64_t rows = cu_k.back() + spare;
  const Tensor q = Tensor::randn({cu_q.back(), c.heads_q, c.dim}, c.dtype, c.seed);
  Tensor k = Tensor::randn({rows, c.heads_kv, c.dim}, c.dtype, c.seed + 1);
  Tensor v = Tensor::randn({rows, c.heads_kv, c.dim}, c.dtype, c.seed + 2);
  if (unused_value && spare > 0) {
    const Tensor fill = Tensor::full({spare, c.heads_kv, c.dim}, *unused_value, c.dtype);
    k.slice(0, cu_k.back(), rows).copy_(fill);
    v.slice(0, cu_k.back(), rows).copy_(fill);
  }
  // The CPU op checks that cu_seqlens_k ends at Tk: it gets the covered rows only.
  GroupedQueryAttentionVarlenFwdOp cpu_op(c.params);
  const auto [want, want_lse] =
      cpu_op(q, k.slice(0, 0, cu_k.back()).contiguous(), v.slice(0, 0, cu_k.back()).contiguous(),
             int32_values(cu_q), int32_values(cu_k));
  const Tensor out = poisoned({cu_q.back(), c.heads_q, c.dim}, c.dtype);
  GroupedQueryAttentionVarlenFwdOp gpu_op(c.params);
  if (via == Via::op) {
    ASSERT_EQ(spare, 0) << "the op checks Tk against cu_seqlens_k's shape only; use the adapter";
    const auto [got, got_lse] = gpu_op(q.to(kGpu), k.to(kGpu), v.to(kGpu), int32_values(cu_q, kGpu),
                                       int32_values(cu_k, kGpu), out);
    expect_close(got, want, what + " out");
    expect_close(got_lse, want_lse, what + " lse");
    return;
  }
#if TILEOPS_WITH_CUDA
  AttentionVarlenCall call;
  call.device = kGpu;
  call.dtype = c.dtype;
  call.heads_q = c.heads_q;
  call.heads_kv = c.heads_kv;
  call.head_dim = c.dim;
  call.queries_per_sequence = 1;
  const Tensor lse = poisoned({c.heads_q, cu_q.back()}, DType::float32);
  AttentionVarlenSplitCuda kernel(call);
  kernel.forward(q.to(kGpu), k.to(kGpu), v.to(kGpu), int32_values(cu_q, kGpu),
                 int32_values(cu_k, kGpu), out, lse, gpu_op.scores_for(c.dim));
  cuda_synchronize(0);
  expect_close(out, want, what + " split kernel out");
  expect_close(lse, want_lse, what + " split kernel lse");
#endif
}

TEST(AttentionVarlenSplitGpu, EveryHeadDimAndDTypeMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const std::int64_t dim : {64, 128, 256}) {
    for (const DType dtype : {DType::bfloat16, DType::float16}) {
      for (const Batch* b : {&kDecode, &kTwoQueries}) {
        const Case c{.dim = dim, .dtype = dtype};
        expect_matches_cpu(c, *b, describe(c, *b, "causal"));
        expect_matches_cpu(c, *b, describe(c, *b, "causal"), Via::split_kernel);
      }
    }
  }
}

TEST(AttentionVarlenSplitGpu, EveryMaskKindAndHeadGroupMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  // Groups 4, 1, 6 and 16 (16 rows per decoding sequence: one whole tile).
  for (const auto& [name, params] : attention_test::mask_kinds<Params>()) {
    for (const auto& [hq, hkv] :
         {std::pair{32, 8}, std::pair{8, 8}, std::pair{6, 1}, std::pair{16, 1}}) {
      const Case c{.heads_q = hq, .heads_kv = hkv, .params = params};
      expect_matches_cpu(c, kDecode, describe(c, kDecode, name));
    }
  }
}

TEST(AttentionVarlenSplitGpu, LongSequencesManySplits) {
  SKIP_WITHOUT_GPU();
  // One sequence over 4k keys and one over 32k (one KV head: the plan's most splits, every one
  // merged through its lse); 64 sequences over 4k (Llama-3-8B heads, few splits).
  const Batch one{"decode 1 x 4k", {1}, {4096}};
  const Batch longest{"decode 1 x 32k", {1}, {32768}};
  const Batch many{"decode 64 x 4k", std::vector<std::int32_t>(64, 1),
                   std::vector<std::int32_t>(64, 4096)};
  const Case llama{.heads_q = 32, .heads_kv = 8};
  expect_matches_cpu(llama, one, describe(llama, one, ""));
  expect_matches_cpu(llama, many, describe(llama, many, ""));
  const Case one_head{.heads_q = 4, .heads_kv = 1};
  expect_matches_cpu(one_head, longest, describe(one_head, longest, ""));
}

TEST(AttentionVarlenSplitGpu, TilesWhoseSlotIsNotTheirSequence) {
  SKIP_WITHOUT_GPU();
  // 16-row tiles whose block slots are not their sequences: an empty sequence first, one of 5
  // queries (two tiles at group 4), another empty one; one sequence of 20000 keys (many splits
  // far into the key rows).
  const Batch shifted{
      "decode, slots shifted", {0, 5, 1, 0, 1, 1, 1, 1}, {0, 300, 129, 5, 20000, 64, 17, 4096}};
  const Case c{.seed = 11};
  expect_matches_cpu(c, shifted, describe(c, shifted, "causal"));
  expect_matches_cpu(c, shifted, describe(c, shifted, "causal"), Via::split_kernel);
}

TEST(AttentionVarlenSplitGpu, RowsNoSequenceCoversAreNeverRead) {
  SKIP_WITHOUT_GPU();
  // NaN in 70 key rows past the last sequence's (K and V have more rows than cu_seqlens_k
  // covers): none reaches out or lse.
  for (const std::int64_t dim : {64, 128, 256}) {
    const Case c{.dim = dim, .seed = 7};
    expect_matches_cpu(c, kDecode, describe(c, kDecode, "NaN rows"), Via::split_kernel, 70,
                       std::numeric_limits<double>::quiet_NaN());
  }
}

// Few tokens per head dim: the case scripts/paged-check.sh runs under memcheck and racecheck.
TEST(AttentionVarlenSplitGpu, SmallCasesEveryHeadDim) {
  SKIP_WITHOUT_GPU();
  const Batch small{"small decode", {1, 1, 0}, {70, 5, 0}};
  for (const std::int64_t dim : {64, 128, 256}) {
    const Case c{.heads_q = 4, .heads_kv = 2, .dim = dim, .params = {.softcap = 20.0}};
    expect_matches_cpu(c, small, describe(c, small, "softcap 20"), Via::split_kernel, 3,
                       std::numeric_limits<double>::quiet_NaN());
  }
}

TEST(AttentionVarlenSplitGpu, CudaGraphReplaysWithNewLengthsAndQueries) {
  SKIP_WITHOUT_GPU();
#if TILEOPS_WITH_CUDA
  // Captured once (several splits: a second kernel and a workspace in the graph); replayed after
  // cu_seqlens_q, cu_seqlens_k and q changed in place (the keys' rows fixed: Tk is static).
  const std::int64_t hq = 8, hkv = 2, dim = 128, tk = 2000, batch = 4;
  const auto inputs = [&](std::vector<std::int32_t> qs, std::vector<std::int32_t> ks,
                          std::uint64_t seed) {
    ks.back() += static_cast<std::int32_t>(tk) - offsets_of(ks).back();  // the rows end at Tk
    return std::vector<Tensor>{Tensor::randn({batch, hq, dim}, DType::bfloat16, seed),
                               int32_values(offsets_of(qs)), int32_values(offsets_of(ks))};
  };
  const Tensor k = Tensor::randn({tk, hkv, dim}, DType::bfloat16, 11);
  const Tensor v = Tensor::randn({tk, hkv, dim}, DType::bfloat16, 12);
  const Tensor kg = k.to(kGpu), vg = v.to(kGpu);
  const std::vector<Tensor> first = inputs({1, 1, 1, 1}, {100, 640, 33, 0}, 1);
  std::vector<Tensor> dev;
  for (const Tensor& t : first) dev.push_back(t.to(kGpu));
  GroupedQueryAttentionVarlenFwdOp op;
  const Tensor out = poisoned({batch, hq, dim}, DType::bfloat16);
  const Tensor lse = Tensor::full({hq, batch}, 0.0, DType::float32, kGpu);
  const auto call = [&](cudaStream_t stream) {
    const auto [o, l] = op(dev[0], kg, vg, dev[1], dev[2], out);
    ASSERT_EQ(
        cudaMemcpyAsync(lse.data_ptr(), l.data_ptr(), l.nbytes(), cudaMemcpyDeviceToDevice, stream),
        cudaSuccess);
  };
  gpu_test::CapturedGraph graph;
  ASSERT_TRUE(graph.warm_up(call));
  ASSERT_TRUE(graph.capture(call));
  // Other lengths, another packing of the 4 queries (an empty sequence, one of 2 queries).
  const std::vector<std::pair<std::vector<std::int32_t>, std::vector<std::int32_t>>> rounds = {
      {{1, 1, 1, 1}, {5, 0, 1500, 17}},
      {{0, 2, 1, 1}, {9, 1000, 1, 1}},
      {{1, 1, 1, 1}, {1999, 0, 0, 1}}};
  for (std::size_t round = 0; round < rounds.size(); ++round) {
    const std::vector<Tensor> next = inputs(rounds[round].first, rounds[round].second, 20 + round);
    for (std::size_t i = 0; i < next.size(); ++i) {
      ASSERT_EQ(cudaMemcpy(dev[i].data_ptr(), next[i].data_ptr(), next[i].nbytes(),
                           cudaMemcpyHostToDevice),
                cudaSuccess);
    }
    ASSERT_TRUE(graph.replay());
    const std::string what = fmt::format("round {}", round);
    GroupedQueryAttentionVarlenFwdOp eager;
    const auto [want, want_lse] = eager(dev[0], kg, vg, dev[1], dev[2]);
    EXPECT_EQ(out.to(Device::cpu()).to_vector(), want.to(Device::cpu()).to_vector())
        << what << ": replay against eager";
    EXPECT_EQ(lse.to(Device::cpu()).to_vector(), want_lse.to(Device::cpu()).to_vector())
        << what << ": lse";
    GroupedQueryAttentionVarlenFwdOp cpu_op;
    const auto [ref, ref_lse] = cpu_op(next[0], k, v, next[1], next[2]);
    expect_close(out, ref, what + " against the CPU");
    expect_close(lse, ref_lse, what + " lse against the CPU");
  }
#endif
}

}  // namespace
}  // namespace tileops
