// The row-sampled references `tileops bench` checks large cases with: for every op that has one,
// the sampled rows equal the whole reference's rows, and an op output with one sampled row
// corrupted fails the sampled comparison. Also the sample itself: drawn by the seed, distinct,
// sorted.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "ops/moe_test_inputs.h"
#include "ops/ops_test_util.h"
#include "tileops/base/op.h"
#include "tileops/base/op_class.h"
#include "tileops/base/reference.h"
#include "tileops/ops/moe.h"
#include "tileops/ops/norm.h"

namespace tileops {
namespace {

using namespace moe_test;  // NOLINT: the tests' inputs

struct Case {
  std::string what;
  std::unique_ptr<Op> op;
  std::vector<Tensor> inputs;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  const auto add = [&](std::string what, std::unique_ptr<Op> op, std::vector<Tensor> inputs) {
    out.push_back({std::move(what), std::move(op), std::move(inputs)});
  };
  add("rms_norm", std::make_unique<RMSNormFwdOp>(RMSNormFwdOp::Params{.normalized_shape = {96}}),
      {Tensor::randn({37, 96}, DType::bfloat16, 1), Tensor::randn({96}, DType::bfloat16, 2)});
  add("fused_add_rms_norm",
      std::make_unique<FusedAddRMSNormFwdOp>(
          FusedAddRMSNormFwdOp::Params{.normalized_shape = {64}}),
      {Tensor::randn({29, 64}, DType::float16, 3), Tensor::randn({29, 64}, DType::float16, 4),
       Tensor::randn({64}, DType::float16, 5)});
  const Tensor offsets = offsets_of({5, 0, 17, 9});
  add("grouped_gemm",
      std::make_unique<MoEGroupedGemmFwdOp>(
          MoEGroupedGemmFwdOp::Params{.activation = "silu_and_mul"}),
      {Tensor::randn({33, 48}, DType::bfloat16, 6), offsets,
       weight({4, 40, 48}, DType::bfloat16, 7)});
  // FP8: e4m3 values, scales per block (two K blocks of 32, a partial weight block of 16 rows)
  add("grouped_gemm_fp8",
      std::make_unique<MoEGroupedGemmFP8FwdOp>(MoEGroupedGemmFP8FwdOp::Params{
          .activation = "gelu_and_mul", .block_n = 16, .block_k = 32}),
      {Tensor::randn({33, 64}, DType::float8_e4m3fn, 21),
       Tensor::rand({33, 2}, DType::float32, 22, Device::cpu(), 0.5, 2.0), offsets,
       Tensor::randn({4, 40, 64}, DType::float8_e4m3fn, 23),
       Tensor::rand({4, 3, 2}, DType::float32, 24, Device::cpu(), 0.05, 0.2)});
  // The masked layout: its rows of dimension 0 are experts (counts 0, partial and max_m)
  add("grouped_gemm_fp8_masked",
      std::make_unique<MoEGroupedGemmFP8MaskedFwdOp>(MoEGroupedGemmFP8MaskedFwdOp::Params{
          .activation = "silu_and_mul", .block_n = 16, .block_k = 32}),
      {Tensor::randn({6, 8, 64}, DType::float8_e4m3fn, 25),
       Tensor::rand({6, 8, 2}, DType::float32, 26, Device::cpu(), 0.5, 2.0),
       int_tensor({8, 0, 3, 5, 1, 8}), Tensor::randn({6, 40, 64}, DType::float8_e4m3fn, 27),
       Tensor::rand({6, 3, 2}, DType::float32, 28, Device::cpu(), 0.05, 0.2)});
  // The quantization: rows of groups quantized on their own (group 32, with NaN-free values).
  add("per_token_group_quant",
      std::make_unique<PerTokenGroupQuantFP8FwdOp>(
          PerTokenGroupQuantFP8FwdOp::Params{.group_size = 32}),
      {Tensor::randn({17, 128}, DType::bfloat16, 40)});
  add("expert_mlp", std::make_unique<MoEExpertMLPFwdOp>(MoEExpertMLPFwdOp::Params{}),
      {Tensor::randn({33, 32}, DType::bfloat16, 8), offsets,
       weight({4, 2 * 24, 32}, DType::bfloat16, 9), weight({4, 32, 24}, DType::bfloat16, 10)});
  std::vector<std::int32_t> perm(40);
  std::iota(perm.begin(), perm.end(), 0);
  std::reverse(perm.begin(), perm.end());
  std::vector<std::int32_t> inverse(perm.begin(), perm.begin() + 30);
  inverse.insert(inverse.end(), 2, -1);  // pairs served elsewhere
  add("post_permute",
      std::make_unique<MoEPostPermuteFwdOp>(MoEPostPermuteFwdOp::Params{.scale = 0.5}),
      {Tensor::randn({40, 24}, DType::bfloat16, 11),
       Tensor::rand({16, 2}, DType::float32, 12, Device::cpu(), 0.0, 1.0),
       int_tensor(inverse).view({16, 2})});
  const Tensor x = Tensor::randn({21, 32}, DType::bfloat16, 13);
  const Tensor w13 = weight({6, 2 * 16, 32}, DType::bfloat16, 14);
  const Tensor w2 = weight({6, 32, 16}, DType::bfloat16, 15);
  const Tensor topk_weights = Tensor::rand({21, 3}, DType::float32, 16, Device::cpu(), 0.0, 1.0);
  add("fused_experts", std::make_unique<FusedMoEExpertsFwdOp>(FusedMoEExpertsFwdOp::Params{}),
      {x, topk_weights, distinct_ids(21, 3, 6, 17), w13, w2, Tensor()});
  // Expert parallelism: 10 global experts, this rank holds 6 of them (4 map to -1).
  add("fused_experts_mapped",
      std::make_unique<FusedMoEExpertsFwdOp>(FusedMoEExpertsFwdOp::Params{}),
      {x, topk_weights, distinct_ids(21, 3, 10, 18), w13, w2,
       int_tensor({0, -1, 1, 2, -1, 3, -1, 4, 5, -1})});
  add("fused_moe",
      std::make_unique<FusedMoEFwdOp>(FusedMoEFwdOp::Params{
          .top_k = 3, .scoring = "sigmoid", .renormalize = true, .routed_scaling_factor = 2.5}),
      {x, Tensor::randn({21, 6}, DType::float32, 19), w13, w2,
       Tensor::rand({6}, DType::float32, 20, Device::cpu(), 0.0, 0.1)});
  // FP8 experts: e4m3 weights with 128 x 128 block scales (H = 256, F = 128)
  const Tensor x8 = Tensor::randn({13, 256}, DType::bfloat16, 25);
  const Tensor w13_8 = Tensor::randn({5, 256, 256}, DType::float8_e4m3fn, 26);
  const Tensor w13_s = Tensor::rand({5, 2, 2}, DType::float32, 27, Device::cpu(), 0.02, 0.08);
  const Tensor w2_8 = Tensor::randn({5, 256, 128}, DType::float8_e4m3fn, 28);
  const Tensor w2_s = Tensor::rand({5, 2, 1}, DType::float32, 29, Device::cpu(), 0.02, 0.08);
  add("expert_mlp_fp8", std::make_unique<MoEExpertMLPFP8FwdOp>(MoEExpertMLPFP8FwdOp::Params{}),
      {x8, offsets_of({3, 0, 6, 2, 1}), w13_8, w2_8, w13_s, w2_s});
  add("fused_experts_fp8", std::make_unique<FusedMoEExpertsFwdOp>(FusedMoEExpertsFwdOp::Params{}),
      {x8, Tensor::rand({13, 2}, DType::float32, 30, Device::cpu(), 0.0, 1.0),
       distinct_ids(13, 2, 5, 31), w13_8, w2_8, Tensor(), w13_s, w2_s});
  add("fused_moe_fp8",
      std::make_unique<FusedMoEFwdOp>(FusedMoEFwdOp::Params{
          .top_k = 2, .scoring = "sigmoid", .renormalize = true, .routed_scaling_factor = 2.5}),
      {x8, Tensor::randn({13, 5}, DType::float32, 32), w13_8, w2_8,
       Tensor::rand({5}, DType::float32, 33, Device::cpu(), 0.0, 0.1), w13_s, w2_s});
  return out;
}

/// What the op writes: its outputs, then the inputs it mutates (their new values).
std::vector<Tensor> written_by(Op& op, std::vector<Tensor>& inputs) {
  std::vector<Tensor> written = op.call(inputs);
  for (std::size_t i = 0; i < op.schema().inputs.size() && i < inputs.size(); ++i) {
    if (op.schema().inputs[i].mutated) written.push_back(inputs[i]);
  }
  return written;
}

std::vector<Tensor> clones(const std::vector<Tensor>& v) {
  std::vector<Tensor> out;
  for (const auto& t : v) out.push_back(t.defined() ? t.clone() : t);
  return out;
}

TEST(SampledReference, RowsEqualTheWholeReferenceRows) {
  for (auto& c : cases()) {
    SCOPED_TRACE(c.what);
    const SampledReferenceFn* sampled = find_sampled_reference(c.op->name());
    const ReferenceFn* whole = find_reference(c.op->name());
    ASSERT_NE(sampled, nullptr);
    ASSERT_NE(whole, nullptr);
    const std::vector<Tensor> expected = (*whole)(c.inputs, c.op->param_values());
    const std::vector<std::int64_t> rows = sample_rows(expected.front().size(0), 5, 7);
    const std::vector<Tensor> got = (*sampled)(c.inputs, c.op->param_values(), rows);
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      EXPECT_LE(max_relative_error(got[k], gather_rows(expected[k], rows)), 1e-6) << "tensor " << k;
    }
  }
}

TEST(SampledReference, ACorruptedSampledRowFailsTheCheck) {
  for (auto& c : cases()) {
    SCOPED_TRACE(c.what);
    const SampledReferenceFn* sampled = find_sampled_reference(c.op->name());
    std::vector<Tensor> call_inputs = clones(c.inputs);  // the fused norm updates its residual
    const std::vector<Tensor> written = written_by(*c.op, call_inputs);
    const std::vector<std::int64_t> rows = sample_rows(written.front().size(0), 4, 11);
    const std::vector<Tensor> expected = (*sampled)(c.inputs, c.op->param_values(), rows);
    const Tensor& out = written.front();
    const double tolerance = tolerance_for(out.dtype());
    EXPECT_LE(max_relative_error(gather_rows(out, rows), expected.front()), tolerance);

    // One element of the third sampled row off by 0.5: caught. An e4m3 element moves by
    // |v| / 2 + 2 towards zero and past it instead: e4m3's steps would swallow 0.5 at large |v|,
    // and the value stays within its range.
    const std::int64_t bad_row = rows[2];
    const Tensor corrupted = out.clone();
    // (the first element of the row's last dimension's middle; a masked output's rows are 3D)
    std::vector<std::int64_t> at(static_cast<std::size_t>(corrupted.dim()), 0);
    at.front() = bad_row;
    at.back() = corrupted.size(corrupted.dim() - 1) / 2;
    const double v = corrupted.item_at(at);
    corrupted.set_at(
        at, out.dtype() == DType::float8_e4m3fn ? 0.5 * v - (v >= 0 ? 2.0 : -2.0) : v + 0.5);
    EXPECT_GT(max_relative_error(gather_rows(corrupted, rows), expected.front()), tolerance);
  }
}

TEST(SampledReference, SampleRowsAreDrawnBySeedDistinctAndSorted) {
  const auto a = sample_rows(1000, 64, 3);
  EXPECT_EQ(a, sample_rows(1000, 64, 3));
  EXPECT_NE(a, sample_rows(1000, 64, 4));
  ASSERT_EQ(a.size(), 64u);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::set<std::int64_t>(a.begin(), a.end()).size(), 64u);
  EXPECT_GE(a.front(), 0);
  EXPECT_LT(a.back(), 1000);
  const auto all = sample_rows(5, 64, 3);  // fewer rows than asked: all of them
  EXPECT_EQ(all, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
}

TEST(SampledReference, GatherRowsCopiesTheRowsInOrderAndRejectsOthers) {
  const Tensor t = Tensor::arange(12, DType::float32).view({4, 3});
  const std::int64_t rows[] = {3, 1};
  const Tensor g = gather_rows(t, rows);
  EXPECT_EQ(g.sizes(), (Sizes{2, 3}));
  EXPECT_EQ(g.to_vector(), (std::vector<double>{9, 10, 11, 3, 4, 5}));
  const std::int64_t bad[] = {4};
  EXPECT_THROW(gather_rows(t, bad), SignatureError);
}

}  // namespace
}  // namespace tileops
