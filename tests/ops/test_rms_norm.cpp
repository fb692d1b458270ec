// RMSNormFwdOp and FusedAddRMSNormFwdOp on the CPU against the double-precision reference.
#include "ops/ops_test_util.h"
#include "tileops/ops/norm.h"

namespace tileops {
namespace {

using testing::HasSubstr;
using testing_util::expect_close;
using testing_util::message_of;

const DType kFloatDTypes[] = {DType::float32, DType::float16, DType::bfloat16};

Tensor reference_y(const std::vector<Tensor>& inputs, const ParamMap& params, const char* op) {
  return testing_util::run_reference(op, inputs, params)[0];
}

TEST(RMSNorm, MatchesReferenceForEveryDTypeAndShape) {
  const std::vector<std::pair<Sizes, Sizes>> cases = {
      {{4096}, {4096}},        {{3, 7}, {7}},      {{2, 3, 33}, {33}},
      {{5, 4, 8}, {4, 8}},     {{1, 1}, {1}},      {{17, 1000}, {1000}},
      {{2, 16385}, {16385}},
  };
  for (const DType dtype : kFloatDTypes) {
    for (const auto& [shape, normalized] : cases) {
      RMSNormFwdOp op({.normalized_shape = normalized, .eps = 1e-5});
      const Tensor x = Tensor::randn(shape, dtype, 11);
      const Tensor w = Tensor::randn(normalized, dtype, 12, Device::cpu(), 1.0, 0.5);
      const Tensor y = op(x, w);
      EXPECT_EQ(y.sizes(), x.sizes());
      EXPECT_EQ(y.dtype(), dtype);
      expect_close(y, reference_y({x, w}, op.param_values(), "RMSNormFwdOp"),
                   std::string(dtype_name(dtype)) + " " + x.str());
    }
  }
}

TEST(RMSNorm, NonContiguousInputsAndOut) {
  RMSNormFwdOp op({.normalized_shape = {64}});
  const Tensor base = Tensor::randn({64, 10}, DType::bfloat16, 3);
  const Tensor x = base.transpose(0, 1);  // [10, 64], inner stride 10
  ASSERT_FALSE(x.is_contiguous());
  const Tensor w = Tensor::randn({128}, DType::bfloat16, 4).slice(0, 0, 128, 2);  // strided
  const Tensor ref = reference_y({x, w}, op.param_values(), "RMSNormFwdOp");
  expect_close(op(x, w), ref, "transposed x, strided weight");
  // Rows with a stride (a slice of a wider tensor).
  const Tensor wide = Tensor::randn({6, 100}, DType::float32, 5);
  const Tensor rows = wide.slice(1, 10, 74);
  RMSNormFwdOp op32({.normalized_shape = {64}});
  const Tensor w32 = Tensor::randn({64}, DType::float32, 6);
  expect_close(op32(rows, w32), reference_y({rows, w32}, op32.param_values(), "RMSNormFwdOp"),
               "strided rows");
  // A non-contiguous out is written in place.
  const Tensor out_base = Tensor::full({64, 6}, 7.0, DType::float32);
  const Tensor out = out_base.transpose(0, 1);
  const Tensor y = op32(rows, w32, out);
  EXPECT_EQ(y.data_ptr(), out.data_ptr());
  expect_close(out, reference_y({rows, w32}, op32.param_values(), "RMSNormFwdOp"), "strided out");
}

TEST(RMSNorm, InPlaceThroughOut) {
  RMSNormFwdOp op({.normalized_shape = {256}});
  const Tensor x = Tensor::randn({4, 256}, DType::float16, 8);
  const Tensor w = Tensor::randn({256}, DType::float16, 9);
  const Tensor ref = reference_y({x, w}, op.param_values(), "RMSNormFwdOp");
  op(x, w, x);
  expect_close(x, ref, "out = x");
}

TEST(RMSNorm, EmptyTensors) {
  RMSNormFwdOp op({.normalized_shape = {8}});
  const Tensor y = op(Tensor::empty({0, 8}, DType::float32), Tensor::randn({8}, DType::float32, 1));
  EXPECT_EQ(y.sizes(), (Sizes{0, 8}));
  EXPECT_FALSE(op.serving_target().has_value());  // nothing ran
}

TEST(RMSNorm, BadCallsAreSignatureErrors) {
  RMSNormFwdOp op({.normalized_shape = {16}});
  const Tensor x = Tensor::randn({2, 16}, DType::float32, 1);
  const Tensor w = Tensor::randn({16}, DType::float32, 2);
  EXPECT_THROW(op(Tensor::randn({2, 15}, DType::float32, 1), w), SignatureError);
  EXPECT_THAT(message_of([&] { op(x, Tensor::randn({15}, DType::float32, 2)); }),
              HasSubstr("weight"));
  EXPECT_THAT(message_of([&] { op(x, Tensor::randn({16}, DType::float16, 2)); }),
              HasSubstr("float16"));
  EXPECT_THAT(message_of([&] { op(Tensor::zeros({2, 16}, DType::int32), w); }),
              HasSubstr("int32"));
  EXPECT_THROW(op(x, Tensor()), SignatureError);
  EXPECT_THROW(op(x, w, Tensor::empty({2, 8}, DType::float32)), SignatureError);
  EXPECT_THROW(op(x, w, Tensor::empty({2, 16}, DType::float16)), SignatureError);
}

TEST(RMSNorm, BadParametersAreSignatureErrors) {
  EXPECT_THROW(RMSNormFwdOp({.normalized_shape = {}}), SignatureError);
  EXPECT_THROW(RMSNormFwdOp({.normalized_shape = {16}, .eps = -1.0}), SignatureError);
  EXPECT_THROW(RMSNormFwdOp({.normalized_shape = {-4}}), SignatureError);
}

TEST(RMSNorm, RecordAndRoofline) {
  RMSNormFwdOp op({.normalized_shape = {4096}});
  op(Tensor::randn({8, 4096}, DType::bfloat16, 1), Tensor::randn({4096}, DType::bfloat16, 2));
  const auto call = op.last_call();
  EXPECT_EQ(call->shape_index("S"), (Sizes{8}));
  EXPECT_EQ(call->dtype_index("T"), DType::bfloat16);
  const Roofline r = op.eval_roofline();
  EXPECT_EQ(r.flops, 4.0 * 8 * 4096 + 2 * 8);
  EXPECT_EQ(r.bytes, (8.0 * 4096 * 2) * 2 + 4096 * 2);  // read x, write y, read weight
}

TEST(FusedAddRMSNorm, UpdatesResidualAndNormalizes) {
  for (const DType dtype : kFloatDTypes) {
    for (const Sizes& shape : {Sizes{3, 64}, Sizes{2, 5, 100}, Sizes{2, 700}, Sizes{1, 4096}}) {
      const Sizes normalized{shape.back()};
      FusedAddRMSNormFwdOp op({.normalized_shape = normalized});
      const Tensor x = Tensor::randn(shape, dtype, 21);
      const Tensor residual = Tensor::randn(shape, dtype, 22);
      const Tensor w = Tensor::randn(normalized, dtype, 23);
      const auto ref = testing_util::run_reference("FusedAddRMSNormFwdOp", {x, residual, w},
                                                   op.param_values());
      const Tensor x_before = x.clone();
      const Tensor y = op(x, residual, w);
      expect_close(y, ref[0], "y " + std::string(dtype_name(dtype)));
      expect_close(residual, ref[1], "residual " + std::string(dtype_name(dtype)));
      expect_close(x, x_before, "x unchanged");
      EXPECT_EQ(op.last_call()->written, (std::vector<int>{1}));
    }
  }
}

TEST(FusedAddRMSNorm, NonContiguousResidualIsWrittenInPlace) {
  FusedAddRMSNormFwdOp op({.normalized_shape = {32}});
  const Tensor x = Tensor::randn({4, 32}, DType::float32, 1);
  const Tensor residual = Tensor::randn({32, 4}, DType::float32, 2).transpose(0, 1);
  const Tensor w = Tensor::randn({32}, DType::float32, 3);
  const auto ref = testing_util::run_reference("FusedAddRMSNormFwdOp", {x, residual, w},
                                                   op.param_values());
  op(x, residual, w);
  expect_close(residual, ref[1], "strided residual");
}

TEST(FusedAddRMSNorm, RooflineCountsTheResidualTwice) {
  FusedAddRMSNormFwdOp op({.normalized_shape = {128}});
  op(Tensor::randn({2, 128}, DType::float16, 1), Tensor::randn({2, 128}, DType::float16, 2),
     Tensor::randn({128}, DType::float16, 3));
  // read x, read+write residual, read weight, write y
  EXPECT_EQ(op.eval_roofline().bytes, 2.0 * 128 * 2 * 4 + 128 * 2);
}

}  // namespace
}  // namespace tileops
