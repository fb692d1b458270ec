// GroupedQueryAttentionVarlenFwdOp on the CPU: against the double-precision reference, the mask
// rules checked directly (uniform scores make out the mean of the visible keys' rows and lse the
// log of their count), the merge of two key sets equal to the whole, the roofline against a
// brute-force count, and every error by type and message.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "kernels/attention/attention_cpu_amx.h"
#include "ops/attention_test_util.h"
#include "ops/ops_test_util.h"
#include "tileops/base/schema.h"
#include "tileops/base/signature_call.h"
#include "tileops/dispatch/kernel_table.h"
#include "tileops/ops/attention.h"

#if TILEOPS_WITH_CUDA
#include "kernels/attention/attention_varlen_cuda_impls.h"
#endif

namespace tileops {
namespace {

using attention_test::int32_values;
using attention_test::offsets_of;
using attention_test::sees;
using testing::HasSubstr;
using testing_util::expect_close;
using testing_util::message_of;
using Params = GroupedQueryAttentionVarlenFwdOp::Params;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Problem {
  std::vector<std::int32_t> q_lengths;
  std::vector<std::int32_t> k_lengths;
  std::int64_t heads_q = 4;
  std::int64_t heads_kv = 2;
  std::int64_t dim = 16;
  DType dtype = DType::float32;
  std::uint64_t seed = 1;

  std::vector<std::int32_t> cu_q() const { return offsets_of(q_lengths); }
  std::vector<std::int32_t> cu_k() const { return offsets_of(k_lengths); }
  std::int64_t total_q() const { return cu_q().back(); }
  std::int64_t total_k() const { return cu_k().back(); }
  /// q, k, v, cu_seqlens_q, cu_seqlens_k.
  std::vector<Tensor> inputs() const {
    return {Tensor::randn({total_q(), heads_q, dim}, dtype, seed),
            Tensor::randn({total_k(), heads_kv, dim}, dtype, seed + 1),
            Tensor::randn({total_k(), heads_kv, dim}, dtype, seed + 2), int32_values(cu_q()),
            int32_values(cu_k())};
  }
};

std::tuple<Tensor, Tensor> run(GroupedQueryAttentionVarlenFwdOp& op,
                               const std::vector<Tensor>& in) {
  return op(in[0], in[1], in[2], in[3], in[4]);
}

void expect_matches_reference(const Params& params, const Problem& p, const std::string& what) {
  GroupedQueryAttentionVarlenFwdOp op(params);
  const std::vector<Tensor> in = p.inputs();
  const auto [out, lse] = run(op, in);
  const std::vector<Tensor> ref =
      testing_util::run_reference("GroupedQueryAttentionVarlenFwdOp", in, op.param_values());
  expect_close(out, ref[0], what + " out");
  expect_close(lse, ref[1], what + " lse");
}

TEST(AttentionVarlen, GqaCausalMatchesTheReferenceForEveryDType) {
  // Sequences with sq == sk, sq < sk (chunked prefill) and sq > sk (queries that see no key).
  const Problem base{.q_lengths = {5, 3, 7, 1}, .k_lengths = {5, 9, 4, 6}};
  for (const DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
    for (const auto& [hq, hkv] : {std::pair{4, 2}, std::pair{6, 1}, std::pair{3, 3}}) {
      Problem p = base;
      p.dtype = dtype;
      p.heads_q = hq;
      p.heads_kv = hkv;
      expect_matches_reference({}, p, fmt::format("{} Hq {} Hkv {}", dtype_name(dtype), hq, hkv));
    }
  }
}

TEST(AttentionVarlen, NonCausalWindowSoftcapAndScaleMatchTheReference) {
  const Problem p{.q_lengths = {6, 2, 9}, .k_lengths = {6, 11, 4}, .dim = 24};
  expect_matches_reference({.causal = false}, p, "non-causal");
  expect_matches_reference({.window_left = 2}, p, "causal, window 2");
  expect_matches_reference({.causal = false, .window_left = 3}, p, "non-causal, window 3");
  expect_matches_reference({.window_left = 0}, p, "window 0 (the diagonal key only)");
  expect_matches_reference({.softcap = 1.5}, p, "softcap 1.5");
  expect_matches_reference({.softmax_scale = 0.9, .softcap = 3.0}, p, "scale 0.9, softcap 3");
  expect_matches_reference({.causal = false, .softmax_scale = 0.05}, p, "scale 0.05");
}

TEST(AttentionVarlen, AnyHeadDimOnTheCpu) {
  for (const std::int64_t dim : {1, 7, 40, 64, 80, 128, 256}) {
    const Problem p{.q_lengths = {3, 4},
                    .k_lengths = {5, 4},
                    .heads_q = 2,
                    .heads_kv = 1,
                    .dim = dim,
                    .dtype = DType::bfloat16};
    expect_matches_reference({}, p, fmt::format("D {}", dim));
  }
}

TEST(AttentionVarlen, LongSequencesCrossKeyTilesAndQueryTasks) {
  // The CPU implementation takes 64-key tiles and tasks of up to 128 (query, head) rows of one
  // KV head: sequences over several of both, with partial last tiles, chunked prefill (sq < sk),
  // GQA groups of 4, 3 (tasks of 42 queries) and 1, head dims that are and are not a multiple of
  // 32, and every mask kind.
  const Problem base{.q_lengths = {150, 1, 70, 0}, .k_lengths = {150, 300, 134, 65}};
  for (const auto& [hq, hkv, dim] :
       {std::tuple{8, 2, 64}, std::tuple{6, 2, 40}, std::tuple{2, 2, 96}}) {
    for (const DType dtype : {DType::float32, DType::bfloat16}) {
      Problem p = base;
      p.heads_q = hq;
      p.heads_kv = hkv;
      p.dim = dim;
      p.dtype = dtype;
      const std::string what = fmt::format("{} Hq {} Hkv {} D {}", dtype_name(dtype), hq, hkv, dim);
      expect_matches_reference({}, p, what + " causal");
      expect_matches_reference({.causal = false}, p, what + " non-causal");
      expect_matches_reference({.window_left = 70}, p, what + " window 70");
      expect_matches_reference({.softcap = 2.0}, p, what + " softcap 2");
    }
  }
}

TEST(AttentionVarlen, NonFiniteValuesReachOnlyTheRowsThatSeeThem) {
  // v of key 70 (in the second 64-key tile) is NaN, of key 100 infinite: rows that see them are
  // NaN as in the reference, the rows before them (which share the tiles) are not.
  const std::int64_t t = 130, hq = 4, hkv = 1, dim = 32;
  const Tensor q = Tensor::randn({t, hq, dim}, DType::float32, 5);
  const Tensor k = Tensor::randn({t, hkv, dim}, DType::float32, 6);
  Tensor v = Tensor::randn({t, hkv, dim}, DType::float32, 7);
  for (std::int64_t d = 0; d < dim; ++d) {
    v.data<float>()[70 * dim + d] = std::numeric_limits<float>::quiet_NaN();
    v.data<float>()[100 * dim + d] = std::numeric_limits<float>::infinity();
  }
  const Tensor cu = int32_values({0, static_cast<std::int32_t>(t)});
  GroupedQueryAttentionVarlenFwdOp op;
  const auto [out, lse] = op(q, k, v, cu, cu);
  for (std::int64_t i = 0; i < t; ++i) {
    EXPECT_EQ(std::isnan(out.data<float>()[i * hq * dim]), i >= 70) << "query " << i;
  }
  const std::vector<Tensor> ref = testing_util::run_reference("GroupedQueryAttentionVarlenFwdOp",
                                                              {q, k, v, cu, cu}, op.param_values());
  expect_close(out.slice(0, 0, 70), ref[0].slice(0, 0, 70), "the rows before the NaN key");
  expect_close(lse, ref[1], "lse (the scores are finite)");
}

TEST(AttentionVarlen, Bfloat16OnTheTileUnitAndInFloat32) {
  // bfloat16 inputs take the AMX products where the processor has them (head dims that are a
  // multiple of 32), else float32 ones: both, on the cases of the long-sequence test, and a NaN
  // and an infinite value in V, which the tile products must keep from the rows not seeing them.
  const bool amx = cpu::attention_amx_available();
  const struct Restore {
    ~Restore() { cpu::use_attention_amx(true); }
  } restore;
  for (const bool use_amx : {true, false}) {
    cpu::use_attention_amx(use_amx);
    const std::string path = use_amx && amx ? "AMX" : "float32";
    const Problem base{.q_lengths = {150, 1, 70, 0}, .k_lengths = {150, 300, 134, 65}};
    for (const auto& [hq, hkv, dim] : {std::tuple{8, 2, 64}, std::tuple{4, 4, 128},
                                       std::tuple{2, 1, 256}, std::tuple{2, 1, 96}}) {
      Problem p = base;
      p.heads_q = hq;
      p.heads_kv = hkv;
      p.dim = dim;
      p.dtype = DType::bfloat16;
      const std::string what = fmt::format("{}: Hq {} Hkv {} D {}", path, hq, hkv, dim);
      expect_matches_reference({}, p, what + " causal");
      expect_matches_reference({.causal = false, .window_left = 70}, p, what + " window 70");
      expect_matches_reference({.softcap = 2.0}, p, what + " softcap 2");
    }
    const std::int64_t t = 130, hq = 4, dim = 64;
    const Tensor q = Tensor::randn({t, hq, dim}, DType::bfloat16, 5);
    const Tensor k = Tensor::randn({t, 1, dim}, DType::bfloat16, 6);
    Tensor v = Tensor::randn({t, 1, dim}, DType::bfloat16, 7);
    v.data<BFloat16>()[70 * dim + 3] =
        BFloat16::from_float(std::numeric_limits<float>::quiet_NaN());
    v.data<BFloat16>()[100 * dim + 5] =
        BFloat16::from_float(std::numeric_limits<float>::infinity());
    const Tensor cu = int32_values({0, static_cast<std::int32_t>(t)});
    GroupedQueryAttentionVarlenFwdOp op;
    const auto [out, lse] = op(q, k, v, cu, cu);
    for (std::int64_t i = 0; i < t; ++i) {
      EXPECT_EQ(std::isnan(out.data<BFloat16>()[(i * hq) * dim + 3].to_float()), i >= 70)
          << path << " query " << i;
    }
    const std::vector<Tensor> ref = testing_util::run_reference(
        "GroupedQueryAttentionVarlenFwdOp", {q, k, v, cu, cu}, op.param_values());
    expect_close(out.slice(0, 0, 70), ref[0].slice(0, 0, 70), path + " rows before the NaN key");

    // A NaN in k of key 40 makes the scores of the rows that see it NaN (out and lse NaN); the
    // rows before it mask the NaN score of the same tile away.
    Tensor k_nan = k.clone();
    k_nan.data<BFloat16>()[40 * dim + 1] =
        BFloat16::from_float(std::numeric_limits<float>::quiet_NaN());
    const Tensor v_finite = Tensor::randn({t, 1, dim}, DType::bfloat16, 8);
    const auto [out_k, lse_k] = op(q, k_nan, v_finite, cu, cu);
    for (std::int64_t i = 0; i < t; ++i) {
      EXPECT_EQ(std::isnan(out_k.data<BFloat16>()[(i * hq) * dim].to_float()), i >= 40)
          << path << " query " << i << " (NaN key)";
      EXPECT_EQ(std::isnan(lse_k.data<float>()[i]), i >= 40) << path << " lse " << i;
    }
    const std::vector<Tensor> ref_k = testing_util::run_reference(
        "GroupedQueryAttentionVarlenFwdOp", {q, k_nan, v_finite, cu, cu}, op.param_values());
    expect_close(out_k.slice(0, 0, 40), ref_k[0].slice(0, 0, 40),
                 path + " rows before the NaN key's score");
  }
}

// With q = 0 every visible score is 0: out is the mean of the visible keys' v rows and lse the
// log of their count. v[j] = j + 1 (every head and element), so out names which keys were seen.
void expect_mask(const Params& params, const std::vector<std::int32_t>& q_lengths,
                 const std::vector<std::int32_t>& k_lengths) {
  const std::int64_t hq = 2, hkv = 1, dim = 3;
  const auto cu_q = offsets_of(q_lengths);
  const auto cu_k = offsets_of(k_lengths);
  const Tensor q = Tensor::zeros({cu_q.back(), hq, dim}, DType::float32);
  const Tensor k = Tensor::randn({cu_k.back(), hkv, dim}, DType::float32, 3);
  Tensor v = Tensor::empty({cu_k.back(), hkv, dim}, DType::float32);
  for (std::int64_t e = 0; e < v.numel(); ++e) v.data<float>()[e] = static_cast<float>(e / dim + 1);
  GroupedQueryAttentionVarlenFwdOp op(params);
  const auto [out, lse] = op(q, k, v, int32_values(cu_q), int32_values(cu_k));
  for (std::size_t b = 0; b + 1 < cu_q.size(); ++b) {
    const std::int64_t sq = q_lengths[b], sk = k_lengths[b];
    for (std::int64_t i = 0; i < sq; ++i) {
      double count = 0, sum = 0;
      for (std::int64_t j = 0; j < sk; ++j) {
        if (!sees(i, j, sq, sk, params.causal, params.window_left)) continue;
        count += 1;
        sum += static_cast<double>(cu_k[b] + j + 1);
      }
      const std::int64_t t = cu_q[b] + i;
      for (std::int64_t h = 0; h < hq; ++h) {
        const std::string where =
            fmt::format("sequence {} (sq {}, sk {}) query {} head {}", b, sq, sk, i, h);
        const double got_lse = lse.data<float>()[h * cu_q.back() + t];
        if (count == 0) {
          EXPECT_EQ(got_lse, kNegInf) << where;
        } else {
          EXPECT_NEAR(got_lse, std::log(count), 1e-5) << where;
        }
        for (std::int64_t d = 0; d < dim; ++d) {
          const double want = count == 0 ? 0.0 : sum / count;
          EXPECT_NEAR(out.data<float>()[(t * hq + h) * dim + d], want, 1e-4 * (1 + want)) << where;
        }
      }
    }
  }
}

TEST(AttentionVarlen, CausalIsAlignedBottomRight) {
  // sq < sk: query i sees keys 0 .. i + sk - sq (the whole prefix); sq > sk: the first sq - sk
  // queries see no key (out 0, lse -inf).
  expect_mask({}, {3, 6, 4}, {8, 2, 4});
  expect_mask({.causal = false}, {3, 6, 4}, {8, 2, 4});
}

TEST(AttentionVarlen, WindowCountsKeysLeftOfTheDiagonal) {
  expect_mask({.window_left = 2}, {3, 6, 4}, {8, 2, 4});
  expect_mask({.window_left = 0}, {5}, {5});
  expect_mask({.causal = false, .window_left = 1}, {3, 6, 4}, {8, 2, 4});
}

TEST(AttentionVarlen, EmptySequencesAndQueriesThatSeeNoKey) {
  // An empty sequence (no queries, no keys), queries over no keys (lse -inf, out 0), keys with no
  // queries.
  expect_mask({}, {0, 3, 2, 0}, {0, 0, 4, 5});
  expect_mask({.causal = false}, {0, 3, 2, 0}, {0, 0, 4, 5});
  Problem p{.q_lengths = {0, 3, 2, 0}, .k_lengths = {0, 0, 4, 5}, .dtype = DType::bfloat16};
  expect_matches_reference({}, p, "empty sequences");
  // No sequence at all, and no tokens.
  GroupedQueryAttentionVarlenFwdOp op;
  const auto [out, lse] =
      op(Tensor::empty({0, 4, 8}, DType::float16), Tensor::empty({0, 2, 8}, DType::float16),
         Tensor::empty({0, 2, 8}, DType::float16), int32_values({0}), int32_values({0}));
  EXPECT_EQ(out.sizes(), (Sizes{0, 4, 8}));
  EXPECT_EQ(lse.sizes(), (Sizes{4, 0}));
}

TEST(AttentionVarlen, LseIsTheLogSumExpOfTheScaledCappedScores) {
  // One query, one key per head group: lse = the score itself, checked in closed form.
  const Tensor q = Tensor::full({1, 2, 4}, 1.0, DType::float32);
  const Tensor k = Tensor::full({1, 1, 4}, 2.0, DType::float32);  // q . k = 8
  const Tensor v = Tensor::randn({1, 1, 4}, DType::float32, 1);
  const Tensor cu = int32_values({0, 1});
  GroupedQueryAttentionVarlenFwdOp plain;
  EXPECT_NEAR(std::get<1>(plain(q, k, v, cu, cu)).data<float>()[0], 8.0 / 2.0, 1e-6);  // 1/sqrt(4)
  GroupedQueryAttentionVarlenFwdOp scaled({.softmax_scale = 0.25});
  EXPECT_NEAR(std::get<1>(scaled(q, k, v, cu, cu)).data<float>()[1], 2.0, 1e-6);
  GroupedQueryAttentionVarlenFwdOp capped({.softmax_scale = 1.0, .softcap = 5.0});
  EXPECT_NEAR(std::get<1>(capped(q, k, v, cu, cu)).data<float>()[0], 5.0 * std::tanh(8.0 / 5.0),
              1e-6);
  // out is v itself (one key, weight 1).
  expect_close(std::get<0>(plain(q, k, v, cu, cu)).slice(1, 0, 1), v, "out = v");
}

// Splits keys into two disjoint sets, runs the op on each, merges, compares with the op on all.
TEST(AttentionVarlen, MergeOfTwoDisjointKeySetsEqualsTheWhole) {
  const std::vector<std::int32_t> q_lengths{4, 5, 3, 6};
  const std::vector<std::int32_t> k_lengths{9, 5, 7, 6};
  for (const DType dtype : {DType::float32, DType::bfloat16}) {
    const Problem p{.q_lengths = q_lengths, .k_lengths = k_lengths, .dtype = dtype, .seed = 5};
    const std::vector<Tensor> in = p.inputs();
    const auto cu_k = p.cu_k();
    AttentionMergeStatesFwdOp merge;

    // Non-causal: the even and the odd keys of every sequence.
    {
      std::vector<std::int32_t> even_lengths, odd_lengths;
      std::vector<std::int64_t> even_rows, odd_rows;
      for (std::size_t b = 0; b < k_lengths.size(); ++b) {
        even_lengths.push_back((k_lengths[b] + 1) / 2);
        odd_lengths.push_back(k_lengths[b] / 2);
        for (std::int32_t j = 0; j < k_lengths[b]; ++j)
          (j % 2 == 0 ? even_rows : odd_rows).push_back(cu_k[b] + j);
      }
      const auto rows_of = [](const Tensor& t, const std::vector<std::int64_t>& rows) {
        return gather_rows(t, rows);
      };
      GroupedQueryAttentionVarlenFwdOp op({.causal = false});
      const auto [out_a, lse_a] = op(in[0], rows_of(in[1], even_rows), rows_of(in[2], even_rows),
                                     in[3], int32_values(offsets_of(even_lengths)));
      const auto [out_b, lse_b] = op(in[0], rows_of(in[1], odd_rows), rows_of(in[2], odd_rows),
                                     in[3], int32_values(offsets_of(odd_lengths)));
      const auto [whole, whole_lse] = run(op, in);
      const auto [merged, merged_lse] = merge(out_a, lse_a, out_b, lse_b);
      expect_close(merged, whole, std::string(dtype_name(dtype)) + " non-causal merged out");
      expect_close(merged_lse, whole_lse, "non-causal merged lse");
    }
    // Causal (chunked prefill): the prefix every query sees (non-causal) and the sequence's own
    // last sq keys (causal, square); sequence 3 has no prefix (its lse_a is -inf).
    {
      std::vector<std::int32_t> prefix_lengths;
      std::vector<std::int64_t> prefix_rows, own_rows;
      for (std::size_t b = 0; b < k_lengths.size(); ++b) {
        prefix_lengths.push_back(k_lengths[b] - q_lengths[b]);
        for (std::int32_t j = 0; j < k_lengths[b]; ++j)
          (j < prefix_lengths.back() ? prefix_rows : own_rows).push_back(cu_k[b] + j);
      }
      GroupedQueryAttentionVarlenFwdOp prefix_op({.causal = false});
      GroupedQueryAttentionVarlenFwdOp causal_op;
      const auto [out_a, lse_a] =
          prefix_op(in[0], gather_rows(in[1], prefix_rows), gather_rows(in[2], prefix_rows), in[3],
                    int32_values(offsets_of(prefix_lengths)));
      EXPECT_EQ(lse_a.data<float>()[offsets_of(q_lengths)[3]], kNegInf);  // head 0
      const auto [out_b, lse_b] = causal_op(in[0], gather_rows(in[1], own_rows),
                                            gather_rows(in[2], own_rows), in[3], in[3]);
      const auto [whole, whole_lse] = run(causal_op, in);
      const auto [merged, merged_lse] = merge(out_a, lse_a, out_b, lse_b);
      expect_close(merged, whole, std::string(dtype_name(dtype)) + " causal merged out");
      expect_close(merged_lse, whole_lse, "causal merged lse");
    }
  }
}

TEST(AttentionVarlen, NonContiguousInputsAndOutBuffer) {
  // q, k and v as views of one fused projection [T, (Hq + 2 Hkv), D]; out a strided buffer.
  const std::int64_t t = 7, hq = 4, hkv = 2, dim = 8;
  const Tensor qkv = Tensor::randn({t, hq + 2 * hkv, dim}, DType::bfloat16, 2);
  const Tensor q = qkv.slice(1, 0, hq);
  const Tensor k = qkv.slice(1, hq, hq + hkv);
  const Tensor v = qkv.slice(1, hq + hkv, hq + 2 * hkv);
  ASSERT_FALSE(q.is_contiguous());
  const Tensor cu = int32_values({0, 3, 7});
  GroupedQueryAttentionVarlenFwdOp op;
  const Tensor wide = Tensor::zeros({t, hq, 2 * dim}, DType::bfloat16);
  const Tensor out = wide.slice(2, 0, dim);
  const auto [got, lse] = op(q, k, v, cu, cu, out);
  EXPECT_EQ(got.data_ptr(), out.data_ptr());  // the caller's buffer, returned as is
  const std::vector<Tensor> ref = testing_util::run_reference("GroupedQueryAttentionVarlenFwdOp",
                                                              {q, k, v, cu, cu}, op.param_values());
  expect_close(out, ref[0], "strided out");
  expect_close(lse, ref[1], "lse");
  expect_close(wide.slice(2, dim, 2 * dim), Tensor::zeros({t, hq, dim}, DType::float32),
               "the rest of the buffer untouched");
}

// Visible pairs of one sequence, counted one by one.
std::int64_t brute_pairs(std::int64_t sq, std::int64_t sk, bool causal, std::int64_t window) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < sq; ++i)
    for (std::int64_t j = 0; j < sk; ++j) n += sees(i, j, sq, sk, causal, window) ? 1 : 0;
  return n;
}

