// Composite ops: delegate_for, stages, inheritance of the target, tuned mode, undo.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/toy_op.h"
#include "tileops/target/target.h"

namespace toy {
namespace {

using testing::HasSubstr;

struct Table {
  static std::vector<ImplementationInfo> kernel_types() {
    auto info = implementation<ToyKernel<3>>("general", "ToyKernel3");
    info.general = true;
    return {info};
  }
};
using Scale = ToyScaleFwdOp<Table>;

const OpSchema& chain_schema() {
  static const OpSchema schema = [] {
    OpSchema s = toy_schema();
    s.name = "ToyChainFwdOp";
    s.eval_roofline = nullptr;
    s.composition = {StageInfo{"first", "ToyScaleFwdOp"}, StageInfo{"second", "ToyScaleFwdOp"}};
    s.compile_op_names = {};  // a composite is no node of its own
    s.compile_op_schemas = {};
    return s;
  }();
  return schema;
}

/// y = b * (a * x) through two held ToyScaleFwdOp sub-ops. `Mode` picks how it misbehaves.
enum class Mode { normal, per_call_identity, unheld_subop, reuse_instance };

/// With OwnKernels, the composite also declares a kernel interface and implementation of its own
/// (which its forward does not use).
template <bool OwnKernels>
class ToyChainOp final : public tileops::Op {
 public:
  struct Params {
    double a = 1.0;
    double b = 1.0;
  };
  static const OpSchema& schema_data() { return chain_schema(); }
  static Params params_from_map(const ParamMap&) { return {}; }
  static std::vector<DelegateType> delegate_types() {
    return {{"first", "ToyScaleFwdOp"}, {"second", "ToyScaleFwdOp"}};
  }
  static std::vector<InterfaceInfo> interfaces() requires OwnKernels {
    return {interface<ToyInterface>()};
  }
  static std::vector<ImplementationInfo> kernel_types() requires OwnKernels {
    return Table::kernel_types();
  }
  ToyChainOp(Params p, Target target = {}, std::shared_ptr<Scale> given_second = nullptr,
             Mode mode = Mode::normal)
      : Op(op_class_of<ToyChainOp>(), std::move(target)), p_(p), mode_(mode) {
    construct([](const void*) {}, &p_, ParamMap{{"a", p.a}, {"b", p.b}});
    // Sub-ops settled at construction: identity None.
    first_ = &delegate_for<Scale>("first", std::nullopt, nullptr, {.scale = p.a});
    second_ = &delegate_for<Scale>("second", std::nullopt, std::move(given_second), {.scale = p.b});
  }
  Tensor operator()(const Tensor& x) {
    const Tensor* in[] = {&x};
    const Tensor* outs[] = {&kNone};
    return run_call(CallArgs{in, outs})[0];
  }
  using Op::delegate_for;
  Scale* first_ = nullptr;
  Scale* second_ = nullptr;
  std::unique_ptr<Scale> stray = std::make_unique<Scale>(Scale::Params{.scale = 1.0});

