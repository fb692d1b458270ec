// Partial evaluation: folds conditionals, `and`/`or` and present() whose outcome the
// environment decides (type-family branch, tensor presence), so that a branch's expressions
// read only what that branch uses.
#pragma once

#include "expr/ast.h"
#include "expr/eval.h"

namespace tgen {

/// A copy of the checked expression `e` with every decided test folded. Kinds are kept.
ExprPtr simplify(const Expr& e, const EvalEnv& env);

}  // namespace tgen
