// The FP8 grouped GEMM's configurations on the host: which tile the default takes for a shape
// (the narrow 64 x 64 tiles where 64 x 256 ones would leave SMs without a tile, 256 x 128 ones
// where they fill the SMs' waves as well as 128 x 128 ones), that the narrow
// tiles are never offered or launched with a gated activation. Runs in any CUDA build, with or
// without a GPU (without one the SM count is taken as 132); no pointer below is dereferenced.
#if TILEOPS_WITH_CUDA

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "kernels/moe/grouped_gemm_fp8_cuda.h"
#include "tileops/core/error.h"

namespace tileops {
namespace {

namespace ck = cuda_kernels;
using testing::HasSubstr;

ck::GroupedGemmFP8Args shape(std::int64_t M, std::int64_t N, std::int64_t K, std::int64_t E,
                             std::int64_t max_m = 0, MoEActivation act = MoEActivation::none) {
  ck::GroupedGemmFP8Args a;
  a.M = M;
  a.N = N;
  a.K = K;
  a.E = E;
  a.max_m = max_m;
  a.activation = act;
  return a;
}

std::string default_tile(const ck::GroupedGemmFP8Args& a) {
  const auto c = ck::grouped_gemm_fp8_default_config(a);
  return std::to_string(c.block_m) + "x" + std::to_string(c.block_n) + "/" +
         std::to_string(c.stages);
}

TEST(GroupedGemmFP8Configs, DecodeSizedDenseGemmsTakeNarrowTiles) {
  // DeepSeek-V3's projections at 64 tokens: 9, 28 and 16 tiles of 64 x 256.
  EXPECT_EQ(default_tile(shape(64, 2112, 7168, 1)), "64x64/12");
  EXPECT_EQ(default_tile(shape(64, 7168, 16384, 1)), "64x64/12");
  EXPECT_EQ(default_tile(shape(64, 4096, 7168, 1)), "64x64/12");
  EXPECT_EQ(default_tile(shape(1, 2112, 7168, 1)), "64x64/12");
}

TEST(GroupedGemmFP8Configs, ManyRowsTakeTallTilesWhereTheyFillTheWaves) {
  // 256 x 128 from 256 rows per expert: 4096 x 4096 is 512 tiles (3.9 waves of 132 SMs), 1024 x
  // 7168 224 (1.7, as 448 tiles of 128 x 128: 3.4), 8 experts of 256 rows gated to 768 columns 96.
  EXPECT_EQ(default_tile(shape(4096, 4096, 7168, 1)), "256x128/3");
  EXPECT_EQ(default_tile(shape(1024, 7168, 16384, 1)), "256x128/3");
  EXPECT_EQ(default_tile(shape(8 * 4096, 7168, 2048, 8)), "256x128/3");
  EXPECT_EQ(default_tile(shape(8 * 256, 1536, 2048, 8, 0, MoEActivation::silu_and_mul)),
            "256x128/3");
  // Not where their fewer tiles fill the last wave worse: 4096 x 2112 is 272 tiles of 256 x 128
  // (69% of 3 waves) against 544 of 128 x 128 (82% of 5); nor below 256 rows per expert.
  EXPECT_EQ(default_tile(shape(4096, 2112, 7168, 1)), "128x128/6");
  EXPECT_EQ(default_tile(shape(256 * 128, 4096, 7168, 256)), "128x128/6");
  EXPECT_EQ(default_tile(shape(255, 4096, 7168, 1)), "128x128/6");
}

TEST(GroupedGemmFP8Configs, OtherShapesKeepTheirTiles) {
  // Many experts of few rows, or the masked layout: 64 x 256.
  EXPECT_EQ(default_tile(shape(256 * 32, 4096, 7168, 256)), "64x256/4");
  EXPECT_EQ(default_tile(shape(32 * 128, 4096, 7168, 32, 128)), "64x256/4");
  // A gated activation never takes the narrow tiles, however few the tiles.
  EXPECT_EQ(default_tile(shape(64, 4096, 7168, 1, 0, MoEActivation::silu_and_mul)), "64x256/4");
}

TEST(GroupedGemmFP8Configs, NarrowTilesAreNotOfferedWithAnActivation) {
  const auto narrow = [](const ck::GroupedGemmFP8CudaConfig& c) { return c.block_n == 64; };
  const auto plain = ck::grouped_gemm_fp8_tuning_space(shape(64, 2112, 7168, 1));
  EXPECT_EQ(std::count_if(plain.begin(), plain.end(), narrow), 1);
  const auto gated =
      ck::grouped_gemm_fp8_tuning_space(shape(64, 4096, 7168, 1, 0, MoEActivation::gelu_and_mul));
  EXPECT_EQ(std::count_if(gated.begin(), gated.end(), narrow), 0);
  EXPECT_FALSE(gated.empty());
}

TEST(GroupedGemmFP8Configs, NarrowTilesWithAnActivationAreRefused) {
  const ck::GroupedGemmFP8Args a = shape(64, 4096, 7168, 1, 0, MoEActivation::silu_and_mul);
  ck::GroupedGemmFP8CudaConfig narrow;
  narrow.block_m = 64;
  narrow.block_n = 64;
  narrow.stages = 12;
  try {
    ck::launch_grouped_gemm_fp8(a, narrow, nullptr);
    FAIL() << "launched";
  } catch (const SignatureError& e) {
    EXPECT_THAT(e.what(), HasSubstr("a gated activation needs block_n >= 128"));
  }
}

}  // namespace
}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
