// GPU tests of the CUDA grouped GEMM of the MoE family (src/kernels/moe/grouped_gemm*): simt,
// mma and wgmma variants, plain and with fused silu/gelu gating, on small shapes, misaligned
// inputs, every tuning configuration and large sampled shapes. Skipped without CUDA or without a
// device. Cases, runner and tolerances: grouped_gemm_test_util.h.
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

TEST(MoEKernels, RequiresCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

using namespace tileops::grouped_gemm_test;  // NOLINT: this file's test helpers

TEST(MoEGroupedGemm, SmallShapesEveryVariant) {
  SKIP_WITHOUT_GPU();
  for (const GemmCase& c : small_gemm_cases()) ASSERT_NO_FATAL_FAILURE(check_gemm_case(c));
}

// a not 16-byte aligned: the tensor-core configurations fall back to simt by themselves.
TEST(MoEGroupedGemm, MisalignedA) {
  SKIP_WITHOUT_GPU();
  GemmCase c;
  c.name = "misaligned_a";
  c.M = 96;
  c.N = 128;
  c.K = 64;
  c.offsets = {0, 40, 96};
  c.a_offset = 1;
  c.seed = 77;
  ASSERT_NO_FATAL_FAILURE(check_gemm_case(c));
}

// Every configuration of the tuning space (and each with one block per SM) on shapes with tails
// in M, N and K, an empty expert and uncovered rows.
TEST(MoEGroupedGemm, EveryTuningConfig) {
  SKIP_WITHOUT_GPU();
  GemmCase c;
  c.name = "tuning_space";
  c.M = 700;
  c.N = 392;
  c.K = 328;
  c.offsets = {3, 150, 150, 151, 420, 690};
  c.seed = 99;
  ASSERT_NO_FATAL_FAILURE(check_gemm_case(c, true));
  GemmCase d;
  d.name = "tuning_space_decode";
  d.M = 16 * 24;
  d.N = 512;
  d.K = 512;
  d.offsets = uniform_offsets(24, 16);
  d.seed = 100;
  ASSERT_NO_FATAL_FAILURE(check_gemm_case(d, true));
  // Full 128-row tiles in several experts (the tma_store epilogue's path) next to partial ones,
  // N_out % 8 == 0 with and without the gate (N / 2 = 264) and an N tail inside the last chunk.
  GemmCase f;
  f.name = "tuning_space_full_tiles";
  f.M = 640;
  f.N = 528;
  f.K = 192;
  f.offsets = {0, 256, 320, 384, 640};
  f.seed = 101;
  ASSERT_NO_FATAL_FAILURE(check_gemm_case(f, true));
}

// The wgmma configurations with thread-block clusters along M (cluster_m = 2).

// Larger shapes, rows sampled: many tiles per block, many experts, realistic K.
TEST(MoEGroupedGemm, LargeShapesSampled) {
  SKIP_WITHOUT_GPU();
  Rng rng(9);
  std::vector<GemmCase> cases;
  {
    GemmCase c;
    c.name = "e64_random_n1024_k2048";
    c.M = 64 * 96;
    c.N = 1024;
    c.K = 2048;
    c.offsets = random_offsets(64, c.M, rng);
    c.row_sample = 13;
    c.seed = 201;
    cases.push_back(c);
  }
  {
    GemmCase c;
    c.name = "e32_uniform256_n768_k1536";
    c.M = 32 * 256;
    c.N = 768;
    c.K = 1536;
    c.offsets = uniform_offsets(32, 256);
    c.row_sample = 17;
    c.seed = 202;
    cases.push_back(c);
  }
  {
    GemmCase c;
    c.name = "e32_uniform16_n512_k7168";
    c.M = 32 * 16;
    c.N = 512;
    c.K = 7168;
    c.offsets = uniform_offsets(32, 16);
    c.row_sample = 7;
    c.seed = 203;
    cases.push_back(c);
  }
  for (const GemmCase& c : cases) ASSERT_NO_FATAL_FAILURE(check_gemm_case(c));
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
