// GroupedQueryAttentionPagedFwdOp on the CPU: equal, bit for bit, to the varlen op on the same
// keys laid into pages (shuffled pages, partial last pages, page sizes 16 and 64 and odd ones,
// decoding and mixed batches, empty sequences, every mask kind and dtype), against its
// double-precision reference, block table entries past a sequence's pages never read, the
// roofline against a brute-force count, the workload inputs, and every error by type and message.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>

#include "kernels/attention/attention_paged_cuda.h"
#if TILEOPS_WITH_CUDA
#include "kernels/attention/attention_paged_cuda_impls.h"
#endif
#include "ops/attention_test_util.h"
#include "ops/ops_test_util.h"
#include "tileops/base/reference.h"
#include "tileops/base/schema.h"
#include "tileops/base/signature_call.h"
#include "tileops/dispatch/kernel_table.h"
#include "tileops/ops/attention.h"

namespace tileops {
namespace {

using attention_test::int32_values;
using attention_test::offsets_of;
using attention_test::PagedCache;
using attention_test::sees;
using attention_test::to_pages;
using testing::HasSubstr;
using testing_util::expect_close;
using testing_util::message_of;
using PagedParams = GroupedQueryAttentionPagedFwdOp::Params;
using VarlenParams = GroupedQueryAttentionVarlenFwdOp::Params;

/// Same shape and values, compared exactly (NaN never equal).
void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_EQ(got.to_vector(), want.to_vector()) << what;
}

VarlenParams varlen_params(const PagedParams& p) {
  return {.causal = p.causal,
          .softmax_scale = p.softmax_scale,
          .window_left = p.window_left,
          .softcap = p.softcap};
}

struct Batch {
  std::vector<std::int32_t> q_lengths;
  std::vector<std::int32_t> k_lengths;
  std::int64_t heads_q = 4;
  std::int64_t heads_kv = 2;
  std::int64_t dim = 16;
  DType dtype = DType::float32;
  std::uint64_t seed = 1;

