// Loads manifest/*.yaml into the model, checking structure: mappings, required and unknown
// fields at every level, scalar types of flags, parsable types, expressions and shapes.
#pragma once

#include <string>
#include <vector>

#include "diag.h"
#include "manifest/model.h"

namespace tgen {

/// Loads every file (sorted by name). `source_prefix` prefixes OpDecl::source
/// ("manifest/" gives "manifest/norm.yaml:12").
Manifest load_manifest(const std::vector<std::string>& files, const std::string& source_prefix,
                       Diagnostics& diags);

}  // namespace tgen
