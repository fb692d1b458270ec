// Semantic validation of the manifest, op by op (see validator.h): the order of the rule groups
// and the helpers they share. The groups are manifest/validator_*.cpp.
#include "manifest/validator.h"

#include "manifest/op_validator.h"
#include "manifest/workloads.h"

namespace tgen {

namespace validation {

// Substitutes names by expressions (type-family formals by arguments), simultaneously.
ExprPtr substitute(const Expr& e, const std::map<std::string, const Expr*>& subst) {
  if (e.op == ExprOp::name) {
    auto it = subst.find(e.sval);
    if (it != subst.end()) return it->second->clone();
  }
  ExprPtr out = e.clone();
  for (std::size_t i = 0; i < e.args.size(); ++i) {
    if (e.args[i]) out->args[i] = substitute(*e.args[i], subst);
  }
  return out;
}

OpInfo OpValidator::run() {
  const std::size_t before = diags_.size();
  if (!op_.complete) return std::move(info_);
  if (!names()) return std::move(info_);
  symbols();
  lets();
  dtype_refs();
  families();
  shapes();
  tensor_flags();
  rules();
  combos_table();
  roofline();
  peak();
  composition();
  unused_indices();
  if (diags_.size() != before) return std::move(info_);
  slots();
  construction();
  if (!combos()) return std::move(info_);
  if (diags_.size() != before) return std::move(info_);
  check_workloads(info_, diags_);
  info_.ok = diags_.size() == before;
  return std::move(info_);
}

}  // namespace validation

std::vector<OpInfo> validate(Manifest& manifest, Diagnostics& diags) {
  std::vector<OpInfo> out;
  for (auto& op : manifest.ops) out.push_back(validation::OpValidator(*op, manifest, diags).run());
  return out;
}

}  // namespace tgen
