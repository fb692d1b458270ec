#include "tileops/core/value.h"

#include <fmt/format.h>

#include "tileops/core/error.h"

namespace tileops {

std::string value_repr(const Value& value) {
  struct Visitor {
    std::string operator()(NoneValue) const { return "None"; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(std::int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return fmt::format("{}", d); }
    std::string operator()(const std::string& s) const { return "'" + s + "'"; }
    std::string operator()(const Sizes& s) const { return fmt::format("[{}]", fmt::join(s, ", ")); }
    std::string operator()(DType t) const { return std::string(dtype_name(t)); }
    std::string operator()(const Tensor& t) const { return t.defined() ? t.str() : "None"; }
    std::string operator()(const InjectedValue& v) const {
      return fmt::format("<injected {}>", v.object ? v.type_name : "null");
    }
  };
  return std::visit(Visitor{}, value);
}

double value_as_double(const Value& value, std::string_view what) {
  if (const auto* i = std::get_if<std::int64_t>(&value)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* b = std::get_if<bool>(&value)) return *b ? 1.0 : 0.0;
  throw SignatureError(fmt::format("{}: expected a number, got {}", what, value_repr(value)));
}

}  // namespace tileops
