// The checker of manifest expressions: name resolution and kinds (docs/design/manifest.md,
// "Expressions").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "expr/ast.h"
#include "expr/lexer.h"

namespace tgen {

/// What a name in an expression refers to.
struct Symbol {
  enum class Cat : std::uint8_t { index, param, let, input, output, ctor_tensor, formal };
  Cat cat = Cat::index;
  Kind kind;              // the value's kind (Kind::tensor for tensors)
  bool optional = false;  // a tensor that may be absent
};

class SymbolTable {
 public:
  virtual ~SymbolTable() = default;
  virtual const Symbol* find(std::string_view name) const = 0;
};

struct CheckContext {
  bool roofline = false;  // bytes(t) is allowed
};

/// The closed set of primitives.
const std::vector<std::string_view>& primitive_names();

/// Resolves names and computes kinds, annotating `e`. False, with the first error, on failure.
bool check_expr(Expr& e, const SymbolTable& symbols, const CheckContext& ctx, ExprError& err);

/// Whether `a` and `b` can be compared with ==; the message when they cannot.
bool comparable(const Expr& a, const Expr& b, std::string& why);

}  // namespace tgen
