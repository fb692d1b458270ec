// GPU tests of the per-token-group FP8 quantization kernel (src/kernels/quant/*): its codes and
// scales must equal the CPU implementation's bit for bit (PerTokenGroupQuantFP8FwdOp on the CPU,
// itself tested against the double-precision reference in tests/ops), for every input dtype, the
// vector kernel's group sizes and the scalar kernel's, misaligned pointers, every rounding tie
// of e4m3, and the defined results of zeros, infinities and NaN. Outputs are poisoned with 0xAB
// bytes before each launch. Skipped without CUDA or without a device.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "gpu/kernel_test_util.h"
#include "kernels/quant/quant_cuda.h"
#include "tileops/core/error.h"
#include "tileops/core/half.h"
#include "tileops/ops/quant.h"
#endif

namespace {

#if TILEOPS_WITH_CUDA

using tileops::DType;
using tileops::Tensor;
namespace ck = tileops::cuda_kernels;
using namespace tileops::kernel_test;  // NOLINT: the shared kernel-test helpers

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// `values` (rows * cols of them) as a [rows, cols] CPU tensor of `dtype` (one rounding).
Tensor tensor_of(const std::vector<double>& values, int64_t rows, int64_t cols, DType dtype) {
  Tensor t = Tensor::empty({rows, cols}, DType::float32);
  for (size_t i = 0; i < values.size(); ++i) t.data<float>()[i] = static_cast<float>(values[i]);
  return t.to(dtype);
}

/// Values over several binades (group g of row r scaled by 2^((r + g) % 9 - 4)), some negative
/// values far below their group's amax (codes rounding to -0), some zero groups.
std::vector<double> spread_values(int64_t rows, int64_t cols, int64_t group, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> v(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t g = c / group;
      double x = rng.uniform(-3.0f, 3.0f) * std::ldexp(1.0, static_cast<int>((r + g) % 9) - 4);
      if (rng.below(17) == 0) x = -std::ldexp(1.0, -14) * rng.uniform(0.1f, 1.0f);
      if ((r * 7 + g) % 23 == 5) x = 0.0;
      v[static_cast<size_t>(r * cols + c)] = x;
    }
  }
  return v;
}

