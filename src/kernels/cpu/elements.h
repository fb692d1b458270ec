// Internal: element types of the CPU kernels and the dtype dispatch over them.
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>

#include <fmt/format.h>

#include "tileops/core/dtype.h"
#include "tileops/core/error.h"
#include "tileops/core/half.h"

// The library is compiled for the baseline x86-64 (SSE2). The inner loops of the CPU kernels
// are also compiled for x86-64-v3 (AVX2, FMA, F16C) and the CPU picks its clone once, at load
// (GCC's function multiversioning): a function marked so must not be inline. Not under the
// sanitizers: their runtime is not ready when the loader runs the clones' resolvers.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TILEOPS_CPU_CLONES [[gnu::target_clones("arch=x86-64-v3", "default")]]
#else
#define TILEOPS_CPU_CLONES
#endif

namespace tileops::cpu {

/// Every float16 value as float, indexed by its bits: a table lookup is several times faster
/// than decoding the format with branches for subnormals and specials.
inline const std::array<float, 65536> kHalfToFloat = [] {
  std::array<float, 65536> table{};
  for (std::uint32_t bits = 0; bits < table.size(); ++bits) {
    table[bits] = half_to_float(static_cast<std::uint16_t>(bits));
  }
  return table;
}();

inline float to_float(float v) {
  return v;
}
inline float to_float(Half v) {
  return kHalfToFloat[v.bits];
}
inline float to_float(BFloat16 v) {
  return v.to_float();
}

template <class T>
T from_float(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return T::from_float(v);
  }
}

/// Calls f(T{}) with T the storage type of a float16 / bfloat16 / float32 dtype.
template <class F>
decltype(auto) dispatch_float(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::float32:
      return f(float{});
    case DType::float16:
      return f(Half{});
    case DType::bfloat16:
      return f(BFloat16{});
    default:
      throw SignatureError(fmt::format("{}: dtype {} is not supported", what, dtype_name(dtype)));
  }
}

}  // namespace tileops::cpu
