// Conversions between float32 and the narrow floating-point formats tileops stores: IEEE
// binary16 (float16), bfloat16, float8_e4m3fn and float8_e5m2. The scalar conversions are inline
// (CPU kernels call them in inner loops) and usable in CUDA device code.
//
// Rounding: every float32 -> narrow conversion rounds to nearest, ties to even (RNE).
// - float16: subnormals are produced and read exactly; |x| >= 65520 becomes +-inf (IEEE
//   overflow under RNE); inf stays inf; NaN stays NaN (quiet, top payload bits kept).
// - bfloat16: RNE on the upper 16 bits; overflow becomes +-inf; NaN stays NaN (made quiet).
// - float8_e4m3fn (OCP "fn": no infinities, NaN = S.1111.111, max finite 448): subnormals
//   down to 2^-9. Values whose rounding would exceed 448 (|x| > 464, and inf) become NaN with
//   the input's sign, as torch does; |x| in (448, 464] rounds to 448. NaN stays NaN.
// - float8_e5m2 (OCP E5M2, IEEE-like: inf = S.11111.00, NaN = S.11111.xx with xx != 0, max
//   finite 57344): subnormals down to 2^-16. Not saturating, as torch's cast is not:
//   |x| >= 61440 (the tie above 57344, which goes to the even inf) and inf become +-inf; NaN
//   becomes S.11111.11 with the input's sign (torch's bits).
#pragma once

#include <cstddef>
#include <cstdint>

#if !defined(__CUDA_ARCH__)
#include <bit>
#endif

#if defined(__CUDACC__)
#define TILEOPS_HOST_DEVICE __host__ __device__
#else
#define TILEOPS_HOST_DEVICE
#endif

