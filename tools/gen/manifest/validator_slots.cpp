// The positional index slots of SignatureCall and what construction can solve and check.

#include "manifest/op_validator.h"
#include "manifest/planner.h"

namespace tgen::validation {

void OpValidator::slots() {
  for (const auto& f : op_.forall) {
    IndexSlot s;
    s.name = f.name;
    s.kind_text = f.kind_text;
    s.kind = info_.symbols.find(f.name)->kind;
    s.src = IndexSlot::Src::forall;
    info_.slots.push_back(std::move(s));
  }
  std::set<std::string> index_params;
  auto shape = [&](const ShapeSrc& s) {
    if (!s.ok) return;
    for (const auto& a : s.ast.family_args) read_names(*a, index_params);
    for (const auto& i : s.ast.items) read_names(*i.expr, index_params);
  };
  for (const auto& p : op_.params) {
    if (p.is_tensor) {
      shape(p.shape);
      index_params.insert(p.dtype);
    }
  }
  for (const auto* list : {&op_.inputs, &op_.outputs}) {
    for (const auto& t : *list) {
      shape(t.shape);
      index_params.insert(t.dtype);
    }
  }
  for (const auto& l : op_.lets) {
    if (l.expr.ast) read_names(*l.expr.ast, index_params);
  }
  if (op_.flops.ast) read_names(*op_.flops.ast, index_params);
  if (op_.has_bytes && op_.bytes.ast) read_names(*op_.bytes.ast, index_params);
  for (const auto& p : op_.params) {
    if (p.is_tensor || !index_params.count(p.name)) continue;
    IndexSlot s;
    s.name = p.name;
    s.kind_text = "param";
    s.kind = info_.symbols.find(p.name)->kind;
    s.src = IndexSlot::Src::param;
    info_.slots.push_back(std::move(s));
  }
  for (const auto& l : op_.lets) {
    IndexSlot s;
    s.name = l.name;
    s.kind_text = "let";
    s.kind = info_.symbols.find(l.name)->kind;
    s.src = IndexSlot::Src::let;
    info_.slots.push_back(std::move(s));
  }
}

std::set<std::string> OpValidator::base_known(bool call) const {
  std::set<std::string> known;
  for (const auto& p : op_.params) known.insert(p.name);
  if (call) {
    for (const auto& t : op_.inputs) known.insert(t.name);
  }
  return known;
}

std::vector<ShapeItem> OpValidator::clone_items(const ShapeAst& ast) const {
  std::vector<ShapeItem> out;
  for (const auto& i : ast.items) out.push_back(ShapeItem{i.splice, i.expr->clone()});
  return out;
}

void OpValidator::construction() {
  info_.ctor_axes.resize(op_.params.size());
  info_.ctor_decl.resize(op_.params.size());
  for (std::size_t i = 0; i < op_.params.size(); ++i) {
    const ParamDecl& p = op_.params[i];
    if (!p.is_tensor) continue;
    info_.ctor_axes[i] = clone_items(p.shape.ast);
    info_.ctor_decl[i] = p.shape.text;
  }
  std::vector<PlanInput> required;
  for (std::size_t i = 0; i < op_.params.size(); ++i) {
    const ParamDecl& p = op_.params[i];
    if (!p.is_tensor || p.optional) continue;
    required.push_back(PlanInput{PlanTensor{true, static_cast<int>(i), p.name, p.shape.text},
                                 &info_.ctor_axes[i], info_.ctor_dtype[i]});
  }
  std::set<std::string> stuck;
  info_.ctor_plan = make_plan(info_, required, base_known(false), stuck);
  info_.ctor_known = info_.ctor_plan.known;
  for (std::size_t i = 0; i < op_.params.size(); ++i) {
    const ParamDecl& p = op_.params[i];
    if (!p.is_tensor || !p.optional) continue;
    std::vector<PlanInput> one = {
        PlanInput{PlanTensor{true, static_cast<int>(i), p.name, p.shape.text}, &info_.ctor_axes[i],
                  info_.ctor_dtype[i]}};
    std::set<std::string> ignored;
    info_.optional_ctor_plans.emplace_back(static_cast<int>(i),
                                           make_plan(info_, one, info_.ctor_known, ignored));
  }
  for (const auto& r : op_.shape_rules) {
    info_.rule_at_construction.push_back(r.ast &&
                                         unknown_names(*r.ast, info_, info_.ctor_known).empty());
  }
}

}  // namespace tgen::validation
