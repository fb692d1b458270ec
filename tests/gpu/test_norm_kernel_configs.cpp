// GPU tests of the RMSNorm launch's refusals (SignatureError, nothing written) and of the policy
// functions on the device's own properties (defaults, fallbacks, tuning spaces). Skipped without
// CUDA or without a device.
#include <gtest/gtest.h>

#if TILEOPS_WITH_CUDA
#include "gpu/norm_kernel_test_util.h"
#endif

namespace {

#if TILEOPS_WITH_CUDA

using namespace tileops::norm_test;  // NOLINT(google-build-using-namespace): the shared helpers

// An empty problem launches nothing; a bad configuration or dtype raises SignatureError.
TEST(RMSNormKernels, EmptyAndInvalid) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(1 << 20);
  ASSERT_NE(buf.ptr, nullptr);
  CUDA_OK(cudaMemset(buf.ptr, 0xFF, buf.bytes));
  RMSNormArgs a;
  a.x = buf.at(0);
  a.weight = buf.at(0);
  a.y = buf.at(4096);
  a.x_row_stride = a.y_row_stride = 64;
  a.rows = 0;
  a.cols = 64;
  a.dtype = DType::bfloat16;
  const RMSNormConfig def = rms_norm_default_config(16, 64, DType::bfloat16, false, 0);
  EXPECT_NO_THROW(launch_rms_norm(a, def, nullptr));
  a.rows = 16;
  a.cols = 0;
  EXPECT_NO_THROW(launch_rms_norm(a, def, nullptr));
  CUDA_OK(cudaDeviceSynchronize());

  // Parameters out of range or without a kernel; the name of each family's fields.
  using tileops::cuda_kernels::RMSNormGrid;
  using tileops::cuda_kernels::RMSNormHighOccupancyStreamingConfig;
  using tileops::cuda_kernels::RMSNormRereadConfig;
  using tileops::cuda_kernels::RMSNormResidentConfig;
  using tileops::cuda_kernels::RMSNormStreamingConfig;
  a.cols = 64;
  const auto refused = [&](const RMSNormConfig& c, const std::string& why) {
    expect_signature_error([&] { launch_rms_norm(a, c, nullptr); }, why);
  };
  refused({RMSNormResidentConfig{.threads = 48}}, "threads must be a multiple of 32");
  refused({RMSNormResidentConfig{.threads = 128, .rows_per_block = 3}},
          "rows_per_block must divide threads");
  refused({RMSNormResidentConfig{.threads = 128, .vecs_per_thread = 3}},
          "vecs_per_thread must be 1, 2, 4 or 8");
  a.cols = 4096;
  a.x_row_stride = a.y_row_stride = 4096;
  // A resident configuration too small for the row.
  refused({RMSNormResidentConfig{.threads = 32}}, "the row does not fit");
  const RMSNormResidentConfig resident{
      .threads = 128, .vecs_per_thread = 4, .weight_in_registers = true};
  RMSNormResidentConfig bad = resident;
  bad.rows_in_flight = 3;
  refused({bad}, "rows_in_flight must be 1 or 2");
  bad = resident;
  bad.cluster_size = 4;
  refused({bad}, "cluster_size must be 1 or 2");
  bad = resident;
  bad.grid = static_cast<RMSNormGrid>(7);
  refused({bad}, "grid must be persistent, balanced or all");
  bad = resident;
  bad.weight_in_registers = false;
  bad.vecs_per_thread = 2;
  bad.rows_in_flight = 2;
  refused({bad}, "no kernel variant");
  refused(
      {RMSNormResidentConfig{.threads = 512, .vecs_per_thread = 8, .weight_in_registers = true}},
      "weight_in_registers needs vecs_per_thread 1, 2 or 4");
  refused({RMSNormStreamingConfig{.threads = 1024}}, "at most 512 threads");
  refused({RMSNormStreamingConfig{.threads = 256, .vec_bytes = 4}},
          "vec_bytes must be 16 or the element size");
  refused({RMSNormHighOccupancyStreamingConfig{.threads = 256, .cache_hint = 4}},
          "cache_hint must be 0, 1, 2 or 3");
  refused({RMSNormHighOccupancyStreamingConfig{.threads = 256, .vectors_in_flight = 4}},
          "vectors_in_flight must be 1 or 2");
  // reread: rows of exactly threads x vecs_per_thread vectors (a: bf16 rows of 4096 = 512
  // threads x 1 vector); at most 2 vectors a thread when fused (RMSNormKernels.Reread).
  const RMSNormConfig reread{RMSNormRereadConfig{.threads = 512, .vecs_per_thread = 1}};
  EXPECT_EQ(reread.str(),
            "threads=512,rows_per_block=1,vec_bytes=16,vecs_per_thread=1,weight_in_registers=false,"
            "blocks_per_sm=0,reread=true");
  refused({RMSNormRereadConfig{.threads = 384, .vecs_per_thread = 1}},
          "reread takes vecs_per_thread 1, 2 or 4 and threads 256, 512 or 1024");
  refused({RMSNormRereadConfig{.threads = 512, .vecs_per_thread = 8}},
          "reread takes vecs_per_thread 1, 2 or 4 and threads 256, 512 or 1024");
  refused({RMSNormRereadConfig{.threads = 256, .vecs_per_thread = 1}},
          "reread needs rows of exactly threads x vecs_per_thread 16-byte vectors (2048 elements)");
  a.dtype = DType::int32;
  EXPECT_THROW(launch_rms_norm(a, def, nullptr), tileops::SignatureError);
  EXPECT_THROW(rms_norm_default_config(16, 64, DType::int8, false, 0), tileops::SignatureError);
  // Nothing was written by the empty launches or the rejected ones.
  std::vector<unsigned char> host(buf.bytes);
  CUDA_OK(cudaMemcpy(host.data(), buf.ptr, buf.bytes, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](unsigned char b) { return b == 0xFF; }));
}

