// Element types, spelled as the manifest spells them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tileops {

/// The element types a tensor may hold. The enumerator names are the manifest's spellings
/// (`bool_` is spelled `bool`). New dtypes are appended, so the values of the others stay.
/// float8_e5m2 is a storage dtype only (tensors, copies, DLPack, torch): no op accepts it yet.
enum class DType : std::uint8_t {
  float32,
  float16,
  bfloat16,
  float8_e4m3fn,
  int8,
  int16,
  int32,
  int64,
  uint8,
  bool_,
  float64,
  float8_e5m2,
};

/// Number of DType enumerators (for tables indexed by dtype).
inline constexpr int kNumDTypes = 12;

/// What kind of values a dtype holds; the manifest's `category(...)` primitive returns this.
enum class DTypeCategory : std::uint8_t { float_, int_, bool_ };

/// The manifest spelling: "float32", "bfloat16", "bool", ...
std::string_view dtype_name(DType dtype) noexcept;

/// Parses a manifest spelling; nullopt for anything else.
std::optional<DType> dtype_from_name(std::string_view name) noexcept;

/// Bytes per element.
constexpr std::size_t element_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::float32:
    case DType::int32:
      return 4;
    case DType::float16:
    case DType::bfloat16:
    case DType::int16:
      return 2;
    case DType::int64:
    case DType::float64:
      return 8;
    case DType::float8_e4m3fn:
    case DType::float8_e5m2:
    case DType::int8:
    case DType::uint8:
    case DType::bool_:
      return 1;
  }
  return 0;
}

constexpr DTypeCategory dtype_category(DType dtype) noexcept {
  switch (dtype) {
    case DType::float32:
    case DType::float16:
    case DType::bfloat16:
    case DType::float8_e4m3fn:
    case DType::float8_e5m2:
    case DType::float64:
      return DTypeCategory::float_;
    case DType::bool_:
      return DTypeCategory::bool_;
    default:
      return DTypeCategory::int_;
  }
}

constexpr bool is_floating(DType dtype) noexcept {
  return dtype_category(dtype) == DTypeCategory::float_;
}

/// "float", "int" or "bool", as the manifest's category() primitive spells them.
std::string_view category_name(DTypeCategory category) noexcept;

}  // namespace tileops
