// GPU tests of the RMSNorm kernel families outside the defaults' common paths: the high-occupancy
// streaming kernels, the re-reading kernel and the shared-memory-staged kernel, each over its
// configurations and the arguments it refuses. Skipped without CUDA or without a device.
#include <gtest/gtest.h>

#if TILEOPS_WITH_CUDA
#include "gpu/norm_kernel_test_util.h"
#endif

namespace {

#if TILEOPS_WITH_CUDA

using namespace tileops::norm_test;  // NOLINT(google-build-using-namespace): the shared helpers

using tileops::cuda_kernels::RMSNormGrid;
using tileops::cuda_kernels::RMSNormHighOccupancyStreamingConfig;
using tileops::cuda_kernels::RMSNormRereadConfig;
using tileops::cuda_kernels::RMSNormStagedConfig;

RMSNormConfig make_staged(int threads, int stages, int blocks_per_sm,
                          RMSNormGrid grid = RMSNormGrid::persistent) {
  return {RMSNormStagedConfig{
      .threads = threads, .blocks_per_sm = blocks_per_sm, .grid = grid, .stages = stages}};
}

// The high-occupancy streaming kernels (1 and 2 vectors in flight, each cache hint) with blocks of
// 128 and 512 threads on the persistent grid and a block per row: rows with scalar tails, rows
// longer than a block's vectors, strided rows, y == x, a single row, and unaligned x (the scalar
// path); their names.
TEST(RMSNormKernels, StreamingUnroll) {
  SKIP_WITHOUT_GPU();
  const StridedCase cases[] = {{2048, 4096, 0, 0, 0, 0, false},
                               {37, 16383, 0, 0, 0, 0, false},
                               {64, 16384, 16392, 16400, 16384, 0, false},
                               {23, 16383, 16384, 16384, 0, 0, true},
                               {1, 8192, 0, 0, 0, 0, false},
                               {300, 1000, 0, 0, 0, 0, false},
                               {9, 65536, 0, 0, 0, 0, false},
                               {19, 4096, 0, 0, 0, 1, false}};
  std::vector<std::optional<RMSNormConfig> > configs;
  for (const int in_flight : {1, 2})
    for (const int hint : {0, 1, 2, 3})
      for (const int threads : {128, 512})
        for (const auto grid : {RMSNormGrid::persistent, RMSNormGrid::all})
          configs.emplace_back(
              RMSNormConfig{RMSNormHighOccupancyStreamingConfig{.threads = threads,
                                                                .grid = grid,
                                                                .vectors_in_flight = in_flight,
                                                                .cache_hint = hint}});
  // Named as the flag struct named them (the tuning database's values).
  const RMSNormConfig named{
      RMSNormHighOccupancyStreamingConfig{.threads = 256, .vectors_in_flight = 2}};
  EXPECT_EQ(named.str(),
            "threads=256,rows_per_block=1,vec_bytes=16,vecs_per_thread=0,weight_in_registers=false,"
            "blocks_per_sm=0,streaming_unroll=2");
  uint64_t seed = 2500;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const StridedCase& k : cases)
        ASSERT_NO_FATAL_FAILURE(check_problem(k.problem(dtype, fused, ++seed), configs));
}

// The re-reading kernel (reread): every (threads, vecs_per_thread) it has, plain and fused, each on
// rows of exactly threads x vecs_per_thread vectors, on a persistent grid of one block a
// multiprocessor (blocks loop over rows) and with a block per row; contiguous and strided rows,
// y == x, and an unaligned x (which takes the scalar path). Fused with 4 vectors is refused.
TEST(RMSNormKernels, Reread) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 3100;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const int threads : {256, 512, 1024})
        for (const int nv : {1, 2, 4}) {
          const int64_t cols =
              int64_t{threads} * nv * (16 / static_cast<int64_t>(tileops::element_size(dtype)));
          RMSNormRereadConfig c{.threads = threads, .vecs_per_thread = nv};
          if (fused && nv == 4) {
            RMSProblem p = StridedCase{4, cols, 0, 0, 0, 0, false}.problem(dtype, true, ++seed);
            RMSRunner runner(p);
            ASSERT_NO_FATAL_FAILURE(runner.prepare());
            expect_signature_error([&] { runner.launch(RMSNormConfig{c}); },
                                   "reread with a residual takes vecs_per_thread 1 or 2");
            continue;
          }
          std::vector<std::optional<RMSNormConfig> > configs;
          c.grid = RMSNormGrid::persistent;
          c.blocks_per_sm = 1;
          configs.emplace_back(RMSNormConfig{c});
          c.grid = RMSNormGrid::all;
          c.blocks_per_sm = 0;
          configs.emplace_back(RMSNormConfig{c});
          const StridedCase cases[] = {{300, cols, 0, 0, 0, 0, false},
                                       {37, cols, cols + 8, cols + 16, cols + 24, 0, false},
                                       {37, cols, cols + 8, cols + 8, 0, 0, true},
                                       {1, cols, 0, 0, 0, 0, false},
                                       {5, cols, 0, 0, 0, 1, false}};
          for (const StridedCase& k : cases)
            ASSERT_NO_FATAL_FAILURE(check_problem(k.problem(dtype, fused, ++seed), configs));
        }
}

