// The masked decode path on the CPU: MoEPrePermuteQuantFP8MaskedFwdOp holds the contiguous
// quantizing pre-permute's rows bit for bit in each expert's block (counts, inverse, the
// registered reference, SignatureError above max_m naming the expert, empty M, an expert map
// dropping pairs); MoEExpertMLPFP8MaskedFwdOp equals MoEExpertMLPFP8FwdOp row for row (and their
// references likewise); FusedMoEExpertsFwdOp / FusedMoEFwdOp take the masked stages by shape only
// and give the contiguous route's y bit for bit (every stage computes a row alike on the CPU).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "ops/moe_test_inputs.h"
#include "ops/ops_test_util.h"
#include "tileops/ops/moe.h"

namespace tileops {
namespace {

using testing::HasSubstr;
using testing_util::message_of;
using testing_util::run_reference;
using namespace moe_test;  // NOLINT: the tests' inputs

/// Row `r` of the [rows, cols] view of `t` (any element size) equals row `s` of `u`'s, by bytes.
bool same_row(const Tensor& t, std::int64_t r, const Tensor& u, std::int64_t s) {
  const std::int64_t cols = t.numel() / (t.size(0) * (t.dim() == 3 ? t.size(1) : 1));
  const auto bytes = static_cast<std::size_t>(cols) * element_size(t.dtype());
  const auto* a = static_cast<const std::uint8_t*>(t.data_ptr()) + r * bytes;
  const auto* b = static_cast<const std::uint8_t*>(u.data_ptr()) + s * bytes;
  return std::memcmp(a, b, bytes) == 0;
}

/// Whether `a` and `b` have the same shape and bytes.
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const auto bytes = static_cast<std::size_t>(a.numel()) * element_size(a.dtype());
  return bytes == 0 ||
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), bytes) == 0;
}

struct Masked {
  Tensor a, a_scales, counts, inverse;
};

/// The masked op's outputs checked against the contiguous op's on the same inputs: counts are
/// the offsets' differences, row r of expert e is contiguous row offsets[e] + r (codes and scales
/// bit for bit), inverse is e * max_m + rank within e, or -1 where the contiguous one is -1.
Masked expect_contiguous_rows(const Tensor& x, const Tensor& ids, const Tensor& map,
                              std::int64_t experts, std::int64_t max_m, std::int64_t group,
                              const std::string& what) {
  MoEPrePermuteQuantFP8MaskedFwdOp op(
      {.num_experts = experts, .max_m = max_m, .group_size = group});
  const auto [a, as, counts, inverse] = op(x, ids, map);
  MoEPrePermuteQuantFP8FwdOp contiguous({.num_experts = experts, .group_size = group});
  const auto [q, s, offsets, inv] = contiguous(x, ids, map);
  EXPECT_EQ(a.sizes(), (Sizes{experts, max_m, x.size(1)})) << what;
  EXPECT_EQ(as.sizes(), (Sizes{experts, max_m, x.size(1) / group})) << what;
  const std::vector<double> o = offsets.to_vector();
  for (std::int64_t e = 0; e < experts; ++e) {
    const auto count = static_cast<std::int64_t>(o[e + 1] - o[e]);
    EXPECT_EQ(counts.item_at({e}), static_cast<double>(count)) << what << " expert " << e;
    for (std::int64_t r = 0; r < count; ++r) {
      const auto row = static_cast<std::int64_t>(o[e]) + r;
      EXPECT_TRUE(same_row(a, e * max_m + r, q, row)) << what << " expert " << e << " row " << r;
      EXPECT_TRUE(same_row(as, e * max_m + r, s, row)) << what << " scales " << e << ", " << r;
    }
  }
  const std::vector<double> got = inverse.to_vector();
  const std::vector<double> ranks = inv.to_vector();
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (ranks[i] < 0) {
      EXPECT_EQ(got[i], -1.0) << what << " pair " << i;
      continue;
    }
    std::int64_t e = 0;
    while (!(o[e] <= ranks[i] && ranks[i] < o[e + 1])) ++e;
    EXPECT_EQ(got[i], static_cast<double>(e * max_m) + ranks[i] - o[e]) << what << " pair " << i;
  }
  // The registered reference: the same kept rows, counts and inverse (it writes 0 past counts).
  const auto ref =
      run_reference("MoEPrePermuteQuantFP8MaskedFwdOp", {x, ids, map}, op.param_values());
  EXPECT_EQ(counts.to_vector(), ref[2].to_vector()) << what;
  EXPECT_EQ(inverse.to_vector(), ref[3].to_vector()) << what;
  for (std::int64_t e = 0; e < experts; ++e) {
    for (std::int64_t r = 0; r < static_cast<std::int64_t>(o[e + 1] - o[e]); ++r) {
      EXPECT_TRUE(same_row(a, e * max_m + r, ref[0], e * max_m + r)) << what << " reference";
      EXPECT_TRUE(same_row(as, e * max_m + r, ref[1], e * max_m + r)) << what << " reference";
    }
  }
  return {a, as, counts, inverse};
}

