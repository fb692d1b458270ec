// GPU tests of the CUDA RMSNorm / fused add+RMSNorm kernels (src/kernels/norm/) with their default
// configurations and every member of their tuning spaces, on many shapes, strided rows, unaligned
// pointers and y == x. Skipped without CUDA or without a device.
#include <gtest/gtest.h>

#if TILEOPS_WITH_CUDA
#include "gpu/norm_kernel_test_util.h"
#endif

namespace {

#if !TILEOPS_WITH_CUDA

TEST(RMSNormKernels, RequiresCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

using namespace tileops::norm_test;  // NOLINT(google-build-using-namespace): the shared helpers

// Every (cols, rows) of the lists up to 4M elements a tensor, each dtype, plain and fused, default
// configuration.
TEST(RMSNormKernels, ShapesDefaultConfig) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 100;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const int64_t rows : kRows)
        for (const int64_t cols : kCols) {
          if (rows * cols > (int64_t{4} << 20)) continue;
          RMSProblem p;
          p.dtype = dtype;
          p.rows = rows;
          p.cols = cols;
          p.fused = fused;
          p.seed = ++seed;
          ASSERT_NO_FATAL_FAILURE(check_problem(p));
        }
}

// The benchmark shapes and the long rows (register-resident up to the limit, streaming past it).
TEST(RMSNormKernels, LargeShapes) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    DType dtype;
    int64_t rows, cols;
  };
  const Shape shapes[] = {{DType::bfloat16, 2048, 16384}, {DType::bfloat16, 2048, 4096},
                          {DType::bfloat16, 1024, 32768}, {DType::float16, 4096, 8192},
                          {DType::float32, 2048, 8192},   {DType::float32, 300, 65536},
                          {DType::bfloat16, 300, 65536},  {DType::float16, 7, 131072 + 3}};
  uint64_t seed = 500;
  for (const Shape& s : shapes)
    for (const bool fused : {false, true}) {
      RMSProblem p;
      p.dtype = s.dtype;
      p.rows = s.rows;
      p.cols = s.cols;
      p.fused = fused;
      p.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_problem(p));
    }
}

// Row strides larger than cols (vector path with a tail, or the scalar path when the stride is
// not a multiple of 16 bytes), different for x, residual and y.
TEST(RMSNormKernels, StridedRows) {
  SKIP_WITHOUT_GPU();
  struct Strided {
    int64_t rows, cols, xs, rs, ys;
  };
  const Strided cases[] = {{64, 100, 104, 112, 128},         {64, 4096, 4104, 4096, 4352},
                           {3, 4096, 4100, 4101, 4099},      {64, 1000, 1003, 1024, 1001},
                           {33, 16384, 16392, 16384, 20000}, {5, 7, 9, 8, 16},
                           {17, 65536, 65544, 65600, 65536}};
  uint64_t seed = 700;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const Strided& c : cases) {
        RMSProblem p;
        p.dtype = dtype;
        p.rows = c.rows;
        p.cols = c.cols;
        p.fused = fused;
        p.x_stride = c.xs;
        p.r_stride = c.rs;
        p.y_stride = c.ys;
        p.seed = ++seed;
        ASSERT_NO_FATAL_FAILURE(check_problem(p));
      }
}

// Base pointers offset by one element (each alone, then all): the scalar path.
TEST(RMSNormKernels, UnalignedPointers) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 900;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const int64_t cols : {int64_t{64}, int64_t{1000}, int64_t{4096}, int64_t{16384}})
        for (int which = 0; which < 5; ++which) {
          RMSProblem p;
          p.dtype = dtype;
          p.rows = 19;
          p.cols = cols;
          p.fused = fused;
          p.x_offset = which == 0 || which == 4 ? 1 : 0;
          p.r_offset = which == 1 || which == 4 ? 1 : 0;
          p.y_offset = which == 2 || which == 4 ? 1 : 0;
          p.w_offset = which == 3 || which == 4 ? 1 : 0;
          p.seed = ++seed;
          ASSERT_NO_FATAL_FAILURE(check_problem(p));
        }
}

