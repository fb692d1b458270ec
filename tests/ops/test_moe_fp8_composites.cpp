// The FP8 expert path of the MoE composites on the CPU: MoEExpertMLPFP8FwdOp, and
// FusedMoEExpertsFwdOp / FusedMoEFwdOp selecting it by the weights' dtype. Each is checked
// bit for bit against its sub-ops run by hand (the wiring), and against its double-precision
// reference within the per-element bound of fp8_moe_bound.h (several experts, one with no token,
// top-k 2 to 8, grouped routing on and off, an expert map); the signature's errors by type and
// message.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ops/fp8_moe_bound.h"
#include "ops/moe_test_inputs.h"
#include "ops/ops_test_util.h"
#include "tileops/ops/moe.h"
#include "tileops/ops/quant.h"

namespace tileops {
namespace {

using testing::HasSubstr;
using testing_util::message_of;
using testing_util::run_reference;
using namespace moe_test;  // NOLINT: the tests' inputs
namespace bound = fp8_moe_bound;

/// FP8 expert weights [E, N, K] (e4m3 of randn) and their 128 x 128 block scales 2^i * [1, 2)
/// / sqrt(K), i in [-3, 3] per block: a scale applied to the wrong block misses by far more than
/// the bound.
struct FP8Weight {
  Tensor w;
  Tensor scales;
};

FP8Weight fp8_weight(std::int64_t experts, std::int64_t n, std::int64_t k, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(-3, 3);
  const std::int64_t nb = (n + 127) / 128;
  const std::int64_t kb = (k + 127) / 128;
  Tensor s = Tensor::empty({experts, nb, kb}, DType::float32);
  for (std::int64_t i = 0; i < s.numel(); ++i) {
    s.data<float>()[i] = static_cast<float>(std::ldexp(mantissa(rng), exponent(rng)) /
                                            std::sqrt(static_cast<double>(k)));
  }
  return {Tensor::randn({experts, n, k}, DType::float8_e4m3fn, seed + 1), s};
}

struct FP8Layer {
  std::int64_t experts, hidden, f;
  FP8Weight w13, w2;
};

FP8Layer fp8_layer(std::int64_t experts, std::int64_t hidden, std::int64_t f, unsigned seed) {
  return {experts, hidden, f, fp8_weight(experts, 2 * f, hidden, seed),
          fp8_weight(experts, hidden, f, seed + 7)};
}

/// x quantized as both the op and the reference quantize it (1 x 128), then dequantized: row t.
std::vector<std::vector<double>> quantized_rows(const Tensor& x) {
  const auto q = run_reference("PerTokenGroupQuantFP8FwdOp", {x},
                               {{"group_size", std::int64_t{128}}, {"eps", bound::kEps}});
  const std::vector<double> qv = q[0].to_vector();
  const std::vector<double> sv = q[1].to_vector();
  const std::int64_t hidden = x.size(1);
  std::vector<std::vector<double>> rows(static_cast<std::size_t>(x.size(0)));
  for (std::int64_t t = 0; t < x.size(0); ++t) {
    for (std::int64_t i = 0; i < hidden; ++i) {
      rows[t].push_back(qv[t * hidden + i] * sv[t * (hidden / 128) + i / 128]);
    }
  }
  return rows;
}

/// How many elements of `t` lie outside their intervals.
int outside(const Tensor& t, const std::vector<std::vector<bound::Interval>>& intervals) {
  const std::vector<double> v = t.to_vector();
  const std::int64_t cols = t.size(1);
  int count = 0;
  for (std::int64_t r = 0; r < t.size(0); ++r) {
    for (std::int64_t c = 0; c < cols; ++c)
      count += intervals[r][c].contains(v[r * cols + c]) ? 0 : 1;
  }
  return count;
}

/// Expects the op's output `got` and the reference `ref` (rounded to bfloat16 as the op's last
/// stage rounds) both inside the derived intervals, so |got - ref| <= the interval's width plus
/// that rounding: the tolerance per element; reports the first misses.
/// Also the bench's check of this result (bfloat16's tolerance_for), which the derived bound
/// does not imply: where float32 errors could flip an e4m3 rounding of h, the bound allows the
/// flip in every term at once, which makes it wide (about a tenth of |y| at the median here).
void expect_within(const Tensor& got, const Tensor& ref,
                   const std::vector<std::vector<bound::Interval>>& intervals,
                   const std::string& what) {
  const std::vector<double> g = got.to_vector();
  const std::vector<double> r = ref.to_vector();
  const std::int64_t cols = got.size(1);
  ASSERT_EQ(static_cast<std::int64_t>(intervals.size()), got.size(0)) << what;
  int misses = 0;
  for (std::int64_t t = 0; t < got.size(0) && misses < 8; ++t) {
    for (std::int64_t c = 0; c < cols && misses < 8; ++c) {
      const bound::Interval& i = intervals[t][c];
      const double gv = g[t * cols + c];
      const double rv = r[t * cols + c];
      // The references hand over their last stage unrounded (float32 of double).
      const double rounded = bound::to_bf16(rv);
      if (!i.contains(gv) || !i.contains(rounded) ||
          !(std::fabs(gv - rv) <= i.width() + std::fabs(rv - rounded))) {
        ++misses;
        ADD_FAILURE() << what << " [" << t << ", " << c << "]: op " << gv << ", reference " << rv
                      << ", interval [" << i.lo << ", " << i.hi << "]";
      }
    }
  }
  testing_util::expect_close(got, ref, what);
}

/// The intervals of the FP8 fused experts' output: per token, the pairs whose local expert is
/// in [0, E) combined with their weights (intervals of relative half-width `weight_error`).
std::vector<std::vector<bound::Interval>> experts_intervals(
    const Tensor& x, const std::vector<double>& weights, const std::vector<double>& ids,
    const std::vector<double>& map, std::int64_t top_k, const bound::Experts& w,
    double weight_error) {
  const auto xq = quantized_rows(x);
  std::vector<std::vector<bound::Interval>> out;
  for (std::int64_t t = 0; t < x.size(0); ++t) {
    std::vector<bound::Interval> wk;
    std::vector<std::vector<bound::Interval>> rows;
    for (std::int64_t k = 0; k < top_k; ++k) {
      const auto g = static_cast<std::int64_t>(ids[t * top_k + k]);
      const std::int64_t e = map.empty() ? g : static_cast<std::int64_t>(map[g]);
      if (e < 0) continue;  // served by another rank
      const double wv = weights[t * top_k + k];
      const double d = weight_error * std::fabs(wv);
      wk.push_back({wv - d, wv + d});
      rows.push_back(bound::mlp_row(xq[t], e, w));
    }
    out.push_back(bound::combine(wk, rows, w.hidden));
  }
  return out;
}

// ---- MoEExpertMLPFP8FwdOp ----------------------------------------------------------------------

TEST(MoEExpertMLPFP8, IsItsSubOpsBitForBitAndFilesEveryStage) {
  const FP8Layer l = fp8_layer(3, 256, 128, 1);
  const Tensor x = Tensor::randn({10, 256}, DType::bfloat16, 2);
  const Tensor off = offsets_of({4, 0, 5});  // expert 1 has no row; row 9 is outside
  MoEExpertMLPFP8FwdOp op({.activation = "silu_and_mul"});
  const Tensor y = op(x, off, l.w13.w, l.w2.w, l.w13.scales, l.w2.scales);
  ASSERT_EQ(y.dtype(), DType::bfloat16);
  ASSERT_EQ(y.sizes(), (Sizes{10, 256}));

  PerTokenGroupQuantFP8FwdOp quant({.group_size = 128});
  MoEGroupedGemmFP8FwdOp gate_up({.activation = "silu_and_mul"});
  MoEGroupedGemmFP8FwdOp down(MoEGroupedGemmFP8FwdOp::Params{});
  const auto [xq, xs] = quant(x);
  const Tensor h = gate_up(xq, xs, off, l.w13.w, l.w13.scales);
  const auto [hq, hs] = quant(h);
  EXPECT_EQ(y.to_vector(), down(hq, hs, off, l.w2.w, l.w2.scales).to_vector());

  const auto call = op.last_call();
  for (const char* stage : {"quantize_x", "gate_up", "quantize_h", "down"}) {
    EXPECT_EQ(call->stage(stage).size(), 1u) << stage;
  }
  EXPECT_EQ(call->stage("gate_up")[0]->dim("N"), 256);  // 2F: gate and up together
  EXPECT_EQ(call->stage("quantize_h")[0]->dim("K"), 128);
  EXPECT_EQ(op.roof_key(), "tensor_core.fp8");
  const auto held = op.held_delegates();
  ASSERT_EQ(held.size(), 4u);
  EXPECT_EQ(std::get<std::int64_t>(held[0]->param_values().at("group_size")), 128);
  EXPECT_EQ(std::get<std::string>(held[1]->param_values().at("activation")), "silu_and_mul");
  EXPECT_EQ(std::get<std::int64_t>(held[1]->param_values().at("block_k")), 128);
  EXPECT_EQ(std::get<std::string>(held[3]->param_values().at("activation")), "none");
}

TEST(MoEExpertMLPFP8, QuantizedRowsSkipQuantizeXAndGiveTheSameY) {
  const FP8Layer l = fp8_layer(3, 256, 128, 51);
  const Tensor x = Tensor::randn({9, 256}, DType::bfloat16, 52);
  const Tensor off = offsets_of({3, 0, 5});  // expert 1 has no row; row 8 is outside
  MoEExpertMLPFP8FwdOp op({.activation = "silu_and_mul"});
  const Tensor from_bf16 = op(x, off, l.w13.w, l.w2.w, l.w13.scales, l.w2.scales);
  PerTokenGroupQuantFP8FwdOp quant({.group_size = 128});
  const auto [xq, xs] = quant(x);
  const Tensor y = op(xq, off, l.w13.w, l.w2.w, l.w13.scales, l.w2.scales, xs);
  EXPECT_EQ(y.to_vector(), from_bf16.to_vector());
  const auto call = op.last_call();
  EXPECT_TRUE(call->stage("quantize_x").empty());
  for (const char* stage : {"gate_up", "quantize_h", "down"}) {
    EXPECT_EQ(call->stage(stage).size(), 1u) << stage;
  }
  // The reference takes the rows as given too.
  const std::vector<Tensor> in{xq, off, l.w13.w, l.w2.w, l.w13.scales, l.w2.scales, xs};
  const Tensor ref = run_reference("MoEExpertMLPFP8FwdOp", in, op.param_values())[0];
  const Tensor ref_bf16 =
      run_reference("MoEExpertMLPFP8FwdOp", {x, off, l.w13.w, l.w2.w, l.w13.scales, l.w2.scales},
                    op.param_values())[0];
  EXPECT_EQ(ref.to_vector(), ref_bf16.to_vector());
}

TEST(MoEExpertMLPFP8, XScalesGoWithE4M3XOnly) {
  MoEExpertMLPFP8FwdOp op(MoEExpertMLPFP8FwdOp::Params{});
  const FP8Layer l = fp8_layer(2, 256, 128, 53);
  const Tensor off = offsets_of({2, 2});
  const Tensor x = Tensor::randn({4, 256}, DType::bfloat16, 54);
  const Tensor xs = Tensor::full({4, 2}, 1.0, DType::float32);
  EXPECT_THAT(message_of([&] {
                op(x.to(DType::float8_e4m3fn), off, l.w13.w, l.w2.w, l.w13.scales, l.w2.scales);
              }),
              HasSubstr("MoEExpertMLPFP8FwdOp: shape rule 'X != float8_e4m3fn or "
                        "present(x_scales)' does not hold"));
  EXPECT_THAT(message_of([&] { op(x, off, l.w13.w, l.w2.w, l.w13.scales, l.w2.scales, xs); }),
              HasSubstr("MoEExpertMLPFP8FwdOp: shape rule 'X == float8_e4m3fn or not "
                        "present(x_scales)' does not hold"));
  EXPECT_THAT(message_of([&] {
                op(x.to(DType::float8_e4m3fn), off, l.w13.w, l.w2.w, l.w13.scales, l.w2.scales,
                   Tensor::full({4, 1}, 1.0, DType::float32));
              }),
              HasSubstr("MoEExpertMLPFP8FwdOp: input 'x_scales'"));
  EXPECT_THROW(op(x.to(DType::float16), off, l.w13.w, l.w2.w, l.w13.scales, l.w2.scales),
               SignatureError);
}

TEST(MoEExpertMLPFP8, MatchesReferenceWithinTheDerivedBound) {
  for (const std::string act : {"silu_and_mul", "gelu_and_mul"}) {
    for (const auto& [counts, hidden, f] :
         std::vector<std::tuple<std::vector<std::int32_t>, int, int>>{
             {{3, 0, 6, 1}, 256, 128}, {{5}, 128, 256}, {{0, 2, 0, 2, 7}, 384, 128}}) {
      const FP8Layer l = fp8_layer(static_cast<std::int64_t>(counts.size()), hidden, f, 3);
      const std::int64_t rows = std::accumulate(counts.begin(), counts.end(), 0) + 1;
      const Tensor x = Tensor::randn({rows, hidden}, DType::bfloat16, 4);
      const Tensor off = offsets_of(counts);
      MoEExpertMLPFP8FwdOp op({.activation = act});
      const std::vector<Tensor> in{x, off, l.w13.w, l.w2.w, l.w13.scales, l.w2.scales};
      const Tensor y = op(in[0], in[1], in[2], in[3], in[4], in[5]);
      const Tensor ref = run_reference("MoEExpertMLPFP8FwdOp", in, op.param_values())[0];
      const bound::Experts w(l.w13.w, l.w13.scales, l.w2.w, l.w2.scales, act);
      const auto xq = quantized_rows(x);
      std::vector<std::vector<bound::Interval>> intervals;
      const std::vector<double> offsets = off.to_vector();
      for (std::int64_t r = 0; r < rows; ++r) {
        std::int64_t e = 0;
        while (e < l.experts && !(offsets[e] <= r && r < offsets[e + 1])) ++e;
        intervals.push_back(e < l.experts ? bound::mlp_row(xq[r], e, w)
                                          : std::vector<bound::Interval>(hidden));  // 0
      }
      expect_within(y, ref, intervals, act + " H=" + std::to_string(hidden));
    }
  }
}

TEST(MoEExpertMLPFP8, TheBoundSeesAScaleOffByTwoAndTheOtherActivation) {
  // The check above can fail: outputs of a miswired MLP fall outside the intervals.
  const FP8Layer l = fp8_layer(3, 256, 256, 40);
  const Tensor x = Tensor::randn({8, 256}, DType::bfloat16, 41);
  const Tensor off = offsets_of({3, 4, 1});
  const bound::Experts w(l.w13.w, l.w13.scales, l.w2.w, l.w2.scales, "silu_and_mul");
  const auto xq = quantized_rows(x);
  std::vector<std::vector<bound::Interval>> intervals;
  for (const std::int64_t e : {0, 0, 0, 1, 1, 1, 1, 2})
    intervals.push_back(bound::mlp_row(xq[intervals.size()], e, w));
  MoEExpertMLPFP8FwdOp silu({.activation = "silu_and_mul"});
  EXPECT_EQ(outside(silu(x, off, l.w13.w, l.w2.w, l.w13.scales, l.w2.scales), intervals), 0);
  const auto doubled = [](const Tensor& scales, std::vector<std::int64_t> at) {
    const Tensor t = scales.clone();
    t.set_at(at, 2 * t.item_at(at));
    return t;
  };
  // One 128 x 128 block of expert 1's up rows (w13 rows 256..383, columns 128..255).
  EXPECT_GT(outside(silu(x, off, l.w13.w, l.w2.w, doubled(l.w13.scales, {1, 2, 1}), l.w2.scales),
                    intervals),
            0);
  // One block of expert 2's down weights (its single row).
  EXPECT_GT(outside(silu(x, off, l.w13.w, l.w2.w, l.w13.scales, doubled(l.w2.scales, {2, 0, 1})),
                    intervals),
            0);
  MoEExpertMLPFP8FwdOp gelu({.activation = "gelu_and_mul"});
  EXPECT_GT(outside(gelu(x, off, l.w13.w, l.w2.w, l.w13.scales, l.w2.scales), intervals), 0);
}

// ---- FusedMoEExpertsFwdOp ----------------------------------------------------------------------

TEST(FusedMoEExpertsFP8, MatchesReferenceForTopKTwoToEightAndAnExpertMap) {
  const FP8Layer l = fp8_layer(10, 256, 128, 5);
  for (const std::int64_t top_k : {2, 5, 8}) {
    for (const bool mapped : {false, true}) {
      const std::int64_t tokens = 7;
      // Without a map: 10 experts, ids never 4 (an expert with no token). With a map: 14 global
      // experts, 10 of them here, 4 served elsewhere (-1).
      const std::int64_t global = mapped ? 14 : 10;
      Tensor ids = distinct_ids(tokens, top_k, global - 1, 6 + top_k);
      for (std::int64_t i = 0; i < ids.numel(); ++i) {
        auto& id = ids.data<std::int32_t>()[i];
        if (id >= 4) ++id;
      }
      const Tensor map =
          mapped ? int_tensor({0, 1, -1, 2, 3, 4, -1, 5, 6, -1, 7, 8, -1, 9}) : Tensor();
      const Tensor x = Tensor::randn({tokens, 256}, DType::bfloat16, 7);
      const Tensor tw = Tensor::rand({tokens, top_k}, DType::float32, 8, Device::cpu(), 0.0, 1.0);
      FusedMoEExpertsFwdOp op({.activation = "silu_and_mul"});
      const std::vector<Tensor> in{x, tw, ids, l.w13.w, l.w2.w, map, l.w13.scales, l.w2.scales};
      const Tensor y = op(in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]);
      const Tensor ref = run_reference("FusedMoEExpertsFwdOp", in, op.param_values())[0];
      const bound::Experts w(l.w13.w, l.w13.scales, l.w2.w, l.w2.scales, "silu_and_mul");
      expect_within(
          y, ref,
          experts_intervals(x, tw.to_vector(), ids.to_vector(),
                            mapped ? map.to_vector() : std::vector<double>{}, top_k, w, 0.0),
          "top_k=" + std::to_string(top_k) + (mapped ? " mapped" : ""));
    }
  }
}

TEST(FusedMoEExpertsFP8, TheWeightsDTypeSelectsTheMLPHeldAtConstruction) {
  const FP8Layer l = fp8_layer(4, 128, 128, 9);
  const Tensor x = Tensor::randn({5, 128}, DType::bfloat16, 10);
  const Tensor tw = Tensor::rand({5, 2}, DType::float32, 11, Device::cpu(), 0.0, 1.0);
  const Tensor ids = distinct_ids(5, 2, 4, 12);
  FusedMoEExpertsFwdOp op({});
  // The MLPs are held at construction (their parameters are settled there, the masked one's
  // too although masked_max_rows 0 never takes it), with the activation of the experts.
  std::vector<std::string> built;
  for (const Op* sub : op.held_delegates()) built.emplace_back(sub->name());
  EXPECT_EQ(built, (std::vector<std::string>{"MoEExpertMLPFwdOp", "MoEExpertMLPFP8FwdOp",
                                             "MoEExpertMLPFP8MaskedFwdOp", "MoEPostPermuteFwdOp"}));
  EXPECT_EQ(std::get<std::string>(op.held_delegates()[1]->param_values().at("activation")),
            "silu_and_mul");
  // bf16 weights: the bf16 MLP runs, the FP8 one does not.
  op(x, tw, ids, weight({4, 256, 128}, DType::bfloat16, 13),
     weight({4, 128, 128}, DType::bfloat16, 14));
  EXPECT_EQ(op.last_call()->stage("mlp").size(), 1u);
  EXPECT_TRUE(op.last_call()->stage("mlp_fp8").empty());
  EXPECT_EQ(op.roof_key(), "tensor_core.bf16");
  // FP8 weights: the quantizing pre-permute and the FP8 MLP on its rows, whose y is exactly
  // what the experts combine.
  const Tensor y = op(x, tw, ids, l.w13.w, l.w2.w, Tensor(), l.w13.scales, l.w2.scales);
  const auto call = op.last_call();
  EXPECT_TRUE(call->stage("mlp").empty());
  EXPECT_TRUE(call->stage("pre_permute").empty());
  ASSERT_EQ(call->stage("pre_permute_quant").size(), 1u);
  ASSERT_EQ(call->stage("mlp_fp8").size(), 1u);
  EXPECT_EQ(call->stage("mlp_fp8")[0]->stage("gate_up").size(), 1u);
  // The rows come quantized: the MLP's quantize_x stage does not run.
  EXPECT_TRUE(call->stage("mlp_fp8")[0]->stage("quantize_x").empty());
  EXPECT_EQ(call->stage("mlp_fp8")[0]->stage("quantize_h").size(), 1u);
  EXPECT_EQ(op.roof_key(), "tensor_core.fp8");
  // pre_permute E=4, pre_permute_quant E=4, mlp, mlp_fp8, mlp_fp8_masked, post_permute: stage
  // order.
  const auto held = op.held_delegates();
  ASSERT_EQ(held.size(), 6u);
  EXPECT_EQ(held[0]->name(), "MoEPrePermuteFwdOp");
  EXPECT_EQ(held[1]->name(), "MoEPrePermuteQuantFP8FwdOp");
  EXPECT_EQ(std::get<std::int64_t>(held[1]->param_values().at("group_size")), 128);
  EXPECT_EQ(held[3]->name(), "MoEExpertMLPFP8FwdOp");
  MoEPostPermuteFwdOp post(MoEPostPermuteFwdOp::Params{});
  MoEExpertMLPFP8FwdOp mlp(MoEExpertMLPFP8FwdOp::Params{});
  // By hand as the layer runs now: pre-permute-quantize, the MLP from e4m3 rows ...
  MoEPrePermuteQuantFP8FwdOp pre_quant({.num_experts = 4});
  const auto [xq, xs, off_q, inverse_q] = pre_quant(x, ids);
  EXPECT_EQ(y.to_vector(),
            post(mlp(xq, off_q, l.w13.w, l.w2.w, l.w13.scales, l.w2.scales, xs), tw, inverse_q)
                .to_vector());
  // ... and as it ran before: pre-permute in bfloat16, the MLP quantizing its rows. Bit for bit.
  MoEPrePermuteFwdOp pre({.num_experts = 4});
  const auto [xp, off, inverse] = pre(x, ids);
  const Tensor by_hand =
      post(mlp(xp, off, l.w13.w, l.w2.w, l.w13.scales, l.w2.scales), tw, inverse);
  EXPECT_EQ(y.to_vector(), by_hand.to_vector());
  // A second FP8 call reuses the held sub-ops.
  op(x, tw, ids, l.w13.w, l.w2.w, Tensor(), l.w13.scales, l.w2.scales);
  EXPECT_EQ(op.held_delegates().size(), 6u);
}

TEST(FusedMoEExpertsFP8, AnExpertMapGivesTheUnfusedResultBitForBit) {
  // Pairs of remote experts are dropped and the tail rows are the quantized zero row: y equals
  // pre-permuting in bfloat16 and quantizing in the MLP.
  const FP8Layer l = fp8_layer(4, 256, 128, 21);
  const Tensor map = int_tensor({-1, 0, -1, 1, -1, 2, -1, 3});
  const Tensor x = Tensor::randn({7, 256}, DType::bfloat16, 22);
  const Tensor tw = Tensor::rand({7, 3}, DType::float32, 23, Device::cpu(), 0.0, 1.0);
  const Tensor ids = distinct_ids(7, 3, 8, 24);
  FusedMoEExpertsFwdOp op({.activation = "gelu_and_mul"});
  const Tensor y = op(x, tw, ids, l.w13.w, l.w2.w, map, l.w13.scales, l.w2.scales);
  MoEPrePermuteFwdOp pre({.num_experts = 4});
  const auto [xp, off, inverse] = pre(x, ids, map);
  MoEExpertMLPFP8FwdOp mlp({.activation = "gelu_and_mul"});
  MoEPostPermuteFwdOp post(MoEPostPermuteFwdOp::Params{});
  EXPECT_EQ(
      y.to_vector(),
      post(mlp(xp, off, l.w13.w, l.w2.w, l.w13.scales, l.w2.scales), tw, inverse).to_vector());
}

TEST(FusedMoEExpertsFP8, ANaNWeightScalePoisonsExactlyTheTokensOfItsExpert) {
  // A NaN scale of one w13 block of expert 2 makes h NaN in that block's columns; the
  // quantization of h makes a NaN group's scale and values NaN (manifest/quant.yaml), and every
  // output of down reads that group: each row of expert 2 is NaN, so each token routed to it is
  // NaN in every column, and no other token is touched. The reference says the same.
  const FP8Layer l = fp8_layer(4, 256, 128, 42);
  const Tensor x = Tensor::randn({6, 256}, DType::bfloat16, 43);
  const Tensor tw = Tensor::rand({6, 2}, DType::float32, 44, Device::cpu(), 0.1, 1.0);
  const Tensor ids = distinct_ids(6, 2, 4, 45);
  const Tensor scales = l.w13.scales.clone();
  scales.set_at({2, 0, 1}, std::numeric_limits<double>::quiet_NaN());
  FusedMoEExpertsFwdOp op({});
  const Tensor y = op(x, tw, ids, l.w13.w, l.w2.w, Tensor(), scales, l.w2.scales);
  const Tensor ref = run_reference("FusedMoEExpertsFwdOp",
                                   {x, tw, ids, l.w13.w, l.w2.w, Tensor(), scales, l.w2.scales},
                                   op.param_values())[0];
  const Tensor clean = op(x, tw, ids, l.w13.w, l.w2.w, Tensor(), l.w13.scales, l.w2.scales);
  int poisoned = 0;
  for (std::int64_t t = 0; t < 6; ++t) {
    const bool routed = ids.item_at({t, 0}) == 2 || ids.item_at({t, 1}) == 2;
    poisoned += routed ? 1 : 0;
    for (std::int64_t c = 0; c < 256; ++c) {
      if (routed) {
        ASSERT_TRUE(std::isnan(y.item_at({t, c}))) << t << ", " << c;
        ASSERT_TRUE(std::isnan(ref.item_at({t, c}))) << t << ", " << c;
      } else {
        ASSERT_EQ(y.item_at({t, c}), clean.item_at({t, c})) << t << ", " << c;
      }
    }
  }
  EXPECT_GT(poisoned, 0);
  EXPECT_LT(poisoned, 6);
}

// ---- FusedMoEFwdOp -----------------------------------------------------------------------------

/// The routing weights' relative error in float32 against the exact ones (MoETopKRoutingFwdOp's
/// CPU implementation, libm's expf within 2 ulp): a sigmoid score within 4 u; a softmax score
/// within (2 max|logit| + E + 4) u (x - peak, exp, the sum of E, the division); renormalizing
/// over K doubles it and adds (K + 1) u; the routed scale and the reference's float32 rounding
/// add 2 u.
double routing_weight_error(bool sigmoid, std::int64_t experts, std::int64_t top_k,
                            double max_logit) {
  const double score = sigmoid ? 4.0 : 2 * max_logit + static_cast<double>(experts) + 4;
  return 1.01 * (2 * score + static_cast<double>(top_k) + 3) * bound::kU;  // 1.01: second order
}

TEST(FusedMoEFP8, MatchesReferenceWithAndWithoutGroupedRouting) {
  struct Case {
    FusedMoEFwdOp::Params params;
    bool bias;
  };
  const Case cases[] = {
      // DeepSeek-V3's rule: sigmoid, correction bias, 4 groups of 4, 2 kept, scaling 2.5
      {{.top_k = 4,
        .scoring = "sigmoid",
        .renormalize = true,
        .routed_scaling_factor = 2.5,
        .n_group = 4,
        .topk_group = 2},
       true},
      {{.top_k = 8,
        .scoring = "sigmoid",
        .renormalize = true,
        .routed_scaling_factor = 2.5,
        .n_group = 4,
        .topk_group = 2},
       true},
      {{.top_k = 2, .scoring = "softmax", .renormalize = true}, false},
      {{.top_k = 3, .scoring = "softmax", .activation = "gelu_and_mul"}, false},
  };
  const FP8Layer l = fp8_layer(16, 256, 128, 15);
  for (const auto& c : cases) {
    for (const std::int64_t tokens : {1, 9}) {
      FusedMoEFwdOp op(c.params);
      const Tensor x = Tensor::randn({tokens, 256}, DType::bfloat16, 16);
      const Tensor logits = Tensor::randn({tokens, 16}, DType::float32, 17);
      const Tensor bias =
          c.bias ? Tensor::rand({16}, DType::float32, 18, Device::cpu(), 0.0, 0.1) : Tensor();
      const std::vector<Tensor> in{x, logits, l.w13.w, l.w2.w, bias, l.w13.scales, l.w2.scales};
      const Tensor y = op(in[0], in[1], in[2], in[3], in[4], in[5], in[6]);
      const Tensor ref = run_reference("FusedMoEFwdOp", in, op.param_values())[0];
      // The routing the reference takes (ids exact, weights as the reference rounds them).
      const auto routed = run_reference("MoETopKRoutingFwdOp", {logits, bias},
                                        {{"top_k", c.params.top_k},
                                         {"scoring", c.params.scoring},
                                         {"renormalize", c.params.renormalize},
                                         {"routed_scaling_factor", c.params.routed_scaling_factor},
                                         {"n_group", c.params.n_group},
                                         {"topk_group", c.params.topk_group}});
      const std::vector<double> lv = logits.to_vector();
      double max_logit = 0;
      for (const double v : lv) max_logit = std::max(max_logit, std::fabs(v));
      const std::string act = *op.params().activation;
      const bound::Experts w(l.w13.w, l.w13.scales, l.w2.w, l.w2.scales, act);
      expect_within(
          y, ref,
          experts_intervals(
              x, routed[0].to_vector(), routed[1].to_vector(), {}, c.params.top_k, w,
              routing_weight_error(c.params.scoring == "sigmoid", 16, c.params.top_k, max_logit)),
          c.params.scoring + " top_k=" + std::to_string(c.params.top_k) +
              " n_group=" + std::to_string(c.params.n_group) + " tokens=" + std::to_string(tokens));
      EXPECT_EQ(op.last_call()->stage("experts")[0]->stage("mlp_fp8").size(), 1u);
      EXPECT_EQ(op.roof_key(), "tensor_core.fp8");
    }
  }
}

// ---- errors ------------------------------------------------------------------------------------

TEST(FusedMoEFP8, ScalesTiedToTheWeightsDTypeAndShapesAreSignatureErrors) {
  const FP8Layer l = fp8_layer(4, 256, 128, 19);
  const Tensor x = Tensor::randn({3, 256}, DType::bfloat16, 20);
  const Tensor logits = Tensor::randn({3, 4}, DType::float32, 21);
  const Tensor w13_bf16 = weight({4, 256, 256}, DType::bfloat16, 22);
  const Tensor w2_bf16 = weight({4, 256, 128}, DType::bfloat16, 23);
  FusedMoEFwdOp op({.top_k = 2});
  const auto message = [&](auto&&... args) { return message_of([&] { op(args...); }); };
  const std::string needs_scales =
      "FusedMoEFwdOp: shape rule 'W != float8_e4m3fn or (present(w13_scales) and "
      "present(w2_scales))' does not hold";
  const std::string scales_need_fp8 =
      "FusedMoEFwdOp: shape rule 'W == float8_e4m3fn or not (present(w13_scales) or "
      "present(w2_scales))' does not hold";
  // FP8 weights without scales, or with one of the two.
  EXPECT_THROW(op(x, logits, l.w13.w, l.w2.w), SignatureError);
  EXPECT_THAT(message(x, logits, l.w13.w, l.w2.w), HasSubstr(needs_scales));
  EXPECT_THAT(message(x, logits, l.w13.w, l.w2.w, Tensor(), l.w13.scales), HasSubstr(needs_scales));
  // Scales with bf16 weights.
  EXPECT_THROW(op(x, logits, w13_bf16, w2_bf16, Tensor(), l.w13.scales, l.w2.scales),
               SignatureError);
  EXPECT_THAT(message(x, logits, w13_bf16, w2_bf16, Tensor(), l.w13.scales, l.w2.scales),
              HasSubstr(scales_need_fp8));
  EXPECT_THAT(message(x, logits, w13_bf16, w2_bf16, Tensor(), Tensor(), l.w2.scales),
              HasSubstr(scales_need_fp8));
  // Scales of the wrong shape: one row block of w13 where 2F = 256 needs two; w2's swapped.
  EXPECT_THAT(message(x, logits, l.w13.w, l.w2.w, Tensor(),
                      Tensor::full({4, 1, 2}, 1.0, DType::float32), l.w2.scales),
              HasSubstr("input 'w13_scales' declared [E, ceil_div(2 * F, 128), ceil_div(H, 128)]: "
                        "axis 1 must be 2"));
  EXPECT_THAT(message(x, logits, l.w13.w, l.w2.w, Tensor(), l.w13.scales,
                      Tensor::full({4, 1, 2}, 1.0, DType::float32)),
              HasSubstr("input 'w2_scales' declared [E, ceil_div(H, 128), ceil_div(F, 128)]: "
                        "axis 1 must be 2"));
  // Scales of another dtype than float32.
  EXPECT_THROW(
      op(x, logits, l.w13.w, l.w2.w, Tensor(), l.w13.scales.to(DType::bfloat16), l.w2.scales),
      SignatureError);
  // H (the gate_up reduction) not a multiple of 128: scales shaped by ceil_div pass the shape
  // step, and the rule names the cause.
  const FP8Layer odd = fp8_layer(4, 192, 128, 24);
  EXPECT_THAT(message(Tensor::randn({3, 192}, DType::bfloat16, 25), logits, odd.w13.w, odd.w2.w,
                      Tensor(), odd.w13.scales, odd.w2.scales),
              HasSubstr("FusedMoEFwdOp: shape rule 'W != float8_e4m3fn or (H % 128 == 0 and F % "
                        "128 == 0)' does not hold"));
  // F (the down reduction) not a multiple of 128.
  const FP8Layer odd_f = fp8_layer(4, 256, 96, 26);
  EXPECT_THAT(
      message(x, logits, odd_f.w13.w, odd_f.w2.w, Tensor(), odd_f.w13.scales, odd_f.w2.scales),
      HasSubstr("(H % 128 == 0 and F % 128 == 0)' does not hold"));
  // FP8 weights take bfloat16 activations only (the FP8 MLP's quantization reads bf16 rows).
  EXPECT_THROW(
      op(x.to(DType::float16), logits, l.w13.w, l.w2.w, Tensor(), l.w13.scales, l.w2.scales),
      SignatureError);
  // Mixed weights: w13 FP8, w2 bf16.
  EXPECT_THROW(op(x, logits, l.w13.w, w2_bf16, Tensor(), l.w13.scales, l.w2.scales),
               SignatureError);
}

TEST(FusedMoEExpertsFP8, TheSameRulesHoldOnTheExperts) {
  const FP8Layer l = fp8_layer(4, 256, 128, 27);
  const Tensor x = Tensor::randn({3, 256}, DType::bfloat16, 28);
  const Tensor tw = Tensor::rand({3, 2}, DType::float32, 29, Device::cpu(), 0.0, 1.0);
  const Tensor ids = distinct_ids(3, 2, 4, 30);
  FusedMoEExpertsFwdOp op({});
  EXPECT_THAT(message_of([&] { op(x, tw, ids, l.w13.w, l.w2.w); }),
              HasSubstr("FusedMoEExpertsFwdOp: shape rule 'W != float8_e4m3fn or "
                        "(present(w13_scales) and present(w2_scales))' does not hold"));
  EXPECT_THAT(message_of([&] {
                op(x, tw, ids, weight({4, 256, 256}, DType::bfloat16, 31),
                   weight({4, 256, 128}, DType::bfloat16, 32), Tensor(), l.w13.scales, l.w2.scales);
              }),
              HasSubstr("FusedMoEExpertsFwdOp: shape rule 'W == float8_e4m3fn or not"));
}

TEST(MoEExpertMLPFP8, ReductionsNotMultiplesOf128AreSignatureErrors) {
  MoEExpertMLPFP8FwdOp op(MoEExpertMLPFP8FwdOp::Params{});
  const FP8Layer l = fp8_layer(2, 192, 128, 33);
  EXPECT_THAT(message_of([&] {
                op(Tensor::randn({4, 192}, DType::bfloat16, 34), offsets_of({2, 2}), l.w13.w,
                   l.w2.w, l.w13.scales, l.w2.scales);
              }),
              HasSubstr("MoEExpertMLPFP8FwdOp: shape rule 'H % 128 == 0' does not hold"));
  const FP8Layer f = fp8_layer(2, 128, 64, 35);
  EXPECT_THAT(message_of([&] {
                op(Tensor::randn({4, 128}, DType::bfloat16, 36), offsets_of({2, 2}), f.w13.w,
                   f.w2.w, f.w13.scales, f.w2.scales);
              }),
              HasSubstr("MoEExpertMLPFP8FwdOp: shape rule 'F % 128 == 0' does not hold"));
  // bf16 weights are not this op's.
  EXPECT_THROW(op(Tensor::randn({4, 128}, DType::bfloat16, 37), offsets_of({2, 2}),
                  weight({2, 256, 128}, DType::bfloat16, 38),
                  weight({2, 128, 128}, DType::bfloat16, 39), l.w13.scales, l.w2.scales),
               SignatureError);
}

}  // namespace
}  // namespace tileops