TEST(MoEPrePermuteQuantFP8Masked, HoldsTheContiguousRowsBitForBit) {
  for (const DType dtype : {DType::bfloat16, DType::float16, DType::float32}) {
    for (const auto& [tokens, top_k, experts, hidden, group] :
         std::vector<std::tuple<int, int, int, int, int>>{
             {9, 2, 6, 256, 128}, {1, 1, 4, 128, 128}, {16, 4, 4, 96, 32}, {7, 3, 5, 48, 16}}) {
      const Tensor x = Tensor::randn({tokens, hidden}, dtype, 3 + tokens);
      const Tensor ids = distinct_ids(tokens, top_k, experts, 5 + tokens);
      const std::string what = x.str() + " k=" + std::to_string(top_k);
      expect_contiguous_rows(x, ids, Tensor(), experts, tokens, group, what);  // max_m = M
      expect_contiguous_rows(x, ids, Tensor(), experts, tokens + 3, group, what + " max_m+3");
    }
  }
}

TEST(MoEPrePermuteQuantFP8Masked, AnExpertMapDropsPairsToMinusOne) {
  // 8 global experts; this rank holds global 4..7 as local 0..3.
  const Tensor map = int_tensor({-1, -1, -1, -1, 0, 1, 2, 3});
  const Tensor x = Tensor::randn({6, 256}, DType::bfloat16, 8);
  const Tensor ids = distinct_ids(6, 3, 8, 9);
  const Masked m = expect_contiguous_rows(x, ids, map, 4, 6, 128, "mapped");
  int dropped = 0;
  for (const double v : m.inverse.to_vector()) dropped += v < 0 ? 1 : 0;
  EXPECT_GT(dropped, 0);  // the case drops pairs
  double kept = 0;
  for (const double c : m.counts.to_vector()) kept += c;
  EXPECT_EQ(kept + dropped, 18.0);
}

TEST(MoEPrePermuteQuantFP8Masked, ACountAboveMaxMIsASignatureErrorNamingTheExpert) {
  // Four tokens all routed to expert 2 (top-1): 4 rows for a layout of 3.
  const Tensor x = Tensor::randn({4, 128}, DType::bfloat16, 1);
  const Tensor ids = Tensor::full({4, 1}, 2.0, DType::int32);
  MoEPrePermuteQuantFP8MaskedFwdOp op({.num_experts = 3, .max_m = 3});
  EXPECT_THROW(op(x, ids), SignatureError);
  EXPECT_THAT(message_of([&] { op(x, ids); }),
              HasSubstr("MoEPrePermuteQuantFP8MaskedFwdOp: expert 2 receives 4 pairs, more than "
                        "max_m = 3 rows"));
  EXPECT_THROW(
      run_reference("MoEPrePermuteQuantFP8MaskedFwdOp", {x, ids, Tensor()}, op.param_values()),
      SignatureError);
  // Exactly max_m rows fit.
  MoEPrePermuteQuantFP8MaskedFwdOp fits({.num_experts = 3, .max_m = 4});
  EXPECT_EQ(std::get<2>(fits(x, ids)).to_vector(), (std::vector<double>{0, 0, 4}));
  // The id checks are the contiguous op's, naming this op.
  EXPECT_THAT(message_of([&] {
                op(x, Tensor::full({4, 1}, 5.0, DType::int32));
              }),
              HasSubstr("MoEPrePermuteQuantFP8MaskedFwdOp"));
}

