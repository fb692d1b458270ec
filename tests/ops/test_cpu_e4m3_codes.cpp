// cpu::e4m3_code_saturated (src/kernels/cpu/e4m3_codes.h), the branch-free encode of the CPU
// token-group quantization, equals float_to_fp8e4m3 on [-448, 448] (every float whose low 11
// mantissa bits are zero, and around every e4m3 value: the value, the midpoints to its
// neighbours and one float either side of each), saturates beyond it and gives 0x7f for NaN;
// cpu::e4m3_value, the branch-free decode of the CPU FP8 GEMMs, equals fp8e4m3_to_float on every
// code, bit for bit (NaN included).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/e4m3_codes.h"
#include "tileops/core/half.h"

namespace tileops {
namespace {

void expect_code(float v) {
  ASSERT_EQ(cpu::e4m3_code_saturated(v), float_to_fp8e4m3(v))
      << std::hexfloat << v << " (bits " << std::hex << std::bit_cast<std::uint32_t>(v) << ")";
}

TEST(CpuE4M3Codes, FloatsOnACoarseGridMatchTheScalarEncode) {
  const std::uint32_t last = std::bit_cast<std::uint32_t>(448.0f);
  for (std::uint32_t b = 0; b <= last; b += 1u << 11) {
    const float v = std::bit_cast<float>(b);
    expect_code(v);
    expect_code(-v);
  }
}

TEST(CpuE4M3Codes, EveryValueTieAndNeighbourMatchesTheScalarEncode) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (int c = 0; c < 0x7e; ++c) {
    const float lo = fp8e4m3_to_float(static_cast<std::uint8_t>(c));
    const float hi = fp8e4m3_to_float(static_cast<std::uint8_t>(c + 1));
    const float mid = lo + (hi - lo) / 2;  // exact: both are e4m3 values
    for (const float v : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf),
                          std::nextafter(lo, kInf), std::nextafter(hi, 0.0f)}) {
      expect_code(v);
      expect_code(-v);
    }
  }
  expect_code(448.0f);
  expect_code(-448.0f);
  expect_code(0x1p-10f);  // half the smallest subnormal: a tie to 0
  expect_code(std::numeric_limits<float>::denorm_min());
  // Beyond 448 (the midpoint to the next binade's 480 included) and infinities: +-448.
  for (const float v : {std::nextafter(448.0f, kInf), 464.0f, 480.0f, 1e30f, kInf}) {
    EXPECT_EQ(cpu::e4m3_code_saturated(v), 0x7e) << v;
    EXPECT_EQ(cpu::e4m3_code_saturated(-v), 0xfe) << -v;
  }
  // NaN of either sign: 0x7f.
  EXPECT_EQ(cpu::e4m3_code_saturated(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(cpu::e4m3_code_saturated(-std::numeric_limits<float>::quiet_NaN()), 0x7f);
}

TEST(CpuE4M3Codes, EveryCodeDecodesAsTheScalarDecodeBitForBit) {
  for (int code = 0; code < 256; ++code) {
    const auto c = static_cast<std::uint8_t>(code);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(cpu::e4m3_value(c)),
              std::bit_cast<std::uint32_t>(fp8e4m3_to_float(c)))
        << "code 0x" << std::hex << code;
  }
  EXPECT_EQ(cpu::e4m3_value(0x01), 0x1p-9f);  // the smallest subnormal
  EXPECT_EQ(cpu::e4m3_value(0x7e), 448.0f);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(cpu::e4m3_value(0x80)), 0x80000000u);  // -0
}

}  // namespace
}  // namespace tileops
