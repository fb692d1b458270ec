// Semantic validation of the loaded manifest (docs/design/manifest.md): names,
// kinds of every expression, type families, lets, rules, dtype_combos, roofline, composition,
// solvability of every index on every branch, and the workload rows. Fills one OpInfo per op.
#pragma once

#include <vector>

#include "diag.h"
#include "manifest/analysis.h"
#include "manifest/model.h"

namespace tgen {

/// Validates every op; OpInfo::ok tells which ops are sound enough for code generation.
std::vector<OpInfo> validate(Manifest& manifest, Diagnostics& diags);

}  // namespace tgen