/// Runs the kernel on `x` (copied to the device `x_offset` bytes into a buffer; q written
/// `q_offset` bytes into its own) and expects its codes and scales to equal the CPU op's exactly.
void expect_same_as_cpu(const Tensor& x, int64_t group, double eps, const std::string& what,
                        size_t x_offset = 0, size_t q_offset = 0) {
  const int64_t rows = x.size(0);
  const int64_t cols = x.size(1);
  const int64_t groups = rows * (cols / group);
  tileops::PerTokenGroupQuantFP8FwdOp op({.group_size = group, .eps = eps});
  const auto [q, scales] = op(x);

  DeviceBuffer dx(x.nbytes() + x_offset);
  DeviceBuffer dq(static_cast<size_t>(rows * cols) + q_offset);
  DeviceBuffer ds(static_cast<size_t>(groups) * 4);
  ASSERT_TRUE(dx.ptr && dq.ptr && ds.ptr) << what;
  CUDA_OK(cudaMemcpy(dx.at(x_offset), x.data_ptr(), x.nbytes(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dq.ptr, 0xAB, dq.bytes));
  CUDA_OK(cudaMemset(ds.ptr, 0xAB, ds.bytes));
  ck::TokenGroupQuantArgs a;
  a.x = dx.at(x_offset);
  a.q = dq.at(q_offset);
  a.scales = ds.at<float>(0);
  a.rows = rows;
  a.cols = cols;
  a.group_size = group;
  a.eps = eps;
  a.dtype = x.dtype();
  try {
    ck::launch_token_group_quant_fp8(a, nullptr);
  } catch (const std::exception& e) {
    FAIL() << what << ": launch threw: " << e.what();
  }
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> got_q(static_cast<size_t>(rows * cols));
  std::vector<uint32_t> got_s(static_cast<size_t>(groups));
  CUDA_OK(cudaMemcpy(got_q.data(), dq.at(q_offset), got_q.size(), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(got_s.data(), ds.ptr, got_s.size() * 4, cudaMemcpyDeviceToHost));

  const auto* want_q = static_cast<const uint8_t*>(q.data_ptr());
  const auto* want_s = static_cast<const uint32_t*>(scales.data_ptr());
  int64_t bad_q = 0, bad_s = 0;
  std::string first;
  for (size_t i = 0; i < got_q.size(); ++i) {
    if (got_q[i] != want_q[i] && bad_q++ == 0) {
      first = "q[" + std::to_string(i) + "] = " + std::to_string(got_q[i]) + ", CPU " +
              std::to_string(want_q[i]) + " (x " +
              std::to_string(x.to(DType::float32).data<float>()[i]) + ")";
    }
  }
  for (size_t i = 0; i < got_s.size(); ++i) {
    if (got_s[i] != want_s[i] && bad_s++ == 0 && first.empty()) {
      first = "scales[" + std::to_string(i) + "] bits " + std::to_string(got_s[i]) + ", CPU " +
              std::to_string(want_s[i]);
    }
  }
  EXPECT_EQ(bad_q, 0) << what << ": " << bad_q << " codes differ, first " << first;
  EXPECT_EQ(bad_s, 0) << what << ": " << bad_s << " scales differ, first " << first;
}

std::string name_of(DType dtype, int64_t rows, int64_t cols, int64_t group) {
  return dtype_str(dtype) + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "] group " +
         std::to_string(group);
}

// Group sizes of the vector kernel (1 to 32 lanes, 1, 2 or 4 vectors a lane) and of the scalar
// kernel (a group size not a multiple of the vector, or too many vectors), row counts 1, odd and
// DeepSeek-V3's hidden size.
TEST(TokenGroupQuantKernel, MatchesTheCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 900;
  for (const DType dtype : {DType::float32, DType::bfloat16, DType::float16}) {
    for (const auto& [rows, cols, group] :
         std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 128, 128},
                                                            {7, 512, 128},
                                                            {33, 256, 64},
                                                            {3, 48, 16},
                                                            {5, 7, 1},
                                                            {9, 24, 8},
                                                            {6, 96, 32},
                                                            {5, 12, 4},
                                                            {2, 1024, 512},
                                                            {3, 2048, 1024},
                                                            {2, 4096, 4096},
                                                            {4, 60, 12},
                                                            {2, 7168, 128},
                                                            {257, 7168, 128},
                                                            {31, 2048, 128}}) {
      const Tensor x = tensor_of(spread_values(rows, cols, group, ++seed), rows, cols, dtype);
      ASSERT_NO_FATAL_FAILURE(
          expect_same_as_cpu(x, group, 1e-10, name_of(dtype, rows, cols, group)));
    }
  }
}

// Pointers off the 16-byte vectors (x by one element, q by one byte) take the scalar kernel.
TEST(TokenGroupQuantKernel, MisalignedPointersMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const DType dtype : {DType::float32, DType::bfloat16}) {
    const Tensor x = tensor_of(spread_values(5, 256, 128, 77), 5, 256, dtype);
    const size_t elem = tileops::element_size(dtype);
    ASSERT_NO_FATAL_FAILURE(
        expect_same_as_cpu(x, 128, 1e-10, name_of(dtype, 5, 256, 128) + " x+1", elem, 0));
    ASSERT_NO_FATAL_FAILURE(
        expect_same_as_cpu(x, 128, 1e-10, name_of(dtype, 5, 256, 128) + " q+1", 0, 1));
    ASSERT_NO_FATAL_FAILURE(
        expect_same_as_cpu(x, 128, 1e-10, name_of(dtype, 5, 256, 128) + " q+8", 0, 8));
  }
}

