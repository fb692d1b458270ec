#include "tileops/base/signature_call.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include <fmt/format.h>

#include "tileops/core/error.h"

namespace tileops {

double TensorRecord::bytes() const {
  double elements = 1;
  for (const auto s : shape) elements *= static_cast<double>(s);
  return elements * static_cast<double>(element_size(dtype));
}

const Value& SignatureCall::index(std::string_view name) const {
  const auto pos = schema_->index_position(name);
  if (!pos || *pos >= indices.size()) {
    throw UsageError(fmt::format("{}: the call record has no index '{}'", schema_->name, name));
  }
  return indices[*pos];
}

std::int64_t SignatureCall::dim(std::string_view name) const {
  const Value& v = index(name);
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  throw UsageError(
      fmt::format("{}: index '{}' is {}, not a Dim", schema_->name, name, value_repr(v)));
}

const Sizes& SignatureCall::shape_index(std::string_view name) const {
  const Value& v = index(name);
  if (const auto* s = std::get_if<Sizes>(&v)) return *s;
  throw UsageError(
      fmt::format("{}: index '{}' is {}, not a Shape", schema_->name, name, value_repr(v)));
}

DType SignatureCall::dtype_index(std::string_view name) const {
  const Value& v = index(name);
  if (const auto* d = std::get_if<DType>(&v)) return *d;
  throw UsageError(
      fmt::format("{}: index '{}' is {}, not a DType", schema_->name, name, value_repr(v)));
}

const TensorRecord* SignatureCall::tensor(std::string_view name) const {
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

bool SignatureCall::is_present(std::string_view input) const {
  for (std::size_t i = 0; i < schema_->inputs.size() && i < present.size(); ++i) {
    if (schema_->inputs[i].name == input) return present[i];
  }
  return false;
}

const std::vector<SignatureCallPtr>& SignatureCall::stage(std::string_view name) const {
  for (const auto& [stage_name, calls] : stages) {
    if (stage_name == name) return calls;
  }
  throw UsageError(fmt::format("{}: the call record has no stage '{}'", schema_->name, name));
}

bool SignatureCall::writes_nothing() const {
  bool any_written = false;
  for (const auto& t : tensors) {
    if (t.writes == 0) continue;
    any_written = true;
    const bool empty = std::any_of(t.shape.begin(), t.shape.end(), [](auto s) { return s == 0; });
    if (!empty) return false;
  }
  return any_written;
}

double SignatureCall::traffic_bytes() const {
  double total = 0;
  for (const auto& t : tensors) total += t.bytes() * (t.reads + t.writes);
  return total;
}

double SignatureCall::read_bytes() const {
  double total = 0;
  for (const auto& t : tensors) total += t.bytes() * t.reads;
  return total;
}

std::string SignatureCall::str() const {
  std::string out = fmt::format("{}(device={}", schema_->name, device.str());
  for (std::size_t i = 0; i < indices.size() && i < schema_->indices.size(); ++i) {
    out += fmt::format(", {}={}", schema_->indices[i].name, value_repr(indices[i]));
  }
  for (const auto& t : tensors) {
    out += fmt::format(", {}: {} [{}]", t.name, dtype_name(t.dtype), fmt::join(t.shape, ", "));
  }
  return out + ")";
}

}  // namespace tileops
