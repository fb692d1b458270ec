// The MoE family on the CPU: every op against its double-precision reference on many shapes
// (experts with no tokens, one token, all tokens), the value checks, and the composite rules as
// the MoE ops exercise them (stages, sub-ops per expert count, injection, tuned mode).
#include <algorithm>

#include "ops/moe_test_inputs.h"
#include "ops/ops_test_util.h"
#include "tileops/base/op_class.h"
#include "tileops/ops/moe.h"

namespace tileops {
namespace {

using testing::HasSubstr;
using testing_util::expect_close;
using testing_util::message_of;
using testing_util::run_reference;
using namespace moe_test;  // NOLINT: the tests' inputs

// ---- routing ---------------------------------------------------------------------------------

TEST(MoEOps, RoofKeysAreTheManifestPeaks) {
  // roofline.peak in manifest/moe.yaml; FusedMoE's by the weights' dtype, bf16 before any call
  // (tests/ops/test_moe_fp8_composites.cpp checks it after FP8 calls).
  EXPECT_EQ(MoEGroupedGemmFwdOp(MoEGroupedGemmFwdOp::Params{}).roof_key(), "tensor_core.bf16");
  EXPECT_EQ(MoEGroupedGemmFP8FwdOp(MoEGroupedGemmFP8FwdOp::Params{}).roof_key(), "tensor_core.fp8");
  EXPECT_EQ(MoEGroupedGemmFP8MaskedFwdOp(MoEGroupedGemmFP8MaskedFwdOp::Params{}).roof_key(),
            "tensor_core.fp8");
  EXPECT_EQ(MoEExpertMLPFwdOp(MoEExpertMLPFwdOp::Params{}).roof_key(), "tensor_core.bf16");
  EXPECT_EQ(MoEExpertMLPFP8FwdOp(MoEExpertMLPFP8FwdOp::Params{}).roof_key(), "tensor_core.fp8");
  EXPECT_EQ(MoEExpertMLPFP8MaskedFwdOp(MoEExpertMLPFP8MaskedFwdOp::Params{}).roof_key(),
            "tensor_core.fp8");
  EXPECT_EQ(FusedMoEExpertsFwdOp(FusedMoEExpertsFwdOp::Params{}).roof_key(), "tensor_core.bf16");
  EXPECT_EQ(FusedMoEFwdOp({.top_k = 2}).roof_key(), "tensor_core.bf16");
  // No peak declared: the base class's default.
  EXPECT_EQ(MoETopKRoutingFwdOp({.top_k = 2}).roof_key(), "cuda_core.fp32");
}

TEST(MoEOps, InterfacesAreThoseOfTheKernelTables) {
  // No op class declares interfaces(): each kernel op's are its kernel table's, a composite
  // without kernels of its own has none.
  for (const OpClass* c : registered_op_classes()) {
    for (const auto& impl : c->kernel_types) {
      const bool declared =
          std::any_of(c->interfaces.begin(), c->interfaces.end(),
                      [&](const auto& i) { return i.type == impl.interface_type; });
      EXPECT_TRUE(declared) << c->name << " " << impl.key;
    }
    EXPECT_EQ(c->interfaces.empty(), c->kernel_types.empty()) << c->name;
    EXPECT_TRUE(c->registration_problems.empty()) << c->name;
  }
  const OpClass* gemm = find_op_class("MoEGroupedGemmFwdOp");
  ASSERT_NE(gemm, nullptr);
  ASSERT_EQ(gemm->interfaces.size(), 1u);
  EXPECT_EQ(gemm->interfaces[0].name, "moe_grouped_gemm");
  EXPECT_EQ(gemm->interfaces[0].request_type, std::type_index(typeid(GroupedGemmCall)));
  const OpClass* fused = find_op_class("FusedMoEFwdOp");
  ASSERT_NE(fused, nullptr);
  EXPECT_TRUE(fused->interfaces.empty());
  EXPECT_EQ(fused->delegate_types.size(), 2u);  // generated from the composition
}

TEST(MoERouting, MatchesReferenceForEveryScoring) {
  struct Case {
    std::string scoring;
    bool renormalize;
    double scale;
    bool bias;
    DType dtype;
  };
  const Case cases[] = {{"softmax", false, 1.0, false, DType::float32},
                        {"softmax", true, 1.0, false, DType::bfloat16},
                        {"sigmoid", true, 2.5, true, DType::float32},
                        {"sigmoid", false, 1.0, true, DType::float16}};
  for (const auto& c : cases) {
    for (const auto& [tokens, experts, top_k] :
         std::vector<std::tuple<int, int, int>>{{7, 16, 4}, {1, 8, 8}, {33, 64, 6}, {5, 3, 1}}) {
      MoETopKRoutingFwdOp op({.top_k = top_k,
                              .scoring = c.scoring,
                              .renormalize = c.renormalize,
                              .routed_scaling_factor = c.scale});
      const Tensor logits = Tensor::randn({tokens, experts}, c.dtype, 7 + tokens);
      const Tensor bias =
          c.bias ? Tensor::rand({experts}, DType::float32, 9, Device::cpu(), 0.0, 0.2) : Tensor();
      const auto [w, ids] = op(logits, bias);
      EXPECT_EQ(w.dtype(), DType::float32);
      EXPECT_EQ(ids.dtype(), DType::int32);
      const auto ref = run_reference("MoETopKRoutingFwdOp", {logits, bias}, op.param_values());
      const std::string what =
          c.scoring + " " + std::string(dtype_name(c.dtype)) + " " + logits.str();
      EXPECT_EQ(ids.to_vector(), ref[1].to_vector()) << what;
      expect_close(w, ref[0], what);
    }
  }
}

TEST(MoERouting, BiasSelectsButDoesNotWeightAndTiesGoToTheSmallerId) {
  MoETopKRoutingFwdOp op({.top_k = 2, .scoring = "sigmoid"});
  const Tensor logits = Tensor::zeros({1, 4}, DType::float32);  // every score 0.5: a tie
  const auto [w0, ids0] = op(logits);
  EXPECT_EQ(ids0.to_vector(), (std::vector<double>{0, 1}));
  const Tensor bias = Tensor::empty({4}, DType::float32);
  for (int e = 0; e < 4; ++e) bias.set_at({e}, e == 3 ? 1.0 : 0.0);
  const auto [w1, ids1] = op(logits, bias);
  EXPECT_EQ(ids1.to_vector(), (std::vector<double>{3, 0}));
  EXPECT_EQ(w1.to_vector(), (std::vector<double>{0.5, 0.5}));  // the bias is not in the weight
}

TEST(MoERouting, TopKAboveTheExpertCountIsASignatureError) {
  MoETopKRoutingFwdOp op({.top_k = 5});
  EXPECT_THROW(op(Tensor::randn({2, 4}, DType::float32, 1)), SignatureError);
  EXPECT_THROW(MoETopKRoutingFwdOp({.top_k = 0}), SignatureError);
}

// ---- pre-permute -----------------------------------------------------------------------------

TEST(MoEPrePermute, MatchesReferenceIncludingEmptyAndFullExperts) {
  for (const DType dtype : {DType::bfloat16, DType::float32}) {
    for (const auto& [tokens, top_k, experts] :
         std::vector<std::tuple<int, int, int>>{{9, 2, 6}, {1, 1, 4}, {16, 4, 4}, {0, 2, 3}}) {
      MoEPrePermuteFwdOp op({.num_experts = experts});
      const Tensor x = Tensor::randn({tokens, 24}, dtype, 3);
      const Tensor ids = distinct_ids(tokens, top_k, experts, 5);
      const auto [xp, offsets, inverse] = op(x, ids);
      const auto ref = run_reference("MoEPrePermuteFwdOp", {x, ids, Tensor()}, op.param_values());
      EXPECT_EQ(xp.to_vector(), ref[0].to_vector()) << x.str();
      EXPECT_EQ(offsets.to_vector(), ref[1].to_vector());
      EXPECT_EQ(inverse.to_vector(), ref[2].to_vector());
    }
  }
  // Every token to expert 2 of 4: experts 0, 1 and 3 receive nothing, and the order is stable.
  MoEPrePermuteFwdOp op({.num_experts = 4});
  const Tensor x = Tensor::randn({5, 8}, DType::float32, 4);
  const auto [xp, offsets, inverse] = op(x, Tensor::full({5, 1}, 2, DType::int32));
  EXPECT_EQ(offsets.to_vector(), (std::vector<double>{0, 0, 0, 5, 5}));
  EXPECT_EQ(inverse.to_vector(), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(xp.to_vector(), x.to_vector());
}

TEST(MoEPrePermute, ExpertMapDropsRemoteExpertsAndZeroesTheTail) {
  // 8 global experts; this rank holds global 4..7 as local 0..3.
  const Tensor map = int_tensor({-1, -1, -1, -1, 0, 1, 2, 3});
  MoEPrePermuteFwdOp op({.num_experts = 4});
  const Tensor x = Tensor::randn({6, 16}, DType::bfloat16, 8);
  const Tensor ids = distinct_ids(6, 3, 8, 9);
  const auto [xp, offsets, inverse] = op(x, ids, map);
  const auto ref = run_reference("MoEPrePermuteFwdOp", {x, ids, map}, op.param_values());
  EXPECT_EQ(xp.to_vector(), ref[0].to_vector());
  EXPECT_EQ(offsets.to_vector(), ref[1].to_vector());
  EXPECT_EQ(inverse.to_vector(), ref[2].to_vector());
  const auto kept = static_cast<std::int64_t>(offsets.item_at({4}));
  EXPECT_LT(kept, 18);
  for (std::int64_t r = kept; r < 18; ++r) EXPECT_EQ(xp.item_at({r, 0}), 0.0);
}

TEST(MoEPrePermute, IdsOutsideTheExpertsAreErrors) {
  MoEPrePermuteFwdOp op({.num_experts = 4});
  const Tensor x = Tensor::randn({2, 8}, DType::float32, 1);
  EXPECT_THAT(message_of([&] {
                op(x, Tensor::full({2, 1}, 4, DType::int32));
              }),
              HasSubstr("topk_ids[0, 0] = 4 is outside [0, 4) (num_experts)"));
  EXPECT_THROW(op(x, Tensor::full({2, 1}, 9, DType::int32), int_tensor({0, 1, 2})), SignatureError);
  EXPECT_THAT(message_of([&] {
                op(x, Tensor::full({2, 1}, 0, DType::int32), int_tensor({7}));
              }),
              HasSubstr("expert_map[0] = 7 is neither -1 nor a local expert"));
}

// ---- grouped GEMM ----------------------------------------------------------------------------

TEST(MoEGroupedGemm, MatchesReferenceForEveryActivationAndDType) {
  const std::vector<std::vector<std::int32_t>> counts = {
      {3, 0, 1, 5}, {0, 0, 7, 0}, {1}, {2, 2, 2, 2, 2, 2}, {0, 0}};
  for (const std::string act : {"none", "silu_and_mul", "gelu_and_mul"}) {
    for (const DType dtype : {DType::bfloat16, DType::float16}) {
      for (const auto& c : counts) {
        const auto experts = static_cast<std::int64_t>(c.size());
        const std::int64_t rows = std::accumulate(c.begin(), c.end(), 0) + 2;  // 2 rows outside
        MoEGroupedGemmFwdOp op({.activation = act});
        const Tensor a = Tensor::randn({rows, 40}, dtype, 21);
        const Tensor off = offsets_of(c);
        const Tensor b = weight({experts, 18, 40}, dtype, 22);
        const Tensor out = op(a, off, b);
        EXPECT_EQ(out.size(1), act == "none" ? 18 : 9);
        const auto ref = run_reference("MoEGroupedGemmFwdOp", {a, off, b}, op.param_values());
        expect_close(out, ref[0], act + " " + std::string(dtype_name(dtype)));
        for (std::int64_t r = rows - 2; r < rows; ++r) EXPECT_EQ(out.item_at({r, 0}), 0.0);
      }
    }
  }
}

// Groups of 16 rows and more go through OpenBLAS's sgemm, smaller ones through the row-by-row
// path: both, side by side, in one call.
TEST(MoEGroupedGemm, LargeAndSmallGroupsMatchTheReference) {
  const std::vector<std::int32_t> counts = {40, 0, 16, 15, 1, 33};
  for (const std::string act : {"none", "silu_and_mul", "gelu_and_mul"}) {
    for (const DType dtype : {DType::bfloat16, DType::float16}) {
      const std::int64_t rows = std::accumulate(counts.begin(), counts.end(), 0) + 3;
      MoEGroupedGemmFwdOp op({.activation = act});
      const Tensor a = Tensor::randn({rows, 72}, dtype, 31);
      const Tensor off = offsets_of(counts);
      const Tensor b = weight({6, 34, 72}, dtype, 32);
      const Tensor out = op(a, off, b);
      const auto ref = run_reference("MoEGroupedGemmFwdOp", {a, off, b}, op.param_values());
      expect_close(out, ref[0], act + " " + std::string(dtype_name(dtype)));
      for (std::int64_t r = rows - 3; r < rows; ++r) EXPECT_EQ(out.item_at({r, 1}), 0.0);
    }
  }
}

// A 16-bit weight reaches OpenBLAS in float32 panels of 16 MB: 600 rows of K = 8192 are a panel
// of 512 rows and one of 88, and the gated halves (rows j and j + 300) lie in different panels.
TEST(MoEGroupedGemm, WeightsBeyondOnePanelMatchTheReference) {
  const std::vector<std::int32_t> counts = {20, 0, 17};
  for (const std::string act : {"none", "silu_and_mul"}) {
    const std::int64_t rows = std::accumulate(counts.begin(), counts.end(), 0);
    MoEGroupedGemmFwdOp op({.activation = act});
    const Tensor a = Tensor::randn({rows, 8192}, DType::bfloat16, 41);
    const Tensor off = offsets_of(counts);
    const Tensor b = weight({3, 600, 8192}, DType::bfloat16, 42);
    const Tensor out = op(a, off, b);
    const auto ref = run_reference("MoEGroupedGemmFwdOp", {a, off, b}, op.param_values());
    expect_close(out, ref[0], act);
  }
}

TEST(MoEGroupedGemm, BadOffsetsAndOddGatedWidthsAreErrors) {
  MoEGroupedGemmFwdOp op(MoEGroupedGemmFwdOp::Params{});
  const Tensor a = Tensor::randn({4, 8}, DType::bfloat16, 1);
  const Tensor b = weight({2, 6, 8}, DType::bfloat16, 2);
  EXPECT_THAT(message_of([&] {
                op(a, int_tensor({0, 3, 2}), b);
              }),
              HasSubstr("expert_offsets[2] = 2 breaks"));
  EXPECT_THROW(op(a, int_tensor({0, 3, 5}), b), SignatureError);  // past the rows of a
  EXPECT_THROW(op(a, int_tensor({0, 4}), b), SignatureError);     // offsets of 1 expert, b of 2
  MoEGroupedGemmFwdOp gated({.activation = "silu_and_mul"});
  EXPECT_THROW(gated(a, int_tensor({0, 2, 4}), weight({2, 5, 8}, DType::bfloat16, 3)),
               SignatureError);
}

// ---- post-permute ----------------------------------------------------------------------------

TEST(MoEPostPermute, MatchesReferenceAndSkipsDroppedPairs) {
  for (const DType dtype : {DType::bfloat16, DType::float16, DType::float32}) {
    MoEPostPermuteFwdOp op({.scale = 1.5});
    const Tensor expert_out = Tensor::randn({10, 12}, dtype, 4);
    const Tensor w = Tensor::rand({4, 3}, DType::float32, 5, Device::cpu(), 0.0, 1.0);
    const Tensor inverse = int_tensor({0, 9, -1, 3, 4, 5, -1, -1, -1, 1, 2, 8}).view({4, 3});
    const Tensor y = op(expert_out, w, inverse);
    const auto ref =
        run_reference("MoEPostPermuteFwdOp", {expert_out, w, inverse}, op.param_values());
    expect_close(y, ref[0], std::string(dtype_name(dtype)));
    for (std::int64_t h = 0; h < 12; ++h) EXPECT_EQ(y.item_at({2, h}), 0.0);  // every pair dropped
  }
  MoEPostPermuteFwdOp op(MoEPostPermuteFwdOp::Params{});
  EXPECT_THAT(message_of([&] {
                op(Tensor::randn({2, 4}, DType::float32, 1),
                   Tensor::rand({1, 1}, DType::float32, 2), int_tensor({2}).view({1, 1}));
              }),
              HasSubstr("inverse[0, 0] = 2 is neither -1 nor a row of expert_out"));
}

// ---- composites ------------------------------------------------------------------------------

TEST(MoEExpertMLP, MatchesReferenceAndFilesBothStages) {
  for (const std::string act : {"silu_and_mul", "gelu_and_mul"}) {
    MoEExpertMLPFwdOp op({.activation = act});
    const Tensor x = Tensor::randn({11, 32}, DType::bfloat16, 1);
    const Tensor off = offsets_of({4, 0, 6, 1});
    const Tensor w13 = weight({4, 2 * 16, 32}, DType::bfloat16, 2);
    const Tensor w2 = weight({4, 32, 16}, DType::bfloat16, 3);
    const Tensor y = op(x, off, w13, w2);
    expect_close(y, run_reference("MoEExpertMLPFwdOp", {x, off, w13, w2}, op.param_values())[0],
                 act);
    const auto call = op.last_call();
    ASSERT_EQ(call->stages.size(), 2u);
    EXPECT_EQ(call->stage("gate_up").size(), 1u);
    EXPECT_EQ(call->stage("down").size(), 1u);
    EXPECT_EQ(call->stage("gate_up")[0]->dim("N"), 32);
    ASSERT_EQ(op.held_delegates().size(), 2u);
    EXPECT_EQ(std::get<std::string>(op.held_delegates()[0]->param_values().at("activation")), act);
    EXPECT_EQ(std::get<std::string>(op.held_delegates()[1]->param_values().at("activation")),
              "none");
  }
}

TEST(FusedMoEExperts, MatchesReferenceAndHoldsOnePrePermutePerExpertCount) {
  FusedMoEExpertsFwdOp op({});
  for (const std::int64_t experts : {4, 6, 4}) {
    const Tensor x = Tensor::randn({9, 32}, DType::bfloat16, 1);
    const Tensor w = Tensor::rand({9, 2}, DType::float32, 2, Device::cpu(), 0.0, 1.0);
    const Tensor ids = distinct_ids(9, 2, experts, 3 + experts);
    const Tensor w13 = weight({experts, 2 * 8, 32}, DType::bfloat16, 4);
    const Tensor w2 = weight({experts, 32, 8}, DType::bfloat16, 5);
    const Tensor y = op(x, w, ids, w13, w2);
    expect_close(
        y,
        run_reference("FusedMoEExpertsFwdOp", {x, w, ids, w13, w2, Tensor()}, op.param_values())[0],
        "E=" + std::to_string(experts));
    const auto call = op.last_call();
    EXPECT_EQ(call->stage("pre_permute").size(), 1u);
    EXPECT_EQ(call->stage("mlp").size(), 1u);
    EXPECT_EQ(call->stage("post_permute").size(), 1u);
  }
  // pre_permute E=4, pre_permute E=6, mlp, mlp_fp8, mlp_fp8_masked (held at construction: their
  // parameters are settled there), post_permute: stage order, then holding order.
  const auto held = op.held_delegates();
  ASSERT_EQ(held.size(), 6u);
  EXPECT_EQ(std::get<std::int64_t>(held[0]->param_values().at("num_experts")), 4);
  EXPECT_EQ(std::get<std::int64_t>(held[1]->param_values().at("num_experts")), 6);
  EXPECT_EQ(held[2]->name(), "MoEExpertMLPFwdOp");
  EXPECT_EQ(held[3]->name(), "MoEExpertMLPFP8FwdOp");
  EXPECT_EQ(held[4]->name(), "MoEExpertMLPFP8MaskedFwdOp");
  EXPECT_EQ(held[5]->name(), "MoEPostPermuteFwdOp");
}

TEST(FusedMoEExperts, TunedModeReachesThePrePermuteHeldLater) {
  FusedMoEExpertsFwdOp op({});
  op.request_tune();
  const Tensor x = Tensor::randn({3, 16}, DType::bfloat16, 1);
  op(x, Tensor::rand({3, 1}, DType::float32, 2), distinct_ids(3, 1, 2, 3),
     weight({2, 8, 16}, DType::bfloat16, 4), weight({2, 16, 4}, DType::bfloat16, 5));
  for (Op* sub : op.held_delegates()) EXPECT_TRUE(sub->tune_requested()) << sub->name();
  EXPECT_EQ(op.iter_kernels().size(), 4u);  // pre-permute, gate_up, down, post-permute
}

TEST(FusedMoE, MatchesReferenceForSoftmaxAndBiasedSigmoidRouting) {
  struct Case {
    FusedMoEFwdOp::Params params;
    bool bias;
  };
  const Case cases[] = {
      {{.top_k = 2, .scoring = "softmax", .renormalize = true}, false},
      {{.top_k = 3, .scoring = "sigmoid", .renormalize = true, .routed_scaling_factor = 2.5}, true},
      {{.top_k = 8, .scoring = "softmax", .activation = "gelu_and_mul"}, false},
  };
  for (const auto& c : cases) {
    for (const std::int64_t tokens : {1, 13}) {
      FusedMoEFwdOp op(c.params);
      const std::int64_t experts = 8;
      const Tensor x = Tensor::randn({tokens, 32}, DType::bfloat16, 1);
      const Tensor logits = Tensor::randn({tokens, experts}, DType::float32, 2);
      const Tensor w13 = weight({experts, 2 * 16, 32}, DType::bfloat16, 3);
      const Tensor w2 = weight({experts, 32, 16}, DType::bfloat16, 4);
      const Tensor bias =
          c.bias ? Tensor::rand({experts}, DType::float32, 5, Device::cpu(), 0.0, 0.1) : Tensor();
      const Tensor y = op(x, logits, w13, w2, bias);
      expect_close(y,
                   run_reference("FusedMoEFwdOp", {x, logits, w13, w2, bias}, op.param_values())[0],
                   c.params.scoring + " tokens=" + std::to_string(tokens));
      EXPECT_EQ(op.last_call()->stage("routing").size(), 1u);
      EXPECT_EQ(op.last_call()->stage("experts").size(), 1u);
    }
  }
}

/// Counts its calls and passes the tokens through.
class CountingPrepareFinalize final : public MoEPrepareFinalize {
 public:
  std::string name() const override { return "counting"; }
  MoEPreparedTokens prepare(const Tensor& x, const Tensor& w, const Tensor& ids) override {
    ++prepared;
    return {x, w, ids, Tensor()};
  }
  void finalize(const Tensor& out, const Tensor& y) override {
    ++finalized;
    y.copy_(out);
  }
  int prepared = 0;
  int finalized = 0;
};

TEST(FusedMoE, InjectionRules) {
  const FusedMoEFwdOp::Params p{.top_k = 2};
  auto pf = std::make_shared<CountingPrepareFinalize>();
  EXPECT_THAT(message_of([&] { FusedMoEFwdOp(p, {}, nullptr, pf); }),
              HasSubstr("prepare_finalize 'counting' was injected without experts"));
  // An injected experts decides the activation before the base constructor runs.
  auto experts = std::make_shared<FusedMoEExpertsFwdOp>(
      FusedMoEExpertsFwdOp::Params{.activation = "gelu_and_mul"}, Target::builtin());
  FusedMoEFwdOp op(p, Target("nowhere"), experts, pf);
  EXPECT_EQ(op.params().activation, std::optional<std::string>("gelu_and_mul"));
  EXPECT_EQ(std::get<std::string>(op.param_values().at("activation")), "gelu_and_mul");
  EXPECT_THROW(FusedMoEFwdOp({.top_k = 2, .activation = "silu_and_mul"}, {}, experts), UsageError);
  // The injected experts keeps its own target; the built routing inherits the composite's.
  const auto held = op.held_delegates();
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0]->target().name(), "nowhere");
  EXPECT_EQ(held[1], experts.get());
  EXPECT_TRUE(held[1]->target().is_builtin());
  // Without injection: silu_and_mul and the single-device prepare/finalize.
  FusedMoEFwdOp plain(p);
  EXPECT_EQ(plain.params().activation, std::optional<std::string>("silu_and_mul"));
  EXPECT_EQ(plain.prepare_finalize().name(), "single_device");
}

TEST(FusedMoE, AnInjectedPrepareFinalizeRunsAroundTheExperts) {
  auto pf = std::make_shared<CountingPrepareFinalize>();
  auto experts = std::make_shared<FusedMoEExpertsFwdOp>(FusedMoEExpertsFwdOp::Params{});
  FusedMoEFwdOp op({.top_k = 2}, {}, experts, pf);
  const Tensor x = Tensor::randn({4, 16}, DType::bfloat16, 1);
  const Tensor logits = Tensor::randn({4, 4}, DType::float32, 2);
  const Tensor w13 = weight({4, 8, 16}, DType::bfloat16, 3);
  const Tensor w2 = weight({4, 16, 4}, DType::bfloat16, 4);
  const Tensor y = op(x, logits, w13, w2);
  EXPECT_EQ(pf->prepared, 1);
  EXPECT_EQ(pf->finalized, 1);
  expect_close(y,
               run_reference("FusedMoEFwdOp", {x, logits, w13, w2, Tensor()}, op.param_values())[0],
               "injected");
}

TEST(FusedMoE, TheDynamicPathTakesInjectedParameters) {
  auto pf = std::make_shared<CountingPrepareFinalize>();
  auto experts = std::make_shared<FusedMoEExpertsFwdOp>(
      FusedMoEExpertsFwdOp::Params{.activation = "gelu_and_mul"}, Target::builtin());
  const auto op =
      make_op("FusedMoEFwdOp", {{"top_k", std::int64_t{2}},
                                {"experts", injected<FusedMoEExpertsFwdOp>(experts, "experts")},
                                {"prepare_finalize", injected<MoEPrepareFinalize>(pf, "pf")}});
  auto& fused = dynamic_cast<FusedMoEFwdOp&>(*op);
  EXPECT_EQ(fused.held_delegates()[1], experts.get());  // held as passed
  EXPECT_EQ(fused.prepare_finalize().name(), "counting");
  EXPECT_EQ(std::get<std::string>(op->param_values().at("activation")), "gelu_and_mul");
  EXPECT_EQ(op->param_values().count("experts"), 0u);  // not a manifest parameter
  const Tensor x = Tensor::randn({4, 16}, DType::bfloat16, 1);
  const Tensor logits = Tensor::randn({4, 4}, DType::float32, 2);
  const Tensor w13 = weight({4, 8, 16}, DType::bfloat16, 3);
  const Tensor w2 = weight({4, 16, 4}, DType::bfloat16, 4);
  const std::vector<Tensor> inputs{x, logits, w13, w2};
  const Tensor y = op->call(inputs)[0];
  EXPECT_EQ(pf->prepared, 1);
  expect_close(
      y, run_reference("FusedMoEFwdOp", {x, logits, w13, w2, Tensor()}, op->param_values())[0],
      "injected through make_op");
  // None is no injection; the constructor's rules hold on this path too.
  EXPECT_EQ(dynamic_cast<FusedMoEFwdOp&>(
                *make_op("FusedMoEFwdOp", {{"top_k", std::int64_t{2}}, {"experts", NoneValue{}}}))
                .prepare_finalize()
                .name(),
            "single_device");
  EXPECT_THAT(message_of([&] {
                make_op("FusedMoEFwdOp",
                        {{"top_k", std::int64_t{2}},
                         {"prepare_finalize", injected<MoEPrepareFinalize>(pf, "pf")}});
              }),
              HasSubstr("was injected without experts"));
  // A value of the wrong kind names the parameter and what it must be.
  EXPECT_THAT(
      message_of([&] {
        make_op("FusedMoEFwdOp", {{"top_k", std::int64_t{2}}, {"experts", std::int64_t{3}}});
      }),
      HasSubstr("injected parameter 'experts' must be FusedMoEExpertsFwdOp"));
  EXPECT_THROW(make_op("FusedMoEFwdOp", {{"top_k", std::int64_t{2}},
                                         {"experts", injected<MoEPrepareFinalize>(pf, "pf")}}),
               SignatureError);
  EXPECT_THAT(message_of([&] {
                make_op("FusedMoEFwdOp", {{"top_k", std::int64_t{2}}, {"expert", NoneValue{}}});
              }),
              HasSubstr("unknown parameter 'expert'"));
  // Ops without injected parameters still refuse an injected value.
  EXPECT_THROW(make_op("MoETopKRoutingFwdOp",
                       {{"top_k", std::int64_t{2}},
                        {"experts", injected<FusedMoEExpertsFwdOp>(experts, "experts")}}),
               SignatureError);
}

TEST(MoEFamily, ClassesAgreeWithTheManifestAndBuildDynamically) {
  for (const OpClass* c :
       {&op_class_of<MoEExpertMLPFwdOp>(), &op_class_of<MoEExpertMLPFP8FwdOp>(),
        &op_class_of<MoEExpertMLPFP8MaskedFwdOp>(), &op_class_of<FusedMoEExpertsFwdOp>(),
        &op_class_of<FusedMoEFwdOp>(), &op_class_of<MoEGroupedGemmFwdOp>(),
        &op_class_of<MoEPrePermuteQuantFP8MaskedFwdOp>()}) {
    EXPECT_TRUE(c->registration_problems.empty()) << c->name;
  }
  EXPECT_EQ(op_class_of<FusedMoEFwdOp>().injected_parameters,
            (std::vector<std::string>{"prepare_finalize", "experts"}));
  const auto op = make_op("FusedMoEFwdOp", {{"top_k", std::int64_t{2}}});
  EXPECT_EQ(op->held_delegates().size(), 2u);
  EXPECT_EQ(std::get<std::string>(op->param_values().at("activation")), "silu_and_mul");
}

TEST(MoEFamily, WorkloadInputsAreValidInputs) {
  // The bench inputs each MoE op class makes (workload_inputs), on small cases of the manifest's
  // kinds: they pass the CPU implementations' value checks (ids in range, offsets ordered,
  // inverse indices rows or -1), and ids are distinct per token.
  using Spec = InstantiatedCase::InputSpec;
  const auto bf16 = [](Sizes s) {
    return std::optional<Spec>(Spec{DType::bfloat16, std::move(s)});
  };
  const auto typed = [](DType d, Sizes s) { return std::optional<Spec>(Spec{d, std::move(s)}); };
  const auto fp8 = [](Sizes s) {
    return std::optional<Spec>(Spec{DType::float8_e4m3fn, std::move(s)});
  };
  const std::optional<Spec> absent;
  struct Case {
    const char* op;
    ParamMap params;
    std::vector<std::optional<Spec>> inputs;
  };
  const std::vector<Case> cases = {
      {"MoEPrePermuteFwdOp",
       {{"num_experts", std::int64_t{8}}},
       {bf16({6, 16}), typed(DType::int32, {6, 3}), absent}},
      {"MoEPrePermuteFwdOp",
       {{"num_experts", std::int64_t{4}}},
       {bf16({6, 16}), typed(DType::int32, {6, 3}), typed(DType::int32, {16})}},
      {"MoEGroupedGemmFwdOp",
       {{"activation", std::string("silu_and_mul")}},
       {bf16({20, 32}), typed(DType::int32, {5}), bf16({4, 16, 32})}},
      {"MoEPostPermuteFwdOp",
       {{"scale", 1.0}},
       {bf16({12, 16}), typed(DType::float32, {4, 3}), typed(DType::int32, {4, 3})}},
      {"MoEExpertMLPFwdOp",
       {{"activation", std::string("silu_and_mul")}},
       {bf16({20, 32}), typed(DType::int32, {5}), bf16({4, 16, 32}), bf16({4, 32, 8})}},
      {"FusedMoEExpertsFwdOp",
       {{"activation", std::string("silu_and_mul")}},
       {bf16({5, 32}), typed(DType::float32, {5, 2}), typed(DType::int32, {5, 2}),
        bf16({4, 16, 32}), bf16({4, 32, 8}), absent, absent, absent}},
      {"FusedMoEFwdOp",
       {{"top_k", std::int64_t{2}}},
       {bf16({5, 32}), typed(DType::float32, {5, 4}), bf16({4, 16, 32}), bf16({4, 32, 8}),
        typed(DType::float32, {4}), absent, absent}},
      // FP8 experts: e4m3 weights and their 128 x 128 block scales
      {"MoEExpertMLPFP8FwdOp",
       {{"activation", std::string("silu_and_mul")}},
       {bf16({20, 128}), typed(DType::int32, {5}), fp8({4, 256, 128}), fp8({4, 128, 128}),
        typed(DType::float32, {4, 2, 1}), typed(DType::float32, {4, 1, 1}), absent}},
      // the rows MoEPrePermuteQuantFP8FwdOp hands over
      {"MoEExpertMLPFP8FwdOp",
       {{"activation", std::string("silu_and_mul")}},
       {fp8({20, 128}), typed(DType::int32, {5}), fp8({4, 256, 128}), fp8({4, 128, 128}),
        typed(DType::float32, {4, 2, 1}), typed(DType::float32, {4, 1, 1}),
        typed(DType::float32, {20, 1})}},
      {"MoEPrePermuteQuantFP8FwdOp",
       {{"num_experts", std::int64_t{4}}, {"group_size", std::int64_t{128}}, {"eps", 1e-10}},
       {bf16({6, 256}), typed(DType::int32, {6, 3}), typed(DType::int32, {16})}},
      // the masked layout: balanced (every expert max_m = 3 rows), and distinct ids with a map
      {"MoEPrePermuteQuantFP8MaskedFwdOp",
       {{"num_experts", std::int64_t{4}},
        {"max_m", std::int64_t{3}},
        {"group_size", std::int64_t{128}},
        {"eps", 1e-10}},
       {bf16({6, 256}), typed(DType::int32, {6, 2}), absent}},
      {"MoEPrePermuteQuantFP8MaskedFwdOp",
       {{"num_experts", std::int64_t{4}},
        {"max_m", std::int64_t{6}},
        {"group_size", std::int64_t{128}},
        {"eps", 1e-10}},
       {bf16({6, 256}), typed(DType::int32, {6, 3}), typed(DType::int32, {16})}},
      {"MoEExpertMLPFP8MaskedFwdOp",
       {{"activation", std::string("silu_and_mul")}},
       {fp8({4, 3, 128}), typed(DType::float32, {4, 3, 1}), typed(DType::int32, {4}),
        fp8({4, 256, 128}), fp8({4, 128, 128}), typed(DType::float32, {4, 2, 1}),
        typed(DType::float32, {4, 1, 1})}},
      {"FusedMoEExpertsFwdOp",
       {{"activation", std::string("silu_and_mul")}},
       {bf16({5, 128}), typed(DType::float32, {5, 2}), typed(DType::int32, {5, 2}),
        fp8({4, 256, 128}), fp8({4, 128, 128}), absent, typed(DType::float32, {4, 2, 1}),
        typed(DType::float32, {4, 1, 1})}},
      {"FusedMoEFwdOp",
       {{"top_k", std::int64_t{2}}},
       {bf16({5, 128}), typed(DType::float32, {5, 4}), fp8({4, 256, 128}), fp8({4, 128, 128}),
        typed(DType::float32, {4}), typed(DType::float32, {4, 2, 1}),
        typed(DType::float32, {4, 1, 1})}},
  };
  for (const Case& c : cases) {
    const OpClass* op_class = find_op_class(c.op);
    ASSERT_NE(op_class, nullptr) << c.op;
    const WorkloadInputsFn* workload_inputs = find_workload_inputs(c.op);
    ASSERT_NE(workload_inputs, nullptr) << c.op;
    const InstantiatedCase inst{c.params, c.inputs};
    const std::vector<Tensor> inputs = (*workload_inputs)(inst, 7, Device::cpu());
    ASSERT_EQ(inputs.size(), c.inputs.size()) << c.op;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      ASSERT_EQ(inputs[i].defined(), c.inputs[i].has_value()) << c.op << " input " << i;
      if (inputs[i].defined()) {
        EXPECT_EQ(inputs[i].sizes(), c.inputs[i]->shape) << c.op;
      }
      if (op_class->schema->inputs[i].name != "topk_ids") continue;
      const auto ids = inputs[i].to_vector();
      const auto k = static_cast<std::size_t>(inputs[i].size(1));
      for (std::size_t t = 0; t < ids.size(); t += k) {
        std::vector<double> row(ids.begin() + t, ids.begin() + t + k);
        std::sort(row.begin(), row.end());
        EXPECT_EQ(std::adjacent_find(row.begin(), row.end()), row.end()) << c.op;
      }
    }
    const auto op = make_op(c.op, c.params);
    EXPECT_NO_THROW(op->call(inputs)) << c.op;
  }
}

}  // namespace
}  // namespace tileops
