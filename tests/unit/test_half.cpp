// Conversions float32 <-> float16 / bfloat16 / float8_e4m3fn / float8_e5m2, checked against a
// reference that decodes with ldexp and rounds in double precision (nearbyint: ties to even),
// independently of the bit tricks of the implementation.
#include <gtest/gtest.h>

#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tileops/core/half.h"

namespace {

using tileops::bfloat16_to_float;
using tileops::float_to_bfloat16;
using tileops::float_to_fp8e4m3;
using tileops::float_to_fp8e5m2;
using tileops::float_to_half;
using tileops::fp8e4m3_to_float;
using tileops::fp8e5m2_to_float;
using tileops::half_to_float;

// A binary floating-point format: `exp_bits` exponent bits, `man_bits` stored mantissa bits.
struct Format {
  int exp_bits;
  int man_bits;
  bool has_inf;  // false: e4m3fn (all-ones exponent is finite except mantissa all ones = NaN)
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  int emin() const { return 1 - bias(); }
  double max_finite() const {
    const int emax_field = has_inf ? (1 << exp_bits) - 2 : (1 << exp_bits) - 1;
    const int top_man = has_inf ? (1 << man_bits) - 1 : (1 << man_bits) - 2;
    return std::ldexp(1.0 + top_man / std::ldexp(1.0, man_bits), emax_field - bias());
  }
};

constexpr Format kHalf{5, 10, true};
constexpr Format kBf16{8, 7, true};
constexpr Format kFp8{4, 3, false};
constexpr Format kE5M2{5, 2, true};

// Reference decoding of a bit pattern.
double decode(const Format& f, std::uint32_t bits) {
  const int total = 1 + f.exp_bits + f.man_bits;
  const bool negative = (bits >> (total - 1)) & 1u;
  const std::uint32_t e = (bits >> f.man_bits) & ((1u << f.exp_bits) - 1u);
  const std::uint32_t m = bits & ((1u << f.man_bits) - 1u);
  const std::uint32_t e_all = (1u << f.exp_bits) - 1u;
  double v;
  if (f.has_inf && e == e_all) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.has_inf && e == e_all && m == (1u << f.man_bits) - 1u) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), f.emin() - f.man_bits);
  } else {
    v = std::ldexp(static_cast<double>(m + (1u << f.man_bits)),
                   static_cast<int>(e) - f.bias() - f.man_bits);
  }
  return negative ? -v : v;
}

// Reference rounding of a (finite or infinite) double to the format: RNE with unbounded
// exponent range, then overflow handling (inf, or NaN for e4m3fn).
double round_to(const Format& f, double v) {
  if (std::isnan(v)) return v;
  const double a = std::fabs(v);
  double r;
  if (std::isinf(a)) {
    r = a;
  } else if (a == 0.0) {
    r = 0.0;
  } else {
    int k = 0;
    std::frexp(a, &k);  // a in [2^(k-1), 2^k)
    const int e = std::max(k - 1, f.emin());
    const double quantum = std::ldexp(1.0, e - f.man_bits);
    r = std::nearbyint(a / quantum) * quantum;
  }
  if (r > f.max_finite()) {
    r = f.has_inf ? std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::quiet_NaN();
  }
  return std::signbit(v) ? -r : r;
}

// Checks convert(x) against the reference for one float input.
template <class ToBits, class FromBits>
void check_one(const Format& f, float x, ToBits to_bits, FromBits from_bits) {
  const double expected = round_to(f, static_cast<double>(x));
  const double got = static_cast<double>(from_bits(to_bits(x)));
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(got)) << "x=" << x << " (bits 0x" << std::hex
                                 << std::bit_cast<std::uint32_t>(x) << ")";
    return;
  }
  EXPECT_EQ(got, expected) << "x=" << x << " (bits 0x" << std::hex
                           << std::bit_cast<std::uint32_t>(x) << ")";
  EXPECT_EQ(std::signbit(got), std::signbit(expected)) << "x=" << x;
}

// All finite, non-negative values of the format in increasing order.
std::vector<double> finite_values(const Format& f) {
  std::vector<double> values;
  const std::uint32_t half_range = 1u << (f.exp_bits + f.man_bits);
  for (std::uint32_t bits = 0; bits < half_range; ++bits) {
    const double v = decode(f, bits);
    if (std::isfinite(v)) values.push_back(v);
  }
  return values;
}

