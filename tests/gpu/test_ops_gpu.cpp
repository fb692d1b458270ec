// The ops through the whole Op path on CUDA, against the CPU implementation on the same inputs:
// many shapes (odd sizes, tails), non-contiguous inputs, empty tensors, `out`, in place, and
// request_tune(). Outputs are poisoned before each call. Skipped without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gpu/gpu_op_test_util.h"
#include "tileops/base/reference.h"
#include "tileops/core/cuda.h"
#include "tileops/ops/norm.h"
#include "tileops/ops/rope.h"

namespace tileops {
namespace {

using gpu_test::expect_close;
using gpu_test::kGpu;
using gpu_test::poisoned;

TEST(GpuOps, RMSNormMatchesTheCpuImplementation) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::pair<Sizes, std::int64_t>> cases = {
      {{1, 4096}, 4096},  {{3, 7}, 7},         {{2, 5, 33}, 33},    {{17, 1000}, 1000},
      {{64, 8192}, 8192}, {{5, 16385}, 16385}, {{2, 40000}, 40000}, {{1, 1}, 1}};
  for (const DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
    for (const auto& [shape, cols] : cases) {
      RMSNormFwdOp cpu_op({.normalized_shape = {cols}});
      RMSNormFwdOp gpu_op({.normalized_shape = {cols}});
      const Tensor x = Tensor::randn(shape, dtype, 3);
      const Tensor w = Tensor::randn({cols}, dtype, 4, Device::cpu(), 1.0, 0.5);
      const Tensor out = poisoned(shape, dtype);
      gpu_op(x.to(kGpu), w.to(kGpu), out);
      EXPECT_EQ(gpu_op.serving_target(), "BUILTIN");
      expect_close(out, cpu_op(x, w), std::string(dtype_name(dtype)) + " " + x.str());
    }
  }
}

TEST(GpuOps, RMSNormNonContiguousInPlaceAndEmpty) {
  SKIP_WITHOUT_GPU();
  RMSNormFwdOp op({.normalized_shape = {256}});
  const Tensor base = Tensor::randn({256, 9}, DType::bfloat16, 5);
  const Tensor w = Tensor::randn({256}, DType::bfloat16, 6);
  const Tensor ref = op(base.transpose(0, 1), w);  // CPU
  const Tensor x_gpu = base.to(kGpu).transpose(0, 1);
  ASSERT_FALSE(x_gpu.is_contiguous());
  RMSNormFwdOp gpu_op({.normalized_shape = {256}});
  expect_close(gpu_op(x_gpu, w.to(kGpu)), ref, "transposed x");
  const Tensor wide = Tensor::randn({6, 300}, DType::float16, 7).to(kGpu).slice(1, 3, 259);
  const Tensor w16 = Tensor::randn({256}, DType::float16, 8);
  RMSNormFwdOp op16({.normalized_shape = {256}});
  expect_close(op16(wide, w16.to(kGpu)), op16(wide.to(Device::cpu()), w16), "strided rows");
  const Tensor inplace = Tensor::randn({4, 256}, DType::float32, 9);
  const Tensor expected = op(inplace.to(DType::bfloat16), w);
  const Tensor g = inplace.to(DType::bfloat16).to(kGpu);
  gpu_op(g, w.to(kGpu), g);
  expect_close(g, expected, "out = x");
  EXPECT_EQ(gpu_op(Tensor::empty({0, 256}, DType::bfloat16, kGpu), w.to(kGpu)).numel(), 0);
}

// On sm_90, many rows of at least 16 KB that the re-reading kernel does not hold exactly (24 KB
// here) take the staged kernel by default, which serves only 16-byte aligned pointers and row
// strides: the same op (one kernel for the signature) then serves a view one element in, with rows
// of an odd stride, through the fallback configuration, tuned or not.
TEST(GpuOps, RMSNormStagedDefaultAndItsFallback) {
  SKIP_WITHOUT_GPU();
  for (const auto& [dtype, cols] : {std::pair{DType::bfloat16, std::int64_t{12288}},
                                    std::pair{DType::float32, std::int64_t{6144}}}) {
    const std::string what = std::string(dtype_name(dtype)) + " cols " + std::to_string(cols);
    const Tensor x = Tensor::randn({264, cols + 1}, dtype, 21);
    const Tensor w = Tensor::randn({cols}, dtype, 22, Device::cpu(), 1.0, 0.5);
    const Tensor aligned = x.slice(1, 0, cols).contiguous();
    const Tensor view = x.slice(1, 1, cols + 1);  // one element in, row stride cols + 1
    RMSNormFwdOp cpu_op({.normalized_shape = {cols}});
    RMSNormFwdOp gpu_op({.normalized_shape = {cols}});
    expect_close(gpu_op(aligned.to(kGpu), w.to(kGpu)), cpu_op(aligned, w), what + " aligned");
    if (cuda_device_properties(0).major == 9 && cuda_device_properties(0).sm_count <= 264) {
      ASSERT_TRUE(gpu_op.kernel_config().has_value());
      EXPECT_THAT(*gpu_op.kernel_config(), testing::HasSubstr("staged_rows=")) << what;
    }
    const Tensor view_gpu = x.to(kGpu).slice(1, 1, cols + 1);
    ASSERT_FALSE(view_gpu.is_contiguous());
    expect_close(gpu_op(view_gpu, w.to(kGpu)), cpu_op(view, w), what + " view");
    if (cuda_device_properties(0).major == 9 && cuda_device_properties(0).sm_count <= 264) {
      EXPECT_THAT(*gpu_op.kernel_config(), testing::HasSubstr("the last call ran")) << what;
      EXPECT_THAT(*gpu_op.kernel_config(), testing::HasSubstr("16-byte aligned")) << what;
    }
    RMSNormFwdOp tuned({.normalized_shape = {cols}});
    tuned.request_tune();
    expect_close(tuned(view_gpu, w.to(kGpu)), cpu_op(view, w), what + " view, tuned");
    expect_close(tuned(aligned.to(kGpu), w.to(kGpu)), cpu_op(aligned, w), what + " aligned, tuned");
  }
}

// Fused add + RMSNorm on many rows of 16 KB takes the re-reading kernel by default (1024 vectors,
// held exactly), and on many rows of 24 KB the lean streaming kernel: a residual view one element
// in, updated in place, goes through their scalar path.
TEST(GpuOps, FusedAddRMSNormRereadAndLeanDefaultsOnAViewToo) {
  SKIP_WITHOUT_GPU();
  for (const auto& [cols, want] : {std::pair{std::int64_t{8192}, "reread=true"},
                                   std::pair{std::int64_t{12288}, "streaming_unroll="}})
    for (const bool view : {false, true}) {
      const DType dtype = DType::bfloat16;
      const Tensor x = Tensor::randn({264, cols}, dtype, 23);
      const Tensor r = Tensor::randn({264, cols + 1}, dtype, 24);
      const Tensor w = Tensor::randn({cols}, dtype, 25, Device::cpu(), 1.0, 0.5);
      FusedAddRMSNormFwdOp cpu_op({.normalized_shape = {cols}});
      FusedAddRMSNormFwdOp gpu_op({.normalized_shape = {cols}});
      const std::string what =
          (view ? "residual view, cols " : "aligned, cols ") + std::to_string(cols);
      const Tensor r_cpu =
          view ? r.clone().slice(1, 1, cols + 1) : r.slice(1, 0, cols).contiguous();
      const Tensor r_gpu = view ? r.to(kGpu).slice(1, 1, cols + 1) : r_cpu.to(kGpu);
      const Tensor y_gpu = gpu_op(x.to(kGpu), r_gpu, w.to(kGpu), poisoned({264, cols}, dtype));
      if (cuda_device_properties(0).major == 9 && cuda_device_properties(0).sm_count <= 264) {
        ASSERT_TRUE(gpu_op.kernel_config().has_value());
        EXPECT_THAT(*gpu_op.kernel_config(), testing::HasSubstr(want)) << what;
      }
      const Tensor y_cpu = cpu_op(x, r_cpu, w);
      expect_close(y_gpu, y_cpu, "y, " + what);
      expect_close(r_gpu, r_cpu, "residual, " + what);
    }
}

TEST(GpuOps, FusedAddRMSNormMatchesTheCpuImplementation) {
  SKIP_WITHOUT_GPU();
  for (const DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
    for (const Sizes& shape : {Sizes{1, 4096}, Sizes{3, 100}, Sizes{64, 16384}, Sizes{2, 3, 33}}) {
      const std::int64_t cols = shape.back();
      FusedAddRMSNormFwdOp cpu_op({.normalized_shape = {cols}});
      FusedAddRMSNormFwdOp gpu_op({.normalized_shape = {cols}});
      const Tensor x = Tensor::randn(shape, dtype, 10);
      const Tensor r = Tensor::randn(shape, dtype, 11);
      const Tensor w = Tensor::randn({cols}, dtype, 12);
      const Tensor r_gpu = r.to(kGpu);
      const Tensor r_cpu = r.clone();
      const Tensor y_gpu = gpu_op(x.to(kGpu), r_gpu, w.to(kGpu), poisoned(shape, dtype));
      const Tensor y_cpu = cpu_op(x, r_cpu, w);
      expect_close(y_gpu, y_cpu, "y " + std::string(dtype_name(dtype)));
      expect_close(r_gpu, r_cpu, "residual " + std::string(dtype_name(dtype)));
    }
  }
}

TEST(GpuOps, LongRoPEMatchesTheCpuImplementation) {
  SKIP_WITHOUT_GPU();
  for (const DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
    for (const std::int64_t half : {32, 48, 64}) {
      const Tensor factors = Tensor::rand({half}, DType::float32, 13, Device::cpu(), 1.0, 8.0);
      LongRoPEFwdOp cpu_op({.rescale_factors = factors});
      LongRoPEFwdOp gpu_op({.rescale_factors = factors});
      const Tensor x = Tensor::randn({2, 9, 3, 2 * half}, dtype, 14);
      const Tensor p = Tensor::rand({2, 9}, DType::int64, 15, Device::cpu(), 0, 131072);
      expect_close(gpu_op(x.to(kGpu)), cpu_op(x), "no positions");
      expect_close(gpu_op(x.to(kGpu), p.to(kGpu)), cpu_op(x, p), "int64 positions");
      const Tensor xg = x.to(kGpu);
      gpu_op(xg, Tensor(), xg);  // in place
      expect_close(xg, cpu_op(x), "in place");
    }
  }
  LongRoPEFwdOp sd({.rescale_factors = Tensor::rand({64}, DType::float32, 16, Device::cpu(), 1, 2),
                    .layout = "sd"});
  const Tensor x = Tensor::randn({4097, 128}, DType::float16, 17);
  const Tensor p = Tensor::rand({4097}, DType::int32, 18, Device::cpu(), 0, 4096);
  expect_close(sd(x.to(kGpu), p.to(kGpu)), sd(x, p), "sd layout, int32 positions");
  EXPECT_EQ(sd(Tensor::empty({0, 128}, DType::float16, kGpu)).numel(), 0);
}

TEST(GpuOps, RequestTuneKeepsResultsAndPersistsTheChoice) {
  SKIP_WITHOUT_GPU();
  RMSNormFwdOp op({.normalized_shape = {4096}});
  const Tensor x = Tensor::randn({512, 4096}, DType::bfloat16, 19);
  const Tensor w = Tensor::randn({4096}, DType::bfloat16, 20);
  const Tensor ref = RMSNormFwdOp({.normalized_shape = {4096}})(x, w);
  op.request_tune();
  const Tensor y = op(x.to(kGpu), w.to(kGpu));
  expect_close(y, ref, "tuned");
  ASSERT_TRUE(op.kernel_config().has_value());
  EXPECT_THAT(*op.kernel_config(), testing::HasSubstr("(tuned)"));
  for (Kernel* k : op.iter_kernels()) EXPECT_TRUE(k->tune_requested());
}

}  // namespace
}  // namespace tileops
