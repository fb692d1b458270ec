// Internal: float to float8_e4m3fn codes and back without branches, for loops the compiler
// vectorizes.
#pragma once

#include <bit>
#include <cstdint>

namespace tileops::cpu {

/// The e4m3 code of v saturated to [-448, 448]: float_to_fp8e4m3 (tileops/core/half.h) of v
/// clamped to that range (infinities included), 0x7f (no sign) for NaN. Integer masks instead
/// of branches. Below 2^-6, round-to-nearest-even of |v| * 2^9 comes from a float add of 2^14,
/// whose ulp is 2^-9; codes 0-8 there continue into the normal codes (8 is 2^-6).
[[gnu::always_inline]] inline std::uint8_t e4m3_code_saturated(float v) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
  const std::uint32_t sign = (bits >> 24) & 0x80u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  const std::uint32_t x = magnitude < 0x43e00000u ? magnitude : 0x43e00000u;  // 448
  const std::uint32_t small = std::bit_cast<std::uint32_t>(std::bit_cast<float>(x) + 16384.0f) -
                              0x46800000u;  // bits of 2^14
  const std::uint32_t normal = (x + 0xc407ffffu + ((x >> 20) & 1u)) >> 20;
  // All-ones masks, not ?: (GCC 12 leaves those as control flow and does not vectorize the loop).
  const std::uint32_t is_normal = 0u - static_cast<std::uint32_t>(x >= 0x3c800000u);  // 2^-6
  const std::uint32_t code = sign | (normal & is_normal) | (small & ~is_normal);
  const std::uint32_t is_nan = 0u - static_cast<std::uint32_t>(magnitude > 0x7f800000u);
  return static_cast<std::uint8_t>((code & ~is_nan) | (0x7fu & is_nan));
}

/// The value of e4m3 code `code`: fp8e4m3_to_float (tileops/core/half.h), NaN as 0x7fc00000 with
/// the code's sign. Integer masks instead of branches: normal codes take their magnitude bits at
/// float bit 20 with the exponent re-biased by 120, subnormal ones (0.mmm x 2^-6) are the
/// mantissa as a float times 2^-9 (exact, never a float subnormal).
[[gnu::always_inline]] inline float e4m3_value(std::uint8_t code) {
  const std::uint32_t magnitude = code & 0x7fu;
  const std::uint32_t sign = static_cast<std::uint32_t>(code & 0x80u) << 24;
  const std::uint32_t normal = (magnitude << 20) + (120u << 23);
  const std::uint32_t small =
      std::bit_cast<std::uint32_t>(static_cast<float>(static_cast<int>(magnitude & 7u)) * 0x1p-9f);
  const std::uint32_t is_small = 0u - static_cast<std::uint32_t>(magnitude < 8u);
  const std::uint32_t is_nan = 0u - static_cast<std::uint32_t>(magnitude == 0x7fu);
  const std::uint32_t bits = (normal & ~is_small) | (small & is_small);
  return std::bit_cast<float>(sign | (bits & ~is_nan) | (0x7fc00000u & is_nan));
}

}  // namespace tileops::cpu
