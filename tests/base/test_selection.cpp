// Kernel selection: availability, refusal, general, preferred_over; never declaration order.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/toy_op.h"

namespace toy {
namespace {

using testing::HasSubstr;

ImplementationInfo impl(const char* key, bool general = false,
                        std::vector<std::string> preferred = {}) {
  auto info = implementation<ToyKernel<0>>(key, std::string("Impl_") + key);
  info.general = general;
  info.preferred_over = std::move(preferred);
  return info;
}

ToyCall cpu_call(std::int64_t n, DType dtype = DType::float32) {
  ToyCall c;
  c.device = Device::cpu();
  c.n = n;
  c.dtype = dtype;
  return c;
}

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no exception";
}

TEST(Selection, SpecificBeatsGeneralWhateverTheOrder) {
  struct GeneralFirst {
    static std::vector<ImplementationInfo> kernel_types() {
      auto small = impl("small");
      small.refusal = [](const void* c) -> std::optional<std::string> {
        if (static_cast<const ToyCall*>(c)->n > 16) return "n > 16";
        return std::nullopt;
      };
      return {impl("general", true), small};
    }
  };
  struct GeneralLast {
    static std::vector<ImplementationInfo> kernel_types() {
      auto t = GeneralFirst::kernel_types();
      std::reverse(t.begin(), t.end());
      return t;
    }
  };
  ToyScaleFwdOp<GeneralFirst> a({});
  ToyScaleFwdOp<GeneralLast> b({});
  EXPECT_EQ(a.key_for<ToyInterface>(cpu_call(8)), "small");
  EXPECT_EQ(b.key_for<ToyInterface>(cpu_call(8)), "small");
  EXPECT_EQ(a.key_for<ToyInterface>(cpu_call(64)), "general");
  EXPECT_EQ(b.key_for<ToyInterface>(cpu_call(64)), "general");
}

TEST(Selection, PreferredOverIsTransitiveAndDecides) {
  struct Table {
    static std::vector<ImplementationInfo> kernel_types() {
      return {impl("c"), impl("a", false, {"b"}), impl("b", false, {"c"})};
    }
  };
  ToyScaleFwdOp<Table> op({});
  EXPECT_EQ(op.key_for<ToyInterface>(cpu_call(4)), "a");
}

TEST(Selection, OverlapWithoutPreferenceIsAmbiguous) {
  struct Table {
    static std::vector<ImplementationInfo> kernel_types() { return {impl("x"), impl("y")}; }
  };
  ToyScaleFwdOp<Table> op({});
  const std::string msg = message_of([&] { op.key_for<ToyInterface>(cpu_call(4)); });
  EXPECT_THAT(msg, HasSubstr("dispatch is ambiguous"));
  EXPECT_THAT(msg, HasSubstr("x, y"));
  EXPECT_THROW(op.key_for<ToyInterface>(cpu_call(4)), DispatchError);
}

TEST(Selection, NoneServesListsEveryReason) {
  struct Table {
    static std::vector<ImplementationInfo> kernel_types() {
      auto a = impl("only_fp16");
      a.refusal = [](const void* c) -> std::optional<std::string> {
        if (static_cast<const ToyCall*>(c)->dtype != DType::float16) return "needs float16";
        return std::nullopt;
      };
      auto b = impl("only_small");
      b.refusal = [](const void*) -> std::optional<std::string> { return "too large"; };
      return {a, b};
    }
  };
  ToyScaleFwdOp<Table> op({});
  EXPECT_THROW(op.key_for<ToyInterface>(cpu_call(4)), DispatchError);
  const std::string msg = message_of([&] { op.key_for<ToyInterface>(cpu_call(4)); });
  EXPECT_THAT(msg, HasSubstr("no implementation of 'toy_scale' serves this call"));
  EXPECT_THAT(msg, HasSubstr("only_fp16 (Impl_only_fp16: needs float16)"));
  EXPECT_THAT(msg, HasSubstr("only_small (Impl_only_small: too large)"));
  EXPECT_THAT(msg, HasSubstr("ToyCall(n=4, float32)"));
}

TEST(Selection, NoImplementationOnTheDeviceTypeIsNotAvailable) {
  struct Table {
    static std::vector<ImplementationInfo> kernel_types() {
      auto a = impl("gpu_only");
      a.devices = {Device::Type::cuda};
      return {a};
    }
  };
  ToyScaleFwdOp<Table> op({});
  EXPECT_THROW(op.key_for<ToyInterface>(cpu_call(4)), OpNotAvailableError);
  EXPECT_THAT(message_of([&] { op.key_for<ToyInterface>(cpu_call(4)); }),
              HasSubstr("in-tree kernels do not run on cpu"));
}

TEST(Selection, ArchitecturesFilterBeforePrecedence) {
  struct Table {
    static std::vector<ImplementationInfo> kernel_types() {
      auto general = impl("decode", true);
      general.devices = {Device::Type::cuda};
      auto hopper = impl("decode_sm90");
      hopper.devices = {Device::Type::cuda};
      hopper.supported_archs = std::vector<int>{90};
      return {general, hopper};
    }
  };
  ToyScaleFwdOp<Table> op({});
  ToyCall c = cpu_call(4);
  c.device = Device::cuda(0);
  c.facts = DeviceFacts{90, 132, 232448};
  EXPECT_EQ(op.key_for<ToyInterface>(c), "decode_sm90");
  c.facts = DeviceFacts{80, 108, 166912};
  EXPECT_EQ(op.key_for<ToyInterface>(c), "decode");
}

TEST(Selection, KernelForBuildsOncePerIdentityAndCachesPerCall) {
  struct Table {
    static std::vector<ImplementationInfo> kernel_types() { return {impl("general", true)}; }
  };
  ToyScaleFwdOp<Table> op({.scale = 2.0});
  const int before = g_builds.load();
  const Tensor x4 = Tensor::randn({4}, DType::float32, 1);
  const Tensor x9 = Tensor::randn({9}, DType::float32, 2);
  op(x4);
  op(x9);  // another call spec, same identity (dtype): no new build
  op(x4);
  EXPECT_EQ(g_builds.load() - before, 1);
  EXPECT_THAT(op.built_entries("toy_scale"), testing::ElementsAre("general[float32]"));
  op(Tensor::randn({4}, DType::float16, 3));  // another dtype: another identity
  EXPECT_EQ(g_builds.load() - before, 2);
  EXPECT_EQ(op.built_entries("toy_scale").size(), 2u);
}

TEST(Selection, ContractsAreCheckedAtConstruction) {
  struct TwoGenerals {
    static std::vector<ImplementationInfo> kernel_types() {
      return {impl("g1", true), impl("g2", true)};
    }
  };
  struct GeneralPrefers {
    static std::vector<ImplementationInfo> kernel_types() {
      return {impl("g", true, {"s"}), impl("s")};
    }
  };
  struct UnknownPreference {
    static std::vector<ImplementationInfo> kernel_types() { return {impl("a", false, {"zzz"})}; }
  };
  struct Cycle {
    static std::vector<ImplementationInfo> kernel_types() {
      return {impl("a", false, {"b"}), impl("b", false, {"a"})};
    }
  };
  const auto construct_message = [](auto* tag) {
    using Op = std::remove_pointer_t<decltype(tag)>;
    return message_of([] { Op op({}); });
  };
  EXPECT_THAT(construct_message(static_cast<ToyScaleFwdOp<TwoGenerals>*>(nullptr)),
              HasSubstr("2 general implementations"));
  EXPECT_THAT(construct_message(static_cast<ToyScaleFwdOp<GeneralPrefers>*>(nullptr)),
              HasSubstr("general implementation 'g' may not declare preferred_over"));
  EXPECT_THAT(construct_message(static_cast<ToyScaleFwdOp<UnknownPreference>*>(nullptr)),
              HasSubstr("preferred over 'zzz', which is not an implementation"));
  EXPECT_THAT(construct_message(static_cast<ToyScaleFwdOp<Cycle>*>(nullptr)), HasSubstr("cycle"));
  EXPECT_THROW(ToyScaleFwdOp<Cycle>({}), ManifestError);
}

TEST(Selection, CallSpecStatingDeviceFactsIsRejectedByKernelFor) {
  struct Table {
    static std::vector<ImplementationInfo> kernel_types() { return {impl("general", true)}; }
  };
  ToyScaleFwdOp<Table> op({});
  ToyCall c = cpu_call(4);
  c.facts = DeviceFacts{};
  EXPECT_EQ(op.key_for<ToyInterface>(c), "general");  // key_for accepts explicit facts
  EXPECT_THROW(op.kernel_for_call(c), UsageError);    // kernel_for does not
  EXPECT_THAT(message_of([&] { op.kernel_for_call(c); }), HasSubstr("states device facts"));
}

}  // namespace
}  // namespace toy
