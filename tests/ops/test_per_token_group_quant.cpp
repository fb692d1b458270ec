// PerTokenGroupQuantFP8FwdOp on the CPU: hand-computed values (ties to even, saturation at 448),
// the double-precision reference on many shapes and dtypes, the dequantized round trip, the
// defined results of zeros, infinities and NaN, empty inputs, and the shape rules.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/ops_test_util.h"
#include "tileops/ops/quant.h"

namespace tileops {
namespace {

using testing::HasSubstr;
using testing_util::floats;
using testing_util::message_of;
using testing_util::run_reference;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// Equal values, NaN equal to NaN, and zeros of equal sign.
void expect_same_values(const std::vector<double>& got, const std::vector<double>& want,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "] = " << got[i];
      continue;
    }
    EXPECT_EQ(got[i], want[i]) << what << " [" << i << "]";
    EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i])) << what << " [" << i << "]";
  }
}

TEST(PerTokenGroupQuantFP8, HandComputedValues) {
  PerTokenGroupQuantFP8FwdOp op({.group_size = 4});
  // Group 0: amax 448, scale 1: 1.0625 is halfway between 1 and 1.125 (even: 1), 1.1875 halfway
  // between 1.125 and 1.25 (even: 1.25). Group 1: amax 2, scale 2/448: 2 -> 448, -1 -> -224,
  // 0.5 -> 112, 0.001 -> 0.224 -> 0.21875 (1.75 * 2^-3, the nearer neighbour of 1.792 * 2^-3).
  const Tensor x = floats({448, 1.0625, 1.1875, -3.5, 2, -1, 0.5, 0.001}, {1, 8});
  const auto [q, scales] = op(x);
  EXPECT_EQ(q.dtype(), DType::float8_e4m3fn);
  EXPECT_EQ(scales.dtype(), DType::float32);
  expect_same_values(q.to_vector(), {448, 1, 1.25, -3.5, 448, -224, 112, 0.21875}, "q");
  expect_same_values(scales.to_vector(), {1.0, static_cast<float>(2.0 / 448)}, "scales");
}

TEST(PerTokenGroupQuantFP8, MatchesReferenceOnManyShapesAndDTypes) {
  for (const DType dtype : {DType::float32, DType::bfloat16, DType::float16}) {
    for (const auto& [rows, cols, group] : std::vector<std::tuple<int, int, int>>{
             {1, 128, 128}, {7, 512, 128}, {33, 256, 64}, {3, 48, 16}, {5, 7, 1}, {2, 7168, 128}}) {
      PerTokenGroupQuantFP8FwdOp op({.group_size = group});
      // Values spanning several binades, so that groups differ in scale.
      Tensor x = Tensor::randn({rows, cols}, DType::float32, 3 + rows);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) {
          x.set_at({r, c},
                   x.item_at({r, c}) * std::ldexp(1.0, static_cast<int>((r + c / group) % 9) - 4));
        }
      }
      x = x.to(dtype);
      const auto [q, scales] = op(x);
      const auto ref = run_reference("PerTokenGroupQuantFP8FwdOp", {x}, op.param_values());
      const std::string what = std::string(dtype_name(dtype)) + " " + x.str();
      expect_same_values(scales.to_vector(), ref[1].to_vector(), what + " scales");
      expect_same_values(q.to_vector(), ref[0].to_vector(), what + " q");
      // Dequantized: within half a step of e4m3's 3-bit mantissa (2^-4 relative) of x, or within
      // half the subnormal step (2^-10 * scale) for the group's smallest values.
      const auto xv = x.to_vector();
      const auto qv = q.to_vector();
      const auto sv = scales.to_vector();
      for (std::size_t i = 0; i < xv.size(); ++i) {
        const double s = sv[(i / cols) * (cols / group) + (i % cols) / group];
        const double bound = std::max(std::fabs(xv[i]) * 0x1p-4, s * 0x1p-10) * (1 + 1e-6);
        EXPECT_LE(std::fabs(qv[i] * s - xv[i]), bound) << what << " [" << i << "]";
      }
    }
  }
}

