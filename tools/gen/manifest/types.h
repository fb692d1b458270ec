// Parameter types, index kinds and YAML values typed by them.
#pragma once

#include <optional>
#include <string>

#include <yaml-cpp/yaml.h>

#include "expr/eval.h"
#include "expr/kind.h"
#include "manifest/model.h"

namespace tgen {

/// Parses a parameter `type` ("int", "list[int]", "'sd' | 'bshd'", "float | None", ...).
bool parse_param_type(const std::string& text, ParamType& out, std::string& why);

/// Parses a `forall` kind ("Dim", "Shape", "DType[float16 | bfloat16]").
bool parse_index_kind(const std::string& text, IndexDecl& out, std::string& why);

/// The expression kind of a parameter of type `t`.
Kind kind_of(const ParamType& t);

/// A YAML value read as a value of type `t`; nullopt with `why` when it does not fit.
std::optional<EValue> value_of_type(const YAML::Node& n, const ParamType& t, std::string& why);

/// "'a' | 'b'" for an enum's literals.
std::string enum_text(const std::vector<std::string>& values);

/// Whether `s` is a C++/manifest identifier that generated code can use as a field name.
bool valid_identifier(const std::string& s, std::string& why);

}  // namespace tgen
