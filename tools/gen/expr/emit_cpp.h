// The C++ emitter of manifest expressions: a checked AST becomes C++ expression text over
// typed locals, using the helpers of tileops/base/expr_runtime.h (namespace tileops::expr, spelled
// `ex::` in generated code).
#pragma once

#include <string>
#include <string_view>

#include "expr/ast.h"

namespace tgen {

/// How the generated code spells the names an expression reads.
class CppNames {
 public:
  virtual ~CppNames() = default;
  /// The value of a name: Int → std::int64_t, Float → double, Bool → bool, Seq → Sizes,
  /// DType → tileops::DType, enum/str → something comparable with std::string_view.
  /// `payload`: the name is an `X | None` param read where present() holds (give X).
  virtual std::string value(const std::string& name, bool payload) = 0;
  /// A bool: whether the optional tensor or `X | None` param `name` is present.
  virtual std::string present(const std::string& name) = 0;
  /// bytes(t) (roofline only), as a double or an integer.
  virtual std::string bytes(const std::string& name) = 0;
};

/// C++ text of a checked expression.
std::string emit_cpp(const Expr& e, CppNames& names);

/// The C++ type of a value of kind `k` ("std::int64_t", "double", "bool", "::tileops::Sizes", ...).
std::string cpp_type(const Kind& k);

/// A C++ string literal ("..." with escapes) for arbitrary text.
std::string cpp_string(std::string_view text);

/// A C++ double literal that reads back exactly.
std::string cpp_double(double v);

/// `::tileops::DType::<enumerator>` for a dtype spelling.
std::string cpp_dtype(std::string_view name);

}  // namespace tgen