TEST(PerTokenGroupQuantFP8, ZerosInfinitiesAndNaNHaveDefinedResults) {
  PerTokenGroupQuantFP8FwdOp op({.group_size = 4, .eps = 1e-10});
  const Tensor x = floats({0, 0, 0, 0, kInf, 1, -2, 0, kNaN, 1, 2, 3, -kInf, kInf, 3, 448}, {2, 8});
  const auto [q, scales] = op(x);
  expect_same_values(scales.to_vector(), {static_cast<float>(1e-10 / 448), kInf, kNaN, kInf},
                     "scales");
  expect_same_values(q.to_vector(),
                     {0, 0, 0, 0, kNaN, 0, -0.0, 0, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, 0, 0}, "q");
  // NaN is one pattern whatever the platform's NaN sign (inf / inf is -NaN on x86): code 0x7f,
  // scale 0x7fc00000 (the CUDA kernel writes the same bits).
  const auto* codes = static_cast<const std::uint8_t*>(q.data_ptr());
  for (const int i : {4, 8, 9, 10, 11, 12, 13}) EXPECT_EQ(codes[i], 0x7f) << "q [" << i << "]";
  EXPECT_EQ(std::bit_cast<std::uint32_t>(scales.data<float>()[2]), 0x7fc00000u);
  // The reference defines the same.
  const auto ref = run_reference("PerTokenGroupQuantFP8FwdOp", {x}, op.param_values());
  expect_same_values(q.to_vector(), ref[0].to_vector(), "reference q");
  expect_same_values(scales.to_vector(), ref[1].to_vector(), "reference scales");
}

TEST(PerTokenGroupQuantFP8, EpsBoundsTheScaleOfTinyGroups) {
  PerTokenGroupQuantFP8FwdOp op({.group_size = 2, .eps = 1e-3});
  // amax 1e-4 < eps: scale eps / 448, q = 1e-4 * 448 / 1e-3 = 44.8 -> 44 (5.5 * 2^3; step 4).
  const auto [q, scales] = op(floats({1e-4, 0}, {1, 2}));
  expect_same_values(scales.to_vector(), {static_cast<float>(1e-3 / 448)}, "scales");
  expect_same_values(q.to_vector(), {44, 0}, "q");
}

TEST(PerTokenGroupQuantFP8, EmptyInputsGiveEmptyOutputs) {
  PerTokenGroupQuantFP8FwdOp op(PerTokenGroupQuantFP8FwdOp::Params{});
  const auto [q, scales] = op(Tensor::zeros({0, 256}, DType::bfloat16));
  EXPECT_EQ(q.sizes(), (Sizes{0, 256}));
  EXPECT_EQ(scales.sizes(), (Sizes{0, 2}));
}

TEST(PerTokenGroupQuantFP8, ShapeRulesAreSignatureErrors) {
  PerTokenGroupQuantFP8FwdOp op(PerTokenGroupQuantFP8FwdOp::Params{});  // group_size 128
  EXPECT_THROW(op(Tensor::zeros({2, 100}, DType::bfloat16)), SignatureError);
  EXPECT_THAT(message_of([&] {
                op(Tensor::zeros({2, 100}, DType::bfloat16));
              }),
              HasSubstr("PerTokenGroupQuantFP8FwdOp: shape rule 'K % group_size == 0' does not "
                        "hold"));
  EXPECT_THROW(PerTokenGroupQuantFP8FwdOp({.group_size = 0}), SignatureError);
  EXPECT_THAT(message_of([] { PerTokenGroupQuantFP8FwdOp({.group_size = 0}); }),
              HasSubstr("shape rule 'group_size >= 1' does not hold"));
  EXPECT_THAT(message_of([] { PerTokenGroupQuantFP8FwdOp({.eps = 0.0}); }),
              HasSubstr("shape rule 'eps > 0.0' does not hold"));
  EXPECT_THROW(op(Tensor::zeros({2, 128}, DType::int32)), SignatureError);
}

// float8_e5m2 is a storage dtype that no op takes yet: the manifest's dtype check refuses it.
TEST(PerTokenGroupQuantFP8, RefusesAFloat8E5M2Input) {
  PerTokenGroupQuantFP8FwdOp op(PerTokenGroupQuantFP8FwdOp::Params{});
  const Tensor x = Tensor::zeros({2, 128}, DType::float8_e5m2);
  EXPECT_THROW(op(x), SignatureError);
  EXPECT_THAT(message_of([&] { op(x); }),
              HasSubstr("PerTokenGroupQuantFP8FwdOp: input 'x' declared dtype T: T must be one "
                        "of float32, float16, bfloat16, got float8_e5m2"));
}

}  // namespace
}  // namespace tileops
