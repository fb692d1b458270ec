// The runtime helpers of generated code (tileops/base/expr_runtime.h): Python semantics, the
// check helpers and their messages, and the templates over tensors, devices and values (here
// with small stand-ins, so that the test needs no library).
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "expr/eval.h"
#include "tileops/base/expr_runtime.h"

namespace {

namespace ex = tileops::expr;
using tileops::DType;
using tileops::SignatureError;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const SignatureError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(ExprRuntime, FloorDivisionAndModuloAgreeWithTheEvaluator) {
  for (std::int64_t a = -13; a <= 13; ++a) {
    for (std::int64_t b = -5; b <= 5; ++b) {
      if (b == 0) {
        EXPECT_THROW(ex::floordiv(a, b), SignatureError);
        EXPECT_THROW(ex::mod(a, b), SignatureError);
        continue;
      }
      EXPECT_EQ(ex::floordiv(a, b), tgen::py_floordiv(a, b, 0)) << a << " // " << b;
      EXPECT_EQ(ex::mod(a, b), tgen::py_mod(a, b, 0)) << a << " % " << b;
      EXPECT_EQ(ex::floordiv(a, b) * b + ex::mod(a, b), a);
      if (b > 0) {
        EXPECT_EQ(ex::ceil_div(a, b), -tgen::py_floordiv(-a, b, 0)) << a << ", " << b;
      } else {
        EXPECT_THROW(ex::ceil_div(a, b), SignatureError);
      }
    }
  }
  EXPECT_EQ(ex::floordiv(-7.5, 2.0), -4.0);
  EXPECT_EQ(ex::mod(7.5, -2.0), -0.5);
  EXPECT_THROW(ex::floordiv(INT64_MIN, std::int64_t{-1}), SignatureError);
}

TEST(ExprRuntime, OverflowThrows) {
  EXPECT_EQ(message_of([] { ex::add(INT64_MAX, 1); }),
            "integer overflow in 9223372036854775807 + 1");
  EXPECT_THROW(ex::sub(INT64_MIN, 1), SignatureError);
  EXPECT_THROW(ex::mul(std::int64_t{1} << 40, std::int64_t{1} << 40), SignatureError);
  EXPECT_THROW(ex::neg(INT64_MIN), SignatureError);
  EXPECT_THROW(ex::prod({std::int64_t{1} << 32, std::int64_t{1} << 32}), SignatureError);
  EXPECT_EQ(ex::add(2, 3), 5);
}

TEST(ExprRuntime, Sequences) {
  const ex::Seq s{2, 3, 4};
  EXPECT_EQ(ex::len(s), 3);
  EXPECT_EQ(ex::prod(s), 24);
  EXPECT_EQ(ex::prod({}), 1);
  EXPECT_EQ(ex::sum(s), 9);
  EXPECT_EQ(ex::sum({}), 0);
  EXPECT_EQ(ex::at(s, 0), 2);
  EXPECT_EQ(ex::at(s, -1), 4);
  EXPECT_EQ(message_of([&] { ex::at(s, 3); }), "index 3 out of range for [2, 3, 4] (length 3)");
  EXPECT_THROW(ex::at(s, -4), SignatureError);
  EXPECT_EQ(ex::slice(s, 1, std::nullopt), (ex::Seq{3, 4}));
  EXPECT_EQ(ex::slice(s, std::nullopt, -1), (ex::Seq{2, 3}));
  EXPECT_EQ(ex::slice(s, -2, std::nullopt), (ex::Seq{3, 4}));
  EXPECT_EQ(ex::slice(s, 2, 1), ex::Seq{});
  EXPECT_EQ(ex::slice(s, -10, 10), s);
  EXPECT_EQ(ex::max_seq(s), 4);
  EXPECT_EQ(ex::min_seq(s), 2);
  EXPECT_THROW(ex::max_seq({}), SignatureError);
  EXPECT_EQ(ex::max_of(std::int64_t{1}, std::int64_t{7}, std::int64_t{3}), 7);
  EXPECT_EQ(ex::min_of(2.5, 1.5), 1.5);
  EXPECT_TRUE(ex::contains(s, 3));
  EXPECT_FALSE(ex::contains(s, 5));
  EXPECT_TRUE(ex::in(std::string_view("sd"), {std::string_view("sd"), std::string_view("bshd")}));
  EXPECT_FALSE(ex::in(std::int64_t{4}, {std::int64_t{1}, std::int64_t{2}}));
}

TEST(ExprRuntime, DTypes) {
  EXPECT_EQ(ex::category_of(DType::bfloat16), "float");
  EXPECT_EQ(ex::category_of(DType::uint8), "int");
  EXPECT_EQ(ex::category_of(DType::bool_), "bool");
  EXPECT_EQ(ex::bits_of(DType::float8_e4m3fn), 8);
  EXPECT_EQ(ex::bits_of(DType::float8_e5m2), 8);
  EXPECT_EQ(ex::category_of(DType::float8_e5m2), "float");
  EXPECT_EQ(ex::dtype_str(DType::float8_e5m2), "float8_e5m2");
  EXPECT_EQ(ex::bits_of(DType::int64), 64);
  EXPECT_EQ(ex::dtype_str(DType::bool_), "bool");
  EXPECT_EQ(ex::dtype_str(DType::float16), "float16");
}

TEST(ExprRuntime, Repr) {
  EXPECT_EQ(ex::repr(std::int64_t{-3}), "-3");
  EXPECT_EQ(ex::repr(1e-6), "1e-06");
  EXPECT_EQ(ex::repr(10000.0), "10000.0");
  EXPECT_EQ(ex::repr(2.5), "2.5");
  EXPECT_EQ(ex::repr(true), "True");
  EXPECT_EQ(ex::repr(ex::Seq{4096}), "[4096]");
  EXPECT_EQ(ex::repr(DType::bfloat16), "bfloat16");
  EXPECT_EQ(ex::repr(std::string("bshd")), "'bshd'");
  EXPECT_EQ(ex::repr(std::optional<double>{}), "None");
  EXPECT_EQ(ex::repr(std::optional<double>{0.5}), "0.5");
  for (double d : {0.1, 1.0 / 3, 123456.789, 1e22, -0.0001, 6.02e23}) {
    EXPECT_EQ(ex::repr(d), tgen::repr(tgen::EValue(d)));
  }
}

constexpr ex::Decl kX{"RMSNormFwdOp", "input", "weight", "[*normalized_shape]", "T"};

TEST(ExprRuntime, CheckMessages) {
  EXPECT_EQ(message_of([] { ex::check_splice(kX, {4095}, 0, {4096}, "normalized_shape"); }),
            "RMSNormFwdOp: input 'weight' declared [*normalized_shape]: axis 0 must be 4096 "
            "(normalized_shape[0]), got shape [4095]");
  EXPECT_EQ(message_of([] {
              ex::check_rank(kX, {1, 2}, 1, false);
            }),
            "RMSNormFwdOp: input 'weight' declared [*normalized_shape]: rank must be 1, got shape "
            "[1, 2]");
  EXPECT_EQ(
      message_of([] { ex::check_rank(kX, {}, 1, true); }),
      "RMSNormFwdOp: input 'weight' declared [*normalized_shape]: rank must be at least 1, got "
      "shape []");
  EXPECT_EQ(
      message_of([] { ex::check_dtype(kX, DType::bfloat16, DType::float16, "T, from input 'x'"); }),
      "RMSNormFwdOp: input 'weight' declared dtype T: must be float16 (T, from input 'x'), got "
      "bfloat16");
  EXPECT_EQ(
      message_of([] {
        ex::solve_dtype(kX, DType::int8, "T", {DType::float16, DType::bfloat16});
      }),
      "RMSNormFwdOp: input 'weight' declared dtype T: T must be one of float16, bfloat16, got "
      "int8");
  EXPECT_EQ(ex::solve_affine(kX, {9}, 0, 2, 1, "D", "2 * D + 1"), 4);
  EXPECT_EQ(message_of([] { ex::solve_affine(kX, {8}, 0, 2, 1, "D", "2 * D + 1"); }),
            "RMSNormFwdOp: input 'weight' declared [*normalized_shape]: axis 0 must be 2 * D + 1 "
            "for a whole D >= 0, got shape [8]");
  EXPECT_THROW(ex::solve_affine(kX, {0}, 0, 2, 1, "D", "2 * D + 1"), SignatureError);
  EXPECT_EQ(message_of([] { ex::fail_rule("Op", "eps >= 0", "eps = -1.0"); }),
            "Op: shape rule 'eps >= 0' does not hold (eps = -1.0)");
  EXPECT_EQ(message_of([] { ex::fail_required("Op", "input", "x"); }), "Op: input 'x' is required");
  EXPECT_EQ(message_of([] {
              ex::check_enum("Op", "layout", "nchw", {"sd", "bshd"});
            }),
            "Op: parameter 'layout' must be one of 'sd' | 'bshd', got 'nchw'");
  EXPECT_EQ(message_of([] {
              ex::check_nonneg("Op", "normalized_shape", ex::Seq{4, -1});
            }),
            "Op: parameter 'normalized_shape' is used in a shape: its elements must be >= 0, got "
            "[4, -1]");
  EXPECT_EQ(message_of([] { ex::output_axis("Op", "y", "[N - 2]", 0, -1); }),
            "Op: output 'y' declared [N - 2]: axis 0 would be -1 (negative)");
  EXPECT_EQ(message_of([] { ex::fail_out("Op", "y", "dtype", "float16", "float32"); }),
            "Op: out (output 'y') must have dtype float16, got float32");
}

TEST(ExprRuntime, RethrowNamesTheOpOnce) {
  EXPECT_EQ(message_of([] { ex::rethrow_for("Op", SignatureError("integer division by zero")); }),
            "Op: integer division by zero");
  EXPECT_EQ(message_of([] { ex::rethrow_for("Op", SignatureError("Op: input 'x' is required")); }),
            "Op: input 'x' is required");
  EXPECT_EQ(message_of([] { ex::rethrow_for("Op", SignatureError("OpX: y")); }), "Op: OpX: y");
}

// Stand-ins for Tensor, Device and Value.
struct FakeDevice {
  int id = 0;
  std::string str() const { return id == 0 ? "cpu" : "cuda:" + std::to_string(id - 1); }
  friend bool operator==(const FakeDevice&, const FakeDevice&) = default;
};
struct FakeTensor {
  FakeDevice dev;
  FakeDevice device() const { return dev; }
  bool defined() const { return true; }
};
struct FakeNone {};
using FakeValue =
    std::variant<FakeNone, bool, std::int64_t, double, std::string, ex::Seq, DType, FakeTensor>;

TEST(ExprRuntime, CallDeviceIsTheInputsOneDevice) {
  FakeDevice device;
  std::string_view from;
  ex::join_device("Op", device, from, FakeTensor{FakeDevice{1}}, "x");
  EXPECT_EQ(from, "x");
  EXPECT_EQ(device.id, 1);
  ex::join_device("Op", device, from, FakeTensor{FakeDevice{1}}, "w");
  EXPECT_EQ(
      message_of([&] { ex::join_device("Op", device, from, FakeTensor{FakeDevice{0}}, "b"); }),
      "Op: input 'b' is on cpu but 'x' is on cuda:0 (a call runs on one device)");
}

TEST(ExprRuntime, ParameterValues) {
  EXPECT_EQ(ex::value_to<double>(FakeValue{std::int64_t{2}}, "Op", "eps", "float"), 2.0);
  EXPECT_EQ(ex::value_to<ex::Seq>(FakeValue{ex::Seq{1}}, "Op", "s", "list[int]"), ex::Seq{1});
  EXPECT_EQ(message_of([] { ex::value_to<std::int64_t>(FakeValue{2.5}, "Op", "n", "int"); }),
            "Op: parameter 'n' must be int, got float");
  EXPECT_EQ(message_of([] { ex::value_to<std::string>(FakeValue{FakeNone{}}, "Op", "m", "str"); }),
            "Op: parameter 'm' must be str, got None");
  EXPECT_EQ(message_of([] { ex::value_to<double>(FakeValue{FakeTensor{}}, "Op", "f", "float"); }),
            "Op: parameter 'f' must be float, got tensor");
  EXPECT_EQ(ex::index_as<std::int64_t>(FakeValue{std::int64_t{5}}, "Op", "B"), 5);
  EXPECT_EQ(message_of([] { ex::index_as<std::int64_t>(FakeValue{FakeNone{}}, "Op", "B"); }),
            "Op: index 'B' is not solved on this call");
  EXPECT_EQ(ex::seed_from("row", "t"), ex::seed_from("row", "t"));
  EXPECT_NE(ex::seed_from("row", "t"), ex::seed_from("row", "u"));
  EXPECT_NE(ex::seed_from("a", "bc"), ex::seed_from("ab", "c"));
}

}  // namespace
