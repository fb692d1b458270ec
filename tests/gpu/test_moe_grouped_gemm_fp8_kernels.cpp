// GPU tests of the FP8 block-scaled grouped GEMM on Hopper (src/kernels/moe/grouped_gemm_fp8_*),
// both layouts, through the launch API (every configuration of the tuning space) and through the
// ops: random e4m3 operands (zeros among them) and scales 2^i [1, 2), i in [-8, 8], on shapes with
// K = 128 .. 7168, N up to 7168, many experts with uneven and empty segments that are not
// multiples of the tile, rows outside every segment, untidy offsets, masked counts of 0, partial
// and max_m, each activation, and 0 / inf / NaN scales, against a double-precision reference
// within the bound of tests/ops/grouped_gemm_fp8_tolerance.h (E_cuda). Outputs are poisoned with
// NaN before each launch; rows outside every segment (past the counts) must be exactly +0.
// Skipped without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpu/cuda_graph_test_util.h"
#include "gpu/fp8_gemm_check.h"
#include "gpu/gpu_op_test_util.h"
#include "kernels/moe/grouped_gemm_fp8_cuda.h"
#include "tileops/core/cuda.h"
#include "tileops/ops/moe.h"

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace tileops {
namespace {

#if !TILEOPS_WITH_CUDA

TEST(MoEGroupedGemmFP8Kernels, RequiresCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

namespace ck = cuda_kernels;
using fp8_gemm_check::check;
using fp8_gemm_check::make_problem;
using fp8_gemm_check::Problem;
using gpu_test::device_tensor;
using gpu_test::kGpu;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::uint8_t kOne = 0x38;  // e4m3 1.0

MoEActivation activation_of(const Problem& p) {
  return p.act == "none"           ? MoEActivation::none
         : p.act == "silu_and_mul" ? MoEActivation::silu_and_mul
                                   : MoEActivation::gelu_and_mul;
}

/// The problem's tensors on the GPU, in the ops' shapes: a, a_scales, offsets, b, b_scales.
std::vector<Tensor> device_inputs(const Problem& p) {
  const Sizes rows = p.max_m > 0 ? Sizes{p.E, p.max_m} : Sizes{p.M};
  Sizes a_sizes = rows;
  a_sizes.push_back(p.K);
  Sizes as_sizes = rows;
  as_sizes.push_back(p.kblocks());
  return {device_tensor(p.a, a_sizes, DType::float8_e4m3fn),
          device_tensor(p.as, as_sizes, DType::float32),
          device_tensor(p.offsets, {static_cast<std::int64_t>(p.offsets.size())}, DType::int32),
          device_tensor(p.b, {p.E, p.N, p.K}, DType::float8_e4m3fn),
          device_tensor(p.bs, {p.E, p.nblocks(), p.kblocks()}, DType::float32)};
}

ck::GroupedGemmFP8Args launch_args(const Problem& p, const std::vector<Tensor>& in,
                                   const Tensor& c) {
  ck::GroupedGemmFP8Args args;
  args.a = in[0].data_ptr();
  args.a_scales = in[1].data<float>();
  args.offsets = in[2].data<std::int32_t>();
  args.b = in[3].data_ptr();
  args.b_scales = in[4].data<float>();
  args.c = c.data_ptr();
  args.M = p.M;
  args.N = p.N;
  args.K = p.K;
  args.E = p.E;
  args.max_m = p.max_m;
  args.activation = activation_of(p);
  return args;
}

/// c (as doubles) of one launch with `config` into a NaN-poisoned output.
std::vector<double> run_config(const Problem& p, const std::vector<Tensor>& in,
                               const ck::GroupedGemmFP8CudaConfig& config) {
  const Tensor c = gpu_test::poisoned({p.M, p.n_out()}, DType::bfloat16);
  ck::launch_grouped_gemm_fp8(launch_args(p, in, c), config, cuda_current_stream(0));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return c.to(Device::cpu()).to_vector();
}

/// Every configuration of the tuning space on `p`.
void check_every_config(const Problem& p, std::int64_t row_sample = 1) {
  const std::vector<Tensor> in = device_inputs(p);
  for (const auto& config : ck::grouped_gemm_fp8_tuning_space(launch_args(p, in, in[0]))) {
    const std::string what = p.name + " {" + config.str() + "}";
    const double worst = check(p, run_config(p, in, config), what, row_sample);
    std::printf("[ fp8 err ] %s: max |c - r| / A = %.3g\n", what.c_str(), worst);
  }
}

TEST(MoEGroupedGemmFP8Kernels, SmallShapesEveryConfig) {
  SKIP_WITHOUT_GPU();
  // K = 128 (one block); an empty expert, a segment of 125 rows, rows past offsets[E].
  check_every_config(make_problem("k128", 4, 256, 128, 210, {0, 5, 5, 130, 200}, "none", 0, 1));
  // Rows before offsets[0], segments not multiples of any tile, both gated activations.
  for (const char* act : {"silu_and_mul", "gelu_and_mul"}) {
    check_every_config(make_problem(std::string("uneven_") + act, 8, 256, 384, 470,
                                    {3, 3, 70, 70, 200, 333, 333, 400, 465}, act, 0, 2));
  }
  // N = 200 (a partial weight block and a partial tile), N_out % 8 != 0 (register stores).
  check_every_config(make_problem("n200", 3, 200, 256, 150, {0, 64, 65, 150}, "none", 0, 3));
  // Untidy offsets: negative, past M, decreasing (made safe as the bf16 kernel's).
  check_every_config(
      make_problem("untidy", 5, 256, 128, 100, {-4, 30, 20, 60, 500, 90}, "none", 0, 4));
}

TEST(MoEGroupedGemmFP8Kernels, ManyExpertsEveryConfig) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  std::vector<std::int32_t> off{0};
  for (int e = 0; e < 256; ++e) {
    const unsigned r = rng() % 8;
    off.push_back(off.back() + static_cast<std::int32_t>(r == 0 ? 0 : r == 1 ? 200 : rng() % 70));
  }
  check_every_config(
      make_problem("256_experts", 256, 256, 256, off.back(), off, "silu_and_mul", 0, 8), 3);
}

TEST(MoEGroupedGemmFP8Kernels, DeepSeekV3Shapes) {
  SKIP_WITHOUT_GPU();
  // gate_up (N = 4096, K = 7168) and down (N = 7168, K = 2048) on a few experts; sampled rows.
  const Problem gate_up = make_problem("dsv3_gate_up", 4, 4096, 7168, 300, {0, 130, 131, 131, 300},
                                       "silu_and_mul", 0, 11);
  const Problem down =
      make_problem("dsv3_down", 4, 7168, 2048, 333, {0, 64, 200, 200, 333}, "none", 0, 12);
  for (const Problem* p : {&gate_up, &down}) {
    const std::vector<Tensor> in = device_inputs(*p);
    const auto config = ck::grouped_gemm_fp8_default_config(launch_args(*p, in, in[0]));
    const double worst = check(*p, run_config(*p, in, config), p->name, 9);
    std::printf("[ fp8 err ] %s: max |c - r| / A = %.3g\n", p->name.c_str(), worst);
  }
}

TEST(MoEGroupedGemmFP8Kernels, MaskedCountsEveryConfig) {
  SKIP_WITHOUT_GPU();
  // Counts 0, 1, partial, max_m, and two outside [0, max_m] (clamped on CUDA).
  for (const char* act : {"none", "silu_and_mul", "gelu_and_mul"}) {
    check_every_config(make_problem(std::string("masked_") + act, 7, 512, 384, 0,
                                    {0, 1, 64, 130, 200, -3, 500}, act, 200, 20));
  }
}

// 0, inf and NaN scales: the manifest's values (IEEE products of the dequantized terms), among
// them inf * 0 = NaN for a zero e4m3 value that the block sums alone would miss.
TEST(MoEGroupedGemmFP8Kernels, NonFiniteAndZeroScales) {
  SKIP_WITHOUT_GPU();
  Problem p = make_problem("scales", 2, 256, 256, 20, {0, 8, 20}, "none", 0, 30);
  std::fill(p.a.begin(), p.a.end(), kOne);
  std::fill(p.b.begin(), p.b.end(), kOne);
  std::fill(p.as.begin(), p.as.end(), 1.0f);
  std::fill(p.bs.begin(), p.bs.end(), 1.0f);
  const auto f = [](double v) { return static_cast<float>(v); };
  p.as[3 * 2 + 0] = p.as[3 * 2 + 1] = 0.0f;  // row 3: every term 0
  p.bs[(0 * 2 + 0) * 2 + 1] = 0.0f;          // expert 0 (rows 0-7), columns 0-127, K block 1
  p.as[1 * 2 + 0] = f(kNaN);                 // row 1: NaN everywhere
  p.as[0 * 2 + 1] = f(kInf);                 // row 0, block 1: +inf, times the 0 above: NaN
  p.as[2 * 2 + 1] = f(kInf);                 // row 2 too, but a zero value there: inf * 0 = NaN
  p.a[2 * 256 + 200] = 0;                    //   (the block sum, 127 inf, would say +inf)
  p.bs[(1 * 2 + 1) * 2 + 0] = f(kNaN);       // expert 1 (rows 8-19), columns 128-255
  p.bs[(1 * 2 + 0) * 2 + 0] = f(-kInf);      // expert 1, columns 0-127, block 0: -inf ...
  p.as[9 * 2 + 1] = f(kInf);                 // ... and row 9's block 1 +inf: NaN
  const std::vector<Tensor> in = device_inputs(p);
  for (const auto& config : ck::grouped_gemm_fp8_tuning_space(launch_args(p, in, in[0]))) {
    const std::vector<double> got = run_config(p, in, config);
    check(p, got, "scales {" + config.str() + "}");
    // Spot values (check() compares every element with the reference).
    EXPECT_EQ(got[3 * 256 + 5], 0.0);
    EXPECT_EQ(got[4 * 256 + 5], 128.0);
    EXPECT_TRUE(std::isnan(got[0 * 256 + 5]));
    EXPECT_EQ(got[0 * 256 + 130], kInf);
    EXPECT_TRUE(std::isnan(got[2 * 256 + 130]));
    EXPECT_TRUE(std::isnan(got[9 * 256 + 5]));
    EXPECT_EQ(got[10 * 256 + 5], -kInf);
  }
}

// The same rules in the second wave of a 256-row tile (tile rows 128-255), whose warpgroups
// promote (and take the exact path) after the first wave's.
TEST(MoEGroupedGemmFP8Kernels, NonFiniteScalesPastTheFirst128Rows) {
  SKIP_WITHOUT_GPU();
  Problem p = make_problem("scales_wave1", 1, 256, 256, 300, {0, 300}, "none", 0, 31);
  std::fill(p.a.begin(), p.a.end(), kOne);
  std::fill(p.b.begin(), p.b.end(), kOne);
  std::fill(p.as.begin(), p.as.end(), 1.0f);
  std::fill(p.bs.begin(), p.bs.end(), 1.0f);
  p.bs[(0 * 2 + 0) * 2 + 1] = 0.0f;                                   // columns 0-127, block 1
  p.as[140 * 2 + 1] = static_cast<float>(kInf);                       // row 140, block 1
  p.as[200 * 2 + 0] = static_cast<float>(kNaN);                       // row 200, block 0
  p.as[270 * 2 + 0] = p.as[270 * 2 + 1] = static_cast<float>(-kInf);  // row 270 (2nd tile)
  const std::vector<Tensor> in = device_inputs(p);
  for (const auto& config : ck::grouped_gemm_fp8_tuning_space(launch_args(p, in, in[0]))) {
    const std::vector<double> got = run_config(p, in, config);
    check(p, got, "scales_wave1 {" + config.str() + "}");
    EXPECT_EQ(got[141 * 256 + 5], 128.0);
    EXPECT_EQ(got[141 * 256 + 130], 256.0);
    EXPECT_TRUE(std::isnan(got[140 * 256 + 5]));  // inf x 0
    EXPECT_EQ(got[140 * 256 + 130], kInf);
    EXPECT_TRUE(std::isnan(got[200 * 256 + 7]));
    EXPECT_TRUE(std::isnan(got[270 * 256 + 5]));  // -inf x 0 in block 1
    EXPECT_EQ(got[270 * 256 + 130], -kInf);
  }
}

// The masked layout replays from a CUDA graph with new counts and the same result as a launch.
TEST(MoEGroupedGemmFP8Kernels, MaskedLaunchIsGraphCapturable) {
  SKIP_WITHOUT_GPU();
  const Problem p = make_problem("graph", 4, 256, 256, 0, {3, 0, 64, 17}, "silu_and_mul", 64, 40);
  const std::vector<Tensor> in = device_inputs(p);
  const Tensor c = gpu_test::poisoned({p.M, p.n_out()}, DType::bfloat16);
  const auto args = launch_args(p, in, c);
  const auto config = ck::grouped_gemm_fp8_default_config(args);
  ck::launch_grouped_gemm_fp8(args, config, cuda_current_stream(0));  // warm-up (attributes)
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  gpu_test::CapturedGraph graph;
  ASSERT_TRUE(graph.capture(
      [&](cudaStream_t stream) { ck::launch_grouped_gemm_fp8(args, config, stream); }));
  cudaStream_t stream = graph.stream();
  // New counts, written on the device only: the replay reads them.
  Problem q = p;
  q.offsets = {64, 5, 0, 33};
  const Tensor counts = device_tensor(q.offsets, {4}, DType::int32);
  const Tensor poison = gpu_test::poisoned({p.M, p.n_out()}, DType::bfloat16);
  // The copies run on the replay's stream, after the work that made their sources: a plain
  // cudaMemcpy runs on the legacy stream, which the non-blocking `stream` does not wait for (and
  // a device-to-device one does not wait for the host), so the replay could read stale counts or
  // poison rows the kernel had written (compute-sanitizer's racecheck ran into it).
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(
      cudaMemcpyAsync(in[2].data_ptr(), counts.data_ptr(), 16, cudaMemcpyDeviceToDevice, stream),
      cudaSuccess);
  ASSERT_EQ(
      cudaMemcpyAsync(c.data_ptr(), poison.data_ptr(), static_cast<size_t>(p.M * p.n_out() * 2),
                      cudaMemcpyDeviceToDevice, stream),
      cudaSuccess);
  ASSERT_TRUE(graph.replay());
  check(q, c.to(Device::cpu()).to_vector(), "graph replay");
}

TEST(MoEGroupedGemmFP8Kernels, OpsRunOnCudaAndRefuseWhatTheKernelCannotDo) {
  SKIP_WITHOUT_GPU();
  const Problem p = make_problem("op", 3, 256, 256, 90, {0, 40, 40, 90}, "silu_and_mul", 0, 50);
  const std::vector<Tensor> in = device_inputs(p);
  MoEGroupedGemmFP8FwdOp op({.activation = "silu_and_mul"});
  const Tensor c = op(in[0], in[1], in[2], in[3], in[4]);
  ASSERT_EQ(c.device(), kGpu);
  check(p, c.to(Device::cpu()).to_vector(), "MoEGroupedGemmFP8FwdOp");
  const Problem m = make_problem("op_masked", 3, 256, 256, 0, {0, 7, 16}, "none", 16, 51);
  const std::vector<Tensor> min = device_inputs(m);
  MoEGroupedGemmFP8MaskedFwdOp masked(MoEGroupedGemmFP8MaskedFwdOp::Params{});
  check(m, masked(min[0], min[1], min[2], min[3], min[4]).to(Device::cpu()).to_vector(),
        "masked op");
  // Weight blocks of 64 and a gated N whose up half starts inside a 64-column group: refused on
  // CUDA, naming the reason.
  MoEGroupedGemmFP8FwdOp small_blocks({.block_n = 64});
  gpu_test::expect_refused(
      [&] {
        small_blocks(in[0], in[1], in[2], in[3], Tensor::zeros({3, 4, 2}, DType::float32).to(kGpu));
      },
      "takes 128 x 128 weight blocks", "block_n = 64 on CUDA");
  const Problem odd = make_problem("odd", 2, 300, 128, 8, {0, 4, 8}, "silu_and_mul", 0, 52);
  const std::vector<Tensor> oin = device_inputs(odd);
  gpu_test::expect_refused([&] { op(oin[0], oin[1], oin[2], oin[3], oin[4]); },
                           "N / 2 to be a multiple of 64", "gated N = 300 on CUDA");
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
}  // namespace tileops
