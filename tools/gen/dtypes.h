// The dtype spellings of the manifest, as the generator knows them (the runtime has its own
// enum in tileops/core/dtype.h; the spellings are the enumerator names).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tgen {

struct DTypeInfo {
  std::string_view name;        // manifest spelling
  std::string_view enumerator;  // tileops::DType enumerator
  int bits;
  std::string_view category;  // "float", "int" or "bool"
};

/// Every dtype, in the runtime enum's order.
const std::vector<DTypeInfo>& all_dtypes();
const DTypeInfo* find_dtype(std::string_view name);
/// "float32, float16, ..." for messages.
std::string dtype_spellings();

}  // namespace tgen
