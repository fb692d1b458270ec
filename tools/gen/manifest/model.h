// The manifest as data: one OpDecl per entry, as loaded from YAML (structure checked), with
// expressions and shapes parsed. Semantic checks (names, kinds, solvability, workloads) are the
// validator's (validator.h); it fills OpInfo.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "expr/ast.h"
#include "expr/eval.h"
#include "expr/parser.h"

namespace tgen {

/// An expression of the manifest: its text, where it is, and its AST (null when unparsable;
/// the parse error has been reported).
struct ExprSrc {
  std::string text;
  int line = 0;
  std::string where;  // "shape_rules[0]", "let 'n'", "roofline.flops"
  ExprPtr ast;
};

/// A shape declaration with its AST (`ok` false when unparsable; reported).
struct ShapeSrc {
  std::string text;
  int line = 0;
  std::string where;
  bool ok = false;
  ShapeAst ast;
};

/// The `type` of a parameter.
struct ParamType {
  enum class Tag : std::uint8_t {
    int_,
    float_,
    bool_,
    str,
    int_list,
    enum_,
    dtype,
    tensor,
    optional
  };
  Tag tag = Tag::int_;
  std::vector<std::string> values;         // enum_: the literals; dtype: the allowed dtypes
  std::shared_ptr<const ParamType> inner;  // optional: the payload type
  int tuple_len = -1;                      // int_list from tuple[int, int]: the fixed length
  std::string text;                        // as written
};

struct IndexDecl {
  enum class K : std::uint8_t { dim, shape, dtype };
  std::string name;
  K k = K::dim;
  std::vector<std::string> dtypes;  // dtype: the allowed dtypes
  std::string kind_text;            // "Dim", "Shape", "DType[float16 | bfloat16]"
  int line = 0;
};

struct ParamDecl {
  std::string name;
  int line = 0;
  ParamType type;
  bool type_ok = false;
  bool has_default = false;
  EValue default_value;
  int default_line = 0;
  bool kw_only = false;
  std::string doc;
  // A construction-time tensor (type torch.Tensor, with dtype and shape).
  bool is_tensor = false;
  std::string dtype;
  int dtype_line = 0;
  ShapeSrc shape;
  bool optional = false;
};

struct TensorDecl {
  std::string name;
  int line = 0;
  bool output = false;
  std::string dtype;
  int dtype_line = 0;
  ShapeSrc shape;
  bool optional = false;
  bool mutated = false;
  bool contiguous = false;
  bool buffer_out = false;
};

struct FamilyFormal {
  std::string name;
  std::string type_text;
  Kind kind;  // dim, bool_ or enum_
  int line = 0;
};

struct FamilyCase {
  EValue when;
  int line = 0;
  ShapeSrc is;
};

struct FamilyDecl {
  std::string name;
  int line = 0;
  std::vector<FamilyFormal> formals;
  std::string match;
  int match_line = 0;
  std::vector<FamilyCase> cases;
  bool ok = false;  // structurally complete
};

struct LetDecl {
  std::string name;
  ExprSrc expr;
};

/// A row of dtype_combos or one dtype case of a workload row: name → dtype spelling.
struct DTypeRow {
  int line = 0;
  std::vector<std::pair<std::string, std::string>> cells;
};

struct RowEntry {
  std::string name;
  int line = 0;
  YAML::Node node;
};

struct WorkloadDecl {
  int line = 0;
  std::string label;
  int label_line = 0;
  std::vector<RowEntry> values;  // every key but label, some and dtype_cases
  std::vector<std::pair<std::string, int>> some;
  bool has_dtype_cases = false;
  std::vector<DTypeRow> dtype_cases;
};

/// roofline.peak: the key of the hardware profile's peak the roofline's flops run at
/// ("tensor_core.bf16"): one key, or a key per dtype of one DType index of the call (`index`,
/// `by_dtype`), `key` then serving the other dtypes and the time before any call.
struct PeakDecl {
  std::string key;
  std::string index;
  std::vector<std::pair<std::string, std::string>> by_dtype;  // dtype -> key
  int line = 0;
};

struct StageDecl {
  std::string name;
  std::string op;
  std::string kernel;
  bool optional = false;
  int line = 0;
};

struct OpDecl {
  std::string name;
  std::string file;         // path of the YAML file (diagnostics)
  std::string file_family;  // the file's stem
  std::string source;       // "manifest/norm.yaml:12"
  int line = 0;
  std::string doc;
  std::string family;
  std::string status;
  std::string ref_api;

  std::vector<IndexDecl> forall;
  std::vector<ParamDecl> params;
  std::vector<TensorDecl> inputs;
  std::vector<TensorDecl> outputs;
  std::vector<FamilyDecl> families;
  std::vector<LetDecl> lets;
  std::vector<ExprSrc> shape_rules;
  std::vector<DTypeRow> dtype_combos;

  ExprSrc flops;
  bool has_bytes = false;
  ExprSrc bytes;
  bool has_peak = false;
  PeakDecl peak;

  std::vector<WorkloadDecl> workloads;

  bool has_composition = false;
  int composition_line = 0;
  std::vector<StageDecl> stages;

  /// False when a part that later checks depend on is missing or broken (already reported):
  /// semantic checks and code generation skip the op.
  bool complete = true;
};

struct Manifest {
  std::vector<std::unique_ptr<OpDecl>> ops;  // file order, then entry order
  std::vector<std::string> families;         // file stems, sorted
  std::vector<YAML::Node> documents;         // kept alive for RowEntry nodes
};

}  // namespace tgen
