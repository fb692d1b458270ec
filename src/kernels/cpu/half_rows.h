// Internal: rows of float16 to float32 and back for the CPU kernels, with F16C where the CPU has
// it (src/kernels/cpu/half_rows.cpp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cpu/elements.h"
#include "tileops/core/half.h"

namespace tileops::cpu {

/// out[i] = in[i] as float for i < n: F16C's vcvtph2ps (8 at a time) where the CPU has it, which
/// returns a signalling NaN quiet (as every arithmetic use of it would), else the decode table
/// (elements.h). Every other value is exact either way.
void half_row_to_float(const Half* in, float* out, std::int64_t n);

/// out[i] = Half::from_float(in[i]) for i < n (round to nearest even, overflow to inf, NaN quiet
/// with its top payload bits): F16C's vcvtps2ph where the CPU has it, else the scalar encode.
void float_row_to_half(const float* in, Half* out, std::int64_t n);

/// out[i] = float(in[i]) for i < n: float16 through half_row_to_float, bfloat16 and float32 by a
/// loop the compiler vectorizes.
template <class T>
void row_to_float(const T* in, float* out, std::int64_t n) {
  if constexpr (std::is_same_v<T, Half>) {
    half_row_to_float(in, out, n);
  } else {
    for (std::int64_t i = 0; i < n; ++i) out[i] = to_float(in[i]);
  }
}

}  // namespace tileops::cpu
