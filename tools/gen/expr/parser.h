// A precedence-climbing parser for manifest expressions and shape declarations.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "expr/ast.h"
#include "expr/lexer.h"

namespace tgen {

/// Parses one expression. Null, with `err`, on a syntax error.
ExprPtr parse_expr(std::string_view src, ExprError& err);

/// One axis of a bracketed shape: an integer expression, or `*seq` (a splice).
struct ShapeItem {
  bool splice = false;
  ExprPtr expr;
};

/// A shape declaration: `[axis, ...]` (`[]` is rank 0) or a type-family application
/// `Fam[arg, ...]`.
struct ShapeAst {
  bool is_family = false;
  std::string family;  // is_family
  int family_col = 1;
  std::vector<ExprPtr> family_args;  // is_family
  std::vector<ShapeItem> items;      // !is_family
};

/// Parses a shape declaration. False, with `err`, on a syntax error.
bool parse_shape(std::string_view src, ShapeAst& out, ExprError& err);

/// The source text of a shape (normalised).
std::string to_source(const ShapeAst& shape);

}  // namespace tgen
