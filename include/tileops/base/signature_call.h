// The record of one call, produced by the generated signature check (step 2 of a call) and kept
// as the op's `last_call` once the call completes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tileops/base/schema.h"
#include "tileops/core/device.h"
#include "tileops/core/value.h"

namespace tileops {

/// One tensor of the call: a present input, an output, or a construction-time tensor.
struct TensorRecord {
  std::string_view name;
  Sizes shape;
  DType dtype = DType::float32;
  std::uint8_t reads = 0;   ///< traffic: times read (effect rules)
  std::uint8_t writes = 0;  ///< traffic: times written
  enum class Role : std::uint8_t { input, output, construction } role = Role::input;
  /// Bytes of the tensor: prod(shape) * element size.
  double bytes() const;
};

class SignatureCall;
using SignatureCallPtr = std::shared_ptr<const SignatureCall>;

/// A call record. Immutable once it becomes an op's last_call.
class SignatureCall {
 public:
  explicit SignatureCall(const OpSchema* schema = nullptr) : schema_(schema) {}

  const OpSchema& schema() const { return *schema_; }

  /// Solved indices, positional (OpSchema::indices order): forall indices, construction
  /// parameters used in index positions, lets.
  std::vector<Value> indices;
  /// The call device settled by the check.
  Device device;
  /// Present inputs (manifest order), then outputs, then construction-time tensors.
  std::vector<TensorRecord> tensors;
  /// Positions (in the manifest inputs) of the inputs this call writes.
  std::vector<int> written;
  /// Whether the caller passed `out`.
  bool has_out = false;
  /// Which manifest inputs are present (manifest order).
  std::vector<bool> present;
  /// Per stage of the composition (stage order), the completed sub-op calls, in completion order.
  std::vector<std::pair<std::string_view, std::vector<SignatureCallPtr>>> stages;

  // Lookups by name, for tests, the CLI and roofline functions written by hand. Slow (linear).
  const Value& index(std::string_view name) const;
  std::int64_t dim(std::string_view name) const;
  const Sizes& shape_index(std::string_view name) const;
  DType dtype_index(std::string_view name) const;
  const TensorRecord* tensor(std::string_view name) const;
  bool is_present(std::string_view input) const;
  const std::vector<SignatureCallPtr>& stage(std::string_view name) const;

  /// Whether any tensor is written, and whether every written tensor holds no element.
  bool writes_nothing() const;

  /// Sum of bytes(t) * (reads + writes) over the tensors: the derived roofline bytes.
  double traffic_bytes() const;
  /// Sum of bytes(t) * reads.
  double read_bytes() const;

  std::string str() const;

 private:
  const OpSchema* schema_;
};

}  // namespace tileops
