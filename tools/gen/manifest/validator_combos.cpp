// Every branch and presence combination: shapes expanded for it, its solve plan, and an error
// for an index no step solves (docs/design/manifest.md, Solve order).

#include "expr/simplify.h"
#include "manifest/op_validator.h"
#include "manifest/planner.h"
#include "manifest/workloads.h"

namespace tgen::validation {

std::vector<ShapeItem> OpValidator::expand(const ShapeSrc& src, const Combo& c, const ComboEnv& env,
                                           std::string& decl) {
  decl = src.text;
  std::vector<ShapeItem> items;
  if (!src.ast.is_family) {
    for (const auto& i : src.ast.items)
      items.push_back(ShapeItem{i.splice, simplify(*i.expr, env)});
    return items;
  }
  const FamilyDecl& f = *family(src.ast.family);
  std::map<std::string, const Expr*> subst;
  EValue branch;
  for (std::size_t i = 0; i < f.formals.size(); ++i) {
    const Expr& arg = *src.ast.family_args[i];
    subst[f.formals[i].name] = &arg;
    if (f.formals[i].name != f.match) continue;
    if (arg.op == ExprOp::name) {
      for (const auto& [n, v] : c.discr) {
        if (n == arg.sval) branch = v;
      }
    } else if (arg.op == ExprOp::bool_lit) {
      branch = EValue(arg.bval);
    } else {
      branch = EValue(arg.sval);
    }
  }
  for (const auto& cs : f.cases) {
    if (!(cs.when == branch)) continue;
    for (const auto& i : cs.is.ast.items) {
      ExprPtr e = substitute(*i.expr, subst);
      ExprError err;
      if (!check_expr(*e, info_.symbols, CheckContext{}, err)) {
        error(src.line,
              expr_message(src.where, src.text, 1,
                           "in the case " + f.match + " = " + repr(branch) + ": " + err.message));
      }
      items.push_back(ShapeItem{i.splice, simplify(*e, env)});
    }
    ShapeAst expanded;
    for (const auto& i : items) expanded.items.push_back(ShapeItem{i.splice, i.expr->clone()});
    decl = src.text + " = " + to_source(expanded);
    break;
  }
  return items;
}

std::string OpValidator::describe(const Combo& c) const {
  std::string out;
  for (const auto& [n, v] : c.discr) out += (out.empty() ? "" : ", ") + n + " = " + repr(v);
  for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
    if (!op_.inputs[i].optional) continue;
    out += (out.empty() ? "" : ", ") + op_.inputs[i].name +
           (c.input_present[i] ? " present" : " absent");
  }
  for (std::size_t i = 0; i < op_.params.size(); ++i) {
    if (!op_.params[i].is_tensor || !op_.params[i].optional) continue;
    out += (out.empty() ? "" : ", ") + op_.params[i].name +
           (c.ctor_present[i] ? " present" : " absent");
  }
  return out;
}

int OpValidator::index_line(const std::string& name) const {
  for (const auto& f : op_.forall) {
    if (f.name == name) return f.line;
  }
  for (const auto& l : op_.lets) {
    if (l.name == name) return l.expr.line;
  }
  return op_.line;
}

void OpValidator::unsolvable(const std::string& name, const Combo& c, std::size_t ncombos) {
  if (reported_unsolvable_.count(name)) return;
  reported_unsolvable_.insert(name);
  std::string msg = "index '" + name + "' cannot be solved from any input";
  if (ncombos > 1) msg += " (when " + c.description + ")";
  error(index_line(name), msg);
}

bool OpValidator::combos() {
  // Dimensions: discriminant params, then optional inputs, then optional ctor tensors.
  std::vector<std::vector<EValue>> domains;
  for (const auto& n : info_.discr_params) {
    const Symbol* s = info_.symbols.find(n);
    std::vector<EValue> d;
    if (s->kind.is(Kind::Tag::bool_)) {
      d = {EValue(false), EValue(true)};
    } else {
      for (const auto& v : s->kind.values) d.push_back(EValue(v));
    }
    domains.push_back(std::move(d));
  }
  std::vector<int> opt_inputs, opt_ctor;
  for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
    if (op_.inputs[i].optional) opt_inputs.push_back(static_cast<int>(i));
  }
  for (std::size_t i = 0; i < op_.params.size(); ++i) {
    if (op_.params[i].is_tensor && op_.params[i].optional) opt_ctor.push_back(static_cast<int>(i));
  }
  std::size_t total = 1;
  for (const auto& d : domains) total *= d.size();
  const std::size_t presence_bits = opt_inputs.size() + opt_ctor.size();
  if (presence_bits > 16 || total << presence_bits > kMaxCombos) {
    error(op_.line, "op '" + op_.name + "' has more than " + std::to_string(kMaxCombos) +
                        " branch and presence combinations; split it");
    return false;
  }
  total <<= presence_bits;
  for (std::size_t n = 0; n < total; ++n) {
    Combo c;
    std::size_t rest = n;
    // The last dimension varies fastest: presence bits, then discriminants.
    c.input_present.assign(op_.inputs.size(), true);
    c.ctor_present.assign(op_.params.size(), false);
    for (std::size_t i = 0; i < op_.params.size(); ++i) {
      if (op_.params[i].is_tensor && !op_.params[i].optional) c.ctor_present[i] = true;
    }
    for (auto it = opt_ctor.rbegin(); it != opt_ctor.rend(); ++it) {
      c.ctor_present[static_cast<std::size_t>(*it)] = (rest & 1) == 0;
      rest >>= 1;
    }
    for (auto it = opt_inputs.rbegin(); it != opt_inputs.rend(); ++it) {
      c.input_present[static_cast<std::size_t>(*it)] = (rest & 1) == 0;
      rest >>= 1;
    }
    std::vector<std::pair<std::string, EValue>> discr(info_.discr_params.size());
    for (std::size_t d = info_.discr_params.size(); d-- > 0;) {
      discr[d] = {info_.discr_params[d], domains[d][rest % domains[d].size()]};
      rest /= domains[d].size();
    }
    c.discr = std::move(discr);
    c.description = describe(c);
    build_combo(c, total);
    info_.combos.push_back(std::move(c));
  }
  return true;
}

