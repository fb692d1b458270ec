// A solve plan as straight-line C++ (dtype and shape unification, lets, rule checks) and the
// construction check built from it (docs/design/manifest.md, Solve order).
#include "codegen/op_emitter.h"
#include "codegen/op_names.h"
#include "dtypes.h"

namespace tgen::op_emit {

OpEmitter::TensorLocal OpEmitter::local(const PlanTensor& t) const {
  return TensorLocal{"t_" + t.name, "s_" + t.name, "n_" + t.name, "kD_" + t.name};
}

std::string OpEmitter::pos_text(const AxisPos& p, const TensorLocal& tl, CppNames& names) {
  std::vector<std::string> parts;
  if (p.k != 0 || p.splices.empty()) parts.push_back(std::to_string(p.k));
  for (const Expr* s : p.splices) parts.push_back("ex::len(" + emit_cpp(*s, names) + ")");
  std::string sum = join(parts, " + ");
  if (!p.from_end) return parts.size() == 1 ? sum : "(" + sum + ")";
  return "(" + tl.n + " - " + (parts.size() == 1 ? sum : "(" + sum + ")") + ")";
}

bool OpEmitter::uses_rank(const Plan& plan, int t) {
  for (const auto& s : plan.steps) {
    if (s.tensor != t) continue;
    if (s.pos.from_end || s.end.from_end) return true;
  }
  return false;
}

std::string OpEmitter::dtype_text(const PlanTensor& t) const {
  return t.ctor ? op_.params[static_cast<std::size_t>(t.index)].dtype
                : op_.inputs[static_cast<std::size_t>(t.index)].dtype;
}

const DTypeRef& OpEmitter::dtype_ref(const PlanTensor& t) const {
  return t.ctor ? info_.ctor_dtype[static_cast<std::size_t>(t.index)]
                : info_.input_dtype[static_cast<std::size_t>(t.index)];
}

std::string OpEmitter::dtype_value(const DTypeRef& d, CppNames& names) {
  if (d.k == DTypeRef::K::literal) return cpp_dtype(d.name);
  return names.value(d.name, false);
}

void OpEmitter::let_line(Code& c, const std::string& name, const Expr& e, CppNames& names) {
  const Kind& k = info_.symbols.find(name)->kind;
  if (k.is_stringy()) {
    c.line("[[maybe_unused]] const std::string l_" + name + "(" + emit_cpp(e, names) + ");");
  } else {
    c.line("[[maybe_unused]] const " + cpp_type(k) + " l_" + name + " = " + emit_cpp(e, names) +
           ";");
  }
}

void OpEmitter::steps(Code& c, const Plan& plan, std::set<std::string>& known) {
  LocalNames names(info_, known);
  for (std::size_t t = 0; t < plan.tensors.size(); ++t) {
    const PlanTensor& pt = plan.tensors[t];
    const TensorLocal tl = local(pt);
    c.line("static constexpr ex::Decl " + tl.d + "{kOp, " +
           q(pt.ctor ? "construction-time tensor" : "input") + ", " + q(pt.name) + ", " +
           q(pt.decl_text) + ", " + q(dtype_text(pt)) + "};");
    if (pt.ctor) c.line("const ::tileops::Tensor& " + tl.t + " = p." + pt.name + ";");
    c.line("const ::tileops::Sizes& " + tl.s + " = " + tl.t + ".sizes();");
    if (uses_rank(plan, static_cast<int>(t))) {
      c.line("const std::int64_t " + tl.n + " = ex::len(" + tl.s + ");");
    }
  }
  for (const auto& s : plan.steps) {
    const PlanTensor* pt =
        s.tensor >= 0 ? &plan.tensors[static_cast<std::size_t>(s.tensor)] : nullptr;
    const TensorLocal tl = pt ? local(*pt) : TensorLocal{};
    switch (s.k) {
      case PlanStep::K::dtype_solve: {
        const Symbol* sym = info_.symbols.find(s.name);
        c.line("[[maybe_unused]] const ::tileops::DType v_" + s.name + " = ex::solve_dtype(" +
               tl.d + ", " + tl.t + ".dtype(), " + q(s.name) + ", " + dtype_list(sym->kind.values) +
               ");");
        known.insert(s.name);
        break;
      }
      case PlanStep::K::dtype_check: {
        const DTypeRef& d = dtype_ref(*pt);
        std::string what = d.name;
        if (d.k == DTypeRef::K::index) {
          auto it = plan.solved_from.find(d.name);
          if (it != plan.solved_from.end()) what += ", from " + it->second;
        } else if (d.k == DTypeRef::K::param) {
          what = "param " + d.name;
        }
        c.line("ex::check_dtype(" + tl.d + ", " + tl.t + ".dtype(), " + dtype_value(d, names) +
               ", " + q(what) + ");");
        break;
      }
      case PlanStep::K::rank: {
        std::vector<std::string> parts;
        if (s.fixed != 0 || s.splices.empty()) parts.push_back(std::to_string(s.fixed));
        for (const Expr* sp : s.splices) parts.push_back("ex::len(" + emit_cpp(*sp, names) + ")");
        c.line("ex::check_rank(" + tl.d + ", " + tl.s + ", " + join(parts, " + ") + ", " +
               (s.at_least ? "true" : "false") + ");");
        break;
      }
      case PlanStep::K::splice_solve:
        c.line("[[maybe_unused]] const ::tileops::Sizes v_" + s.name + " = ex::slice(" + tl.s +
               ", " + pos_text(s.pos, tl, names) + ", " + pos_text(s.end, tl, names) + ");");
        known.insert(s.name);
        break;
      case PlanStep::K::splice_check:
        c.line("ex::check_splice(" + tl.d + ", " + tl.s + ", " + pos_text(s.pos, tl, names) + ", " +
               emit_cpp(*s.expr, names) + ", " + q(to_source(*s.expr)) + ");");
        break;
      case PlanStep::K::axis_solve:
        c.line("[[maybe_unused]] const std::int64_t v_" + s.name + " = ex::size_at(" + tl.s + ", " +
               pos_text(s.pos, tl, names) + ");");
        known.insert(s.name);
        break;
      case PlanStep::K::axis_affine:
        c.line("[[maybe_unused]] const std::int64_t v_" + s.name + " = ex::solve_affine(" + tl.d +
               ", " + tl.s + ", " + pos_text(s.pos, tl, names) + ", " + emit_cpp(*s.a, names) +
               ", " + emit_cpp(*s.e, names) + ", " + q(s.name) + ", " + q(to_source(*s.expr)) +
               ");");
        known.insert(s.name);
        break;
      case PlanStep::K::axis_check:
        c.line("ex::check_axis(" + tl.d + ", " + tl.s + ", " + pos_text(s.pos, tl, names) + ", " +
               emit_cpp(*s.expr, names) + ", " + q(to_source(*s.expr)) + ");");
        break;
      case PlanStep::K::let:
        let_line(c, s.name, *s.expr, names);
        known.insert(s.name);
        break;
    }
  }
}

void OpEmitter::rule_check(Code& c, const Expr& rule, const std::string& text, CppNames& names) {
  std::vector<std::string> parts;
  for (const auto& n : names_read(rule)) {
    const Symbol* s = info_.symbols.find(n);
    if (!s || s->cat == Symbol::Cat::input || s->cat == Symbol::Cat::output ||
        s->cat == Symbol::Cat::ctor_tensor) {
      continue;
    }
    parts.push_back("std::string(" + q(n + " = ") + ") + ex::repr(" + names.value(n, false) + ")");
  }
  const std::string values = parts.empty() ? "std::string()" : join(parts, " + \", \" + ");
  c.open("if (!" + wrap(emit_cpp(rule, names)) + ")");
  c.line("ex::fail_rule(kOp, " + q(text) + ", " + values + ");");
  c.close();
}

void OpEmitter::check_params(Code& c) {
  c.open("void " + name_ + "_check_params(const void* params)");
  c.line("[[maybe_unused]] static constexpr std::string_view kOp = " + q(name_) + ";");
  c.line("[[maybe_unused]] const auto& p = *static_cast<const " + name_ + "Params*>(params);");
  c.open("try");
  for (const auto& p : op_.params) {
    const ParamType& t = p.type.tag == ParamType::Tag::optional ? *p.type.inner : p.type;
    const std::string v = p.type.tag == ParamType::Tag::optional ? "*p." + p.name : "p." + p.name;
    std::string check;
    if (t.tag == ParamType::Tag::enum_) {
      std::vector<std::string> lits;
      for (const auto& e : t.values) lits.push_back(q(e));
      check = "ex::check_enum(kOp, " + q(p.name) + ", " + v + ", {" + join(lits, ", ") + "});";
    } else if (t.tag == ParamType::Tag::dtype && t.values.size() < all_dtypes().size()) {
      check =
          "ex::check_dtype_param(kOp, " + q(p.name) + ", " + v + ", " + dtype_list(t.values) + ");";
    } else if (t.tag == ParamType::Tag::int_list && t.tuple_len >= 0) {
      check = "ex::check_length(kOp, " + q(p.name) + ", " + v + ", " + std::to_string(t.tuple_len) +
              ");";
    }
    if (!check.empty()) {
      c.line(p.type.tag == ParamType::Tag::optional ? "if (p." + p.name + ") " + check : check);
    }
    if (info_.splice_params.count(p.name) || info_.axis_params.count(p.name)) {
      const std::string nn = "ex::check_nonneg(kOp, " + q(p.name) + ", " + v + ");";
      c.line(p.type.tag == ParamType::Tag::optional ? "if (p." + p.name + ") " + nn : nn);
    }
  }
  for (const auto& p : op_.params) {
    if (!p.is_tensor || p.optional) continue;
    c.open("if (!p." + p.name + ".defined())");
    c.line("ex::fail_param(kOp, " + q(p.name) + ", \"is required (a construction-time tensor)\");");
    c.close();
  }
  std::set<std::string> known;
  for (const auto& p : op_.params) known.insert(p.name);
  steps(c, info_.ctor_plan, known);
  for (const auto& [index, plan] : info_.optional_ctor_plans) {
    c.open("if (p." + op_.params[static_cast<std::size_t>(index)].name + ".defined())");
    std::set<std::string> inner = known;
    steps(c, plan, inner);
    c.close();
  }
  LocalNames names(info_, known);
  for (std::size_t i = 0; i < op_.shape_rules.size(); ++i) {
    if (!info_.rule_at_construction[i] || !op_.shape_rules[i].ast) continue;
    rule_check(c, *op_.shape_rules[i].ast, op_.shape_rules[i].text, names);
  }
  c.dedent();
  c.line("} catch (const ::tileops::SignatureError& e) {");
  c.indent();
  c.line("ex::rethrow_for(kOp, e);");
  c.close();
  c.close();
  c.line();
}

}  // namespace tgen::op_emit
