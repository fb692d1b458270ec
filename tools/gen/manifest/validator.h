// Semantic validation of the loaded manifest (digest §3.4 as far as our format goes): names,
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

/// Message text for an expression error: `where "text", column N: message`.
std::string expr_message(const std::string& where, const std::string& text, int col,
                         const std::string& msg);

}  // namespace tgen
