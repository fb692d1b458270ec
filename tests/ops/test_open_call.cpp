// Op::open_call and delegate_for by class name, the base-class entry points the Python composites
// run through (docs/design/torch-boundary.md): a body run by the caller has its sub-op calls
// filed under their stages, is recorded at close, and is undone when not closed; a sub-op held
// by name gets the typed form's checks. On the MoE expert MLP and experts, on the CPU.
#include <cstring>

#include "ops/moe_test_inputs.h"
#include "ops/ops_test_util.h"
#include "tileops/ops/moe.h"

namespace tileops {
namespace {

using testing::HasSubstr;
using testing_util::message_of;
using namespace moe_test;  // NOLINT: the tests' inputs

struct MLPInputs {
  Tensor x = Tensor::randn({11, 32}, DType::bfloat16, 1);
  Tensor offsets = offsets_of({4, 0, 6, 1});
  Tensor w13 = weight({4, 2 * 16, 32}, DType::bfloat16, 2);
  Tensor w2 = weight({4, 32, 16}, DType::bfloat16, 3);
  std::vector<Tensor> all() const { return {x, offsets, w13, w2}; }
};

// The MLP's wiring run by hand on the held stages: gate_up, then down into `y`.
void run_stages(const Op& op, const MLPInputs& in, const Tensor& y) {
  const std::vector<Op*> held = op.held_delegates();
  const Tensor h = held[0]->call(std::vector<Tensor>{in.x, in.offsets, in.w13})[0];
  held[1]->call(std::vector<Tensor>{h, in.offsets, in.w2}, std::vector<Tensor>{y});
}

TEST(OpenCall, FilesTheBodysSubOpCallsAndRecordsAtClose) {
  const MLPInputs in;
  MoEExpertMLPFwdOp op({});
  const Tensor want = MoEExpertMLPFwdOp({})(in.x, in.offsets, in.w13, in.w2);
  auto open = op.open_call(in.all());
  ASSERT_FALSE(open->complete());
  ASSERT_EQ(open->outputs().size(), 1u);
  const Tensor y = open->outputs()[0];  // allocated from the signature, as for forward
  EXPECT_EQ(y.sizes(), (Sizes{11, 32}));
  EXPECT_EQ(open->record().dim("M"), 11);
  EXPECT_EQ(op.serving_target(), "BUILTIN");  // selected at open
  run_stages(op, in, y);
  EXPECT_THROW((void)op.last_call(), UsageError);  // recorded only at close
  const std::vector<Tensor> got = open->close({y});
  ASSERT_EQ(got[0].data_ptr(), y.data_ptr());
  EXPECT_EQ(std::memcmp(y.data_ptr(), want.data_ptr(), y.nbytes()), 0);  // forward's bits
  const auto call = op.last_call();
  EXPECT_EQ(call->dim("M"), 11);
  EXPECT_EQ(call->stage("gate_up").size(), 1u);
  EXPECT_EQ(call->stage("down").size(), 1u);
  EXPECT_TRUE(call->stage("down")[0]->has_out);
  EXPECT_THAT(message_of([&] { open->close({y}); }), HasSubstr("complete"));
}

TEST(OpenCall, DestroyedUnclosedIsUndone) {
  const MLPInputs in;
  MoEExpertMLPFwdOp op({});
  {
    auto open = op.open_call(in.all());
    run_stages(op, in, open->outputs()[0]);
  }
  EXPECT_THROW((void)op.last_call(), UsageError);
  EXPECT_EQ(op.serving_target(), std::nullopt);  // the binding this call made, reset ...
  for (const Op* sub : op.held_delegates()) {
    EXPECT_EQ(sub->serving_target(), std::nullopt) << sub->name();  // ... through the sub-ops
  }
  // The next call works, and its record holds its own stages only.
  auto open = op.open_call(in.all());
  run_stages(op, in, open->outputs()[0]);
  open->close({open->outputs()[0]});
  EXPECT_EQ(op.last_call()->stage("gate_up").size(), 1u);
}

TEST(OpenCall, CloseRefusesAnotherTensorThanTheOutputGiven) {
  const MLPInputs in;
  MoEExpertMLPFwdOp op({});
  auto open = op.open_call(in.all());
  run_stages(op, in, open->outputs()[0]);
  const Tensor other = Tensor::empty({11, 32}, DType::bfloat16);
  EXPECT_THAT(message_of([&] { open->close({other}); }),
              HasSubstr("MoEExpertMLPFwdOp: output 'y': the body did not return the output it was "
                        "given to write"));
  open.reset();
  EXPECT_THROW((void)op.last_call(), UsageError);
  EXPECT_EQ(op.serving_target(), std::nullopt);
}

TEST(OpenCall, TheCallersOutIsTheOutputAndTheShapeIsChecked) {
  const MLPInputs in;
  MoEExpertMLPFwdOp op({});
  const Tensor out = Tensor::empty({11, 32}, DType::bfloat16);
  auto open = op.open_call(in.all(), std::vector<Tensor>{out});
  EXPECT_EQ(open->outputs()[0].data_ptr(), out.data_ptr());
  run_stages(op, in, out);
  open->close({out});
  EXPECT_TRUE(op.last_call()->has_out);
  EXPECT_THAT(message_of([&] {
                (void)op.open_call(std::vector<Tensor>{in.x, in.offsets});
              }),
              HasSubstr("MoEExpertMLPFwdOp"));
}

TEST(OpenCall, OnlyTheInnermostOpenCallCloses) {
  const MLPInputs in;
  MoEExpertMLPFwdOp outer_op({});
  MoEExpertMLPFwdOp inner_op({});
  auto outer = outer_op.open_call(in.all());
  auto inner = inner_op.open_call(in.all());
  EXPECT_THAT(message_of([&] { outer->close(outer->outputs()); }),
              HasSubstr("not this thread's innermost running call"));
  inner.reset();  // undone; the outer call stays open and closes
  run_stages(outer_op, in, outer->outputs()[0]);
  outer->close(outer->outputs());
  EXPECT_EQ(outer_op.last_call()->stage("down").size(), 1u);
}

TEST(OpenCall, ACallWritingNothingIsCompleteAtOpen) {
  MoEExpertMLPFwdOp op({});
  const Tensor x = Tensor::empty({0, 32}, DType::bfloat16);
  auto open = op.open_call(std::vector<Tensor>{x, offsets_of({0, 0, 0, 0}),
                                               weight({4, 2 * 16, 32}, DType::bfloat16, 2),
                                               weight({4, 32, 16}, DType::bfloat16, 3)});
  ASSERT_TRUE(open->complete());
  EXPECT_EQ(open->outputs()[0].sizes(), (Sizes{0, 32}));
  EXPECT_EQ(op.last_call()->dim("M"), 0);
  EXPECT_EQ(op.serving_target(), std::nullopt);  // nothing ran, nothing was selected
}

TEST(DelegateForByName, HoldsOnceWithTheCompositesTargetAndChecksTheClass) {
  FusedMoEExpertsFwdOp op({}, Target::builtin());
  const std::size_t before = op.held_delegates().size();
  Op& pre = op.delegate_for("pre_permute", "E=4", "MoEPrePermuteFwdOp",
                            {{"num_experts", std::int64_t{4}}});
  EXPECT_EQ(pre.name(), "MoEPrePermuteFwdOp");
  EXPECT_TRUE(pre.target().is_builtin());
  EXPECT_EQ(std::get<std::int64_t>(pre.param_values().at("num_experts")), 4);
  EXPECT_EQ(&op.delegate_for("pre_permute", "E=4", "MoEPrePermuteFwdOp", {}), &pre);
  EXPECT_EQ(op.held_delegates().size(), before + 1);
  EXPECT_THAT(message_of([&] { op.delegate_for("pre_permute", "E=5", "MoEPostPermuteFwdOp", {}); }),
              HasSubstr("FusedMoEExpertsFwdOp: delegate_for: stage 'pre_permute' holds "
                        "MoEPrePermuteFwdOp, got MoEPostPermuteFwdOp"));
  EXPECT_THAT(message_of([&] { op.delegate_for("gate", std::nullopt, "MoEPrePermuteFwdOp", {}); }),
              HasSubstr("unknown stage 'gate'"));
  const auto given =
      std::shared_ptr<Op>(make_op("MoEPrePermuteFwdOp", {{"num_experts", std::int64_t{6}}}));
  EXPECT_EQ(&op.delegate_for("pre_permute", "E=6", "", {}, given), given.get());
  EXPECT_FALSE(given->target().is_set());  // a given instance keeps its own target
  EXPECT_THAT(message_of([&] { op.delegate_for("pre_permute", "E=7", "", {}, given); }),
              HasSubstr("is already held under stage 'pre_permute' (identity E=6)"));
  EXPECT_EQ(op.held_delegates().size(), before + 2);
}

}  // namespace
}  // namespace tileops
