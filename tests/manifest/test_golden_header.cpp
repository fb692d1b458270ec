// The header emitted for tests/manifest/golden/mini.yaml, included here: its Params structs
// carry the manifest defaults and read like keyword arguments. (Its sources and the op classes
// are compiled by tileops_gen_golden_compile; nothing here needs the library to link, so a
// Params holding a Tensor is only checked at compile time.)
#include <type_traits>

#include <gtest/gtest.h>

#include "tileops/gen/mini.h"

namespace {

using tileops::gen::MiniMatmulFwdOpParams;
using tileops::gen::MiniSplitFwdOpParams;

struct FakeDerived;

static_assert(std::is_aggregate_v<MiniMatmulFwdOpParams>);
static_assert(std::is_aggregate_v<MiniSplitFwdOpParams>);
static_assert(std::is_base_of_v<tileops::Op, tileops::gen::MiniMatmulFwdOpBase<FakeDerived>>);
static_assert(
    std::is_same_v<tileops::gen::MiniSplitFwdOpBase<FakeDerived>::Params, MiniSplitFwdOpParams>);
static_assert(requires { MiniSplitFwdOpParams{.mode = "max", .groups = {2, 3}}; });
static_assert(std::is_same_v<decltype(MiniSplitFwdOpParams::scale), tileops::Tensor>);
static_assert(std::is_same_v<decltype(MiniSplitFwdOpParams::groups), tileops::Sizes>);
static_assert(std::is_same_v<decltype(MiniMatmulFwdOpParams::alpha), std::optional<double>>);
static_assert(
    std::is_same_v<decltype(MiniMatmulFwdOpParams::out_dtype), std::optional<tileops::DType>>);
// A torch.dtype parameter overrides Op::dtype(); an op without one keeps the base's default.
static_assert(std::is_same_v<decltype(&tileops::gen::MiniMatmulFwdOpBase<FakeDerived>::dtype),
                             std::optional<tileops::DType> (
                                 tileops::gen::MiniMatmulFwdOpBase<FakeDerived>::*)() const>);
static_assert(std::is_same_v<decltype(&tileops::gen::MiniSplitFwdOpBase<FakeDerived>::dtype),
                             std::optional<tileops::DType> (tileops::Op::*)() const>);

TEST(GoldenHeader, ParamsCarryManifestDefaults) {
  const MiniMatmulFwdOpParams p;
  EXPECT_FALSE(p.transpose);
  EXPECT_FALSE(p.alpha.has_value());
  EXPECT_EQ(p.tile, (tileops::Sizes{64, 64}));
  EXPECT_FALSE(p.out_dtype.has_value());
}

TEST(GoldenHeader, DesignatedInitializersReadLikeKeywords) {
  const MiniMatmulFwdOpParams p{.transpose = true, .alpha = 0.25};
  EXPECT_TRUE(p.transpose);
  ASSERT_TRUE(p.alpha.has_value());
  EXPECT_EQ(*p.alpha, 0.25);
  EXPECT_EQ(p.tile, (tileops::Sizes{64, 64}));
}

}  // namespace