// With a group amax of 448 (scale 1), the values are their own quotients: every e4m3 value, every
// midpoint between neighbours (ties, to even), and the floats just beside each midpoint, both
// signs, subnormals and the range (448, 464] that saturates.
TEST(TokenGroupQuantKernel, EveryRoundingTieMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  std::vector<double> magnitudes;
  for (int c = 0; c < 126; ++c) {
    const double lo = tileops::fp8e4m3_to_float(static_cast<uint8_t>(c));
    const double hi = tileops::fp8e4m3_to_float(static_cast<uint8_t>(c + 1));
    const auto mid = static_cast<float>((lo + hi) / 2);
    magnitudes.insert(magnitudes.end(),
                      {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1000.0f)});
  }
  magnitudes.insert(magnitudes.end(), {448.0, 456.0, 460.0, 464.0, 1e-30, 0x1p-10, 0x1p-11});
  std::vector<double> values;
  for (const double m : magnitudes) values.insert(values.end(), {m, -m});
  const int64_t group = 128;
  // Each group starts with 448, so its scale is exactly 1 (but the group holding 456 .. 464: its
  // scale is 464 / 448 rounded, and its largest quotients land within an ulp of 448).
  std::vector<double> x;
  size_t next = 0;
  while (next < values.size()) {
    x.push_back(448.0);
    for (int64_t j = 1; j < group; ++j) x.push_back(next < values.size() ? values[next++] : 1.0);
  }
  const auto rows = static_cast<int64_t>(x.size()) / group;
  for (const DType dtype : {DType::float32, DType::bfloat16, DType::float16}) {
    ASSERT_NO_FATAL_FAILURE(expect_same_as_cpu(tensor_of(x, rows, group, dtype), group, 1e-10,
                                               "ties " + dtype_str(dtype)));
    // The same values in groups of 8 (the vector kernel with one lane for 16-bit inputs, two for
    // float32) and of 7 (the scalar kernel).
    for (const int64_t g : {8, 7}) {
      std::vector<double> y;
      for (size_t i = 0; i < values.size(); i += static_cast<size_t>(g - 1)) {
        y.push_back(448.0);
        for (int64_t j = 0; j < g - 1; ++j) {
          y.push_back(i + static_cast<size_t>(j) < values.size()
                          ? values[i + static_cast<size_t>(j)]
                          : 1.0);
        }
      }
      const auto r = static_cast<int64_t>(y.size()) / g;
      ASSERT_NO_FATAL_FAILURE(
          expect_same_as_cpu(tensor_of(y, r, g, dtype), g, 1e-10,
                             "ties group " + std::to_string(g) + " " + dtype_str(dtype)));
    }
  }
}

// Zeros, infinities and NaN (either sign) in the vector and scalar kernels: the manifest's
// defined results, the CPU's bits. eps small enough that the scale underflows to 0 (0 / 0 is NaN,
// x / 0 saturates), and large enough to bound the scale of small groups.
TEST(TokenGroupQuantKernel, SpecialValuesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::vector<double>> specials{
      {0.0},           {-0.0},
      {kInf},          {-kInf},
      {kNaN},          {-kNaN},
      {kInf, -kInf},   {kNaN, kInf},
      {1e-30, -1e-30}, {3.0, kInf, -2.0},
      {65504.0, -1.0}, {1e30, -1e-20, 1e-20}};  // the last: quotients below float32's normal range
  for (const DType dtype : {DType::float32, DType::bfloat16, DType::float16}) {
    for (const int64_t group : {128, 16, 7}) {
      const int64_t rows = static_cast<int64_t>(specials.size()) + 1;
      std::vector<double> x = spread_values(rows, 2 * group, group, 55);
      // Row r < specials.size(): its first group holds the specials in a random-looking spot.
      for (size_t r = 0; r < specials.size(); ++r) {
        for (size_t k = 0; k < specials[r].size(); ++k) {
          const auto at =
              static_cast<int64_t>(r) * 2 * group + (static_cast<int64_t>(r * 5 + k * 3) % group);
          x[static_cast<size_t>(at)] = specials[r][k];
        }
      }
      // The last row: a group of zeros and a group of zeros and one -0.
      for (int64_t j = 0; j < 2 * group; ++j)
        x[static_cast<size_t>((rows - 1) * 2 * group + j)] = 0;
      x[static_cast<size_t>((rows - 1) * 2 * group + group)] = -0.0;
      const Tensor t = tensor_of(x, rows, 2 * group, dtype);
      for (const double eps : {1e-10, 1e-45, 1e-3}) {
        ASSERT_NO_FATAL_FAILURE(expect_same_as_cpu(
            t, group, eps,
            "specials " + name_of(dtype, rows, 2 * group, group) + " eps " + std::to_string(eps)));
      }
    }
  }
  // float32 subnormal inputs (below bfloat16's and float16's range).
  std::vector<double> tiny(256);
  for (size_t i = 0; i < tiny.size(); ++i) tiny[i] = (i % 2 ? -1.0 : 1.0) * 0x1p-149 * (1 + i);
  ASSERT_NO_FATAL_FAILURE(
      expect_same_as_cpu(tensor_of(tiny, 2, 128, DType::float32), 128, 1e-45, "subnormals"));
}

