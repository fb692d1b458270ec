#include "dtypes.h"

namespace tgen {

const std::vector<DTypeInfo>& all_dtypes() {
  static const std::vector<DTypeInfo> table = {
      {"float32", "float32", 32, "float"},
      {"float16", "float16", 16, "float"},
      {"bfloat16", "bfloat16", 16, "float"},
      {"float8_e4m3fn", "float8_e4m3fn", 8, "float"},
      {"int8", "int8", 8, "int"},
      {"int16", "int16", 16, "int"},
      {"int32", "int32", 32, "int"},
      {"int64", "int64", 64, "int"},
      {"uint8", "uint8", 8, "int"},
      {"bool", "bool_", 8, "bool"},
      {"float64", "float64", 64, "float"},
      {"float8_e5m2", "float8_e5m2", 8, "float"},
  };
  return table;
}

const DTypeInfo* find_dtype(std::string_view name) {
  for (const auto& d : all_dtypes()) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

std::string dtype_spellings() {
  std::string out;
  for (const auto& d : all_dtypes()) {
    if (!out.empty()) out += ", ";
    out += d.name;
  }
  return out;
}

}  // namespace tgen
