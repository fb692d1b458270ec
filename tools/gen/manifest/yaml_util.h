// YAML helpers: line numbers, YAML 1.2 core-schema typing of plain scalars, mapping iteration
// that reports duplicate and unknown keys, and comment blocks (docs).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "diag.h"

namespace tgen {

/// 1-based line of a node.
inline int line_of(const YAML::Node& n) {
  return static_cast<int>(n.Mark().line) + 1;
}

enum class ScalarKind : std::uint8_t { null, bool_, int_, float_, string, collection };

/// The type a YAML 1.2 core-schema reader gives the node (quoted scalars are strings).
ScalarKind scalar_kind(const YAML::Node& n);
std::optional<std::int64_t> scalar_int(const YAML::Node& n);
std::optional<double> scalar_number(const YAML::Node& n);
std::optional<bool> scalar_bool(const YAML::Node& n);
/// The text of a string scalar (or of any scalar when `any_scalar`); nullopt otherwise.
std::optional<std::string> scalar_string(const YAML::Node& n, bool any_scalar = false);

/// Short text of a node for messages: the scalar, or its flow form.
std::string node_text(const YAML::Node& n);

struct MapEntry {
  std::string key;
  int line = 0;  // the key's line
  YAML::Node value;
};

/// The entries of a mapping, in order. Reports duplicate keys, non-string keys and (when
/// `allowed` is non-empty) keys outside `allowed`, naming `what` ("signature", "input 'x'").
std::vector<MapEntry> map_entries(const YAML::Node& map, const std::string& what,
                                  const std::vector<std::string_view>& allowed, Diagnostics& diags,
                                  const std::string& file);

/// The comment block directly above `line` (1-based) and a trailing comment on it.
std::string comment_doc(const std::vector<std::string>& lines, int line, bool include_above);

}  // namespace tgen