// The shared-memory-staged kernel (D stages; sm_90 only) with D = 2, 4 and the most that
// fit one or two blocks a multiprocessor, several block sizes (also not powers of two), the
// occupancy's grid, more blocks than fit at once and the balanced grid; on the benchmark shape,
// long rows, rows of a vector count that is no multiple of the threads, y == x, strided rows, a
// single row and fewer rows than blocks.
TEST(RMSNormKernels, StagedConfigs) {
  SKIP_WITHOUT_GPU();
  int device = 0;
  int major = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major != 9) GTEST_SKIP() << "the staged kernel needs a device of compute capability 9.x";
  // Strides: 0 is cols (multiples of 16 bytes for every dtype); x never offset (16-byte aligned).
  const StridedCase cases[] = {
      {2048, 4096, 0, 0, 0, 0, false},       {3, 16384, 0, 0, 0, 0, false},
      {300, 1000, 0, 0, 0, 0, false},        {41, 4104, 0, 0, 0, 0, false},
      {37, 4096, 0, 0, 0, 0, true},          {64, 4096, 4104, 4112, 4352, 0, false},
      {33, 1000, 1008, 1024, 1016, 0, true}, {1, 4096, 0, 0, 0, 0, false},
      {7, 8192, 0, 0, 0, 0, false}};
  uint64_t seed = 2100;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const StridedCase& k : cases) {
        const int max1 = rms_norm_staged_max_rows(k.cols, dtype, fused, 1);
        const int max2 = rms_norm_staged_max_rows(k.cols, dtype, fused, 2);
        if (max1 < 2) continue;  // fp32 fused [3, 16384]: refused (StagedInvalid)
        std::vector<std::optional<RMSNormConfig> > configs = {
            make_staged(256, 2, 0), make_staged(1024, max1, 1), make_staged(96, max1, 1),
            make_staged(64, 2, 8)};  // more blocks than fit when 2 stages do not fit 8 times
        if (max1 >= 4) configs.emplace_back(make_staged(128, 4, 1));
        if (max2 >= 2) configs.emplace_back(make_staged(512, max2, 2));
        configs.emplace_back(make_staged(256, std::min(max1, 3), 1, RMSNormGrid::balanced));
        ASSERT_NO_FATAL_FAILURE(check_problem(k.problem(dtype, fused, ++seed), configs));
      }
}

// The staged kernel refuses (SignatureError, nothing written) what it cannot serve: unaligned
// pointers or row strides, rows of no multiple of 16 bytes, rows too long for the weight and 2
// stages, and parameters out of range.
TEST(RMSNormKernels, StagedInvalid) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(8 << 20);
  ASSERT_NE(buf.ptr, nullptr);
  CUDA_OK(cudaMemset(buf.ptr, 0xFF, buf.bytes));
  RMSNormArgs a;
  a.x = buf.at(0);
  a.weight = buf.at(size_t{1} << 20);
  a.y = buf.at(size_t{4} << 20);
  a.residual = nullptr;
  a.rows = 4;
  a.cols = 4096;
  a.x_row_stride = a.y_row_stride = a.residual_row_stride = 4096;
  a.dtype = DType::bfloat16;
  const RMSNormConfig staged = make_staged(256, 4, 1);
  const auto refused = [&](const RMSNormArgs& args, const RMSNormConfig& c) {
    EXPECT_THROW(launch_rms_norm(args, c, nullptr), tileops::SignatureError) << c.str();
  };
  // Refused for its arguments: rms_norm_staged_refusal says why beforehand.
  const auto refused_args = [&](const RMSNormArgs& args, const RMSNormConfig& c,
                                const std::string& why) {
    refused(args, c);
    EXPECT_THAT(rms_norm_staged_refusal(args, c), testing::HasSubstr(why)) << c.str();
    // The fallback is not staged: nothing refuses these arguments for their alignment there.
    const RMSNormConfig fallback =
        rms_norm_fallback_config(args.rows, args.cols, args.dtype, args.residual != nullptr, 0);
    EXPECT_EQ(rms_norm_staged_refusal(args, fallback), "") << fallback.str();
  };
  EXPECT_EQ(rms_norm_staged_refusal(a, staged), "");
  RMSNormArgs b = a;
  b.x = buf.at(2);  // x one element off
  refused_args(b, staged, "16-byte aligned");
  b = a;
  b.residual = buf.at((size_t{2} << 20) + 2);  // residual one element off
  refused_args(b, staged, "16-byte aligned");
  b = a;
  b.x_row_stride = 4100;  // 8200 bytes
  refused_args(b, staged, "row strides of a multiple of 16 bytes");
  b = a;
  b.cols = b.x_row_stride = b.y_row_stride = 40000;  // weight + 2 stages of 80000 bytes
  refused_args(b, make_staged(256, 2, 1), "bytes of shared memory");
  b = a;
  b.cols = 100;  // 200 bytes
  b.x_row_stride = b.y_row_stride = 104;
  refused(b, make_staged(256, 2, 1));
  b = a;
  b.dtype = DType::float32;
  b.cols = b.x_row_stride = b.y_row_stride = b.residual_row_stride = 16384;  // fused: 2 x 64 KB
  b.residual = buf.at(size_t{2} << 20);
  EXPECT_EQ(rms_norm_staged_max_rows(16384, DType::float32, true, 1), 0);
  refused(b, make_staged(256, 2, 1));
  // Parameters out of range (the other families' fields cannot be set on a staged config).
  refused(a, make_staged(256, 1, 1));
  refused(a, make_staged(48, 4, 1));
  refused(a, make_staged(256, 4, 1, RMSNormGrid::all));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<unsigned char> host(buf.bytes);
  CUDA_OK(cudaMemcpy(host.data(), buf.ptr, buf.bytes, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](unsigned char v) { return v == 0xFF; }));
  EXPECT_NE(staged.str().find(",staged_rows=4"), std::string::npos) << staged.str();
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