 private:
  SignatureCall check_call(const CallArgs& a) const override {
    SignatureCall call = toy_check_call(a);
    SignatureCall renamed(&chain_schema());
    renamed.indices = call.indices;
    renamed.device = call.device;
    renamed.tensors = call.tensors;
    renamed.present = call.present;
    renamed.stages = {{"first", {}}, {"second", {}}};
    return renamed;
  }
  void run_forward(const SignatureCall&, const CallArgs& a, std::span<const Tensor> o) override {
    const Tensor& x = *a.inputs[0];
    Scale* first = first_;
    if (mode_ == Mode::per_call_identity) {
      // Call-time construction argument: one sub-op per length of x.
      first = &delegate_for<Scale>("first", std::to_string(x.numel()), nullptr, {.scale = p_.a});
    }
    const Tensor mid = (*first)(x);
    if (mode_ == Mode::unheld_subop) (*stray)(mid);
    if (mode_ == Mode::reuse_instance) {
      std::shared_ptr<Scale> again(second_, [](Scale*) {});
      delegate_for<Scale>("first", "other", again);
    }
    (*second_)(mid, o[0]);
  }
  static inline const Tensor kNone{};
  Params p_;
  Mode mode_;
};

using ToyChainFwdOp = ToyChainOp<false>;

class Composite : public testing::Test {
 protected:
  void SetUp() override { tileops::detail::reset_registry_for_tests(); }
  void TearDown() override { tileops::detail::reset_registry_for_tests(); }
};

TEST_F(Composite, SubOpCallsAreFiledUnderTheirStages) {
  ToyChainFwdOp op({.a = 2.0, .b = 3.0});
  const Tensor x = Tensor::randn({4}, DType::float32, 1);
  const Tensor y = op(x);
  EXPECT_FLOAT_EQ(y.item_at({2}), 6.0 * x.item_at({2}));
  const auto call = op.last_call();
  ASSERT_EQ(call->stages.size(), 2u);
  EXPECT_EQ(call->stage("first").size(), 1u);
  EXPECT_EQ(call->stage("second").size(), 1u);
  EXPECT_EQ(call->stage("first")[0]->dim("N"), 4);
  EXPECT_EQ(op.held_delegates().size(), 2u);
  EXPECT_EQ(op.held_delegates()[0], op.first_);
  EXPECT_EQ(op.iter_kernels().size(), 2u);  // derived from the held sub-ops
}

TEST_F(Composite, OneStageAndIdentityIsBuiltOnce) {
  ToyChainFwdOp op({.a = 2.0, .b = 1.0}, {}, nullptr, Mode::per_call_identity);
  op(Tensor::randn({4}, DType::float32, 1));
  op(Tensor::randn({4}, DType::float32, 2));
  op(Tensor::randn({5}, DType::float32, 3));
  // first (None), first ("4"), first ("5"), second (None)
  EXPECT_EQ(op.held_delegates().size(), 4u);
  auto& again = op.delegate_for<Scale>("first", std::string("4"), nullptr, {});
  EXPECT_EQ(op.held_delegates()[1], &again);
  EXPECT_EQ(op.last_call()->stage("first").size(), 1u);
}

TEST_F(Composite, UnknownStageIsAnError) {
  ToyChainFwdOp op({});
  EXPECT_THROW(op.delegate_for<Scale>("third", std::nullopt, nullptr, {}), UsageError);
}

TEST_F(Composite, AnUnheldSubOpCompletingACallFailsTheParent) {
  ToyChainFwdOp op({}, {}, nullptr, Mode::unheld_subop);
  EXPECT_THROW(op(Tensor::randn({3}, DType::float32, 1)), UsageError);
  try {
    op(Tensor::randn({3}, DType::float32, 1));
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is not held through delegate_for"));
  }
  EXPECT_THROW(op.last_call(), UsageError);
}

TEST_F(Composite, AnInstanceIsHeldOnce) {
  ToyChainFwdOp op({}, {}, nullptr, Mode::reuse_instance);
  EXPECT_THROW(op(Tensor::randn({3}, DType::float32, 1)), UsageError);
}

TEST_F(Composite, BuiltSubOpsInheritTheTargetInjectedOnesKeepTheirs) {
  auto injected = std::make_shared<Scale>(Scale::Params{.scale = 3.0}, Target::builtin());
  ToyChainFwdOp op({.a = 2.0}, Target("elsewhere"), injected);
  EXPECT_EQ(op.first_->target().name(), "elsewhere");
  EXPECT_EQ(op.second_, injected.get());
  EXPECT_TRUE(op.second_->target().is_builtin());
}

TEST_F(Composite, TargetWithoutBuilderRunsTheCompositionAndUndoIsRecursive) {
  register_detector("dev", [](const Device&) { return true; });
  register_kernel_builder("ToyScaleFwdOp", "dev", [](auto, const ParamMap& p) {
    const double scale = std::get<double>(p.at("scale"));
    return TargetKernel([scale](std::span<const Tensor> in, std::span<const Tensor> outs) {
      const Tensor y = outs[0].defined() ? outs[0] : Tensor::empty(in[0].sizes(), in[0].dtype());
      const auto xv = in[0].to_vector();
      for (std::int64_t i = 0; i < in[0].numel(); ++i) y.set_at({i}, xv[i] * scale * 10);
      return std::vector<Tensor>{y};
    });
  });
  ToyChainFwdOp op({.a = 1.0, .b = 1.0});
  const Tensor x = Tensor::randn({2}, DType::float32, 1);
  const Tensor y = op(x);  // the composite has no builder: runs its composition
  EXPECT_EQ(op.serving_target(), "dev");
  EXPECT_EQ(op.first_->serving_target(), "dev");
  EXPECT_NEAR(y.item_at({0}), 100.0 * x.item_at({0}), 1e-4);
  // Undo travels through held sub-ops when the failing call selected the composite's target.
  ToyChainFwdOp fresh({});
  fresh.first_->before_kernel = [] { throw std::runtime_error("boom"); };
  detail::reset_registry_for_tests();  // in-tree from now on
  EXPECT_THROW(fresh(x), std::runtime_error);
  EXPECT_FALSE(fresh.serving_target().has_value());
  EXPECT_FALSE(fresh.first_->serving_target().has_value());
}

TEST_F(Composite, ATargetWithoutBuilderRefusesACompositeWithKernelsOfItsOwn) {
  register_detector("dev", [](const Device&) { return true; });
  register_kernel_builder("ToyScaleFwdOp", "dev", [](auto, const ParamMap&) {
    return TargetKernel([](std::span<const Tensor> in, std::span<const Tensor> outs) {
      const Tensor y = outs[0].defined() ? outs[0] : Tensor::empty(in[0].sizes(), in[0].dtype());
      y.copy_(in[0]);
      return std::vector<Tensor>{y};
    });
  });
  const Tensor x = Tensor::randn({2}, DType::float32, 1);
  ToyChainOp<true> hybrid({});
  try {
    hybrid(x);
    ADD_FAILURE() << "a composite with kernels of its own ran on a target without a builder";
  } catch (const OpNotAvailableError& e) {
    EXPECT_THAT(e.what(), HasSubstr("target 'dev' registers no kernel builder for ToyChainFwdOp"));
  }
  EXPECT_FALSE(hybrid.serving_target().has_value());
  ToyChainFwdOp composition_only({});  // no kernels of its own: runs its composition on 'dev'
  composition_only(x);
  EXPECT_EQ(composition_only.serving_target(), "dev");
}

TEST_F(Composite, TunedModeReachesNewlyHeldSubOps) {
  ToyChainFwdOp op({}, {}, nullptr, Mode::per_call_identity);
  op.request_tune();
  EXPECT_TRUE(op.first_->tune_requested());
  op(Tensor::randn({7}, DType::float32, 1));  // holds first("7") in tuned mode
  for (Op* sub : op.held_delegates()) EXPECT_TRUE(sub->tune_requested());
  for (Kernel* k : op.iter_kernels()) EXPECT_TRUE(k->tune_requested());
}

TEST_F(Composite, DelegateTypesAreCheckedAgainstTheComposition) {
  const auto problems = detail::check_op_class(op_class_of<ToyChainFwdOp>());
  EXPECT_TRUE(problems.empty());
  OpClass wrong = op_class_of<ToyChainFwdOp>();
  std::swap(wrong.delegate_types[0], wrong.delegate_types[1]);
  wrong.delegate_types[0].stage = "second";
  wrong.delegate_types[1].stage = "first";
  const auto order = detail::check_op_class(wrong);
  ASSERT_EQ(order.size(), 1u);
  EXPECT_THAT(order[0], HasSubstr("disagree with the manifest composition"));
}

TEST_F(Composite, CompileOpNamesAreCheckedAgainstTheBoundaryConditions) {
  // A composite with compile operators, and an op with a tensor input without them: both are
  // registration problems (the boundary exists exactly without composition, with an input).
  OpClass composite = op_class_of<ToyChainFwdOp>();
  OpSchema with_names = *composite.schema;
  with_names.compile_op_names = {"tileops::testing_toy_chain_fwd"};
  with_names.compile_op_schemas = {"(str key, Tensor x) -> Tensor"};
  composite.schema = &with_names;
  const auto named = detail::check_op_class(composite);
  ASSERT_EQ(named.size(), 1u);
  EXPECT_THAT(named[0], HasSubstr("compile_op_names"));

  // The same class as a leaf (no composition) without names.
  OpClass leaf = op_class_of<ToyChainFwdOp>();
  OpSchema without = *leaf.schema;
  without.composition = {};
  leaf.delegate_types = {};
  leaf.schema = &without;
  const auto unnamed = detail::check_op_class(leaf);
  ASSERT_EQ(unnamed.size(), 1u);
  EXPECT_THAT(unnamed[0], HasSubstr("boundary conditions"));
}

}  // namespace
}  // namespace toy