// The defaults are members of their tuning spaces (the fallback second) and every member is a
// valid configuration; the fallback is never staged and equals an unstaged default; the default
// re-reads exactly where default_reread_config says and holds the row exactly, and is otherwise
// staged exactly on sm_90 for at least as many rows as multiprocessors, rows of at least 16 KB
// and 2 stages for each of two blocks or 3 for one; a staged member's stages fit.
TEST(RMSNormKernels, ConfigFunctions) {
  SKIP_WITHOUT_GPU();
  using tileops::cuda_kernels::RMSNormHighOccupancyStreamingConfig;
  using tileops::cuda_kernels::RMSNormRereadConfig;
  using tileops::cuda_kernels::RMSNormResidentConfig;
  using tileops::cuda_kernels::RMSNormStagedConfig;
  const auto& props = tileops::cuda_device_properties(0);
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const int64_t rows : {int64_t{1}, int64_t{64}, int64_t{props.sm_count}, int64_t{2048}})
        for (const int64_t cols : kCols) {
          const std::string where = dtype_str(dtype) + (fused ? " fused [" : " [") +
                                    std::to_string(rows) + ", " + std::to_string(cols) + "]";
          const RMSNormConfig def = rms_norm_default_config(rows, cols, dtype, fused, 0);
          const RMSNormConfig fallback = rms_norm_fallback_config(rows, cols, dtype, fused, 0);
          EXPECT_EQ(tileops::cuda_kernels::rms_norm_config_refusal(def, dtype, cols), "") << where;
          EXPECT_EQ(fallback.as<RMSNormStagedConfig>(), nullptr) << where;
          const int64_t row_bytes = cols * static_cast<int64_t>(tileops::element_size(dtype));
          // Rows of exactly 512, 1024 or 2048 vectors on sm_90 (not many fused rows of 512): the
          // re-reading kernel, the row held exactly.
          const int64_t vec = 16 / static_cast<int64_t>(tileops::element_size(dtype));
          const int64_t nvec = cols / vec;
          // Many plain fp32 rows of 1024 vectors: the register-resident kernel instead, 256
          // threads x 4 vectors, the weight in registers.
          const bool want_resident = props.major == 9 && dtype == DType::float32 && !fused &&
                                     rows >= props.sm_count && cols == 4096;
          const bool want_reread =
              props.major == 9 && cols % vec == 0 && !want_resident &&
              ((nvec == 512 && (!fused || rows < props.sm_count)) || nvec == 1024 || nvec == 2048);
          if (want_resident) {
            const auto* r = def.as<RMSNormResidentConfig>();
            ASSERT_NE(r, nullptr) << where;
            EXPECT_EQ(r->threads, 256) << where;
            EXPECT_EQ(r->vecs_per_thread, 4) << where;
            EXPECT_TRUE(r->weight_in_registers) << where;
          }
          const auto* def_reread = def.as<RMSNormRereadConfig>();
          EXPECT_EQ(def_reread != nullptr, want_reread) << where << ": " << def.str();
          if (def_reread != nullptr) {
            EXPECT_EQ(static_cast<int64_t>(def_reread->threads) * def_reread->vecs_per_thread, nvec)
                << where;
            EXPECT_LE(def_reread->vecs_per_thread, fused ? 2 : 4) << where;
          }
          // Else fused, many rows of at least 8 KB: the lean streaming kernel, a block per row.
          const bool want_lean =
              !want_reread && fused && rows >= props.sm_count && row_bytes >= 8192;
          const bool want_staged = !want_reread && !want_resident && !fused &&
                                   rows >= props.sm_count && row_bytes >= 16384 &&
                                   props.major == 9 &&
                                   (rms_norm_staged_max_rows(cols, dtype, fused, 2) >= 2 ||
                                    rms_norm_staged_max_rows(cols, dtype, fused, 1) >= 3);
          const auto* def_lean = def.as<RMSNormHighOccupancyStreamingConfig>();
          EXPECT_EQ(def.as<RMSNormStagedConfig>() != nullptr, want_staged)
              << where << ": " << def.str();
          EXPECT_EQ(def_lean != nullptr, want_lean) << where << ": " << def.str();
          if (def_lean != nullptr) {
            EXPECT_EQ(def_lean->grid, tileops::cuda_kernels::RMSNormGrid::all) << where;
          }
          if (def.as<RMSNormStagedConfig>() == nullptr) {
            EXPECT_EQ(def, fallback) << where;
          }
          const auto space = rms_norm_tuning_space(rows, cols, dtype, fused, 0);
          ASSERT_GE(space.size(), 2u) << where;
          EXPECT_EQ(space.front(), def) << where << ": " << def.str();
          if (def.as<RMSNormStagedConfig>() != nullptr) {
            EXPECT_EQ(space[1], fallback) << where;
          }
          for (const auto& c : space) {
            EXPECT_FALSE(c.str().empty());
            if (const auto* r = c.as<RMSNormRereadConfig>()) {
              EXPECT_EQ(static_cast<int64_t>(r->threads) * r->vecs_per_thread * vec, cols)
                  << where << ": " << c.str();
              EXPECT_TRUE(!fused || r->vecs_per_thread <= 2) << where << ": " << c.str();
            }
            if (const auto* s = c.as<RMSNormStagedConfig>()) {
              EXPECT_LE(s->stages,
                        rms_norm_staged_max_rows(cols, dtype, fused, std::max(1, s->blocks_per_sm)))
                  << where << ": " << c.str();
            }
          }
        }
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