TEST(AttentionVarlen, RooflineCountsTheVisiblePairsOfEqualSequences) {
  const std::int64_t hq = 4, hkv = 2, dim = 8, batch = 3;
  for (const bool causal : {true, false}) {
    for (const std::int64_t window : {-1, 0, 1, 3, 7, 40}) {
      for (const auto& [sq, sk] : {std::pair{5, 5}, std::pair{3, 9}, std::pair{9, 3},
                                   std::pair{1, 6}, std::pair{4, 0}, std::pair{0, 4}}) {
        GroupedQueryAttentionVarlenFwdOp op({.causal = causal, .window_left = window});
        std::vector<std::int32_t> cu_q, cu_k;
        for (std::int64_t b = 0; b <= batch; ++b) {
          cu_q.push_back(static_cast<std::int32_t>(b * sq));
          cu_k.push_back(static_cast<std::int32_t>(b * sk));
        }
        op(Tensor::randn({batch * sq, hq, dim}, DType::float16, 1),
           Tensor::randn({batch * sk, hkv, dim}, DType::float16, 2),
           Tensor::randn({batch * sk, hkv, dim}, DType::float16, 3), int32_values(cu_q),
           int32_values(cu_k));
        const Roofline r = op.eval_roofline();
        EXPECT_EQ(r.flops, 4.0 * dim * hq * batch * brute_pairs(sq, sk, causal, window))
            << "causal " << causal << " window " << window << " sq " << sq << " sk " << sk;
        // q, k, v, both cu_seqlens read; out and lse written.
        const double bytes = 2.0 * (batch * sq * hq * dim) + 2 * 2.0 * (batch * sk * hkv * dim) +
                             2 * 4.0 * (batch + 1) + 2.0 * (batch * sq * hq * dim) +
                             4.0 * hq * batch * sq;
        EXPECT_EQ(r.bytes, bytes);
      }
    }
  }
}

