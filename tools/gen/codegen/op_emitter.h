// Internal to the op emitter: the class that writes one op's generated C++, split by section
// over codegen/emit_op*.cpp, and the text helpers those files share.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/code.h"
#include "expr/emit_cpp.h"
#include "manifest/analysis.h"
#include "manifest/model.h"
#include "manifest/planner.h"

namespace tgen::op_emit {

using Tag = Kind::Tag;
std::string q(std::string_view s);
// C++ type of a param field.
std::string field_type(const ParamType& t);
// C++ text of a build-time value as a value of param type `t` (field initialiser).
std::string value_cpp(const EValue& v);
// A build-time value as a tileops::Value.
std::string value_as_value(const EValue& v);
// C++ type a slot's value has inside tileops::Value.
std::string slot_type(const Kind& k);
std::string dtype_list(const std::vector<std::string>& dtypes);
std::string join(const std::vector<std::string>& v, const std::string& sep);

class OpEmitter {
 public:
  explicit OpEmitter(const OpInfo& info) : info_(info), op_(*info.decl), name_(op_.name) {}
  std::string header();  // the family header's part for this op
  std::string source();  // the family source's part for this op

 private:
  // ---- the header: Params, traits, base class (emit_op_class.cpp) ----
  void doc_comment(Code& c, const std::string& doc, const std::string& prefix = "/// ");
  void params_struct(Code& c);
  const TensorDecl* buffer_output(int* index = nullptr) const;
  // Op::dtype() for an op that takes a dtype at construction: the parameter named `dtype`, else
  // the first `torch.dtype` (or `torch.dtype | None`) parameter.
  void dtype_override(Code& c);
  // The typed solved indices handed to forward (`XIndices`): the forall indices and lets of the
  // call record, typed; an index that some branch leaves unsolved (or of a `X | None` kind) is
  // optional. The record and its device travel with them, and the struct converts to the record
  // (so a forward taking `const SignatureCall&` still compiles).
  void indices_struct(Code& c);
  // The names of the index slots every branch solves.
  std::set<std::string> solved_on_every_branch();
  // The data TypedOp reads (include/tileops/base/typed_op.h): the counts of the signature and
  // the generated functions of this entry.
  void traits_struct(Code& c);
  // What differs per op on top of TypedOp: the typed call operator (inputs by name, optional
  // ones defaulted), the dtype() override and the dispatch to Derived::forward. The dispatch
  // stays here, not in TypedOp, so that an op class may keep `forward` private and befriend
  // only its generated base.
  void base_class(Code& c);

  // ---- the OpSchema and the parameter maps (emit_op_schema.cpp) ----
  void schema(Code& c);
  void param_values(Code& c);
  void params_from_map(Code& c);

  // ---- plan steps and the construction check (emit_op_steps.cpp) ----
  struct TensorLocal {
    std::string t, s, n, d;  // tensor, sizes, rank, Decl
  };
  TensorLocal local(const PlanTensor& t) const;
  std::string pos_text(const AxisPos& p, const TensorLocal& tl, CppNames& names);
  static bool uses_rank(const Plan& plan, int t);
  std::string dtype_text(const PlanTensor& t) const;
  const DTypeRef& dtype_ref(const PlanTensor& t) const;
  std::string dtype_value(const DTypeRef& d, CppNames& names);
  void let_line(Code& c, const std::string& name, const Expr& e, CppNames& names);
  // Emits a plan's steps; `known` grows as steps solve names (for the name spelling).
  void steps(Code& c, const Plan& plan, std::set<std::string>& known);
  // The check of one shape rule: the rule text and the values of the names it reads.
  void rule_check(Code& c, const Expr& rule, const std::string& text, CppNames& names);
  static std::string wrap(const std::string& e) { return "(" + e + ")"; }
  void check_params(Code& c);

  // ---- the signature check (emit_op_call.cpp) ----
  std::string combo_condition(const Combo& cb) const;
  void shape_build(Code& c, const std::string& var, const std::vector<ShapeItem>& axes,
                   const std::string& output, const std::string& decl, CppNames& names);
  void combo_body(Code& c, const Combo& cb);
  void dtype_combos(Code& c, const std::set<std::string>& known, CppNames& names);
  void check_call(Code& c);

  // ---- roofline and workload instantiation (emit_op_workloads.cpp) ----
  void eval_roofline(Code& c);
  // roofline.peak as the schema's roof_key function.
  void roof_key(Code& c);
  // A workload row as a runnable case: construction-time tensors are random in [1, 2), seeded
  // from the label, so a row gives the same tensors on every run and machine.
  void instantiate(Code& c);

  const OpInfo& info_;
  const OpDecl& op_;
  std::string name_;
};

}  // namespace tgen::op_emit
