// LongRoPEFwdOp on the CPU against the double-precision reference.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/ops_test_util.h"
#include "tileops/ops/rope.h"

namespace tileops {
namespace {

using testing::HasSubstr;
using testing_util::expect_close;
using testing_util::message_of;

Tensor factors(std::int64_t half, std::uint64_t seed = 5) {
  return Tensor::rand({half}, DType::float32, seed, Device::cpu(), 1.0, 8.0);
}

Tensor reference(const LongRoPEFwdOp& op, const Tensor& x, const Tensor& positions = Tensor()) {
  return testing_util::run_reference("LongRoPEFwdOp", {x, positions}, op.param_values())[0];
}

TEST(LongRoPE, BshdMatchesReferenceForEveryDType) {
  for (const DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
    for (const std::int64_t half : {32, 48, 64}) {
      LongRoPEFwdOp op({.rescale_factors = factors(half)});
      const Tensor x = Tensor::randn({2, 9, 3, 2 * half}, dtype, 7);
      const Tensor y = op(x);
      expect_close(y, reference(op, x),
                   std::string(dtype_name(dtype)) + " R=" + std::to_string(half));
    }
  }
}

TEST(LongRoPE, PositionsInt32AndInt64AndTheSdLayout) {
  LongRoPEFwdOp op({.rescale_factors = factors(16), .layout = "sd"});
  const Tensor x = Tensor::randn({11, 32}, DType::float32, 8);
  const Tensor p32 = Tensor::rand({11}, DType::int32, 9, Device::cpu(), 0, 131072);
  const Tensor p64 = p32.to(DType::int64);
  expect_close(op(x, p32), reference(op, x, p32), "int32 positions, large values");
  expect_close(op(x, p64), reference(op, x, p64), "int64 positions");
  expect_close(op(x), reference(op, x), "no positions");
  LongRoPEFwdOp bshd({.rescale_factors = factors(16)});
  const Tensor xb = Tensor::randn({3, 5, 2, 32}, DType::bfloat16, 10);
  const Tensor pb = Tensor::rand({3, 5}, DType::int64, 11, Device::cpu(), 0, 4096);
  expect_close(bshd(xb, pb), reference(bshd, xb, pb), "[B, S] positions");
}

TEST(LongRoPE, AnglesOfEveryQuadrantAndLargePositions) {
  // Positions 0..63 (angles up to 63 radians: every quadrant many times) and up to 2^22: the
  // float polynomials after the double reduction stay within 1e-6 of the reference, a tenth of
  // float32's bound.
  std::vector<std::int64_t> p;
  for (std::int64_t i = 0; i < 64; ++i) p.push_back(i);
  for (const std::int64_t big : {4095, 65535, 131071, 1048575, 4194303}) p.push_back(big);
  const auto n = static_cast<std::int64_t>(p.size());
  Tensor positions = Tensor::empty({n}, DType::int64);
  std::copy(p.begin(), p.end(), positions.data<std::int64_t>());
  for (const std::int64_t half : {3, 8, 64}) {
    LongRoPEFwdOp op({.rescale_factors = factors(half, 17), .layout = "sd"});
    const Tensor x = Tensor::randn({n, 2 * half}, DType::float32, 18);
    const double err = max_relative_error(op(x, positions), reference(op, x, positions));
    EXPECT_LE(err, 1e-6) << "R=" << half;
  }
}

TEST(LongRoPE, AttentionScalingGivenOrDerived) {
  EXPECT_DOUBLE_EQ(long_rope_default_scaling(4096, 4096), 1.0);
  EXPECT_DOUBLE_EQ(long_rope_default_scaling(131072, 4096),
                   std::sqrt(1.0 + std::log(32.0) / std::log(4096.0)));
  LongRoPEFwdOp derived({.rescale_factors = factors(8)});
  EXPECT_DOUBLE_EQ(derived.attention_scaling(), long_rope_default_scaling(131072, 4096));
  LongRoPEFwdOp given({.rescale_factors = factors(8), .attention_scaling = 0.5});
  EXPECT_DOUBLE_EQ(given.attention_scaling(), 0.5);
  const Tensor x = Tensor::randn({1, 3, 1, 16}, DType::float32, 1);
  expect_close(given(x), reference(given, x), "given scaling");
}

TEST(LongRoPE, InPlaceNonContiguousAndEmpty) {
  LongRoPEFwdOp op({.rescale_factors = factors(8)});
  const Tensor x = Tensor::randn({1, 4, 2, 16}, DType::float16, 3);
  const Tensor ref = reference(op, x);
  op(x, Tensor(), x);
  expect_close(x, ref, "in place");
  const Tensor t = Tensor::randn({1, 2, 4, 16}, DType::float32, 4).transpose(1, 2);
  ASSERT_FALSE(t.is_contiguous());
  expect_close(op(t), reference(op, t), "non-contiguous x");
  EXPECT_EQ(op(Tensor::empty({0, 4, 2, 16}, DType::float32)).numel(), 0);
}

TEST(LongRoPE, BadConstructionAndCalls) {
  EXPECT_THROW(LongRoPEFwdOp({.rescale_factors = Tensor()}), SignatureError);
  EXPECT_THROW(LongRoPEFwdOp({.rescale_factors = Tensor::rand({4}, DType::float16, 1)}),
               SignatureError);
  EXPECT_THROW(LongRoPEFwdOp({.rescale_factors = Tensor::rand({2, 4}, DType::float32, 1)}),
               SignatureError);
  EXPECT_THROW(LongRoPEFwdOp({.rescale_factors = factors(4), .base = -1.0}), SignatureError);
  EXPECT_THROW(LongRoPEFwdOp({.rescale_factors = factors(4), .layout = "bhsd"}), SignatureError);
  LongRoPEFwdOp op({.rescale_factors = factors(4), .max_position_embeddings = 16});
  EXPECT_THAT(message_of([&] {
                op(Tensor::randn({1, 3, 2, 10}, DType::float32, 1));
              }),
              HasSubstr("x"));  // head_dim must be 2 * R = 8
  EXPECT_THROW(op(Tensor::randn({3, 8}, DType::float32, 1)), SignatureError);  // rank for bshd
  EXPECT_THROW(op(Tensor::randn({1, 32, 2, 8}, DType::float32, 1)), SignatureError);  // S > max
  const Tensor positions = Tensor::rand({1, 32}, DType::int32, 1, Device::cpu(), 0, 16);
  EXPECT_NO_THROW(op(Tensor::randn({1, 32, 2, 8}, DType::float32, 1), positions));
  EXPECT_THROW(
      op(Tensor::randn({1, 4, 2, 8}, DType::float32, 1), Tensor::zeros({1, 4}, DType::float32)),
      SignatureError);  // positions must be int32 or int64
  EXPECT_THROW(op(Tensor::randn({1, 4, 2, 8}, DType::float32, 1), Tensor::zeros({4}, DType::int32)),
               SignatureError);  // [B, S] for bshd
}

TEST(LongRoPE, RooflineFollowsTheLayout) {
  LongRoPEFwdOp op({.rescale_factors = factors(64)});
  op(Tensor::randn({1, 16, 4, 128}, DType::bfloat16, 1));
  const Roofline r = op.eval_roofline();
  EXPECT_EQ(r.flops, (8.0 * 64 * 4 + 3 * 64) * 1 * 16);
  // read x, write y, read the construction-time factors
  EXPECT_EQ(r.bytes, 2.0 * (16 * 4 * 128 * 2) + 64 * 4);
}

}  // namespace
}  // namespace tileops
