// Element conversions of the copy engine, shared by the CPU (tensor_copy.cpp) and CUDA
// (tensor_cuda.cu) paths. Internal to src/core.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tileops/core/dtype.h"
#include "tileops/core/half.h"

namespace tileops::detail {

/// Storage of one bool element (a byte; any non-zero byte reads as true).
struct BoolByte {
  std::uint8_t value;
};

template <class T>
struct TypeTag {
  using type = T;
};

template <class T>
inline constexpr bool kIsFloatStorage =
    std::is_same_v<T, double> || std::is_same_v<T, float> || std::is_same_v<T, Half> ||
    std::is_same_v<T, BFloat16> || std::is_same_v<T, Float8E4M3FN> || std::is_same_v<T, Float8E5M2>;

template <class T>
inline constexpr bool kIsIntStorage = std::is_integral_v<T>;

/// Whether copy_ converts S elements to D elements (the rule of Tensor::copy_).
template <class D, class S>
inline constexpr bool kConvertible = std::is_same_v<D, S> || kIsFloatStorage<D> ||
                                     (kIsIntStorage<D> && kIsIntStorage<S>);

template <class S>
TILEOPS_HOST_DEVICE inline float to_f32(S v) noexcept {
  if constexpr (std::is_same_v<S, float>) {
    return v;
  } else if constexpr (std::is_same_v<S, Half>) {
    return half_to_float(v.bits);
  } else if constexpr (std::is_same_v<S, BFloat16>) {
    return bfloat16_to_float(v.bits);
  } else if constexpr (std::is_same_v<S, Float8E4M3FN>) {
    return fp8e4m3_to_float(v.bits);
  } else if constexpr (std::is_same_v<S, Float8E5M2>) {
    return fp8e5m2_to_float(v.bits);
  } else if constexpr (std::is_same_v<S, BoolByte>) {
    return v.value != 0 ? 1.0f : 0.0f;
  } else {
    return static_cast<float>(v);  // integers: rounded to nearest
  }
}

template <class D>
TILEOPS_HOST_DEVICE inline D from_f32(float v) noexcept {
  if constexpr (std::is_same_v<D, float>) {
    return v;
  } else if constexpr (std::is_same_v<D, Half>) {
    return Half{float_to_half(v)};
  } else if constexpr (std::is_same_v<D, BFloat16>) {
    return BFloat16{float_to_bfloat16(v)};
  } else if constexpr (std::is_same_v<D, Float8E4M3FN>) {
    return Float8E4M3FN{float_to_fp8e4m3(v)};
  } else {
    static_assert(std::is_same_v<D, Float8E5M2>);
    return Float8E5M2{float_to_fp8e5m2(v)};
  }
}

/// A float element as a double: exact for every float dtype; integers rounded to nearest.
template <class S>
TILEOPS_HOST_DEVICE inline double to_f64(S v) noexcept {
  if constexpr (std::is_same_v<S, double>) {
    return v;
  } else if constexpr (kIsFloatStorage<S> || std::is_same_v<S, BoolByte>) {
    return static_cast<double>(to_f32(v));
  } else {
    return static_cast<double>(v);
  }
}

/// A double as a float element: float64 keeps it, float32 rounds once; the narrower ones round
/// through float32 (a double rounding that can differ from a direct one in the last bit).
template <class D>
TILEOPS_HOST_DEVICE inline D from_f64(double v) noexcept {
  if constexpr (std::is_same_v<D, double>) {
    return v;
  } else {
    return from_f32<D>(static_cast<float>(v));
  }
}

/// One element converted; only for kConvertible<D, S>.
template <class D, class S>
TILEOPS_HOST_DEVICE inline D convert_element(S v) noexcept {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else if constexpr (std::is_same_v<D, double> || std::is_same_v<S, double>) {
    return from_f64<D>(to_f64(v));
  } else if constexpr (kIsFloatStorage<D>) {
    return from_f32<D>(to_f32(v));
  } else {
    return static_cast<D>(v);  // int -> int: modulo 2^bits
  }
}

/// Calls f(TypeTag<storage type>{}) for the storage type of dtype.
template <class F>
inline void visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::float32:
      return f(TypeTag<float>{});
    case DType::float16:
      return f(TypeTag<Half>{});
    case DType::bfloat16:
      return f(TypeTag<BFloat16>{});
    case DType::float8_e4m3fn:
      return f(TypeTag<Float8E4M3FN>{});
    case DType::int8:
      return f(TypeTag<std::int8_t>{});
    case DType::int16:
      return f(TypeTag<std::int16_t>{});
    case DType::int32:
      return f(TypeTag<std::int32_t>{});
    case DType::int64:
      return f(TypeTag<std::int64_t>{});
    case DType::uint8:
      return f(TypeTag<std::uint8_t>{});
    case DType::bool_:
      return f(TypeTag<BoolByte>{});
    case DType::float64:
      return f(TypeTag<double>{});
    case DType::float8_e5m2:
      return f(TypeTag<Float8E5M2>{});
  }
}

/// Calls f(TypeTag<unsigned integer of that many bytes>{}) for 1, 2, 4 or 8 bytes.
template <class F>
inline void visit_element_size(std::size_t bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(TypeTag<std::uint8_t>{});
    case 2:
      return f(TypeTag<std::uint16_t>{});
    case 4:
      return f(TypeTag<std::uint32_t>{});
    default:
      return f(TypeTag<std::uint64_t>{});
  }
}

}  // namespace tileops::detail