void OpValidator::build_combo(Combo& c, std::size_t ncombos) {
  ComboEnv env(op_, c);
  c.input_axes.resize(op_.inputs.size());
  c.input_decl.resize(op_.inputs.size());
  c.ctor_axes.resize(op_.params.size());
  c.ctor_decl.resize(op_.params.size());
  c.output_axes.resize(op_.outputs.size());
  c.output_decl.resize(op_.outputs.size());
  std::vector<PlanInput> plan_in;
  for (std::size_t i = 0; i < op_.params.size(); ++i) {
    if (!op_.params[i].is_tensor || !c.ctor_present[i]) continue;
    c.ctor_axes[i] = expand(op_.params[i].shape, c, env, c.ctor_decl[i]);
  }
  for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
    if (!c.input_present[i]) continue;
    c.input_axes[i] = expand(op_.inputs[i].shape, c, env, c.input_decl[i]);
  }
  for (std::size_t i = 0; i < op_.outputs.size(); ++i) {
    c.output_axes[i] = expand(op_.outputs[i].shape, c, env, c.output_decl[i]);
  }
  for (std::size_t i = 0; i < op_.params.size(); ++i) {
    if (!op_.params[i].is_tensor || !c.ctor_present[i]) continue;
    plan_in.push_back(
        PlanInput{PlanTensor{true, static_cast<int>(i), op_.params[i].name, c.ctor_decl[i]},
                  &c.ctor_axes[i], info_.ctor_dtype[i]});
  }
  for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
    if (!c.input_present[i]) continue;
    plan_in.push_back(
        PlanInput{PlanTensor{false, static_cast<int>(i), op_.inputs[i].name, c.input_decl[i]},
                  &c.input_axes[i], info_.input_dtype[i]});
  }
  std::set<std::string> known = base_known(true);
  for (const auto& p : op_.params) {
    if (p.is_tensor) known.insert(p.name);
  }
  for (const auto& l : op_.lets) {
    if (l.expr.ast) c.lets.emplace(l.name, simplify(*l.expr.ast, env));
  }
  std::set<std::string> stuck;
  c.plan = make_plan(info_, plan_in, known, stuck, &c.lets);
  for (const auto& n : stuck) unsolvable(n, c, ncombos);

  // Rules (call-time ones), simplified for this branch.
  for (std::size_t i = 0; i < op_.shape_rules.size(); ++i) {
    const ExprSrc& r = op_.shape_rules[i];
    if (!r.ast || info_.rule_at_construction[i]) {
      c.rules.push_back(nullptr);
      continue;
    }
    ExprPtr s = simplify(*r.ast, env);
    if (s->op == ExprOp::bool_lit && s->bval) s.reset();
    c.rules.push_back(std::move(s));
  }
  c.flops = op_.flops.ast ? simplify(*op_.flops.ast, env) : nullptr;
  c.bytes = op_.has_bytes && op_.bytes.ast ? simplify(*op_.bytes.ast, env) : nullptr;

  // Every index this branch uses must be solved.
  std::set<std::string> used;
  for (const auto& axes : c.output_axes) {
    for (const auto& i : axes) collect_used(info_, *i.expr, used);
  }
  for (std::size_t i = 0; i < op_.outputs.size(); ++i) {
    if (info_.output_dtype[i].k == DTypeRef::K::index) used.insert(info_.output_dtype[i].name);
  }
  for (const auto& r : c.rules) {
    if (r) collect_used(info_, *r, used);
  }
  if (c.flops) collect_used(info_, *c.flops, used);
  if (c.bytes) collect_used(info_, *c.bytes, used);
  for (const auto& [name, e] : c.lets) collect_used(info_, *e, used);  // every let is computed
  for (const auto& n : used) {
    const Symbol* s = info_.symbols.find(n);
    if (s && s->cat == Symbol::Cat::index && !c.plan.known.count(n)) unsolvable(n, c, ncombos);
  }
}

}  // namespace tgen::validation