// y == x: every element is read before it is written.
TEST(RMSNormKernels, InPlace) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 1100;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const int64_t cols : {int64_t{7}, int64_t{128}, int64_t{4096}, int64_t{16385},
                                 int64_t{32768}, int64_t{65536}})
        for (const int64_t offset : {int64_t{0}, int64_t{1}}) {
          RMSProblem p;
          p.dtype = dtype;
          p.rows = 37;
          p.cols = cols;
          p.fused = fused;
          p.in_place = true;
          p.x_offset = offset;
          p.seed = ++seed;
          ASSERT_NO_FATAL_FAILURE(check_problem(p));
        }
}

// Every configuration of the tuning space, and each again with one block per multiprocessor (the
// persistent loop then runs many rows per block) and with the scalar path.
TEST(RMSNormKernels, EveryTuningConfig) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    int64_t rows, cols;
  };
  const Shape shapes[] = {{3, 100},    {2048, 64}, {300, 1000}, {1, 4096},  {256, 4096},
                          {77, 5120},  {7, 16384}, {64, 16384}, {5, 32768}, {9, 65536},
                          {130, 4099}, {37, 16383}};  // the last two: scalar tails
  uint64_t seed = 1300;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const Shape& s : shapes) {
        std::vector<std::optional<RMSNormConfig> > configs;
        const auto space = rms_norm_tuning_space(s.rows, s.cols, dtype, fused, 0);
        ASSERT_FALSE(space.empty());
        EXPECT_EQ(space.front(), rms_norm_default_config(s.rows, s.cols, dtype, fused, 0));
        for (const RMSNormConfig& c : space) {
          configs.emplace_back(c);
          configs.emplace_back(with_blocks_per_sm(c, 1));
        }
        // Scalar accesses (vec_bytes = element size): streaming only, the default's rows a warp.
        const auto* front = space.front().as<tileops::cuda_kernels::RMSNormResidentConfig>();
        const int front_tpr = front != nullptr ? front->threads_per_row() : 32;
        configs.emplace_back(RMSNormConfig{tileops::cuda_kernels::RMSNormStreamingConfig{
            .threads = 256,
            .rows_per_block = front_tpr < 32 ? 256 / front_tpr : 1,
            .vec_bytes = static_cast<int>(tileops::element_size(dtype))}});
        RMSProblem p;
        p.dtype = dtype;
        p.rows = s.rows;
        p.cols = s.cols;
        p.fused = fused;
        p.seed = ++seed;
        ASSERT_NO_FATAL_FAILURE(check_problem(p, configs));
      }
}

// The variant configurations (grid, rows_in_flight, cluster_size, cache_hint)
// of the spaces of the 4096- and 16384-column shapes, on rows with scalar tails, strided rows,
// y == x, and unaligned x (the scalar fallback), each also with one block per multiprocessor.
TEST(RMSNormKernels, VariantConfigsStridedInPlace) {
  SKIP_WITHOUT_GPU();
  const StridedCase cases[] = {{41, 4099, 4104, 4112, 4200, 0, false},
                               {41, 4099, 4104, 4104, 0, 0, true},
                               {23, 16383, 16392, 16400, 16384, 0, false},
                               {23, 16383, 16384, 16384, 0, 0, true},
                               {9, 4096, 4096, 4096, 4096, 1, false}};
  uint64_t seed = 1700;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const StridedCase& k : cases) {
        std::vector<std::optional<RMSNormConfig> > configs;
        for (const RMSNormConfig& c : rms_norm_tuning_space(2048, k.cols, dtype, fused, 0)) {
          using namespace tileops::cuda_kernels;  // NOLINT(google-build-using-namespace)
          if (c.as<RMSNormStagedConfig>() != nullptr) continue;  // aligned only: StagedConfigs
          const bool other_grid =
              std::visit([](const auto& k) { return k.grid != RMSNormGrid::persistent; }, c.kernel);
          const auto* r = c.as<RMSNormResidentConfig>();
          const auto* lean = c.as<RMSNormHighOccupancyStreamingConfig>();
          if (!other_grid && !(r != nullptr && r->pipelined()) &&
              !(lean != nullptr && lean->cache_hint != 0))
            continue;
          configs.emplace_back(c);
          configs.emplace_back(with_blocks_per_sm(c, 1));
        }
        ASSERT_GT(configs.size(), 10u) << dtype_str(dtype) << " cols " << k.cols;
        ASSERT_NO_FATAL_FAILURE(check_problem(k.problem(dtype, fused, ++seed), configs));
      }
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