// Group amaxes from 2^-140 to 2^120, so that the scales cross 2^-88 (below it the kernel divides
// element by element, above it multiplies by the reciprocal and corrects) and the float32 normal
// range, with values down to 2^-40 of their group's amax; and amaxes next to eps, where the
// scale switches between amax / 448 and eps / 448.
TEST(TokenGroupQuantKernel, ScalesAcrossTheRangeMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const int64_t group = 128;
  std::vector<double> x;
  Rng rng(4242);
  for (int k = -140; k <= 120; k += 2) {
    for (int64_t j = 0; j < group; ++j) {
      const double v = rng.uniform(-1.0f, 1.0f) *
                       std::ldexp(1.0, k - static_cast<int>(rng.below(4) == 0 ? rng.below(40) : 0));
      x.push_back(j == 0 ? std::ldexp(1.0, k) * 1.37 : v);
    }
  }
  const auto eps_float = static_cast<float>(1e-10);
  for (const float m :
       {std::nextafter(eps_float, 0.0f), eps_float, std::nextafter(eps_float, 1.0f)}) {
    for (int64_t j = 0; j < group; ++j) x.push_back(j == 5 ? -m : m * rng.uniform(-1.0f, 1.0f));
  }
  const auto rows = static_cast<int64_t>(x.size()) / (2 * group);
  x.resize(static_cast<size_t>(rows * 2 * group));
  for (const DType dtype : {DType::float32, DType::bfloat16}) {
    const Tensor t = tensor_of(x, rows, 2 * group, dtype);
    for (const double eps : {1e-10, 1e-45, 1e-30, 1e30}) {
      ASSERT_NO_FATAL_FAILURE(expect_same_as_cpu(
          t, group, eps, "scales " + dtype_str(dtype) + " eps " + std::to_string(eps)));
    }
  }
}

TEST(TokenGroupQuantKernel, EmptyAndInvalidArguments) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(1 << 16);
  ASSERT_NE(buf.ptr, nullptr);
  ck::TokenGroupQuantArgs a;
  a.x = buf.at(0);
  a.q = buf.at(16384);
  a.scales = buf.at<float>(32768);
  a.rows = 2;
  a.cols = 256;
  a.group_size = 128;
  a.dtype = DType::bfloat16;
  EXPECT_NO_THROW(ck::launch_token_group_quant_fp8(a, nullptr));
  auto bad = a;
  bad.dtype = DType::int32;
  EXPECT_THROW(ck::launch_token_group_quant_fp8(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.group_size = 0;
  EXPECT_THROW(ck::launch_token_group_quant_fp8(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.group_size = 100;
  EXPECT_THROW(ck::launch_token_group_quant_fp8(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.eps = 0.0;
  EXPECT_THROW(ck::launch_token_group_quant_fp8(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.q = nullptr;
  EXPECT_THROW(ck::launch_token_group_quant_fp8(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.x = buf.at(1);  // not aligned to a bfloat16
  EXPECT_THROW(ck::launch_token_group_quant_fp8(bad, nullptr), tileops::SignatureError);
  // Empty problems launch nothing, even with null pointers.
  bad = a;
  bad.rows = 0;
  bad.x = nullptr;
  EXPECT_NO_THROW(ck::launch_token_group_quant_fp8(bad, nullptr));
  bad = a;
  bad.cols = 0;
  bad.q = nullptr;
  EXPECT_NO_THROW(ck::launch_token_group_quant_fp8(bad, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
