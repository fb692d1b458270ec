// The AST of manifest expressions, with source columns (1-based, inside the expression text).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "expr/kind.h"

namespace tgen {

enum class ExprOp : std::uint8_t {
  int_lit,
  float_lit,
  bool_lit,
  none_lit,
  str_lit,
  name,
  neg,
  pos,
  not_,
  add,
  sub,
  mul,
  div,  // '/': parsed so that the checker can say what to write instead
  floordiv,
  mod,
  eq,
  ne,
  lt,
  le,
  gt,
  ge,
  and_,
  or_,
  in,
  not_in,
  cond,   // args: [condition, then, else]
  index,  // args: [seq, index]
  slice,  // args: [seq, lo or null, hi or null]
  tuple,  // parenthesised tuple literal
  list,   // bracketed list literal
  call,   // sval: the primitive; args: the arguments
  attr,   // sval: the attribute; args: [object]
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprOp op = ExprOp::none_lit;
  int col = 1;
  std::int64_t ival = 0;
  double fval = 0;
  bool bval = false;
  std::string sval;           // name, string literal, primitive, attribute
  std::vector<ExprPtr> args;  // children (slice bounds may be null)

  // Set by the checker.
  Kind kind;
  bool narrowed = false;       // a name of kind Maybe[X] read as X (present() holds here)
  bool dtype_literal = false;  // a name that spells a dtype (float16, int32, ...)

  ExprPtr clone() const;
};

/// Python-like source text of an expression (normalised spacing, minimal parentheses).
std::string to_source(const Expr& e);

/// The precedence level of an operator node (higher binds tighter); atoms are the highest.
int precedence(const Expr& e);

/// Names read by the expression (in order of first appearance, each once). Call names and
/// attribute names are not included; dtype literals are.
std::vector<std::string> names_read(const Expr& e);

}  // namespace tgen