TEST(MoEPrePermuteQuantFP8Masked, EmptyMWritesZeroCountsAndTheSignaturesShapes) {
  MoEPrePermuteQuantFP8MaskedFwdOp op({.num_experts = 5, .max_m = 2, .group_size = 64});
  const auto [a, as, counts, inverse] =
      op(Tensor::zeros({0, 128}, DType::bfloat16), Tensor::zeros({0, 3}, DType::int32));
  EXPECT_EQ(a.dtype(), DType::float8_e4m3fn);
  EXPECT_EQ(a.sizes(), (Sizes{5, 2, 128}));
  EXPECT_EQ(as.dtype(), DType::float32);
  EXPECT_EQ(as.sizes(), (Sizes{5, 2, 2}));
  EXPECT_EQ(counts.to_vector(), (std::vector<double>(5, 0.0)));
  EXPECT_EQ(inverse.sizes(), (Sizes{0, 3}));
  EXPECT_THAT(message_of([] { MoEPrePermuteQuantFP8MaskedFwdOp({.num_experts = 4, .max_m = 0}); }),
              HasSubstr("shape rule 'max_m >= 1' does not hold"));
  EXPECT_THAT(message_of([&] {
                op(Tensor::zeros({2, 96}, DType::bfloat16), Tensor::zeros({2, 1}, DType::int32));
              }),
              HasSubstr("shape rule 'H % group_size == 0' does not hold"));
}

/// FP8 weights [E, N, K] and their 128 x 128 block scales near 1 / sqrt(K).
std::pair<Tensor, Tensor> fp8_weight(std::int64_t e, std::int64_t n, std::int64_t k,
                                     std::uint64_t seed) {
  const Tensor s =
      Tensor::rand({e, (n + 127) / 128, (k + 127) / 128}, DType::float32, seed, Device::cpu(),
                   0.5 / std::sqrt(double(k)), 1.0 / std::sqrt(double(k)));
  return {Tensor::randn({e, n, k}, DType::float8_e4m3fn, seed + 1), s};
}

TEST(MoEExpertMLPFP8Masked, EqualsTheContiguousMLPRowForRow) {
  const std::int64_t experts = 5;
  const std::int64_t hidden = 256;
  const std::int64_t f = 128;
  const std::int64_t tokens = 7;
  const auto [w13, s13] = fp8_weight(experts, 2 * f, hidden, 11);
  const auto [w2, s2] = fp8_weight(experts, hidden, f, 13);
  const Tensor x = Tensor::randn({tokens, hidden}, DType::bfloat16, 15);
  const Tensor ids = distinct_ids(tokens, 2, experts - 1, 16);  // expert 4 gets no row
  MoEPrePermuteQuantFP8FwdOp contiguous({.num_experts = experts});
  const auto [q, s, offsets, inv] = contiguous(x, ids);
  MoEPrePermuteQuantFP8MaskedFwdOp masked({.num_experts = experts, .max_m = tokens});
  const auto [a, as, counts, inverse] = masked(x, ids);
  for (const std::string act : {"silu_and_mul", "gelu_and_mul"}) {
    const Tensor want = MoEExpertMLPFP8FwdOp({.activation = act})(q, offsets, w13, w2, s13, s2, s);
    MoEExpertMLPFP8MaskedFwdOp op({.activation = act});
    const Tensor got = op(a, as, counts, w13, w2, s13, s2);
    ASSERT_EQ(got.sizes(), (Sizes{experts, tokens, hidden}));
    EXPECT_EQ(got.dtype(), DType::bfloat16);
    // The reference of each, in double: the same rows likewise.
    const Tensor ref = run_reference("MoEExpertMLPFP8MaskedFwdOp",
                                     {a, as, counts, w13, w2, s13, s2}, op.param_values())[0];
    const Tensor ref_want = run_reference("MoEExpertMLPFP8FwdOp", {q, offsets, w13, w2, s13, s2, s},
                                          {{"activation", act}})[0];
    const std::vector<double> o = offsets.to_vector();
    const Tensor zero = Tensor::zeros({1, hidden}, DType::bfloat16);
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto count = static_cast<std::int64_t>(o[e + 1] - o[e]);
      for (std::int64_t r = 0; r < tokens; ++r) {
        if (r < count) {
          const auto row = static_cast<std::int64_t>(o[e]) + r;
          EXPECT_TRUE(same_row(got, e * tokens + r, want, row)) << act << " " << e << ", " << r;
          EXPECT_TRUE(same_row(ref, e * tokens + r, ref_want, row)) << act << " reference";
        } else {  // past the count: the masked GEMM's zeros, whatever the unwritten input holds
          EXPECT_TRUE(same_row(got, e * tokens + r, zero, 0)) << act << " " << e << ", " << r;
        }
      }
    }
  }
}