// Midpoints of consecutive values (ties), their float neighbours, and the values themselves;
// also past the largest value (overflow), all with both signs.
template <class ToBits, class FromBits>
void check_ties(const Format& f, ToBits to_bits, FromBits from_bits) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  const std::vector<double> v = finite_values(f);
  const double step_past_max = v.back() - v[v.size() - 2];
  std::vector<double> edges = v;
  edges.push_back(v.back() + step_past_max);  // the first value beyond the format
  for (std::size_t i = 0; i + 1 < edges.size(); ++i) {
    const auto mid = static_cast<float>((edges[i] + edges[i + 1]) / 2);  // exact in float
    ASSERT_EQ(static_cast<double>(mid), (edges[i] + edges[i + 1]) / 2);
    const float candidates[] = {
        static_cast<float>(edges[i]),
        mid,
        std::nextafter(mid, 0.0f),
        std::nextafter(mid, std::numeric_limits<float>::infinity()),
    };
    for (const float x : candidates) {
      check_one(f, x, to_bits, from_bits);
      check_one(f, -x, to_bits, from_bits);
    }
  }
}

template <class ToBits, class FromBits>
void check_random(const Format& f, double lo_exp, double hi_exp, ToBits to_bits,
                  FromBits from_bits) {
  std::mt19937_64 gen(12345);
  std::uniform_real_distribution<double> exponent(lo_exp, hi_exp);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const auto x = static_cast<float>(std::exp2(exponent(gen)));
    check_one(f, x, to_bits, from_bits);
    check_one(f, -x, to_bits, from_bits);
    check_one(f, std::bit_cast<float>(bits(gen)), to_bits, from_bits);  // any pattern
  }
}

std::uint16_t h(float x) {
  return float_to_half(x);
}
float hf(std::uint16_t b) {
  return half_to_float(b);
}
std::uint16_t b16(float x) {
  return float_to_bfloat16(x);
}
float b16f(std::uint16_t b) {
  return bfloat16_to_float(b);
}
std::uint8_t f8(float x) {
  return float_to_fp8e4m3(x);
}
float f8f(std::uint8_t b) {
  return fp8e4m3_to_float(b);
}
std::uint8_t e5(float x) {
  return float_to_fp8e5m2(x);
}
float e5f(std::uint8_t b) {
  return fp8e5m2_to_float(b);
}

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------------------------------------
// float16

TEST(Half, DecodesAllBitPatterns) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const double expected = decode(kHalf, bits);
    const float got = half_to_float(static_cast<std::uint16_t>(bits));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << bits;
    } else {
      EXPECT_EQ(static_cast<double>(got), expected) << std::hex << bits;
      EXPECT_EQ(std::signbit(got), std::signbit(expected)) << std::hex << bits;
    }
  }
}

TEST(Half, EncodesEveryHalfValueExactly) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const auto b = static_cast<std::uint16_t>(bits);
    const std::uint16_t back = float_to_half(half_to_float(b));
    if ((b & 0x7c00u) == 0x7c00u && (b & 0x3ffu) != 0) {  // NaN stays NaN, sign kept
      EXPECT_EQ(back & 0x7c00u, 0x7c00u) << std::hex << bits;
      EXPECT_NE(back & 0x3ffu, 0u) << std::hex << bits;
      EXPECT_EQ(back & 0x8000u, b & 0x8000u) << std::hex << bits;
    } else {
      EXPECT_EQ(back, b) << std::hex << bits;
    }
  }
}

TEST(Half, RoundsTiesToEvenEverywhere) {
  check_ties(kHalf, h, hf);
}

TEST(Half, RoundsRandomFloats) {
  check_random(kHalf, -30.0, 18.0, h, hf);
}

