// cpu::gemm_abt_panels (src/kernels/cpu/gemm.h): b made a panel of rows at a time, each panel
// multiplied by OpenBLAS into its columns of c; the panels cover b's rows once, in order, and c
// equals the product within float32's accumulation bound of a double-precision reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cpu/gemm.h"

namespace tileops {
namespace {

/// A deterministic value in [-1, 1) for element (r, i) of an operand.
float value(std::int64_t r, std::int64_t i, std::int64_t salt) {
  const std::uint64_t h = static_cast<std::uint64_t>((r * 2654435761LL) ^ (i * 40503LL) ^ salt);
  return static_cast<float>((h * 6364136223846793005ULL) >> 40) / static_cast<float>(1 << 23) -
         1.0f;
}

TEST(CpuGemmPanels, PanelsCoverTheRowsOnceAndCEqualsTheProduct) {
  // K = 65536: 16 MB panels hold 64 rows, so N = 150 is made as 64 + 64 + 22 rows. c's rows are
  // ldc = N + 3 apart; the 3 columns past N must stay untouched.
  constexpr std::int64_t m = 17, n = 150, k = 65536, ldc = n + 3;
  std::vector<float> a(static_cast<std::size_t>(m * k));
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t i = 0; i < k; ++i) a[r * k + i] = value(r, i, 1);
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> panels;
  const cpu::FloatRows b_rows = [&](std::int64_t first, std::int64_t count, float* out) {
    panels.emplace_back(first, count);
    for (std::int64_t j = 0; j < count; ++j) {
      for (std::int64_t i = 0; i < k; ++i) out[j * k + i] = value(first + j, i, 2);
    }
  };
  std::vector<float> panel;
  std::vector<float> c(static_cast<std::size_t>(m * ldc), -7.0f);
  cpu::gemm_abt_panels(m, n, k, a.data(), k, b_rows, panel, c.data(), ldc);

  const std::vector<std::pair<std::int64_t, std::int64_t>> expected = {
      {0, 64}, {64, 64}, {128, 22}};
  EXPECT_EQ(panels, expected);
  EXPECT_EQ(panel.size(), static_cast<std::size_t>(64 * k));
  int failures = 0;
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t j = 0; j < n && failures < 10; ++j) {
      double ref = 0.0;
      double abs = 0.0;
      for (std::int64_t i = 0; i < k; ++i) {
        const double t = static_cast<double>(a[r * k + i]) * value(j, i, 2);
        ref += t;
        abs += std::fabs(t);
      }
      // At most k + 1 float32 roundings reach a term in any order of summation.
      const double bound = 1.01 * static_cast<double>(k + 1) * std::ldexp(1.0, -24) * abs;
      if (!(std::fabs(c[r * ldc + j] - ref) <= bound)) {
        ++failures;
        ADD_FAILURE() << "c[" << r << ", " << j << "] = " << c[r * ldc + j] << ", reference " << ref
                      << ", bound " << bound;
      }
    }
    for (std::int64_t j = n; j < ldc; ++j) EXPECT_EQ(c[r * ldc + j], -7.0f) << r << ", " << j;
  }
}

TEST(CpuGemmPanels, NoRowsOrNoColumnsMakeNoPanel) {
  int calls = 0;
  const cpu::FloatRows b_rows = [&](std::int64_t, std::int64_t, float*) { ++calls; };
  std::vector<float> panel;
  std::vector<float> a(8, 1.0f);
  std::vector<float> c(8, 3.0f);
  cpu::gemm_abt_panels(0, 4, 2, a.data(), 2, b_rows, panel, c.data(), 4);
  cpu::gemm_abt_panels(2, 0, 2, a.data(), 2, b_rows, panel, c.data(), 4);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(c, std::vector<float>(8, 3.0f));
}

}  // namespace
}  // namespace tileops
