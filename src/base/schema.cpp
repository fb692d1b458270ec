#include "tileops/base/schema.h"

#include <algorithm>

namespace tileops {

std::vector<WorkloadCase> OpSchema::workload_cases() const {
  std::vector<WorkloadCase> cases;
  for (const auto& row : workloads) {
    for (std::size_t c = 0; c < std::max<std::size_t>(row.dtype_cases.size(), 1); ++c) {
      std::string id(row.label);
      if (c < row.dtype_cases.size()) {
        for (const auto& [name, dtype] : row.dtype_cases[c]) {
          (void)name;
          id += "-";
          id += dtype_name(dtype);
        }
      }
      cases.push_back(WorkloadCase{std::move(id), &row, c});
    }
  }
  return cases;
}

std::optional<std::size_t> OpSchema::index_position(std::string_view index_name) const {
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (indices[i].name == index_name) return i;
  }
  return std::nullopt;
}

const ParamInfo* OpSchema::find_param(std::string_view param_name) const {
  for (const auto& p : params) {
    if (p.name == param_name) return &p;
  }
  return nullptr;
}

const OpSchema* find_schema(std::string_view schema_name) {
  for (const auto* schema : all_schemas()) {
    if (schema->name == schema_name) return schema;
  }
  return nullptr;
}

}  // namespace tileops