namespace tileops {

namespace detail {

TILEOPS_HOST_DEVICE inline std::uint32_t float_bits(float f) noexcept {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return std::bit_cast<std::uint32_t>(f);
#endif
}

TILEOPS_HOST_DEVICE inline float bits_float(std::uint32_t u) noexcept {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}

// Rounds the integer m right by `shift` bits (1..31), ties to even.
TILEOPS_HOST_DEVICE inline std::uint32_t shift_right_rne(std::uint32_t m,
                                                         std::uint32_t shift) noexcept {
  const std::uint32_t r = m >> shift;
  const std::uint32_t rem = m & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1u);
  return r + ((rem > halfway || (rem == halfway && (r & 1u))) ? 1u : 0u);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// float16 (IEEE binary16)

TILEOPS_HOST_DEVICE inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) {  // inf or NaN (payload kept)
    return detail::bits_float(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return detail::bits_float(sign | detail::float_bits(magnitude));
  }
  return detail::bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

TILEOPS_HOST_DEVICE inline std::uint16_t float_to_half(float f) noexcept {
  std::uint32_t x = detail::float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) {  // inf or NaN
    const std::uint32_t nan_bits = x > 0x7f800000u ? (0x200u | ((x >> 13) & 0x3ffu)) : 0u;
    return static_cast<std::uint16_t>(sign | 0x7c00u | nan_bits);
  }
  if (x >= 0x477ff000u) {  // >= 65520: rounds past 65504 (ties go to the even 65536)
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  }
  if (x >= 0x38800000u) {  // normal half: re-bias exponent (-112) and round the low 13 bits
    x += 0xc8000fffu + ((x >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (x >> 13));
  }
  if (x <= 0x33000000u) {  // <= 2^-25: rounds to zero (2^-25 is a tie, goes to even 0)
    return static_cast<std::uint16_t>(sign);
  }
  // Subnormal half: value = m * 2^(e - 150) = (m >> (126 - e)) * 2^-24.
  const std::uint32_t e = x >> 23;
  const std::uint32_t m = (x & 0x7fffffu) | 0x800000u;
  return static_cast<std::uint16_t>(sign | detail::shift_right_rne(m, 126u - e));
}

// ---------------------------------------------------------------------------------------------
// bfloat16

TILEOPS_HOST_DEVICE inline float bfloat16_to_float(std::uint16_t b) noexcept {
  return detail::bits_float(static_cast<std::uint32_t>(b) << 16);
}

TILEOPS_HOST_DEVICE inline std::uint16_t float_to_bfloat16(float f) noexcept {
  const std::uint32_t x = detail::float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep sign and top payload, force quiet
    return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  }
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// ---------------------------------------------------------------------------------------------
// float8_e4m3fn (1 sign, 4 exponent bits with bias 7, 3 mantissa bits, no inf)

TILEOPS_HOST_DEVICE inline float fp8e4m3_to_float(std::uint8_t v) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(v & 0x80u) << 24;
  const std::uint32_t exponent = (v >> 3) & 0xfu;
  const std::uint32_t mantissa = v & 0x7u;
  if (exponent == 0xfu && mantissa == 0x7u) {
    return detail::bits_float(sign | 0x7fc00000u);
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-9
    const float magnitude = static_cast<float>(mantissa) * 0x1p-9f;
    return detail::bits_float(sign | detail::float_bits(magnitude));
  }
  return detail::bits_float(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

TILEOPS_HOST_DEVICE inline std::uint8_t float_to_fp8e4m3(float f) noexcept {
  std::uint32_t x = detail::float_bits(f);
  const std::uint32_t sign = (x >> 24) & 0x80u;
  x &= 0x7fffffffu;
  if (x > 0x43e80000u) {  // > 464 (rounds beyond 448), inf, NaN -> NaN
    return static_cast<std::uint8_t>(sign | 0x7fu);
  }
  if (x >= 0x3c800000u) {  // normal (>= 2^-6): re-bias exponent (-120), round the low 20 bits
    x += 0xc407ffffu + ((x >> 20) & 1u);
    return static_cast<std::uint8_t>(sign | (x >> 20));
  }
  if (x <= 0x3a800000u) {  // <= 2^-10: rounds to zero
    return static_cast<std::uint8_t>(sign);
  }
  // Subnormal: value = m * 2^(e - 150) = (m >> (141 - e)) * 2^-9.
  const std::uint32_t e = x >> 23;
  const std::uint32_t m = (x & 0x7fffffu) | 0x800000u;
  return static_cast<std::uint8_t>(sign | detail::shift_right_rne(m, 141u - e));
}

// ---------------------------------------------------------------------------------------------
// float8_e5m2 (1 sign, 5 exponent bits with bias 15, 2 mantissa bits, IEEE inf and NaN)

// Every e5m2 value is a binary16 value: the code is the high byte of its float16 bits.
TILEOPS_HOST_DEVICE inline float fp8e5m2_to_float(std::uint8_t v) noexcept {
  return half_to_float(static_cast<std::uint16_t>(static_cast<std::uint16_t>(v) << 8));
}

TILEOPS_HOST_DEVICE inline std::uint8_t float_to_fp8e5m2(float f) noexcept {
  std::uint32_t x = detail::float_bits(f);
  const std::uint32_t sign = (x >> 24) & 0x80u;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) {  // NaN
    return static_cast<std::uint8_t>(sign | 0x7fu);
  }
  if (x >= 0x47700000u) {  // >= 61440: rounds past 57344 (the tie goes to the even inf); inf
    return static_cast<std::uint8_t>(sign | 0x7cu);
  }
  if (x >= 0x38800000u) {  // normal (>= 2^-14): re-bias exponent (-112), round the low 21 bits
    x += 0xc80fffffu + ((x >> 21) & 1u);
    return static_cast<std::uint8_t>(sign | (x >> 21));
  }
  if (x <= 0x37000000u) {  // <= 2^-17: rounds to zero (2^-17 is a tie, goes to even 0)
    return static_cast<std::uint8_t>(sign);
  }
  // Subnormal: value = m * 2^(e - 150) = (m >> (134 - e)) * 2^-16.
  const std::uint32_t e = x >> 23;
  const std::uint32_t m = (x & 0x7fffffu) | 0x800000u;
  return static_cast<std::uint8_t>(sign | detail::shift_right_rne(m, 134u - e));
}

// ---------------------------------------------------------------------------------------------
// Storage types: one element of a float16 / bfloat16 / float8_e4m3fn / float8_e5m2 tensor.
// Aggregates over the raw bits (Half{0x3c00} is 1.0), so `Tensor::data<Half>()` is typed.

struct Half {
  std::uint16_t bits;
  TILEOPS_HOST_DEVICE static Half from_float(float f) noexcept { return Half{float_to_half(f)}; }
  TILEOPS_HOST_DEVICE float to_float() const noexcept { return half_to_float(bits); }
  TILEOPS_HOST_DEVICE explicit operator float() const noexcept { return half_to_float(bits); }
};

struct BFloat16 {
  std::uint16_t bits;
  TILEOPS_HOST_DEVICE static BFloat16 from_float(float f) noexcept {
    return BFloat16{float_to_bfloat16(f)};
  }
  TILEOPS_HOST_DEVICE float to_float() const noexcept { return bfloat16_to_float(bits); }
  TILEOPS_HOST_DEVICE explicit operator float() const noexcept { return bfloat16_to_float(bits); }
};

struct Float8E4M3FN {
  std::uint8_t bits;
  TILEOPS_HOST_DEVICE static Float8E4M3FN from_float(float f) noexcept {
    return Float8E4M3FN{float_to_fp8e4m3(f)};
  }
  TILEOPS_HOST_DEVICE float to_float() const noexcept { return fp8e4m3_to_float(bits); }
  TILEOPS_HOST_DEVICE explicit operator float() const noexcept { return fp8e4m3_to_float(bits); }
};

struct Float8E5M2 {
  std::uint8_t bits;
  TILEOPS_HOST_DEVICE static Float8E5M2 from_float(float f) noexcept {
    return Float8E5M2{float_to_fp8e5m2(f)};
  }
  TILEOPS_HOST_DEVICE float to_float() const noexcept { return fp8e5m2_to_float(bits); }
  TILEOPS_HOST_DEVICE explicit operator float() const noexcept { return fp8e5m2_to_float(bits); }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2 && sizeof(Float8E4M3FN) == 1 &&
              sizeof(Float8E5M2) == 1);

// ---------------------------------------------------------------------------------------------
// Bulk conversions over contiguous arrays (out of line, in src/core/half.cpp).

void half_to_float_n(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void float_to_half_n(const float* in, std::uint16_t* out, std::size_t n) noexcept;
void bfloat16_to_float_n(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void float_to_bfloat16_n(const float* in, std::uint16_t* out, std::size_t n) noexcept;
void fp8e4m3_to_float_n(const std::uint8_t* in, float* out, std::size_t n) noexcept;
void float_to_fp8e4m3_n(const float* in, std::uint8_t* out, std::size_t n) noexcept;
void fp8e5m2_to_float_n(const std::uint8_t* in, float* out, std::size_t n) noexcept;
void float_to_fp8e5m2_n(const float* in, std::uint8_t* out, std::size_t n) noexcept;

}  // namespace tileops
