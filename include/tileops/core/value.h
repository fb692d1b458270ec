// Values of manifest parameters and solved indices, as the dynamic path and call records
// carry them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <typeindex>
#include <variant>
#include <vector>

#include "tileops/core/dtype.h"
#include "tileops/core/error.h"
#include "tileops/core/tensor.h"

namespace tileops {

/// `None` of the manifest (a `X | None` parameter that is absent).
struct NoneValue {
  friend bool operator==(NoneValue, NoneValue) = default;
};

/// An object passed to a constructor through a name of the class's `injected_parameters` (such
/// as FusedMoE's `experts`) on the dynamic path: shared ownership and the type it was stored as.
/// Make one with `injected<T>(object)` and read it back with `injected_as<T>`.
struct InjectedValue {
  std::shared_ptr<void> object;
  std::type_index type = typeid(void);
  std::string type_name;  ///< for messages
  friend bool operator==(const InjectedValue& a, const InjectedValue& b) {
    return a.object == b.object && a.type == b.type;
  }
};

/// One value: a parameter's value, a solved index, a workload row entry.
///   int64_t      int, Dim, Int
///   double       float
///   bool         bool
///   std::string  enum literal, open str
///   Sizes        list[int], tuple, Shape, Seq[Int]
///   DType        a dtype index or dtype parameter
///   Tensor       a construction-time tensor
///   NoneValue    an absent `X | None`
///   InjectedValue  an injected object (never a manifest parameter)
using Value = std::variant<NoneValue, bool, std::int64_t, double, std::string, Sizes, DType, Tensor,
                           InjectedValue>;

/// Parameters by manifest name (the dynamic construction path, target builders).
using ParamMap = std::map<std::string, Value, std::less<>>;

/// Human-readable form of a value, in the manifest's spelling ("[4096]", "1e-06", "'bshd'").
std::string value_repr(const Value& value);

/// The value as a number when it holds an int, float or bool; throws SignatureError otherwise.
double value_as_double(const Value& value, std::string_view what);

/// `object` as an injected value, stored as `T` (name the declared base class: a
/// `std::shared_ptr<Derived>` converts).
template <class T>
Value injected(std::shared_ptr<T> object, std::string type_name) {
  return InjectedValue{std::static_pointer_cast<void>(std::move(object)), typeid(T),
                       std::move(type_name)};
}

/// The object of injected parameter `param` of `op` when `value` holds a `T` (nullptr for None);
/// SignatureError naming the parameter otherwise.
template <class T>
std::shared_ptr<T> injected_as(const Value& value, std::string_view op, std::string_view param,
                               std::string_view expected) {
  if (std::holds_alternative<NoneValue>(value)) return nullptr;
  const auto* v = std::get_if<InjectedValue>(&value);
  if (v == nullptr || v->type != typeid(T)) {
    throw SignatureError(std::string(op) + ": injected parameter '" + std::string(param) +
                         "' must be " + std::string(expected) + " (tileops::injected<" +
                         std::string(expected) + ">), got " + value_repr(value));
  }
  return std::static_pointer_cast<T>(v->object);
}

}  // namespace tileops
