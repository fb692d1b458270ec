// The solve-order planner (docs/design/manifest.md, "Solve order"): fixes, at build time, the order
// in which a call's dtypes and axes solve indices or are checked, independent of declaration order.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "manifest/analysis.h"

namespace tgen {

struct PlanInput {
  PlanTensor tensor;
  const std::vector<ShapeItem>* axes = nullptr;
  DTypeRef dtype;
};

/// Plans unification over `inputs` (in order: construction-time tensors first, then inputs),
/// starting from the names in `known`; lets become known as soon as what they read is.
/// `stuck` receives the index names that appear in an axis no step could process.
/// `lets` gives the let expressions to use (a branch's simplified ones); null: the declared ones.
Plan make_plan(const OpInfo& info, const std::vector<PlanInput>& inputs,
               std::set<std::string> known, std::set<std::string>& stuck,
               const std::map<std::string, ExprPtr>* lets = nullptr);

/// Names an expression reads that are symbols of the op and not in `known`.
std::vector<std::string> unknown_names(const Expr& e, const OpInfo& info,
                                       const std::set<std::string>& known);

/// If `e` is linear in the index `m` (a * m + rest, m nowhere else), the coefficient and the
/// rest (null rest = 0), as checked Int expressions.
bool linear_in(const Expr& e, const std::string& m, ExprPtr& a, ExprPtr& rest);

}  // namespace tgen
