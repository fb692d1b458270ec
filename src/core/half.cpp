// Bulk conversions between float32 and the narrow float formats (the scalar ones are inline in
// the header).
#include "tileops/core/half.h"

namespace tileops {

void half_to_float_n(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = half_to_float(in[i]);
}

void float_to_half_n(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = float_to_half(in[i]);
}

void bfloat16_to_float_n(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = bfloat16_to_float(in[i]);
}

void float_to_bfloat16_n(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = float_to_bfloat16(in[i]);
}

void fp8e4m3_to_float_n(const std::uint8_t* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = fp8e4m3_to_float(in[i]);
}

void float_to_fp8e4m3_n(const float* in, std::uint8_t* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = float_to_fp8e4m3(in[i]);
}

void fp8e5m2_to_float_n(const std::uint8_t* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = fp8e5m2_to_float(in[i]);
}

void float_to_fp8e5m2_n(const float* in, std::uint8_t* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = float_to_fp8e5m2(in[i]);
}

}  // namespace tileops