  Tensor q() const {
    return Tensor::randn({offsets_of(q_lengths).back(), heads_q, dim}, dtype, seed);
  }
  Tensor k() const {
    return Tensor::randn({offsets_of(k_lengths).back(), heads_kv, dim}, dtype, seed + 1);
  }
  Tensor v() const {
    return Tensor::randn({offsets_of(k_lengths).back(), heads_kv, dim}, dtype, seed + 2);
  }
};

/// The paged op on `batch`'s keys in pages of `page` (two spare entries per table row, two spare
/// blocks) equals the varlen op on the packed keys, bit for bit, and matches the reference.
void expect_paged_equals_varlen(const PagedParams& params, const Batch& batch, std::int64_t page,
                                const std::string& what) {
  const Tensor q = batch.q(), k = batch.k(), v = batch.v();
  std::int64_t width = 0;
  for (const std::int32_t l : batch.k_lengths)
    width = std::max<std::int64_t>(width, (l + page - 1) / page);
  const PagedCache c = to_pages(k, v, batch.k_lengths, page, width + 2, 2, batch.seed + 7);
  const Tensor cu_q = int32_values(offsets_of(batch.q_lengths));
  GroupedQueryAttentionPagedFwdOp paged(params);
  GroupedQueryAttentionVarlenFwdOp varlen(varlen_params(params));
  const auto [out, lse] = paged(q, c.k_cache, c.v_cache, cu_q, c.seqused_k, c.block_table);
  const auto [want, want_lse] = varlen(q, k, v, cu_q, int32_values(offsets_of(batch.k_lengths)));
  expect_same(out, want, what + " out");
  expect_same(lse, want_lse, what + " lse");
  const std::vector<Tensor> ref = testing_util::run_reference(
      "GroupedQueryAttentionPagedFwdOp",
      {q, c.k_cache, c.v_cache, cu_q, c.seqused_k, c.block_table}, paged.param_values());
  expect_close(out, ref[0], what + " out against the reference");
  expect_close(lse, ref[1], what + " lse against the reference");
}

TEST(AttentionPaged, EqualsVarlenOnTheSameKeysForEveryPageSizeAndDType) {
  // Partial last pages (lengths off every page size), a sequence on exactly one page, chunked
  // prefill (sq < sk), queries that see no key (sq > sk), an empty sequence.
  const Batch base{.q_lengths = {5, 3, 7, 1, 0, 2}, .k_lengths = {37, 16, 4, 64, 0, 90}};
  for (const std::int64_t page : {16, 64, 1, 5, 128}) {
    for (const DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
      Batch b = base;
      b.dtype = dtype;
      expect_paged_equals_varlen({}, b, page, fmt::format("page {} {}", page, dtype_name(dtype)));
    }
  }
}

TEST(AttentionPaged, DecodeOnlyAndMixedBatches) {
  // Decoding: one query per sequence, each over its whole sequence.
  Batch decode{.q_lengths = {1, 1, 1, 1, 1}, .k_lengths = {100, 1, 33, 16, 250}, .heads_q = 8};
  decode.dtype = DType::bfloat16;
  for (const std::int64_t page : {16, 64}) {
    expect_paged_equals_varlen({}, decode, page, fmt::format("decode page {}", page));
    expect_paged_equals_varlen({.window_left = 20}, decode, page,
                               fmt::format("decode window 20 page {}", page));
  }
  // Mixed: decoding queries beside prefill chunks and a whole prefill, GQA 6 / 1.
  const Batch mixed{.q_lengths = {1, 40, 1, 1, 17, 0, 1},
                    .k_lengths = {70, 100, 1, 129, 17, 5, 0},
                    .heads_q = 6,
                    .heads_kv = 1,
                    .dim = 32,
                    .dtype = DType::float16,
                    .seed = 3};
  for (const std::int64_t page : {16, 64}) {
    expect_paged_equals_varlen({}, mixed, page, fmt::format("mixed page {}", page));
  }
}

TEST(AttentionPaged, EveryMaskKindEqualsVarlen) {
  const Batch b{.q_lengths = {6, 2, 9, 1}, .k_lengths = {6, 41, 4, 30}, .dim = 24};
  const std::vector<std::pair<const char*, PagedParams>> masks = {
      {"non-causal", {.causal = false}},
      {"causal window 2", {.window_left = 2}},
      {"non-causal window 3", {.causal = false, .window_left = 3}},
      {"window 0", {.window_left = 0}},
      {"softcap 1.5", {.softcap = 1.5}},
      {"scale 0.9 softcap 3", {.softmax_scale = 0.9, .softcap = 3.0}},
      {"scale 0.05 non-causal", {.causal = false, .softmax_scale = 0.05}},
  };
  for (const auto& [name, params] : masks) {
    for (const std::int64_t page : {16, 3}) {
      expect_paged_equals_varlen(params, b, page, fmt::format("{} page {}", name, page));
    }
  }
}

TEST(AttentionPaged, EmptySequencesAndCalls) {
  // Sequences without keys (their queries see nothing: out 0, lse -inf), without queries, and a
  // batch of only those.
  Batch b{.q_lengths = {0, 3, 2, 0}, .k_lengths = {0, 0, 20, 17}, .dtype = DType::bfloat16};
  expect_paged_equals_varlen({}, b, 16, "empty sequences");
  const Tensor q = b.q();
  const PagedCache c = to_pages(b.k(), b.v(), b.k_lengths, 16, 3, 1, 5);
  GroupedQueryAttentionPagedFwdOp op;
  const auto [out, lse] = op(q, c.k_cache, c.v_cache, int32_values(offsets_of(b.q_lengths)),
                             c.seqused_k, c.block_table);
  for (std::int64_t h = 0; h < b.heads_q; ++h) {
    for (std::int64_t t = 0; t < 3; ++t) {
      EXPECT_EQ(lse.data<float>()[h * 5 + t], -std::numeric_limits<float>::infinity());
    }
  }
  expect_same(out.slice(0, 0, 3), Tensor::zeros({3, b.heads_q, b.dim}, DType::bfloat16),
              "queries over no key");
  // No query token at all, no sequence at all.
  const auto [none, none_lse] =
      op(Tensor::empty({0, 4, 16}, DType::bfloat16), c.k_cache, c.v_cache, int32_values({0, 0, 0}),
         int32_values({5, 0}), Tensor::zeros({2, 3}, DType::int32));
  EXPECT_EQ(none.sizes(), (Sizes{0, 4, 16}));
  EXPECT_EQ(none_lse.sizes(), (Sizes{4, 0}));
  const auto [zero, zero_lse] =
      op(Tensor::empty({0, 4, 16}, DType::bfloat16), c.k_cache, c.v_cache, int32_values({0}),
         Tensor::empty({0}, DType::int32), Tensor::empty({0, 3}, DType::int32));
  EXPECT_EQ(zero.sizes(), (Sizes{0, 4, 16}));
}

TEST(AttentionPaged, EntriesAndRowsPastASequenceAreNeverRead) {
  // Table entries past a sequence's pages hold garbage (-7, 10^6) and cache rows no sequence
  // uses hold NaN: neither reaches the result, and no error is raised.
  const Batch b{.q_lengths = {2, 1, 3}, .k_lengths = {17, 1, 40}, .dtype = DType::bfloat16};
  const Tensor q = b.q(), k = b.k(), v = b.v();
  const Tensor cu_q = int32_values(offsets_of(b.q_lengths));
  const auto [want, want_lse] =
      GroupedQueryAttentionVarlenFwdOp()(q, k, v, cu_q, int32_values(offsets_of(b.k_lengths)));
  for (const std::int32_t garbage : {-7, 1000000}) {
    const PagedCache c = to_pages(k, v, b.k_lengths, 16, 5, 3, 9, Device::cpu(), garbage,
                                  std::numeric_limits<double>::quiet_NaN());
    GroupedQueryAttentionPagedFwdOp op;
    const auto [out, lse] = op(q, c.k_cache, c.v_cache, cu_q, c.seqused_k, c.block_table);
    expect_same(out, want, fmt::format("table garbage {}", garbage));
    expect_same(lse, want_lse, "lse");
  }
}

TEST(AttentionPaged, SharedPagesAndNonContiguousQueriesAndOut) {
  // Two sequences reading the same pages (a shared prefix), q a view of a fused projection, out
  // a strided buffer.
  const std::int64_t hq = 4, hkv = 2, dim = 8, page = 4;
  const Tensor qkv = Tensor::randn({5, hq + 2 * hkv, dim}, DType::float32, 2);
  const Tensor q = qkv.slice(1, 0, hq);
  ASSERT_FALSE(q.is_contiguous());
  const Tensor k_cache = Tensor::randn({3, page, hkv, dim}, DType::float32, 3);
  const Tensor v_cache = Tensor::randn({3, page, hkv, dim}, DType::float32, 4);
  Tensor table = Tensor::empty({2, 3}, DType::int32);
  const std::vector<std::int32_t> entries{2, 0, 1, 2, 0, -1};
  std::copy(entries.begin(), entries.end(), table.data<std::int32_t>());
  const Tensor cu_q = int32_values({0, 3, 5});
  const Tensor used = int32_values({10, 6});
  const Tensor wide = Tensor::zeros({5, hq, 2 * dim}, DType::float32);
  const Tensor out = wide.slice(2, 0, dim);
  GroupedQueryAttentionPagedFwdOp op;
  const auto [got, lse] = op(q, k_cache, v_cache, cu_q, used, table, out);
  EXPECT_EQ(got.data_ptr(), out.data_ptr());
  // The same keys packed: sequence 0 is pages 2, 0, 1 (10 rows), sequence 1 pages 2, 0 (6 rows).
  const auto rows = [&](const Tensor& cache, std::vector<std::int64_t> ids, std::int64_t n) {
    Tensor packed = Tensor::empty({n, hkv, dim}, DType::float32);
    for (std::int64_t j = 0; j < n; ++j)
      packed.select(0, j).copy_(cache.select(0, ids[j / page]).select(0, j % page));
    return packed;
  };
  const Tensor k = Tensor::empty({16, hkv, dim}, DType::float32);
  const Tensor v = Tensor::empty({16, hkv, dim}, DType::float32);
  k.slice(0, 0, 10).copy_(rows(k_cache, {2, 0, 1}, 10));
  k.slice(0, 10, 16).copy_(rows(k_cache, {2, 0}, 6));
  v.slice(0, 0, 10).copy_(rows(v_cache, {2, 0, 1}, 10));
  v.slice(0, 10, 16).copy_(rows(v_cache, {2, 0}, 6));
  const auto [want, want_lse] =
      GroupedQueryAttentionVarlenFwdOp()(q, k, v, cu_q, int32_values({0, 10, 16}));
  expect_same(out.contiguous(), want, "out");
  expect_same(lse, want_lse, "lse");
  expect_same(wide.slice(2, dim, 2 * dim).contiguous(), Tensor::zeros({5, hq, dim}, DType::float32),
              "the rest of the buffer untouched");
}

TEST(AttentionPaged, BlockTableTooNarrowAndBadContentsAreSignatureErrors) {
  const Tensor q = Tensor::randn({3, 2, 8}, DType::bfloat16, 1);
  const Tensor cache = Tensor::randn({4, 16, 1, 8}, DType::bfloat16, 2);
  const Tensor cu_q = int32_values({0, 1, 3});
  const auto table_of = [](std::vector<std::int32_t> e, std::int64_t width) {
    Tensor t = Tensor::empty({2, width}, DType::int32);
    std::copy(e.begin(), e.end(), t.data<std::int32_t>());
    return t;
  };
  const Tensor table = table_of({0, 1, 2, 3}, 2);
  GroupedQueryAttentionPagedFwdOp op;
  const auto message = [&](const Tensor& cu, const Tensor& used, const Tensor& t) {
    return message_of([&] { op(q, cache, cache, cu, used, t); });
  };
  EXPECT_NO_THROW(op(q, cache, cache, cu_q, int32_values({32, 17}), table));
  // 33 keys need 3 pages of 16; the table has 2 per sequence.
  EXPECT_THROW(op(q, cache, cache, cu_q, int32_values({33, 1}), table), SignatureError);
  EXPECT_EQ(message(cu_q, int32_values({33, 1}), table),
            "GroupedQueryAttentionPagedFwdOp: seqused_k[0] = 33 keys need 3 pages of 16, more than "
            "the block table's 2 (max_blocks_per_seq)");
  EXPECT_EQ(message(cu_q, int32_values({3, -1}), table),
            "GroupedQueryAttentionPagedFwdOp: seqused_k[1] = -1 is negative");
  // Block ids outside [0, num_blocks), in a used entry.
  EXPECT_EQ(message(cu_q, int32_values({20, 3}), table_of({0, 4, 2, 3}, 2)),
            "GroupedQueryAttentionPagedFwdOp: block_table[0][1] = 4 is not a block of the caches "
            "(num_blocks = 4)");
  EXPECT_THAT(message(cu_q, int32_values({20, 3}), table_of({0, 1, -2, 3}, 2)),
              HasSubstr("block_table[1][0] = -2 is not a block"));
  // ... but not in an unused one (sequence 1 uses one page).
  EXPECT_NO_THROW(op(q, cache, cache, cu_q, int32_values({20, 3}), table_of({0, 1, 2, -2}, 2)));
  // cu_seqlens_q as the varlen op checks it.
  EXPECT_EQ(message(int32_values({0, 4, 3}), int32_values({3, 3}), table),
            "GroupedQueryAttentionPagedFwdOp: cu_seqlens_q[1] = 4 breaks 0 = cu_seqlens_q[0] <= "
            "... <= cu_seqlens_q[2] = 3 (Tq, the tokens of q)");
  // The reference checks the same contents.
  EXPECT_THROW(testing_util::run_reference("GroupedQueryAttentionPagedFwdOp",
                                           {q, cache, cache, cu_q, int32_values({33, 1}), table},
                                           op.param_values()),
               SignatureError);
}

TEST(AttentionPaged, SignatureRulesByTypeAndMessage) {
  const Tensor q = Tensor::randn({3, 6, 8}, DType::bfloat16, 1);
  const Tensor cache = Tensor::randn({4, 16, 2, 8}, DType::bfloat16, 2);
  const Tensor cu_q = int32_values({0, 1, 3});
  const Tensor used = int32_values({5, 9});
  Tensor table = Tensor::zeros({2, 2}, DType::int32);
  GroupedQueryAttentionPagedFwdOp op;
  EXPECT_NO_THROW(op(q, cache, cache, cu_q, used, table));
  // Hq % Hkv == 0
  const Tensor cache4 = Tensor::randn({4, 16, 4, 8}, DType::bfloat16, 2);
  EXPECT_THAT(message_of([&] { op(q, cache4, cache4, cu_q, used, table); }),
              HasSubstr("Hq % Hkv == 0"));
  // int32 metadata, one batch across cu_seqlens_q, seqused_k and block_table
  EXPECT_THAT(message_of([&] { op(q, cache, cache, cu_q, used.to(DType::int64), table); }),
              HasSubstr("seqused_k"));
  EXPECT_THAT(message_of([&] { op(q, cache, cache, cu_q, used, table.to(DType::int64)); }),
              HasSubstr("block_table"));
  EXPECT_THAT(message_of([&] { op(q, cache, cache, cu_q, int32_values({5}), table); }),
              HasSubstr("seqused_k"));
  EXPECT_THAT(message_of([&] {
                op(q, cache, cache, cu_q, used, Tensor::zeros({3, 2}, DType::int32));
              }),
              HasSubstr("block_table"));
  // The caches: one shape, q's dtype and head dim, contiguous
  EXPECT_THAT(message_of([&] { op(q, cache, cache.slice(1, 0, 8), cu_q, used, table); }),
              HasSubstr("'v_cache'"));
  EXPECT_THROW(op(q, cache.to(DType::float16), cache, cu_q, used, table), SignatureError);
  const Tensor wide = Tensor::randn({4, 16, 2, 16}, DType::bfloat16, 3).slice(3, 0, 8);
  EXPECT_THAT(message_of([&] { op(q, wide, cache, cu_q, used, table); }), HasSubstr("contiguous"));
  // out buffer of the wrong shape
  EXPECT_THROW(op(q, cache, cache, cu_q, used, table, Tensor::empty({3, 6, 4}, DType::bfloat16)),
               SignatureError);
  // parameters, at construction
  EXPECT_THAT(message_of([] { GroupedQueryAttentionPagedFwdOp({.window_left = -2}); }),
              HasSubstr("window_left >= -1"));
  EXPECT_THROW(GroupedQueryAttentionPagedFwdOp({.softcap = -1.0}), SignatureError);
  const Tensor no_rows = Tensor::randn({4, 0, 2, 8}, DType::bfloat16, 2);
  EXPECT_THAT(message_of([&] { op(q, no_rows, no_rows, cu_q, used, table); }),
              HasSubstr("page_size >= 1"));
}

TEST(AttentionPaged, ScoresResolveTheDefaultScale) {
  GroupedQueryAttentionPagedFwdOp op({.causal = false, .window_left = 5, .softcap = 30.0});
  const AttentionScores s = op.scores_for(256);
  EXPECT_FLOAT_EQ(s.softmax_scale, 0.0625f);
  EXPECT_FALSE(s.causal);
  EXPECT_EQ(s.window_left, 5);
  EXPECT_FLOAT_EQ(s.softcap, 30.0f);
}

std::int64_t brute_pairs(std::int64_t sq, std::int64_t sk, bool causal, std::int64_t window) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < sq; ++i)
    for (std::int64_t j = 0; j < sk; ++j) n += sees(i, j, sq, sk, causal, window) ? 1 : 0;
  return n;
}

