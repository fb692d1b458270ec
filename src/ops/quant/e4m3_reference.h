// Internal: the float8_e4m3fn codes decoded in double from the format's definition (1 sign bit,
// 4 exponent bits with bias 7, 3 mantissa bits, no infinities, S.1111.111 NaN), for the
// double-precision references, independently of tileops/core/half.h.
#pragma once

#include <cmath>
#include <limits>

namespace tileops::reference_fp8 {

/// The value of e4m3fn code `c` (0..255); NaN for the two NaN codes.
inline double e4m3_value(int c) {
  if ((c & 0x7f) == 0x7f) return std::numeric_limits<double>::quiet_NaN();
  const int exponent = (c >> 3) & 0xf;
  const int mantissa = c & 0x7;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return (c & 0x80) != 0 ? -magnitude : magnitude;
}

}  // namespace tileops::reference_fp8
