// Construction, the seven steps of a call, records, roofline, targets, undo, tuning, threads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "base/toy_op.h"
#include "tileops/target/target.h"

namespace toy {
namespace {

using testing::HasSubstr;

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no exception";
}

class Lifecycle : public testing::Test {
 protected:
  void SetUp() override {
    tileops::detail::reset_registry_for_tests();
    tileops::detail::reset_kernel_types_for_tests();
  }
  void TearDown() override {
    tileops::detail::reset_registry_for_tests();
    tileops::detail::reset_kernel_types_for_tests();
  }
};

TEST_F(Lifecycle, ConstructionSelectsAndBuildsNothing) {
  Op1 op({.scale = 3.0});
  EXPECT_FALSE(op.serving_target().has_value());
  EXPECT_TRUE(op.built_entries("toy_scale").empty());
  EXPECT_TRUE(op.iter_kernels().empty());
  EXPECT_THROW(op.last_call(), UsageError);
  EXPECT_EQ(std::get<double>(op.param_values().at("scale")), 3.0);
}

TEST_F(Lifecycle, InstanceKeysAreUniqueAndNeverReused) {
  std::string first;
  {
    Op1 a({});
    first = a.instance_key();
  }
  Op1 b({});
  Op1 c({});
  EXPECT_NE(b.instance_key(), first);
  EXPECT_NE(b.instance_key(), c.instance_key());
  EXPECT_THAT(b.instance_key(), HasSubstr("ToyScaleFwdOp#"));
}

TEST_F(Lifecycle, ParameterCheckRunsAtConstruction) {
  EXPECT_THROW(Op1({.scale = std::nan("")}), SignatureError);
}

TEST_F(Lifecycle, CallComputesRecordsAndEvaluatesTheRoofline) {
  Op1 op({.scale = 2.0});
  const Tensor x = Tensor::randn({5}, DType::float32, 7);
  const Tensor y = op(x);
  for (std::int64_t i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(y.item_at({i}), 2.0 * x.item_at({i}));
  EXPECT_EQ(op.serving_target(), "BUILTIN");
  const auto call = op.last_call();
  EXPECT_EQ(call->dim("N"), 5);
  EXPECT_EQ(call->dtype_index("T"), DType::float32);
  EXPECT_FALSE(call->has_out);
  const Roofline r = op.eval_roofline();
  EXPECT_EQ(r.flops, 5);
  EXPECT_EQ(r.bytes, 5 * 4 * 2);
  EXPECT_EQ(op.eval_roofline_read_bytes(), 5 * 4);
}

TEST_F(Lifecycle, OutBufferIsWrittenAndReturned) {
  Op1 op({.scale = -1.0});
  const Tensor x = Tensor::randn({3}, DType::float32, 8);
  const Tensor out = Tensor::full({3}, 99.0, DType::float32);
  const Tensor y = op(x, out);
  EXPECT_EQ(y.data_ptr(), out.data_ptr());
  EXPECT_FLOAT_EQ(out.item_at({1}), -x.item_at({1}));
  EXPECT_TRUE(op.last_call()->has_out);
}

TEST_F(Lifecycle, EmptyWriteRunsNothingAndSelectsNoTarget) {
  Op1 op({});
  const Tensor y = op(Tensor::empty({0}, DType::float32));
  EXPECT_EQ(y.numel(), 0);
  EXPECT_FALSE(op.serving_target().has_value());
  EXPECT_TRUE(op.iter_kernels().empty());
  EXPECT_EQ(op.last_call()->dim("N"), 0);
}

TEST_F(Lifecycle, FailedSignatureKeepsLastCall) {
  Op1 op({});
  op(Tensor::randn({4}, DType::float32, 1));
  const auto before = op.last_call();
  EXPECT_THROW(op(Tensor::randn({2, 2}, DType::float32, 1)), SignatureError);
  EXPECT_EQ(op.last_call(), before);
  EXPECT_THAT(message_of([&] { op(Tensor::zeros({4}, DType::int32)); }),
              HasSubstr("declared T in DType[float32 | float16], got int32"));
}

TEST_F(Lifecycle, FailureUndoesTheTargetOnlyWhenThisCallSelectedIt) {
  Op1 op({});
  const Tensor x = Tensor::randn({4}, DType::float32, 1);
  op.before_kernel = [] { throw std::runtime_error("kernel failed"); };
  EXPECT_THROW(op(x), std::runtime_error);
  EXPECT_FALSE(op.serving_target().has_value());  // this call selected it: undone
  EXPECT_TRUE(op.built_entries("toy_scale").empty());
  op.before_kernel = nullptr;
  op(x);
  EXPECT_EQ(op.serving_target(), "BUILTIN");
  const auto record = op.last_call();
  op.before_kernel = [] { throw std::runtime_error("kernel failed"); };
  EXPECT_THROW(op(x), std::runtime_error);
  EXPECT_EQ(op.serving_target(), "BUILTIN");  // selected earlier: kept
  EXPECT_EQ(op.built_entries("toy_scale").size(), 1u);
  EXPECT_EQ(op.last_call(), record);
}

TEST_F(Lifecycle, DetectedTargetServesThroughItsBuilder) {
  std::vector<std::vector<std::optional<TensorSpec>>> seen_specs;
  ParamMap seen_params;
  int builds = 0;
  register_detector("fake", [](const Device& d) { return d.is_cpu(); });
  register_kernel_builder(
      "ToyScaleFwdOp", "fake",
      [&](std::span<const std::optional<TensorSpec>> specs, const ParamMap& p) {
        ++builds;
        seen_specs.emplace_back(specs.begin(), specs.end());
        seen_params = p;
        return TargetKernel([](std::span<const Tensor> in, std::span<const Tensor>) {
          return std::vector<Tensor>{Tensor::full(in[0].sizes(), 42.0, in[0].dtype())};
        });
      });
  Op1 op({.scale = 5.0});
  const Tensor y = op(Tensor::randn({3}, DType::float32, 1));
  EXPECT_EQ(op.serving_target(), "fake");
  EXPECT_EQ(y.item_at({0}), 42.0);
  op(Tensor::randn({3}, DType::float32, 2));  // same device, dtype, shape: cached
  EXPECT_EQ(builds, 1);
  op(Tensor::randn({4}, DType::float32, 3));  // another shape: built again
  EXPECT_EQ(builds, 2);
  ASSERT_EQ(seen_specs.size(), 2u);
  ASSERT_TRUE(seen_specs[0][0].has_value());
  EXPECT_EQ(seen_specs[0][0]->shape, (Sizes{3}));
  EXPECT_EQ(seen_specs[0][0]->dtype, DType::float32);
  EXPECT_EQ(std::get<double>(seen_params.at("scale")), 5.0);
  EXPECT_EQ(op.built_entries("ignored").size(), 2u);
  EXPECT_TRUE(op.iter_kernels().empty());  // target kernels are not in-tree kernels
}

TEST_F(Lifecycle, BuiltinForcesTheInTreeKernels) {
  register_detector("fake", [](const Device&) { return true; });
  Op1 op({}, Target::builtin());
  op(Tensor::randn({3}, DType::float32, 1));
  EXPECT_EQ(op.serving_target(), "BUILTIN");
}

TEST_F(Lifecycle, TargetErrors) {
  const Tensor x = Tensor::randn({3}, DType::float32, 1);
  {
    Op1 op({}, Target("nowhere"));
    EXPECT_THROW(op(x), UnknownTargetError);
    EXPECT_THAT(message_of([&] { op(x); }), HasSubstr("no backend registered target 'nowhere'"));
    EXPECT_FALSE(op.serving_target().has_value());
  }
  register_detector("one", [](const Device&) { return true; });
  register_detector("two", [](const Device&) { return true; });
  {
    Op1 op({});
    EXPECT_THROW(op(x), AmbiguousTargetError);
  }
  {
    register_kernel_builder("OtherOp", "one", [](auto, const ParamMap&) { return TargetKernel(); });
    Op1 op({}, Target("two"));
    EXPECT_THROW(op(x), OpNotAvailableError);
    EXPECT_THAT(message_of([&] { op(x); }),
                HasSubstr("target 'two' registers no kernel builder for ToyScaleFwdOp"));
  }
  EXPECT_THROW(register_detector("one", [](const Device&) { return false; }), BackendError);
}

TEST_F(Lifecycle, DefaultTargetApplies) {
  register_kernel_builder("ToyScaleFwdOp", "dflt", [](auto, const ParamMap&) {
    return TargetKernel([](std::span<const Tensor> in, std::span<const Tensor>) {
      return std::vector<Tensor>{in[0].clone()};
    });
  });
  set_default_target(Target("dflt"));
  Op1 op({});
  op(Tensor::randn({2}, DType::float32, 1));
  EXPECT_EQ(op.serving_target(), "dflt");
  EXPECT_THAT(registered_targets("ToyScaleFwdOp"), testing::ElementsAre("dflt"));
}

/// A target "t" whose kernel returns what `outputs` makes of the call's inputs and `out`s.
void register_returning(
    std::function<std::vector<Tensor>(std::span<const Tensor>, std::span<const Tensor>)> outputs) {
  register_kernel_builder("ToyScaleFwdOp", "t",
                          [outputs](auto, const ParamMap&) { return TargetKernel(outputs); });
}

TEST_F(Lifecycle, ATargetKernelsOutputsAreCheckedAgainstTheSignature) {
  const Tensor x = Tensor::randn({3}, DType::float32, 1);
  struct Case {
    const char* what;
    std::function<std::vector<Tensor>(std::span<const Tensor>, std::span<const Tensor>)> outputs;
    const char* message;
  };
  const Case cases[] = {
      {"a wrong shape",
       [](auto, auto) { return std::vector<Tensor>{Tensor::zeros({4}, DType::float32)}; },
       "ToyScaleFwdOp: output 'y' declared T [N]: expected float32 [3] on cpu, got"},
      {"a wrong dtype",
       [](auto, auto) { return std::vector<Tensor>{Tensor::zeros({3}, DType::float16)}; },
       "ToyScaleFwdOp: output 'y' declared T [N]: expected float32 [3] on cpu, got"},
      {"no tensor", [](auto, auto) { return std::vector<Tensor>{Tensor()}; },
       "ToyScaleFwdOp: output 'y': the implementation returned no tensor"},
      {"two outputs",
       [](auto in, auto) {
         return std::vector<Tensor>{in[0].clone(), in[0].clone()};
       },
       "ToyScaleFwdOp: the implementation returned 2 outputs, the manifest declares 1"},
      {"the input itself", [](auto in, auto) { return std::vector<Tensor>{in[0]}; },
       "ToyScaleFwdOp: output 'y': a new output shares storage with an input"},
  };
  for (const Case& c : cases) {
    tileops::detail::reset_registry_for_tests();
    register_returning(c.outputs);
    Op1 op({}, Target("t"));
    EXPECT_THROW(op(x), SignatureError) << c.what;
    EXPECT_THAT(message_of([&] { op(x); }), HasSubstr(c.message)) << c.what;
    // The failed call selected the target: the selection is undone, no record is kept.
    EXPECT_FALSE(op.serving_target().has_value()) << c.what;
    EXPECT_THROW(op.last_call(), UsageError) << c.what;
  }
}

TEST_F(Lifecycle, ATargetKernelMustReturnTheCallersOut) {
  const Tensor x = Tensor::randn({3}, DType::float32, 1);
  register_returning([](auto in, auto) { return std::vector<Tensor>{in[0].clone()}; });
  Op1 op({}, Target("t"));
  const Tensor y = op(x);  // no `out`: a new tensor is what it should return
  EXPECT_EQ(y.to_vector(), x.to_vector());
  const auto record = op.last_call();
  const Tensor out = Tensor::zeros({3}, DType::float32);
  EXPECT_THAT(message_of([&] { op(x, out); }),
              HasSubstr("ToyScaleFwdOp: output 'y': the implementation did not return the "
                        "caller's `out`"));
  // Selected by the first call, so kept; the failed call leaves the last record alone.
  EXPECT_EQ(op.serving_target(), "t");
  EXPECT_EQ(op.last_call(), record);
}

TEST_F(Lifecycle, BuilderReturningNothingIsNotAvailable) {
  register_kernel_builder("ToyScaleFwdOp", "broken",
                          [](auto, const ParamMap&) { return TargetKernel(); });
  Op1 op({}, Target("broken"));
  EXPECT_THROW(op(Tensor::randn({2}, DType::float32, 1)), OpNotAvailableError);
  EXPECT_FALSE(op.serving_target().has_value());  // undone: the call selected it
}

TEST_F(Lifecycle, RegisteredKernelTypesJoinTheTable) {
  auto extra = implementation<ToyKernel<2>>("backend_small", "BackendSmall");
  extra.refusal = [](const void* c) -> std::optional<std::string> {
    if (static_cast<const ToyCall*>(c)->n > 4) return "n > 4";
    return std::nullopt;
  };
  register_kernel_type("ToyScaleFwdOp", extra);
  EXPECT_THROW(register_kernel_type("ToyScaleFwdOp", extra), BackendError);
  Op1 op({});
  ToyCall c;
  c.n = 2;
  EXPECT_EQ(op.key_for<ToyInterface>(c), "backend_small");
  c.n = 8;
  EXPECT_EQ(op.key_for<ToyInterface>(c), "general");
  tileops::detail::reset_kernel_types_for_tests();
  register_kernel_type("ToyScaleFwdOp", implementation<ToyKernel<2>>("general", "Clash"));
  EXPECT_THROW(Op1({}), BackendError);
}

TEST_F(Lifecycle, RequestTuneReachesBuiltAndLaterKernels) {
  Op1 op({});
  op(Tensor::randn({2}, DType::float32, 1));
  ASSERT_EQ(op.iter_kernels().size(), 1u);
  auto* first = dynamic_cast<ToyKernel<1>*>(op.iter_kernels()[0]);
  ASSERT_NE(first, nullptr);
  EXPECT_FALSE(first->tune_requested());
  op.request_tune();
  op.request_tune();  // idempotent
  EXPECT_TRUE(op.tune_requested());
  EXPECT_TRUE(first->tune_requested());
  EXPECT_EQ(first->tune_calls.load(), 1);
  op(Tensor::randn({2}, DType::float16, 1));  // a new entry, built in tuned mode
  ASSERT_EQ(op.iter_kernels().size(), 2u);
  for (Kernel* k : op.iter_kernels()) EXPECT_TRUE(k->tune_requested());
}

TEST_F(Lifecycle, RequestTuneWarnsOnceAboutATargetKernelWithoutAHook) {
  register_kernel_builder("ToyScaleFwdOp", "t", [](auto, const ParamMap&) {
    return TargetKernel([](std::span<const Tensor> in, std::span<const Tensor>) {
      return std::vector<Tensor>{in[0].clone()};
    });
  });
  Op1 op({}, Target("t"));
  op(Tensor::randn({2}, DType::float32, 1));
  testing::internal::CaptureStderr();
  op.request_tune();
  op.request_tune();
  op(Tensor::randn({3}, DType::float32, 1));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("defines no request_tune()"));
  EXPECT_EQ(err.find("request_tune()"), err.rfind("request_tune()"));  // once
}

TEST_F(Lifecycle, RequestTuneReachesATargetsKernelsThroughTheirHook) {
  std::atomic<int> hooks{0};
  register_kernel_builder("ToyScaleFwdOp", "t", [&](auto, const ParamMap&) {
    return TargetKernel([](std::span<const Tensor> in,
                           std::span<const Tensor>) { return std::vector<Tensor>{in[0].clone()}; },
                        [&] { ++hooks; });
  });
  Op1 op({}, Target("t"));
  op(Tensor::randn({2}, DType::float32, 1));
  EXPECT_EQ(hooks.load(), 0);  // not in tuned mode yet
  testing::internal::CaptureStderr();
  op.request_tune();
  op.request_tune();  // each kernel's hook once
  EXPECT_EQ(hooks.load(), 1);
  op(Tensor::randn({3}, DType::float32, 1));  // a new kernel, tuned right after it is built
  EXPECT_EQ(hooks.load(), 2);
  op(Tensor::randn({3}, DType::float32, 2));  // cached: no second hook call
  EXPECT_EQ(hooks.load(), 2);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");  // every kernel had a hook: no warning
}

/// An op that records a value-dependent quantity beside its roofline.
class DataTermsOp final : public Op1 {
 public:
  using Op1::Op1;
  std::map<std::string, double> roofline_data_terms() const override {
    return {{"elements", static_cast<double>(last_call()->dim("N"))}};
  }
};

TEST_F(Lifecycle, RooflineDataTermsAndDtypeAreOverridablePartsWithDefaults) {
  Op1 plain({});
  EXPECT_TRUE(plain.roofline_data_terms().empty());
  EXPECT_FALSE(plain.dtype().has_value());  // no dtype parameter
  DataTermsOp op(ToyParams{});
  op(Tensor::randn({6}, DType::float32, 1));
  const Op& base = op;
  EXPECT_EQ(base.roofline_data_terms(), (std::map<std::string, double>{{"elements", 6.0}}));
  EXPECT_EQ(base.eval_roofline().flops, 6);  // not part of (flops, bytes)
}

TEST_F(Lifecycle, KernelConfigComesFromTheFirstConfiguredKernel) {
  Op1 op({});
  EXPECT_FALSE(op.kernel_config().has_value());
  ToyKernel<1>::tunable = true;
  op(Tensor::randn({2}, DType::float32, 1));
  EXPECT_EQ(op.kernel_config(), "tag=1");
  ToyKernel<1>::tunable = false;
}

TEST_F(Lifecycle, ConcurrentCallsOnOneInstance) {
  Op1 op({.scale = 3.0});
  const int before = g_builds.load();
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const Tensor x = Tensor::randn({(t % 3) + 1}, DType::float32, static_cast<uint64_t>(i));
        const Tensor y = op(x);
        for (std::int64_t k = 0; k < x.numel(); ++k) {
          if (std::abs(y.item_at({k}) - 3.0 * x.item_at({k})) > 1e-5) ++wrong;
        }
        (void)op.last_call();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(g_builds.load() - before, 1);  // one identity, built once
  EXPECT_EQ(op.serving_target(), "BUILTIN");
}

TEST_F(Lifecycle, DynamicPathUsesTheSameChecks) {
  Op1 op({.scale = 2.0});
  const Tensor x = Tensor::randn({2}, DType::float32, 1);
  const std::vector<Tensor> inputs{x};
  const auto out = op.call(inputs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FLOAT_EQ(out[0].item_at({1}), 2.0 * x.item_at({1}));
  const std::vector<Tensor> too_many{x, x};
  EXPECT_THROW(op.call(too_many), SignatureError);
}

}  // namespace
}  // namespace toy
