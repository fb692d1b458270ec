// Values of manifest parameters and solved indices, as the dynamic path and call records
// carry them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tileops/core/dtype.h"
#include "tileops/core/tensor.h"

namespace tileops {

/// `None` of the manifest (a `X | None` parameter that is absent).
struct NoneValue {
  friend bool operator==(NoneValue, NoneValue) = default;
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
using Value = std::variant<NoneValue, bool, std::int64_t, double, std::string, Sizes, DType, Tensor>;

/// Parameters by manifest name (the dynamic construction path, target builders).
using ParamMap = std::map<std::string, Value, std::less<>>;

/// Human-readable form of a value, in the manifest's spelling ("[4096]", "1e-06", "'bshd'").
std::string value_repr(const Value& value);

/// The value as a number when it holds an int, float or bool; throws SignatureError otherwise.
double value_as_double(const Value& value, std::string_view what);

}  // namespace tileops