TEST(AttentionVarlen, RooflineEvaluatesBeforeAnyCallSolvedItsLets) {
  // tileops bench estimates a case from a record of the workload row's values alone: the lets the
  // roofline reads are unsolved there, and recomputed.
  const OpSchema& schema = *find_schema("GroupedQueryAttentionVarlenFwdOp");
  const std::map<std::string, Value> row = {
      {"Tq", std::int64_t{4096}},       {"Tk", std::int64_t{32768}},
      {"Hq", std::int64_t{32}},         {"Hkv", std::int64_t{8}},
      {"D", std::int64_t{128}},         {"B", std::int64_t{8}},
      {"T", DType::bfloat16},           {"causal", true},
      {"window_left", std::int64_t{-1}}};
  SignatureCall call(&schema);
  for (const auto& index : schema.indices) {
    const auto it = row.find(std::string(index.name));
    call.indices.push_back(it != row.end() ? it->second : Value());
  }
  // 512 queries over 4096 keys, bottom-right: query i sees 3584 + i + 1 keys.
  const double pairs = 512.0 * 3584 + 512.0 * 513 / 2;
  EXPECT_EQ(schema.eval_roofline(call).flops, 4.0 * 128 * 32 * 8 * pairs);
}

TEST(AttentionVarlen, SignatureRulesByTypeAndMessage) {
  const Tensor cu = int32_values({0, 2, 5});
  const Tensor q = Tensor::randn({5, 6, 8}, DType::bfloat16, 1);
  const Tensor k = Tensor::randn({5, 4, 8}, DType::bfloat16, 2);
  GroupedQueryAttentionVarlenFwdOp op;
  // Hq % Hkv == 0
  EXPECT_THROW(op(q, k, k, cu, cu), SignatureError);
  EXPECT_THAT(message_of([&] { op(q, k, k, cu, cu); }), HasSubstr("Hq % Hkv == 0"));
  const Tensor k2 = Tensor::randn({5, 2, 8}, DType::bfloat16, 2);
  EXPECT_NO_THROW(op(q, k2, k2, cu, cu));
  // cu_seqlens int32
  const Tensor cu64 = cu.to(DType::int64);
  EXPECT_THROW(op(q, k2, k2, cu64, cu), SignatureError);
  EXPECT_THAT(message_of([&] { op(q, k2, k2, cu64, cu); }), HasSubstr("cu_seqlens_q"));
  EXPECT_THAT(message_of([&] { op(q, k2, k2, cu, cu64); }), HasSubstr("cu_seqlens_k"));
  // the same batch in both offsets
  EXPECT_THAT(message_of([&] {
                op(q, k2, k2, cu, int32_values({0, 5}));
              }),
              HasSubstr("cu_seqlens_k"));
  // dtypes equal
  EXPECT_THROW(op(q, k2.to(DType::float16), k2, cu, cu), SignatureError);
  EXPECT_THAT(message_of([&] { op(q, k2, k2.to(DType::float32), cu, cu); }), HasSubstr("'v'"));
  // k and v of one shape, the head dims of q and k equal
  EXPECT_THAT(message_of([&] { op(q, k2, k2.slice(0, 0, 4), cu, cu); }), HasSubstr("'v'"));
  EXPECT_THAT(message_of([&] { op(q, k2.slice(2, 0, 4).contiguous(), k2, cu, cu); }),
              HasSubstr("'k'"));
  // out buffer of the wrong shape
  EXPECT_THROW(op(q, k2, k2, cu, cu, Tensor::empty({5, 6, 4}, DType::bfloat16)), SignatureError);
  // parameter rules, at construction
  EXPECT_THAT(message_of([] { GroupedQueryAttentionVarlenFwdOp({.window_left = -2}); }),
              HasSubstr("window_left >= -1"));
  EXPECT_THROW(GroupedQueryAttentionVarlenFwdOp({.softcap = -1.0}), SignatureError);
  EXPECT_THAT(message_of([&] {
                op(Tensor::empty({5, 6, 0}, DType::bfloat16),
                   Tensor::empty({5, 2, 0}, DType::bfloat16),
                   Tensor::empty({5, 2, 0}, DType::bfloat16), cu, cu);
              }),
              HasSubstr("D >= 1"));
}

