#include "tileops/core/dtype.h"

#include <array>

namespace tileops {

namespace {

constexpr std::array<std::string_view, kNumDTypes> kDTypeNames = {
    "float32", "float16", "bfloat16", "float8_e4m3fn", "int8",    "int16",
    "int32",   "int64",   "uint8",    "bool",          "float64", "float8_e5m2",
};

static_assert(static_cast<int>(DType::float8_e5m2) + 1 == kNumDTypes);

}  // namespace

std::string_view dtype_name(DType dtype) noexcept {
  const auto i = static_cast<std::size_t>(dtype);
  return i < kDTypeNames.size() ? kDTypeNames[i] : std::string_view("<invalid dtype>");
}

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  for (std::size_t i = 0; i < kDTypeNames.size(); ++i) {
    if (kDTypeNames[i] == name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

std::string_view category_name(DTypeCategory category) noexcept {
  switch (category) {
    case DTypeCategory::float_:
      return "float";
    case DTypeCategory::int_:
      return "int";
    case DTypeCategory::bool_:
      return "bool";
  }
  return "<invalid category>";
}

}  // namespace tileops