TEST(AttentionPaged, RooflineCountsEqualSequencesOverTheirWholeTables) {
  // B sequences of sq queries, each over the whole width of its table (width * page keys): the
  // flops count the visible pairs exactly; the bytes count the keys used, not the whole cache.
  const std::int64_t hq = 4, hkv = 2, dim = 8, batch = 3, page = 4, width = 3, blocks = 20;
  for (const bool causal : {true, false}) {
    for (const std::int64_t window : {-1, 0, 5}) {
      for (const std::int64_t sq : {1, 4, 12, 15}) {
        GroupedQueryAttentionPagedFwdOp op({.causal = causal, .window_left = window});
        std::vector<std::int32_t> cu_q;
        for (std::int64_t b = 0; b <= batch; ++b) cu_q.push_back(static_cast<std::int32_t>(b * sq));
        Tensor table = Tensor::empty({batch, width}, DType::int32);
        for (std::int64_t e = 0; e < batch * width; ++e) table.data<std::int32_t>()[e] = e;
        const std::int32_t sk = width * page;
        op(Tensor::randn({batch * sq, hq, dim}, DType::float16, 1),
           Tensor::randn({blocks, page, hkv, dim}, DType::float16, 2),
           Tensor::randn({blocks, page, hkv, dim}, DType::float16, 3), int32_values(cu_q),
           int32_values({sk, sk, sk}), table);
        const Roofline r = op.eval_roofline();
        const std::string what = fmt::format("causal {} window {} sq {}", causal, window, sq);
        EXPECT_EQ(r.flops, 4.0 * dim * hq * batch * brute_pairs(sq, sk, causal, window)) << what;
        const double bytes = 2.0 * batch * sq * hq * dim * 2 +  // q, out
                             4.0 * hq * batch * sq +            // lse
                             4.0 * (batch + 1) + 4.0 * batch + 4.0 * batch * width +
                             2.0 * batch * sk * hkv * dim * 2;  // keys and values used
        EXPECT_EQ(r.bytes, bytes) << what;
      }
    }
  }
}