TEST(Half, SpecialValues) {
  EXPECT_EQ(h(0.0f), 0x0000);
  EXPECT_EQ(h(-0.0f), 0x8000);
  EXPECT_EQ(h(1.0f), 0x3c00);
  EXPECT_EQ(h(-2.0f), 0xc000);
  EXPECT_EQ(h(65504.0f), 0x7bff);
  EXPECT_EQ(h(65519.99f), 0x7bff);
  EXPECT_EQ(h(65520.0f), 0x7c00);  // tie between 65504 and 65536 goes to the even (inf)
  EXPECT_EQ(h(1e10f), 0x7c00);
  EXPECT_EQ(h(-1e10f), 0xfc00);
  EXPECT_EQ(h(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(h(kInf), 0x7c00);
  EXPECT_EQ(h(-kInf), 0xfc00);
  EXPECT_EQ(h(kNaN) & 0x7e00, 0x7e00);  // quiet NaN
  EXPECT_TRUE(std::isnan(hf(h(-kNaN))));
  EXPECT_EQ(h(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(h(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: 0
  EXPECT_EQ(h(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(h(3 * std::ldexp(1.0f, -25)), 0x0002);  // 1.5 ulp: tie goes to even 2
  EXPECT_EQ(h(5 * std::ldexp(1.0f, -25)), 0x0002);  // 2.5 ulp: tie goes to even 2
  EXPECT_EQ(h(std::ldexp(1.0f, -14)), 0x0400);      // smallest normal
  EXPECT_EQ(h(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(hf(0x7c00), kInf);
  EXPECT_EQ(hf(0x3555), 0.333251953125f);
}

// ---------------------------------------------------------------------------------------------
// bfloat16

TEST(BFloat16, DecodesAllBitPatterns) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const double expected = decode(kBf16, bits);
    const float got = bfloat16_to_float(static_cast<std::uint16_t>(bits));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << bits;
    } else {
      EXPECT_EQ(static_cast<double>(got), expected) << std::hex << bits;
      EXPECT_EQ(std::signbit(got), std::signbit(expected)) << std::hex << bits;
    }
  }
}

TEST(BFloat16, EncodesEveryValueExactly) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const auto b = static_cast<std::uint16_t>(bits);
    const std::uint16_t back = float_to_bfloat16(bfloat16_to_float(b));
    if ((b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0) {
      EXPECT_TRUE(std::isnan(bfloat16_to_float(back))) << std::hex << bits;
      EXPECT_EQ(back & 0x8000u, b & 0x8000u) << std::hex << bits;
    } else {
      EXPECT_EQ(back, b) << std::hex << bits;
    }
  }
}

TEST(BFloat16, RoundsTiesToEvenEverywhere) {
  check_ties(kBf16, b16, b16f);
}

TEST(BFloat16, RoundsRandomFloats) {
  check_random(kBf16, -140.0, 129.0, b16, b16f);
}

TEST(BFloat16, SpecialValues) {
  EXPECT_EQ(b16(1.0f), 0x3f80);
  EXPECT_EQ(b16(-0.0f), 0x8000);
  EXPECT_EQ(b16(kInf), 0x7f80);
  EXPECT_EQ(b16(-kInf), 0xff80);
  EXPECT_EQ(b16(std::numeric_limits<float>::max()), 0x7f80);  // overflow rounds to inf
  // NaN whose payload lives only in the low 16 bits must stay NaN.
  EXPECT_TRUE(std::isnan(b16f(b16(std::bit_cast<float>(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(b16f(b16(std::bit_cast<float>(0xff800001u)))));
  EXPECT_EQ(b16(std::bit_cast<float>(0xff800001u)) & 0x8000, 0x8000);
  EXPECT_EQ(b16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(b16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(b16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
}

// ---------------------------------------------------------------------------------------------
// float8_e4m3fn

TEST(Float8E4M3, DecodesAllBitPatterns) {
  for (std::uint32_t bits = 0; bits < 256; ++bits) {
    const double expected = decode(kFp8, bits);
    const float got = fp8e4m3_to_float(static_cast<std::uint8_t>(bits));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << bits;
    } else {
      EXPECT_EQ(static_cast<double>(got), expected) << std::hex << bits;
      EXPECT_EQ(std::signbit(got), std::signbit(expected)) << std::hex << bits;
    }
  }
  EXPECT_EQ(fp8e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8e4m3_to_float(0x01), std::ldexp(1.0f, -9));
}

TEST(Float8E4M3, EncodesEveryValueExactly) {
  for (std::uint32_t bits = 0; bits < 256; ++bits) {
    const auto b = static_cast<std::uint8_t>(bits);
    const std::uint8_t back = float_to_fp8e4m3(fp8e4m3_to_float(b));
    EXPECT_EQ(back, b) << std::hex << bits;  // NaN (0x7f, 0xff) maps to itself too
  }
}

TEST(Float8E4M3, RoundsTiesToEvenEverywhere) {
  check_ties(kFp8, f8, f8f);
}

TEST(Float8E4M3, RoundsRandomFloats) {
  check_random(kFp8, -12.0, 10.0, f8, f8f);
}

TEST(Float8E4M3, OverflowBecomesNaN) {
  EXPECT_EQ(f8(448.0f), 0x7e);
  EXPECT_EQ(f8(464.0f), 0x7e);  // tie between 448 and (the unrepresentable) 480: even 448
  EXPECT_EQ(f8(std::nextafter(464.0f, kInf)), 0x7f);
  EXPECT_EQ(f8(480.0f), 0x7f);
  EXPECT_EQ(f8(1e6f), 0x7f);
  EXPECT_EQ(f8(-1e6f), 0xff);
  EXPECT_EQ(f8(kInf), 0x7f);
  EXPECT_EQ(f8(-kInf), 0xff);
  EXPECT_EQ(f8(kNaN), 0x7f);
  EXPECT_EQ(f8(-kNaN), 0xff);
  EXPECT_EQ(f8(-0.0f), 0x80);
  EXPECT_EQ(f8(std::ldexp(1.0f, -10)), 0x00);  // tie: 0
  EXPECT_EQ(f8(std::ldexp(3.0f, -10)), 0x02);  // tie between 1 and 2 ulp: even 2
}

// ---------------------------------------------------------------------------------------------
// float8_e5m2

TEST(Float8E5M2, DecodesAllBitPatterns) {
  for (std::uint32_t bits = 0; bits < 256; ++bits) {
    // The value from the format's definition, spelled out here rather than via decode().
    const bool negative = (bits & 0x80u) != 0;
    const int e = static_cast<int>((bits >> 2) & 0x1fu);
    const int m = static_cast<int>(bits & 0x3u);
    double expected;
    if (e == 31) {
      expected = m == 0 ? std::numeric_limits<double>::infinity()
                        : std::numeric_limits<double>::quiet_NaN();
    } else if (e == 0) {
      expected = m * std::ldexp(1.0, -16);  // subnormal: m/4 * 2^(1 - 15)
    } else {
      expected = (1.0 + m / 4.0) * std::ldexp(1.0, e - 15);
    }
    if (negative) expected = -expected;
    const float got = fp8e5m2_to_float(static_cast<std::uint8_t>(bits));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << bits;
    } else {
      EXPECT_EQ(static_cast<double>(got), expected) << std::hex << bits;
      EXPECT_EQ(std::signbit(got), std::signbit(expected)) << std::hex << bits;
    }
  }
  EXPECT_EQ(e5f(0x7b), 57344.0f);
  EXPECT_EQ(e5f(0x7c), kInf);
  EXPECT_EQ(e5f(0xfc), -kInf);
  EXPECT_EQ(e5f(0x04), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(e5f(0x01), std::ldexp(1.0f, -16));  // smallest subnormal
  EXPECT_EQ(e5f(0x3c), 1.0f);
}

TEST(Float8E5M2, EncodesEveryValueExactly) {
  for (std::uint32_t bits = 0; bits < 256; ++bits) {
    const auto b = static_cast<std::uint8_t>(bits);
    const std::uint8_t back = float_to_fp8e5m2(fp8e5m2_to_float(b));
    if ((b & 0x7cu) == 0x7cu && (b & 0x3u) != 0) {  // NaN: torch's NaN bits, sign kept
      EXPECT_EQ(back, (b & 0x80u) | 0x7fu) << std::hex << bits;
    } else {
      EXPECT_EQ(back, b) << std::hex << bits;
    }
  }
}

TEST(Float8E5M2, RoundsTiesToEvenEverywhere) {
  check_ties(kE5M2, e5, e5f);
}

TEST(Float8E5M2, RoundsRandomFloats) {
  check_random(kE5M2, -20.0, 18.0, e5, e5f);
}

TEST(Float8E5M2, OverflowBecomesInf) {
  EXPECT_EQ(e5(57344.0f), 0x7b);
  EXPECT_EQ(e5(std::nextafter(61440.0f, 0.0f)), 0x7b);
  EXPECT_EQ(e5(61440.0f), 0x7c);  // tie between 57344 and 65536 goes to the even (inf)
  EXPECT_EQ(e5(-61440.0f), 0xfc);
  EXPECT_EQ(e5(65536.0f), 0x7c);
  EXPECT_EQ(e5(1e10f), 0x7c);
  EXPECT_EQ(e5(std::numeric_limits<float>::max()), 0x7c);
  EXPECT_EQ(e5(kInf), 0x7c);
  EXPECT_EQ(e5(-kInf), 0xfc);
}

TEST(Float8E5M2, SpecialValues) {
  EXPECT_EQ(e5(0.0f), 0x00);
  EXPECT_EQ(e5(-0.0f), 0x80);
  EXPECT_TRUE(std::signbit(e5f(0x80)));
  EXPECT_EQ(e5f(0x80), 0.0f);
  EXPECT_EQ(e5(1.0f), 0x3c);
  EXPECT_EQ(e5(-2.0f), 0xc0);
  EXPECT_EQ(e5(1.125f), 0x3c);  // tie between 1 and 1.25: even 1
  EXPECT_EQ(e5(1.375f), 0x3e);  // tie between 1.25 and 1.5: even 1.5
  EXPECT_EQ(e5(kNaN), 0x7f);
  EXPECT_EQ(e5(-kNaN), 0xff);
  EXPECT_EQ(e5(std::bit_cast<float>(0x7f800001u)), 0x7f);  // payload only in the low bits
  EXPECT_TRUE(std::isnan(e5f(0x7d)));
  EXPECT_TRUE(std::isnan(e5f(0xfe)));
  // Subnormals: multiples of 2^-16.
  EXPECT_EQ(e5(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(e5(std::ldexp(1.0f, -17)), 0x00);  // tie: even 0
  EXPECT_EQ(e5(std::nextafter(std::ldexp(1.0f, -17), 1.0f)), 0x01);
  EXPECT_EQ(e5(-std::ldexp(1.0f, -17)), 0x80);
  EXPECT_EQ(e5(std::ldexp(3.0f, -17)), 0x02);  // 1.5 ulp: even 2
  EXPECT_EQ(e5(std::ldexp(5.0f, -17)), 0x02);  // 2.5 ulp: even 2
  EXPECT_EQ(e5(std::ldexp(7.0f, -17)), 0x04);  // 3.5 ulp: even 4, the smallest normal
  EXPECT_EQ(e5(std::numeric_limits<float>::denorm_min()), 0x00);
}

// ---------------------------------------------------------------------------------------------
// Storage structs and bulk conversions

TEST(HalfTypes, StructsWrapTheBits) {
  EXPECT_EQ(tileops::Half::from_float(1.0f).bits, 0x3c00);
  EXPECT_EQ(static_cast<float>(tileops::Half{0xc000}), -2.0f);
  EXPECT_EQ(tileops::BFloat16::from_float(-1.0f).bits, 0xbf80);
  EXPECT_EQ(tileops::BFloat16{0x4040}.to_float(), 3.0f);
  EXPECT_EQ(tileops::Float8E4M3FN::from_float(1.0f).bits, 0x38);
  EXPECT_EQ(tileops::Float8E4M3FN{0x7e}.to_float(), 448.0f);
  EXPECT_EQ(tileops::Float8E5M2::from_float(-1.0f).bits, 0xbc);
  EXPECT_EQ(static_cast<float>(tileops::Float8E5M2{0x7b}), 57344.0f);
}

TEST(HalfTypes, BulkConversionsMatchScalar) {
  std::vector<float> in;
  for (int i = -1000; i <= 1000; ++i) in.push_back(static_cast<float>(i) * 0.37f);
  in.push_back(kInf);
  const std::size_t n = in.size();
  std::vector<std::uint16_t> h16(n);
  std::vector<std::uint8_t> h8(n);
  std::vector<float> out(n);
  tileops::float_to_half_n(in.data(), h16.data(), n);
  tileops::half_to_float_n(h16.data(), out.data(), n);
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(h16[i], float_to_half(in[i]));
    EXPECT_EQ(out[i], half_to_float(h16[i]));
  }
  tileops::float_to_bfloat16_n(in.data(), h16.data(), n);
  tileops::bfloat16_to_float_n(h16.data(), out.data(), n);
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(h16[i], float_to_bfloat16(in[i]));
    EXPECT_EQ(out[i], bfloat16_to_float(h16[i]));
  }
  tileops::float_to_fp8e4m3_n(in.data(), h8.data(), n);
  tileops::fp8e4m3_to_float_n(h8.data(), out.data(), n);
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(h8[i], float_to_fp8e4m3(in[i]));
    if (!std::isnan(out[i])) {
      EXPECT_EQ(out[i], fp8e4m3_to_float(h8[i]));
    }
  }
  tileops::float_to_fp8e5m2_n(in.data(), h8.data(), n);
  tileops::fp8e5m2_to_float_n(h8.data(), out.data(), n);
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(h8[i], float_to_fp8e5m2(in[i]));
    EXPECT_EQ(out[i], fp8e5m2_to_float(h8[i]));
  }
}

}  // namespace
