// GPU tests of FP8BlockScaledGemmFwdOp on Hopper (the FP8 grouped GEMM's kernel over one group of
// every row): random e4m3 operands (zeros among them) and scales 2^i [1, 2), i in [-8, 8], on
// shapes with odd M, N not a multiple of 128 and DeepSeek-V3's projections, against the
// double-precision reference within the grouped GEMM's derived bound (tests/ops/
// grouped_gemm_fp8_tolerance.h, E_cuda); outputs poisoned with NaN first. Also: bit-for-bit
// equality with MoEGroupedGemmFP8FwdOp over one expert, DeepGEMM's transposed a_scales, and the
// refusal of other block sizes. Skipped without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/fp8_gemm_check.h"
#include "gpu/gpu_op_test_util.h"
#include "tileops/core/cuda.h"
#include "tileops/ops/gemm.h"
#include "tileops/ops/moe.h"

namespace tileops {
namespace {

#if !TILEOPS_WITH_CUDA

TEST(FP8BlockScaledGemmGpu, RequiresCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

using fp8_gemm_check::check;
using fp8_gemm_check::make_problem;
using fp8_gemm_check::Problem;
using gpu_test::device_tensor;
using gpu_test::kGpu;

/// A dense problem: one expert owning the M rows.
Problem dense_problem(std::int64_t M, std::int64_t N, std::int64_t K, unsigned seed) {
  return make_problem(
      "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K), 1, N, K, M,
      {0, static_cast<std::int32_t>(M)}, "none", 0, seed);
}

/// a [M, K], a_scales [M, K / 128], b [N, K], b_scales [ceil(N / 128), K / 128] on the GPU.
std::vector<Tensor> device_inputs(const Problem& p) {
  return {device_tensor(p.a, {p.M, p.K}, DType::float8_e4m3fn),
          device_tensor(p.as, {p.M, p.kblocks()}, DType::float32),
          device_tensor(p.b, {p.N, p.K}, DType::float8_e4m3fn),
          device_tensor(p.bs, {p.nblocks(), p.kblocks()}, DType::float32)};
}

/// c of the op on the GPU, written into a NaN-poisoned `out`, as doubles.
std::vector<double> run_op(const Problem& p, const std::vector<Tensor>& in) {
  FP8BlockScaledGemmFwdOp op(FP8BlockScaledGemmFwdOp::Params{});
  const Tensor c = gpu_test::poisoned({p.M, p.N}, DType::bfloat16);
  op(in[0], in[1], in[2], in[3], c);
  return c.to(Device::cpu()).to_vector();
}

TEST(FP8BlockScaledGemmGpu, SmallShapes) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    std::int64_t M, N, K;
  };
  // one row; odd M below and past the 64- and 128-row tiles; N = 200, 130, 8 and 1 (partial
  // weight blocks, register stores where N % 8 != 0); K = 128 (one block) to 640
  const std::vector<Shape> shapes = {{1, 128, 128}, {37, 200, 384}, {129, 130, 256},
                                     {65, 8, 640},  {3, 1, 128},    {200, 384, 256}};
  unsigned seed = 100;
  for (const Shape& s : shapes) {
    const Problem p = dense_problem(s.M, s.N, s.K, seed++);
    check(p, run_op(p, device_inputs(p)), p.name);
  }
}

TEST(FP8BlockScaledGemmGpu, DeepSeekV3Shapes) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    std::int64_t M, N, K, row_sample;
  };
  // q_a + kv_a at a decode batch, kv_b and the shared expert's down at odd token counts
  // (partial last tiles), q_b at 1024 tokens; every row_sample-th row checked (and the last)
  const std::vector<Shape> shapes = {
      {64, 2112, 7168, 1}, {999, 32768, 512, 37}, {333, 7168, 2048, 11}, {1024, 24576, 1536, 61}};
  unsigned seed = 200;
  for (const Shape& s : shapes) {
    const Problem p = dense_problem(s.M, s.N, s.K, seed++);
    const double worst = check(p, run_op(p, device_inputs(p)), p.name, s.row_sample);
    RecordProperty(p.name, std::to_string(worst));
  }
}

TEST(FP8BlockScaledGemmGpu, EqualsTheGroupedGemmOfOneExpertBitForBit) {
  SKIP_WITHOUT_GPU();
  for (const std::int64_t m : {40, 300}) {
    const Problem p = dense_problem(m, 384, 512, 300 + static_cast<unsigned>(m));
    const std::vector<Tensor> in = device_inputs(p);
    const std::vector<double> dense = run_op(p, in);
    const Tensor offsets = device_tensor(p.offsets, {2}, DType::int32);
    MoEGroupedGemmFP8FwdOp grouped(MoEGroupedGemmFP8FwdOp::Params{});
    const Tensor c = grouped(in[0], in[1], offsets, in[2].unsqueeze(0), in[3].unsqueeze(0));
    EXPECT_EQ(dense, c.to(Device::cpu()).to_vector()) << p.name;
  }
}

TEST(FP8BlockScaledGemmGpu, AcceptsTransposedTmaAlignedActivationScales) {
  SKIP_WITHOUT_GPU();
  // DeepGEMM's layout: the storage of a row-major [K / 128, align(M, 4)] tensor seen as its
  // [M, K / 128] transpose.
  const Problem p = dense_problem(37, 256, 384, 400);
  const std::vector<Tensor> in = device_inputs(p);
  const std::int64_t aligned_m = 40;
  std::vector<float> storage(static_cast<std::size_t>(p.kblocks() * aligned_m), 0.0f);
  for (std::int64_t r = 0; r < p.M; ++r) {
    for (std::int64_t kb = 0; kb < p.kblocks(); ++kb)
      storage[kb * aligned_m + r] = p.as[r * p.kblocks() + kb];
  }
  const Tensor a_scales_t = device_tensor(storage, {p.kblocks(), aligned_m}, DType::float32)
                                .slice(1, 0, p.M)
                                .transpose(0, 1);
  ASSERT_FALSE(a_scales_t.is_contiguous());
  FP8BlockScaledGemmFwdOp op(FP8BlockScaledGemmFwdOp::Params{});
  EXPECT_EQ(op(in[0], a_scales_t, in[2], in[3]).to(Device::cpu()).to_vector(), run_op(p, in));
}

TEST(FP8BlockScaledGemmGpu, OtherBlockSizesAreRefusedOnCuda) {
  SKIP_WITHOUT_GPU();
  FP8BlockScaledGemmFwdOp op({.block_n = 64, .block_k = 128});
  const Tensor a = Tensor::zeros({4, 256}, DType::float8_e4m3fn, kGpu);
  const Tensor as = Tensor::zeros({4, 2}, DType::float32, kGpu);
  const Tensor b = Tensor::zeros({128, 256}, DType::float8_e4m3fn, kGpu);
  const Tensor bs = Tensor::zeros({2, 2}, DType::float32, kGpu);
  gpu_test::expect_refused([&] { op(a, as, b, bs); }, "takes 128 x 128 weight blocks",
                           "block_n = 64 on CUDA");
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
}  // namespace tileops