TEST(AttentionPaged, CudaPlanComesFromStaticShapes) {
  // The CUDA kernels' plan (host arithmetic, no device): rows per tile and splits from the token
  // count, batch, heads, table width and page size, the multiprocessors (132 on the H200) and the
  // blocks each holds (2 for the D 128 decode kernel). Never a device value: a captured graph
  // replays with any lengths.
  using cuda_kernels::attention_paged_plan;
  using Plan = cuda_kernels::AttentionPagedPlan;
  EXPECT_EQ(attention_paged_plan(64, 64, 32, 8, 256, 16, 132, 2), (Plan{16, 1}));  // 512 blocks
  EXPECT_EQ(attention_paged_plan(8, 8, 32, 8, 2048, 16, 132, 2), (Plan{16, 4}));   // 256 of 264
  EXPECT_EQ(attention_paged_plan(8, 8, 32, 8, 512, 64, 132, 2), (Plan{16, 4}));
  // One sequence of 64 units on 264 slots: 33 splits would fill one wave but give the last split
  // no unit (2 units each); 32 fill 97%.
  EXPECT_EQ(attention_paged_plan(1, 1, 32, 8, 256, 16, 132, 2), (Plan{16, 32}));
  EXPECT_EQ(attention_paged_plan(4096, 8, 32, 8, 256, 16, 132, 2), (Plan{64, 1}));
  EXPECT_EQ(attention_paged_plan(2108, 64, 32, 8, 256, 16, 132, 2), (Plan{64, 1}));  // mixed
  // A batch over one wave whose last wave would run mostly empty: 512 blocks on 396 slots (D 64,
  // 3 blocks per SM) are 1.29 waves; 3 splits make 3.88.
  EXPECT_EQ(attention_paged_plan(64, 64, 32, 8, 32, 128, 132, 3), (Plan{16, 3}));
  // Rows per tile: 16 up to 16 (query, head) rows per sequence on average.
  EXPECT_EQ(attention_paged_plan(128, 64, 32, 8, 256, 16, 132, 2).rows_per_tile, 16);
  EXPECT_EQ(attention_paged_plan(320, 64, 32, 8, 256, 16, 132, 2).rows_per_tile, 64);
  // At most one split per 64 keys of the longest sequence the table holds, at most 128.
  EXPECT_EQ(attention_paged_plan(1, 1, 32, 8, 4, 16, 132, 2).splits, 1);
  EXPECT_EQ(attention_paged_plan(1, 1, 32, 8, 16, 16, 132, 2).splits, 4);
  EXPECT_LE(attention_paged_plan(1, 1, 1, 1, 100000, 16, 132, 4).splits,
            cuda_kernels::kAttentionPagedMaxSplits);
  // One KV head over 32k keys: far under one wave, so the most splits.
  EXPECT_EQ(attention_paged_plan(1, 1, 4, 1, 2048, 16, 132, 2).splits, 128);
  EXPECT_EQ(attention_paged_plan(0, 0, 32, 8, 256, 16, 132, 2), (Plan{16, 1}));
  EXPECT_EQ(cuda_kernels::attention_paged_workspace_floats(1, 64, 32, 128), 0);
  EXPECT_EQ(cuda_kernels::attention_paged_workspace_floats(33, 1, 32, 128), 33 * 32 * 129);
}