TEST(AttentionVarlen, OffsetContentsAreCheckedOnTheCpu) {
  const Tensor q = Tensor::randn({5, 2, 8}, DType::float16, 1);
  const Tensor k = Tensor::randn({6, 1, 8}, DType::float16, 2);
  GroupedQueryAttentionVarlenFwdOp op;
  const Tensor good_k = int32_values({0, 4, 6});
  const auto message = [&](std::vector<std::int32_t> cu_q, std::vector<std::int32_t> cu_k) {
    return message_of([&] { op(q, k, k, int32_values(cu_q), int32_values(cu_k)); });
  };
  EXPECT_THROW(op(q, k, k, int32_values({0, 3, 2, 5}), int32_values({0, 1, 2, 6})), SignatureError);
  EXPECT_EQ(message({0, 3, 2, 5}, {0, 1, 2, 6}),
            "GroupedQueryAttentionVarlenFwdOp: cu_seqlens_q[2] = 2 breaks 0 = cu_seqlens_q[0] <= "
            "... <= cu_seqlens_q[3] = 5 (Tq, the tokens of q)");
  EXPECT_THAT(message({0, 2, 4}, {0, 4, 6}), HasSubstr("cu_seqlens_q[2] = 4 breaks"));  // != Tq
  EXPECT_THAT(message({1, 2, 5}, {0, 4, 6}), HasSubstr("cu_seqlens_q[0] = 1 breaks"));
  EXPECT_THAT(message({0, 7, 5}, {0, 4, 6}), HasSubstr("cu_seqlens_q[1] = 7 breaks"));  // > Tq
  EXPECT_EQ(message({0, 2, 5}, {0, 4, 7}),
            "GroupedQueryAttentionVarlenFwdOp: cu_seqlens_k[2] = 7 breaks 0 = cu_seqlens_k[0] <= "
            "... <= cu_seqlens_k[2] = 6 (Tk, the tokens of k)");
  EXPECT_THAT(message({0, 2, 5}, {0, -1, 6}), HasSubstr("cu_seqlens_k[1] = -1 breaks"));
  EXPECT_NO_THROW(op(q, k, k, int32_values({0, 2, 5}), good_k));
}

