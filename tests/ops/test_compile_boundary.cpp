// The compile boundary as the C++ schemas carry it: every manifest entry with a call-time
// tensor input and no composition names one PyTorch custom operator per effect branch; the
// composites name none. The names are what the torch extension registers.
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "tileops/base/schema.h"

namespace tileops {
namespace {

TEST(CompileBoundary, NamesExistExactlyForTheBoundaryOps) {
  for (const OpSchema* s : all_schemas()) {
    const bool boundary = !s->inputs.empty() && s->composition.empty();
    EXPECT_EQ(!s->compile_op_names.empty(), boundary) << s->name;
    EXPECT_EQ(s->compile_op_names.size(), s->compile_op_schemas.size()) << s->name;
  }
}

TEST(CompileBoundary, OneOperatorPerEffectBranch) {
  using Names = std::vector<std::string_view>;
  EXPECT_EQ(find_schema("RMSNormFwdOp")->compile_op_names,
            (Names{"tileops::norm_rms_norm_fwd", "tileops::norm_rms_norm_fwd_out"}));
  // The residual is always written: both branches carry `_writes_residual`.
  EXPECT_EQ(find_schema("FusedAddRMSNormFwdOp")->compile_op_names,
            (Names{"tileops::norm_fused_add_rms_norm_fwd_writes_residual",
                   "tileops::norm_fused_add_rms_norm_fwd_writes_residual_out"}));
  EXPECT_EQ(find_schema("FusedAddRMSNormFwdOp")->compile_op_schemas[0],
            "(str key, Tensor x, Tensor(a!) residual, Tensor weight) -> Tensor");
  // No `buffer: out` output: one branch; the family is written once.
  EXPECT_EQ(find_schema("MoETopKRoutingFwdOp")->compile_op_names,
            (Names{"tileops::moe_top_k_routing_fwd"}));
  EXPECT_EQ(find_schema("MoETopKRoutingFwdOp")->compile_op_schemas[0],
            "(str key, Tensor logits, Tensor? correction_bias) -> (Tensor, Tensor)");
  EXPECT_EQ(find_schema("LongRoPEFwdOp")->compile_op_schemas[1],
            "(str key, Tensor x, Tensor? positions, Tensor(a!) out) -> ()");
  EXPECT_TRUE(find_schema("FusedMoEFwdOp")->compile_op_names.empty());
}

}  // namespace
}  // namespace tileops