TEST(AttentionPaged, WorkloadInputsAreValidTablesOfShuffledPages) {
  const OpSchema& schema = *find_schema("GroupedQueryAttentionPagedFwdOp");
  std::map<std::string, std::vector<std::int32_t>> q_lengths;
  for (const auto& row : schema.workloads) {
    InstantiatedCase c = schema.instantiate(row, 0);
    // The lengths and tables depend on Tq, B, the cache's blocks and pages and the table's width:
    // one head of 8 elements keeps the random q and caches small.
    for (const std::size_t i : {0, 1, 2}) {
      Sizes& shape = c.inputs[i]->shape;
      shape[shape.size() - 2] = 1;
      shape.back() = 8;
    }
    const WorkloadInputsFn* workload_inputs =
        find_workload_inputs("GroupedQueryAttentionPagedFwdOp");
    ASSERT_NE(workload_inputs, nullptr);
    const std::vector<Tensor> in = (*workload_inputs)(c, 1, Device::cpu());
    const std::int64_t width = in[5].size(1);
    const std::int64_t page = in[1].size(1);
    std::vector<std::int32_t> lengths;
    for (std::int64_t b = 0; b + 1 < in[3].numel(); ++b) {
      lengths.push_back(in[3].data<std::int32_t>()[b + 1] - in[3].data<std::int32_t>()[b]);
      EXPECT_EQ(in[4].data<std::int32_t>()[b], width * page) << row.label;
    }
    EXPECT_EQ(in[3].data<std::int32_t>()[in[3].numel() - 1], in[0].size(0)) << row.label;
    q_lengths[std::string(row.label)] = lengths;
    // distinct pages, all in the cache
    std::vector<std::int32_t> ids(in[5].data<std::int32_t>(),
                                  in[5].data<std::int32_t>() + in[5].numel());
    std::sort(ids.begin(), ids.end());
    EXPECT_TRUE(std::adjacent_find(ids.begin(), ids.end()) == ids.end()) << row.label;
    EXPECT_GE(ids.front(), 0) << row.label;
    EXPECT_LT(ids.back(), in[1].size(0)) << row.label;
  }
  std::vector<std::int32_t> mixed(60, 1);
  mixed.insert(mixed.end(), 4, 512);
  EXPECT_EQ(q_lengths["mixed-60x1-4x512-page16"], mixed);
  EXPECT_EQ(q_lengths["decode-64x4k-page16"], std::vector<std::int32_t>(64, 1));
  EXPECT_EQ(q_lengths["chunk-8x512-on-4k-page16"], std::vector<std::int32_t>(8, 512));
}