struct Layer {
  Tensor x, weights, ids, w13, w2, s13, s2;
};

Layer layer(std::int64_t tokens, std::int64_t top_k, std::int64_t experts, std::uint64_t seed) {
  const auto [w13, s13] = fp8_weight(experts, 256, 256, seed);
  const auto [w2, s2] = fp8_weight(experts, 256, 128, seed + 2);
  return {Tensor::randn({tokens, 256}, DType::bfloat16, seed + 4),
          Tensor::rand({tokens, top_k}, DType::float32, seed + 5),
          distinct_ids(tokens, top_k, experts, seed + 6),
          w13,
          w2,
          s13,
          s2};
}

std::vector<std::string> held_stages(const Op& op) {
  std::vector<std::string> names;
  for (const Op* d : op.held_delegates()) names.emplace_back(d->name());
  return names;
}

TEST(FusedMoEExpertsMasked, TheMaskedRouteGivesTheContiguousYBitForBit) {
  for (const auto& [tokens, top_k, experts] :
       std::vector<std::tuple<int, int, int>>{{6, 2, 8}, {3, 4, 4}, {1, 1, 8}}) {
    const Layer l = layer(tokens, top_k, experts, 21 + tokens);
    FusedMoEExpertsFwdOp contiguous({});
    const Tensor want = contiguous(l.x, l.weights, l.ids, l.w13, l.w2, Tensor(), l.s13, l.s2);
    // masked_max_rows = ceil(M K / E): the smallest threshold that takes the masked route.
    const std::int64_t rows = (tokens * top_k + experts - 1) / experts;
    FusedMoEExpertsFwdOp masked({.masked_max_rows = rows});
    // The MLPs are held at construction.
    EXPECT_EQ(held_stages(masked),
              (std::vector<std::string>{"MoEExpertMLPFwdOp", "MoEExpertMLPFP8FwdOp",
                                        "MoEExpertMLPFP8MaskedFwdOp", "MoEPostPermuteFwdOp"}));
    const Tensor got = masked(l.x, l.weights, l.ids, l.w13, l.w2, Tensor(), l.s13, l.s2);
    EXPECT_TRUE(same_bits(got, want)) << tokens << "x" << top_k;
    EXPECT_EQ(held_stages(masked),
              (std::vector<std::string>{"MoEPrePermuteQuantFP8MaskedFwdOp", "MoEExpertMLPFwdOp",
                                        "MoEExpertMLPFP8FwdOp", "MoEExpertMLPFP8MaskedFwdOp",
                                        "MoEPostPermuteFwdOp"}));
    // One row less than the mean: the contiguous route.
    if (rows > 1) {
      FusedMoEExpertsFwdOp below({.masked_max_rows = rows - 1});
      EXPECT_TRUE(
          same_bits(below(l.x, l.weights, l.ids, l.w13, l.w2, Tensor(), l.s13, l.s2), want));
      EXPECT_EQ(held_stages(below),
                (std::vector<std::string>{"MoEPrePermuteQuantFP8FwdOp", "MoEExpertMLPFwdOp",
                                          "MoEExpertMLPFP8FwdOp", "MoEExpertMLPFP8MaskedFwdOp",
                                          "MoEPostPermuteFwdOp"}));
    }
  }
}

