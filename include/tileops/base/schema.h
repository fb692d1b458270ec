// The manifest entry of an op as data, emitted by tileops-gen, for introspection (the CLI's
// list/describe/bench, the dynamic path, target builders). Nothing here is parsed at call time:
// expressions are kept as text for display only; their checks are generated C++.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tileops/core/value.h"

namespace tileops {

class SignatureCall;

/// One `forall` index, construction parameter in an index position, or `let`.
struct IndexInfo {
  std::string_view name;
  std::string_view kind;  ///< "Dim", "Shape", "DType[float16 | bfloat16]", "let", "param", ...
};

/// One entry of `signature.params`.
struct ParamInfo {
  std::string_view name;
  std::string_view type;  ///< the manifest `type` text, e.g. "float", "list[int]", "'sd' | 'bshd'"
  bool has_default = false;
  Value default_value;  ///< valid when has_default
  bool kw_only = false;
  bool is_tensor = false;         ///< a construction-time tensor (has dtype and shape)
  std::string_view tensor_dtype;  ///< for construction-time tensors
  std::string_view tensor_shape;  ///< for construction-time tensors
  bool optional = false;          ///< construction-time tensor that may be absent
  std::string_view doc;           ///< the entry's comment for this parameter, if any
};

/// One entry of `signature.inputs` or `signature.outputs`.
struct TensorDecl {
  std::string_view name;
  std::string_view dtype;  ///< dtype expression text
  std::string_view shape;  ///< shape text, e.g. "[*S, *normalized_shape]"
  bool optional = false;
  bool mutated = false;
  bool contiguous = false;
  bool buffer_out = false;  ///< outputs only: `buffer: out`
};

/// One `composition` stage.
struct StageInfo {
  std::string_view name;
  std::string_view op;      ///< sub-op class name (an `op` stage), or empty
  std::string_view kernel;  ///< kernel key (a `kernel` stage), or empty
  bool optional = false;
};

/// One workload row: the values it gives (indices and parameters), the optional inputs it
/// passes, and its dtype cases (each an assignment of the DType indices).
struct WorkloadRow {
  std::string_view label;
  std::vector<std::pair<std::string_view, Value>> values;
  std::vector<std::string_view> some;
  std::vector<std::vector<std::pair<std::string_view, DType>>> dtype_cases;
};

/// A concrete case of a workload row: everything needed to build one call.
struct WorkloadCase {
  std::string id;  ///< label + dtype values, joined with '-'
  const WorkloadRow* row = nullptr;
  std::size_t dtype_case = 0;
};

/// What a workload case instantiates to: the construction parameters and, per manifest input,
/// its dtype and shape (nullopt for an omitted optional input).
struct InstantiatedCase {
  ParamMap params;
  struct InputSpec {
    DType dtype;
    Sizes shape;
  };
  std::vector<std::optional<InputSpec>> inputs;
};

/// (flops, bytes) of one call.
struct Roofline {
  double flops = 0;
  double bytes = 0;
};

/// The manifest entry of one op, plus the generated functions that need no op instance.
struct OpSchema {
  std::string_view name;
  std::string_view family;
  std::string_view status;  ///< "implemented" or "spec-only"
  std::string_view ref_api;
  std::string_view doc;            ///< the comment block above the entry
  std::string_view source;         ///< "manifest/norm.yaml:12"
  std::vector<IndexInfo> indices;  ///< positional: SignatureCall::indices follows this order
  std::vector<ParamInfo> params;
  std::vector<TensorDecl> inputs;
  std::vector<TensorDecl> outputs;
  std::vector<std::pair<std::string_view, std::string_view>> lets;  ///< name, expression
  std::vector<std::string_view> shape_rules;
  std::vector<std::vector<std::pair<std::string_view, DType>>> dtype_combos;
  std::string_view roofline_flops;
  std::string_view roofline_bytes;  ///< empty: derived from the effect rules
  std::vector<WorkloadRow> workloads;
  std::vector<StageInfo> composition;
  /// The compile boundary: one PyTorch custom operator per effect branch ("tileops::<family>_
  /// <snake name>[_writes_<input>][_out]"), with its schema string. Empty exactly when the entry
  /// has no call-time tensor input or has a composition (then it is no node under torch.compile).
  std::vector<std::string_view> compile_op_names;
  std::vector<std::string_view> compile_op_schemas;

  /// Evaluates the roofline over a call record (generated).
  Roofline (*eval_roofline)(const SignatureCall& call) = nullptr;
  /// The hardware-profile key of the peak the roofline runs at, for a call record or, before
  /// any call, nullptr (generated from roofline.peak; nullptr when the entry declares none).
  std::string (*roof_key)(const SignatureCall* call) = nullptr;
  /// Instantiates a workload case (generated): parameters and input specs.
  InstantiatedCase (*instantiate)(const WorkloadRow& row, std::size_t dtype_case) = nullptr;

  /// Every case of every workload row, with its case id.
  std::vector<WorkloadCase> workload_cases() const;
  /// Position of an index by name; nullopt when unknown.
  std::optional<std::size_t> index_position(std::string_view name) const;
  const ParamInfo* find_param(std::string_view name) const;
};

/// Every op schema the manifest declares, by name (generated registry; sorted by name).
const std::vector<const OpSchema*>& all_schemas();
const OpSchema* find_schema(std::string_view name);

}  // namespace tileops