#if TILEOPS_WITH_CUDA
TEST(AttentionPaged, CudaSelectionFollowsQueriesPerSequence) {
  // The op's kernel table on an H200's facts (no device read): prefill-shaped calls take the TMA
  // kernel (preferred over the split one), decode-shaped ones (at most 16 query rows per
  // sequence) the split kernel, which the TMA kernel refuses with its reason.
  KernelTable table;
  attention_test::install_kernels_of(table, "GroupedQueryAttentionPagedFwdOp");
  AttentionPagedCall call = attention_test::h200_call<AttentionPagedCall>();
  call.page_size = 16;
  const auto key = [&](std::int64_t queries) {
    AttentionPagedCall q = call;
    q.queries_per_sequence = queries;
    return table.key_for<AttentionPagedInterface>(q);
  };
  EXPECT_EQ(key(512), "attention_paged_tma_cuda");  // chunked prefill 8 x 512
  EXPECT_EQ(key(33), "attention_paged_tma_cuda");   // mixed 60 x 1 + 4 x 512: ceil(2108 / 64)
  EXPECT_EQ(key(5), "attention_paged_tma_cuda");    // 20 rows of a group of 4
  EXPECT_EQ(key(4), "attention_paged_cuda");        // 16 rows: decode-shaped
  EXPECT_EQ(key(1), "attention_paged_cuda");
  EXPECT_EQ(key(0), "attention_paged_cuda");  // no sequences
  call.heads_kv = 32;                         // MHA: one head per KV head
  EXPECT_EQ(key(16), "attention_paged_cuda");
  EXPECT_EQ(key(17), "attention_paged_tma_cuda");
  for (const std::int64_t page : {32, 64, 128}) {
    call.page_size = page;
    EXPECT_EQ(key(512), "attention_paged_tma_cuda") << page;
  }
  call.page_size = 16;
  call.queries_per_sequence = 4;
  call.heads_kv = 8;
  EXPECT_THAT(AttentionPagedTmaCuda::refusal(call).value_or(""),
              HasSubstr("decode-shaped: 16 query rows per sequence (4 queries x 4 heads per KV "
                        "head) is at most 16"));
  call.queries_per_sequence = 512;
  EXPECT_EQ(AttentionPagedTmaCuda::refusal(call), std::nullopt);
  call.page_size = 24;  // neither kernel: the CPU serves only CPU calls
  EXPECT_THAT(AttentionPagedTmaCuda::refusal(call).value_or(""),
              HasSubstr("page_size 24 is not 16, 32, 64 or 128"));
  EXPECT_THROW(table.key_for<AttentionPagedInterface>(call), DispatchError);
}
#endif

}  // namespace
}  // namespace tileops
