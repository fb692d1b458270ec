// GPU tests of the CUDA grouped GEMM's configurations: the thread-block cluster variants, the
// refusal of invalid arguments and the configuration functions. Skipped without CUDA or without
// a device. Cases, runner and tolerances: grouped_gemm_test_util.h.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#if TILEOPS_WITH_CUDA
#include "gpu/grouped_gemm_test_util.h"
#endif

namespace {

#if !TILEOPS_WITH_CUDA

TEST(MoEGroupedGemmConfigs, RequiresCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

using namespace tileops::grouped_gemm_test;  // NOLINT: this file's test helpers

std::vector<GroupedGemmConfig> cluster_configs() {
  std::vector<GroupedGemmConfig> out;
  for (const auto& [bm, bn, stages] :
       {std::tuple{128, 256, 4}, std::tuple{128, 128, 6}, std::tuple{64, 256, 5}}) {
    GroupedGemmConfig c = wgmma_config();
    c.block_m = bm;
    c.block_n = bn;
    c.warps_m = bm / 64;
    c.stages = stages;
    c.cluster_m = 2;
    out.push_back(c);
  }
  return out;
}

// Each cluster configuration (and each with one block per multiprocessor: many units per
// cluster), both dtypes, every activation. The two blocks of a cluster take consecutive m-tiles
// of one expert: experts with an odd m-tile count (the second block has no rows), empty experts,
// uncovered rows, tails in N and K, more clusters than units.
TEST(MoEGroupedGemm, ClusterConfigs) {
  SKIP_WITHOUT_GPU();
  std::vector<GroupedGemmConfig> configs = cluster_configs();
  {
    // Where the experts are large enough, the tuning space offers them.
    GemmCase big;
    big.M = 8 * 512;
    big.N = 1024;
    big.K = 1024;
    big.offsets = uniform_offsets(8, 512);
    const auto space =
        ck::grouped_gemm_tuning_space(shape_args(big, DType::bfloat16, MoEActivation::none), 0);
    const bool wgmma = std::any_of(space.begin(), space.end(), [](const GroupedGemmConfig& g) {
      return g.variant == GroupedGemmVariant::wgmma;
    });
    for (const auto& g : configs) {
      EXPECT_EQ(std::find(space.begin(), space.end(), g) != space.end(), wgmma) << g.str();
      EXPECT_NE(g.str().find("cluster_m=2"), std::string::npos) << g.str();
    }
  }
  const size_t n = configs.size();
  for (size_t i = 0; i < n; ++i) {
    GroupedGemmConfig one = configs[i];
    one.blocks_per_sm = 1;
    configs.push_back(one);
  }
  Rng rng(31);
  std::vector<GemmCase> cases;
  const auto add = [&](std::string name, int64_t M, int64_t N, int64_t K,
                       std::vector<int32_t> off) {
    GemmCase c;
    c.name = std::move(name);
    c.M = M;
    c.N = N;
    c.K = K;
    c.offsets = std::move(off);
    c.seed = 300 + cases.size();
    cases.push_back(c);
  };
  // Rows per expert 0, 1, 127, 128, 129, 0, 64, 193, 256, 100 (odd and even m-tile counts for
  // block_m 64 and 128), rows [0, 2) and [1000, 1010) uncovered.
  add("cluster_odd_m_tiles", 1010, 520, 328, {2, 2, 3, 130, 258, 387, 387, 451, 644, 900, 1000});
  add("cluster_full_pairs", 6 * 256, 768, 512, uniform_offsets(6, 256));
  add("cluster_random_split", 2048, 264, 200, random_offsets(9, 2048, rng));
  add("cluster_single_rows", 5, 136, 72, {0, 1, 2, 2, 5});
  for (const GemmCase& c : cases) {
    for (const DType dtype : kGemmDtypes) {
      GemmRunner runner(c, dtype);
      ASSERT_NO_FATAL_FAILURE(runner.prepare()) << c.name;
      for (const MoEActivation act : kActs) {
        if (act != MoEActivation::none && c.N % 2 != 0) continue;
        for (const auto& cfg : configs)
          ASSERT_NO_FATAL_FAILURE(runner.run_and_check(act, cfg)) << runner.describe(act);
      }
    }
  }
}

TEST(MoEGroupedGemm, InvalidArguments) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(1 << 20);
  ASSERT_NE(buf.ptr, nullptr);
  CUDA_OK(cudaMemset(buf.ptr, 0, buf.bytes));
  GroupedGemmArgs a;
  a.a = buf.at(0);
  a.b = buf.at(0);
  a.c = buf.at(1 << 19);
  a.expert_offsets = buf.at<int32_t>(0);  // zeros: every row uncovered
  a.M = 8;
  a.N = 16;
  a.K = 16;
  a.E = 2;
  a.dtype = DType::bfloat16;
  const GroupedGemmConfig def = ck::grouped_gemm_default_config(a, 0);
  EXPECT_NO_THROW(ck::launch_grouped_gemm(a, def, nullptr));
  CUDA_OK(cudaDeviceSynchronize());

  GroupedGemmArgs bad = a;
  bad.N = 15;
  bad.activation = MoEActivation::silu_and_mul;
  EXPECT_THROW(ck::launch_grouped_gemm(bad, def, nullptr), tileops::SignatureError);
  bad = a;
  bad.dtype = DType::float32;
  EXPECT_THROW(ck::launch_grouped_gemm(bad, def, nullptr), tileops::SignatureError);
  EXPECT_THROW(ck::grouped_gemm_default_config(bad, 0), tileops::SignatureError);
  bad = a;
  bad.c = nullptr;
  EXPECT_THROW(ck::launch_grouped_gemm(bad, def, nullptr), tileops::SignatureError);
  bad = a;
  bad.expert_offsets = nullptr;
  EXPECT_THROW(ck::launch_grouped_gemm(bad, def, nullptr), tileops::SignatureError);
  bad = a;
  bad.a = nullptr;
  EXPECT_THROW(ck::launch_grouped_gemm(bad, def, nullptr), tileops::SignatureError);
  bad = a;
  bad.K = -1;
  EXPECT_THROW(ck::launch_grouped_gemm(bad, def, nullptr), tileops::SignatureError);
  GroupedGemmConfig nokernel = mma_config();
  nokernel.stages = 7;
  EXPECT_THROW(ck::launch_grouped_gemm(a, nokernel, nullptr), tileops::SignatureError);
  nokernel = simt_config();
  nokernel.block_m = 32;
  EXPECT_THROW(ck::launch_grouped_gemm(a, nokernel, nullptr), tileops::SignatureError);
  nokernel = mma_config();
  nokernel.cluster_m = 2;
  EXPECT_THROW(ck::launch_grouped_gemm(a, nokernel, nullptr), tileops::SignatureError);
  nokernel = wgmma_config();
  nokernel.cluster_m = 4;
  EXPECT_THROW(ck::launch_grouped_gemm(a, nokernel, nullptr), tileops::SignatureError);
  // The TMA store epilogue exists for the wgmma kernels without clusters only.
  nokernel = mma_config();
  nokernel.tma_store = true;
  EXPECT_THROW(ck::launch_grouped_gemm(a, nokernel, nullptr), tileops::SignatureError);
  nokernel = wgmma_config();
  nokernel.cluster_m = 2;
  nokernel.tma_store = true;
  EXPECT_THROW(ck::launch_grouped_gemm(a, nokernel, nullptr), tileops::SignatureError);
  // Empty problems launch nothing (null pointers are then fine).
  GroupedGemmArgs empty;
  empty.M = 0;
  empty.N = 16;
  empty.K = 16;
  empty.E = 4;
  EXPECT_NO_THROW(ck::launch_grouped_gemm(empty, def, nullptr));
  empty.M = 4;
  empty.N = 0;
  EXPECT_NO_THROW(ck::launch_grouped_gemm(empty, def, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
}

TEST(MoEGroupedGemm, ConfigFunctions) {
  SKIP_WITHOUT_GPU();
  for (const GemmCase& c : small_gemm_cases()) {
    for (const DType dtype : kGemmDtypes) {
      for (const MoEActivation act : kActs) {
        const GroupedGemmArgs a = shape_args(c, dtype, act);
        const auto space = ck::grouped_gemm_tuning_space(a, 0);
        ASSERT_FALSE(space.empty());
        EXPECT_EQ(space.front(), ck::grouped_gemm_default_config(a, 0));
        const bool has_simt = std::find(space.begin(), space.end(), simt_config()) != space.end();
        EXPECT_EQ(has_simt, c.K % 8 != 0) << c.name;
        for (const auto& g : space) EXPECT_FALSE(g.str().empty());
        if (c.K % 8 != 0) {
          EXPECT_EQ(space.size(), 1u) << c.name;
        }
      }
    }
  }
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
