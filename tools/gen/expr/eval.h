// The evaluator of manifest expressions over build-time values (Python semantics: floor
// division and modulo take the divisor's sign, indices may be negative, slices clamp).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "expr/ast.h"

namespace tgen {

using Seq = std::vector<std::int64_t>;

struct NoneValue {
  friend bool operator==(const NoneValue&, const NoneValue&) = default;
};
struct DTypeValue {
  std::string name;
  friend bool operator==(const DTypeValue&, const DTypeValue&) = default;
};
struct EValue;
struct TupleValue {
  std::vector<EValue> items;
};

struct EValue {
  std::variant<NoneValue, bool, std::int64_t, double, std::string, Seq, DTypeValue, TupleValue> v;

  // Implicit on purpose: values read like literals.
  EValue() = default;
  EValue(NoneValue x) : v(x) {}
  EValue(bool x) : v(x) {}
  EValue(std::int64_t x) : v(x) {}
  EValue(int x) : v(std::int64_t{x}) {}
  EValue(double x) : v(x) {}
  EValue(std::string x) : v(std::move(x)) {}
  EValue(const char* x) : v(std::string(x)) {}
  EValue(Seq x) : v(std::move(x)) {}
  EValue(DTypeValue x) : v(std::move(x)) {}
  EValue(TupleValue x) : v(std::move(x)) {}

  template <class T>
  bool is() const {
    return std::holds_alternative<T>(v);
  }
  template <class T>
  const T& as() const {
    return std::get<T>(v);
  }
};

bool operator==(const EValue& a, const EValue& b);

/// Python-like text of a value: 3, 1e-06, True, 'sd', [4096, 2], float16, None.
std::string repr(const EValue& v);

/// An evaluation failure (division by zero, index out of range, overflow, a None).
struct EvalError : std::runtime_error {
  EvalError(int column, const std::string& message) : std::runtime_error(message), col(column) {}
  int col;
};

/// A name whose value is not known in this environment (partial evaluation).
struct NotKnown : std::runtime_error {
  explicit NotKnown(const std::string& n) : std::runtime_error("not known: " + n), name(n) {}
  std::string name;
};

class EvalEnv {
 public:
  virtual ~EvalEnv() = default;
  /// The value of a name (index, param, let); null when not known (eval throws NotKnown).
  virtual const EValue* lookup(std::string_view name) const = 0;
  /// Whether an optional tensor is present; nullopt when not known.
  virtual std::optional<bool> tensor_present(std::string_view name) const = 0;
  /// bytes(t) in the roofline; nullopt when not known.
  virtual std::optional<std::int64_t> tensor_bytes(std::string_view) const { return std::nullopt; }
};

/// Evaluates a checked expression. Throws EvalError or NotKnown.
EValue eval(const Expr& e, const EvalEnv& env);

/// Python floor division / modulo / ceil_div on int64 (throw EvalError with `col`).
std::int64_t py_floordiv(std::int64_t a, std::int64_t b, int col);
std::int64_t py_mod(std::int64_t a, std::int64_t b, int col);

}  // namespace tgen
