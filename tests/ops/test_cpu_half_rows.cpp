// cpu::half_row_to_float / float_row_to_half (src/kernels/cpu/half_rows.cpp): every float16 value
// decodes as half_to_float does (checked against the format in tests/unit/test_half.cpp), a
// signalling NaN possibly made quiet; the encode equals float_to_half around every float16 value
// (ties, neighbours, overflow, NaN); rows of any length (the 8-wide body and the tail).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/half_rows.h"

namespace tileops {
namespace {

std::uint32_t bits_of(float f) {
  return std::bit_cast<std::uint32_t>(f);
}

TEST(CpuHalfRows, EveryValueMatchesTheReferenceDecode) {
  std::vector<Half> in(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) in[b] = Half{static_cast<std::uint16_t>(b)};
  std::vector<float> out(in.size(), -1.0f);
  cpu::half_row_to_float(in.data(), out.data(), static_cast<std::int64_t>(in.size()));
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float want = half_to_float(static_cast<std::uint16_t>(b));
    if (std::isnan(want)) {
      // Sign and payload kept; the quiet bit may be set (F16C quiets a signalling NaN).
      ASSERT_TRUE(std::isnan(out[b])) << std::hex << b;
      ASSERT_EQ(bits_of(out[b]) | 0x00400000u, bits_of(want) | 0x00400000u) << std::hex << b;
    } else {
      ASSERT_EQ(bits_of(out[b]), bits_of(want)) << std::hex << b;
    }
  }
}

TEST(CpuHalfRows, RowsOfEveryLengthUpToTwoBodiesAndATail) {
  for (std::int64_t n = 0; n <= 19; ++n) {
    std::vector<Half> in(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) in[i] = Half::from_float(0.5f * static_cast<float>(i) - 3);
    std::vector<float> out(static_cast<std::size_t>(n) + 1, 42.0f);
    cpu::half_row_to_float(in.data(), out.data(), n);
    for (std::int64_t i = 0; i < n; ++i) EXPECT_EQ(out[i], 0.5f * static_cast<float>(i) - 3) << n;
    EXPECT_EQ(out[static_cast<std::size_t>(n)], 42.0f) << "wrote past the row, n = " << n;
  }
}

/// Floats around every float16 value: the value, the ties halfway to both neighbours (round to
/// nearest even) and one float ulp either side of them, signs, the overflow edge, NaN payloads.
std::vector<float> encode_cases() {
  std::vector<float> v;
  for (std::uint32_t b = 0; b < 0x7c00; ++b) {
    const float x = half_to_float(static_cast<std::uint16_t>(b));
    const float next = half_to_float(static_cast<std::uint16_t>(b + 1));
    const float mid = x + (next - x) / 2;  // exact: one more bit than float16 holds
    for (const float y : {x, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      v.push_back(y);
      v.push_back(-y);
    }
  }
  for (const float y : {65504.0f, 65519.0f, 65520.0f, 65536.0f, 1e30f, INFINITY}) {
    v.push_back(y);
    v.push_back(-y);
  }
  for (const std::uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fa00000u, 0xffc12345u, 0x7fffffffu})
    v.push_back(std::bit_cast<float>(nan));
  return v;
}

TEST(CpuHalfRows, EncodeMatchesTheScalarEncodeOnEveryEdge) {
  const std::vector<float> in = encode_cases();
  std::vector<Half> out(in.size());
  cpu::float_row_to_half(in.data(), out.data(), static_cast<std::int64_t>(in.size()));
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint16_t want = float_to_half(in[i]);
    if (std::isnan(in[i])) {
      // A quiet NaN of the input's sign (the payload bits may differ).
      ASSERT_EQ(out[i].bits & 0xfe00u, want & 0xfe00u) << std::hex << bits_of(in[i]);
    } else {
      ASSERT_EQ(out[i].bits, want) << std::hex << bits_of(in[i]);
    }
  }
}

}  // namespace
}  // namespace tileops