TEST(AttentionVarlen, ScoresResolveTheDefaultScale) {
  GroupedQueryAttentionVarlenFwdOp op({.causal = false, .window_left = 5, .softcap = 30.0});
  const AttentionScores s = op.scores_for(64);
  EXPECT_FLOAT_EQ(s.softmax_scale, 0.125f);
  EXPECT_FALSE(s.causal);
  EXPECT_EQ(s.window_left, 5);
  EXPECT_FLOAT_EQ(s.softcap, 30.0f);
  GroupedQueryAttentionVarlenFwdOp given({.softmax_scale = 0.3});
  EXPECT_FLOAT_EQ(given.scores_for(64).softmax_scale, 0.3f);
}

#if TILEOPS_WITH_CUDA
TEST(AttentionVarlen, CudaSelectionFollowsQueriesPerSequence) {
  // The op's kernel table on an H200's facts (no device read): decode-shaped calls (at most 16
  // query rows per sequence) take the split-KV kernel over contiguous keys (preferred over the
  // varlen kernel), prefill-shaped ones the varlen kernel, which the split one refuses with its
  // reason.
  KernelTable table;
  attention_test::install_kernels_of(table, "GroupedQueryAttentionVarlenFwdOp");
  AttentionVarlenCall call = attention_test::h200_call<AttentionVarlenCall>();
  const auto key = [&](std::int64_t queries) {
    AttentionVarlenCall q = call;
    q.queries_per_sequence = queries;
    return table.key_for<AttentionVarlenInterface>(q);
  };
  EXPECT_EQ(key(4096), "attention_varlen_cuda");     // prefill 4 x 4096
  EXPECT_EQ(key(5), "attention_varlen_cuda");        // 20 rows of a group of 4
  EXPECT_EQ(key(4), "attention_varlen_split_cuda");  // 16 rows: decode-shaped
  EXPECT_EQ(key(1), "attention_varlen_split_cuda");
  EXPECT_EQ(key(0), "attention_varlen_split_cuda");  // no sequences
  call.heads_kv = 32;                                // MHA: one head per KV head
  EXPECT_EQ(key(16), "attention_varlen_split_cuda");
  EXPECT_EQ(key(17), "attention_varlen_cuda");
  call.heads_kv = 1;  // a group of 32: one query is already 32 rows
  EXPECT_EQ(key(1), "attention_varlen_cuda");
  call.heads_kv = 8;
  call.queries_per_sequence = 5;
  EXPECT_THAT(AttentionVarlenSplitCuda::refusal(call).value_or(""),
              HasSubstr("prefill-shaped: 20 query rows per sequence (5 queries x 4 heads per KV "
                        "head) is over 16"));
  call.queries_per_sequence = 1;
  EXPECT_EQ(AttentionVarlenSplitCuda::refusal(call), std::nullopt);
  call.head_dim = 96;  // neither kernel
  EXPECT_THAT(AttentionVarlenSplitCuda::refusal(call).value_or(""),
              HasSubstr("head_dim 96 is not 64, 128 or 256"));
  EXPECT_THROW(table.key_for<AttentionVarlenInterface>(call), DispatchError);
}
#endif

}  // namespace
}  // namespace tileops
