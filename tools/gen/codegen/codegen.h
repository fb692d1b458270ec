// The code emitter: per family, a header (Params structs, generated base classes) and a source
// (schema data, construction check, signature check, parameter maps, roofline, workload
// instantiation); plus the registry of every schema.
#pragma once

#include <string>
#include <vector>

#include "manifest/analysis.h"
#include "manifest/model.h"

namespace tgen {

struct GeneratedFile {
  std::string path;  // relative to the output folder
  std::string content;
};

/// Every generated file for a validated manifest (all OpInfo::ok).
std::vector<GeneratedFile> generate(const Manifest& manifest, const std::vector<OpInfo>& infos);

/// The Python package's generated files and the torch extension's registrations, for the ops
/// given (codegen/emit_python.cpp); paths start with "python/".
std::vector<GeneratedFile> generate_python(const std::vector<const OpInfo*>& ops);

/// Per-op pieces (codegen/emit_op.cpp).
std::string emit_op_header(const OpInfo& info);
std::string emit_op_source(const OpInfo& info);

}  // namespace tgen