TEST(FusedMoEExpertsMasked, AnExpertMapAndBf16WeightsAndTheDefault) {
  // An expert map: pairs of other ranks' experts reach no row, as on the contiguous route.
  const Layer l = layer(5, 3, 4, 31);
  const Tensor map = int_tensor({-1, 0, -1, 1, -1, 2, -1, 3});
  const Tensor ids = distinct_ids(5, 3, 8, 33);
  const Tensor want = FusedMoEExpertsFwdOp({})(l.x, l.weights, ids, l.w13, l.w2, map, l.s13, l.s2);
  FusedMoEExpertsFwdOp masked({.masked_max_rows = 8});
  EXPECT_TRUE(same_bits(masked(l.x, l.weights, ids, l.w13, l.w2, map, l.s13, l.s2), want));
  EXPECT_EQ(held_stages(masked).front(), "MoEPrePermuteQuantFP8MaskedFwdOp");
  // bf16 weights never take it; the default (0) never does either.
  const Tensor w13 = weight({4, 256, 256}, DType::bfloat16, 34);
  const Tensor w2 = weight({4, 256, 128}, DType::bfloat16, 35);
  masked(l.x, l.weights, l.ids, w13, w2, Tensor(), Tensor(), Tensor());
  FusedMoEExpertsFwdOp by_default({});
  by_default(l.x, l.weights, l.ids, l.w13, l.w2, Tensor(), l.s13, l.s2);
  EXPECT_EQ(held_stages(by_default).front(), "MoEPrePermuteQuantFP8FwdOp");
  EXPECT_THAT(message_of([] { FusedMoEExpertsFwdOp({.masked_max_rows = -1}); }),
              HasSubstr("shape rule 'masked_max_rows >= 0' does not hold"));
}

TEST(FusedMoEExpertsMasked, FusedMoEPassesMaskedMaxRowsToItsExperts) {
  const Layer l = layer(4, 2, 8, 41);
  const Tensor logits = Tensor::randn({4, 8}, DType::float32, 42);
  FusedMoEFwdOp contiguous({.top_k = 2});
  const Tensor want = contiguous(l.x, logits, l.w13, l.w2, Tensor(), l.s13, l.s2);
  FusedMoEFwdOp masked({.top_k = 2, .masked_max_rows = 1});
  EXPECT_TRUE(same_bits(masked(l.x, logits, l.w13, l.w2, Tensor(), l.s13, l.s2), want));
  const Op* experts = masked.held_delegates()[1];
  EXPECT_EQ(std::get<std::int64_t>(experts->param_values().at("masked_max_rows")), 1);
  EXPECT_EQ(held_stages(*experts).front(), "MoEPrePermuteQuantFP8MaskedFwdOp");
  // An injected experts keeps its own value; a different explicit one is a UsageError.
  auto injected =
      std::make_shared<FusedMoEExpertsFwdOp>(FusedMoEExpertsFwdOp::Params{.masked_max_rows = 3});
  FusedMoEFwdOp with({.top_k = 2}, {}, injected);
  EXPECT_EQ(std::get<std::int64_t>(with.param_values().at("masked_max_rows")), 3);
  EXPECT_THROW(FusedMoEFwdOp({.top_k = 2, .masked_max_rows = 2}, {}, injected), UsageError);
  EXPECT_THAT(
      message_of([&] { FusedMoEFwdOp({.top_k = 2, .masked_max_rows = 2}, {}, injected); }),
      HasSubstr("masked_max_rows 2 disagrees with the injected experts' masked_max_rows 3"));
}

}  // namespace
}  // namespace tileops
