#include "manifest/planner.h"

#include <algorithm>

namespace tgen {

std::vector<std::string> unknown_names(const Expr& e, const OpInfo& info,
                                       const std::set<std::string>& known) {
  std::vector<std::string> out;
  for (const auto& n : names_read(e)) {
    if (info.symbols.find(n) && !known.count(n)) out.push_back(n);
  }
  return out;
}

namespace {

bool mentions(const Expr& e, const std::string& m) {
  if (e.op == ExprOp::name) return e.sval == m;
  for (const auto& a : e.args) {
    if (a && mentions(*a, m)) return true;
  }
  return false;
}

ExprPtr int_lit(std::int64_t v) {
  auto e = std::make_unique<Expr>();
  e->op = ExprOp::int_lit;
  e->ival = v;
  e->kind = Kind::dim();
  return e;
}

ExprPtr bin(ExprOp op, ExprPtr l, ExprPtr r) {
  // Fold the neutral elements so that generated code stays readable.
  if (op == ExprOp::mul) {
    if (l->op == ExprOp::int_lit && l->ival == 1) return r;
    if (r->op == ExprOp::int_lit && r->ival == 1) return l;
  }
  auto e = std::make_unique<Expr>();
  e->op = op;
  e->kind = Kind::int_();
  e->args.push_back(std::move(l));
  e->args.push_back(std::move(r));
  return e;
}

ExprPtr negate(ExprPtr x) {
  if (x->op == ExprOp::int_lit && x->ival != INT64_MIN) {
    x->ival = -x->ival;
    x->kind = Kind::int_();
    return x;
  }
  auto e = std::make_unique<Expr>();
  e->op = ExprOp::neg;
  e->kind = Kind::int_();
  e->args.push_back(std::move(x));
  return e;
}

ExprPtr add_opt(ExprPtr a, ExprPtr b) {
  if (!a) return b;
  if (!b) return a;
  return bin(ExprOp::add, std::move(a), std::move(b));
}

}  // namespace

bool linear_in(const Expr& e, const std::string& m, ExprPtr& a, ExprPtr& rest) {
  a.reset();
  rest.reset();
  if (!mentions(e, m)) {
    rest = e.clone();
    return true;
  }
  switch (e.op) {
    case ExprOp::name:
      a = int_lit(1);
      return true;
    case ExprOp::pos:
      return linear_in(*e.args[0], m, a, rest);
    case ExprOp::neg: {
      if (!linear_in(*e.args[0], m, a, rest)) return false;
      if (a) a = negate(std::move(a));
      if (rest) rest = negate(std::move(rest));
      return true;
    }
    case ExprOp::add:
    case ExprOp::sub: {
      ExprPtr a1, r1, a2, r2;
      if (!linear_in(*e.args[0], m, a1, r1) || !linear_in(*e.args[1], m, a2, r2)) return false;
      if (e.op == ExprOp::sub) {
        if (a2) a2 = negate(std::move(a2));
        if (r2) r2 = negate(std::move(r2));
      }
      a = add_opt(std::move(a1), std::move(a2));
      rest = add_opt(std::move(r1), std::move(r2));
      return a != nullptr;
    }
    case ExprOp::mul: {
      const bool left = mentions(*e.args[0], m);
      const bool right = mentions(*e.args[1], m);
      if (left && right) return false;
      const Expr& lin = left ? *e.args[0] : *e.args[1];
      const Expr& k = left ? *e.args[1] : *e.args[0];
      if (!k.kind.is_int()) return false;
      ExprPtr a1, r1;
      if (!linear_in(lin, m, a1, r1)) return false;
      a = bin(ExprOp::mul, k.clone(), std::move(a1));
      if (r1) rest = bin(ExprOp::mul, k.clone(), std::move(r1));
      return true;
    }
    default:
      return false;
  }
}

namespace {

class Planner {
 public:
  Planner(const OpInfo& info, const std::vector<PlanInput>& inputs, std::set<std::string> known,
          std::set<std::string>& stuck, const std::map<std::string, ExprPtr>* lets)
      : info_(info), in_(inputs), stuck_(stuck), lets_(lets) {
    plan_.known = std::move(known);
    for (const auto& i : inputs) plan_.tensors.push_back(i.tensor);
    state_.resize(inputs.size());
    for (std::size_t t = 0; t < inputs.size(); ++t) {
      state_[t].done.assign(inputs[t].axes->size(), false);
      state_[t].pos.resize(inputs[t].axes->size());
    }
  }

  Plan run() {
    lets();
    for (std::size_t t = 0; t < in_.size(); ++t) dtype(static_cast<int>(t));
    lets();
    bool changed = true;
    while (changed) {
      changed = false;
      for (std::size_t t = 0; t < in_.size(); ++t) {
        changed = shape(static_cast<int>(t)) || changed;
      }
      changed = lets() || changed;
    }
    for (std::size_t t = 0; t < in_.size(); ++t) {
      const auto& items = *in_[t].axes;
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (state_[t].done[i]) continue;
        for (const auto& n : unknown_names(*items[i].expr, info_, plan_.known)) stuck_.insert(n);
      }
    }
    return std::move(plan_);
  }

 private:
  struct TensorState {
    bool structured = false;
    std::vector<bool> done;
    std::vector<AxisPos> pos;
  };

  bool is_index(const std::string& n, IndexDecl::K k) const {
    for (const auto& f : info_.decl->forall) {
      if (f.name == n) return f.k == k;
    }
    return false;
  }

  std::string what(int t) const {
    const PlanTensor& pt = plan_.tensors[static_cast<std::size_t>(t)];
    return std::string(pt.ctor ? "construction-time tensor '" : "input '") + pt.name + "'";
  }

  void solved(const std::string& name, int t) {
    plan_.known.insert(name);
    plan_.solved_from.emplace(name, what(t));
  }

  bool lets() {
    bool any = false;
    bool changed = true;
    while (changed) {
      changed = false;
      for (const auto& name : info_.let_order) {
        if (plan_.known.count(name)) continue;
        const Expr* expr = nullptr;
        if (lets_) {
          auto it = lets_->find(name);
          if (it != lets_->end()) expr = it->second.get();
        } else {
          for (const auto& l : info_.decl->lets) {
            if (l.name == name) expr = l.expr.ast.get();
          }
        }
        if (!expr) continue;
        if (!unknown_names(*expr, info_, plan_.known).empty()) continue;
        PlanStep s;
        s.k = PlanStep::K::let;
        s.name = name;
        s.expr = expr;
        plan_.steps.push_back(std::move(s));
        plan_.known.insert(name);
        changed = any = true;
      }
    }
    return any;
  }

  void dtype(int t) {
    const DTypeRef& d = in_[static_cast<std::size_t>(t)].dtype;
    PlanStep s;
    s.tensor = t;
    s.name = d.name;
    if (d.k == DTypeRef::K::index && !plan_.known.count(d.name)) {
      s.k = PlanStep::K::dtype_solve;
      solved(d.name, t);
    } else if (d.k == DTypeRef::K::invalid) {
      return;
    } else {
      s.k = PlanStep::K::dtype_check;
    }
    plan_.steps.push_back(std::move(s));
  }

  bool known_expr(const Expr& e) const { return unknown_names(e, info_, plan_.known).empty(); }

  // An unknown Shape index spliced bare (`*S`).
  bool unknown_splice(const ShapeItem& item) const {
    return item.splice && item.expr->op == ExprOp::name &&
           is_index(item.expr->sval, IndexDecl::K::shape) && !plan_.known.count(item.expr->sval);
  }

  bool structure(int t) {
    TensorState& st = state_[static_cast<std::size_t>(t)];
    const auto& items = *in_[static_cast<std::size_t>(t)].axes;
    int unknown = -1;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (!items[i].splice) continue;
      if (unknown_splice(items[i])) {
        if (unknown >= 0) return false;  // two unknown splices: wait
        unknown = static_cast<int>(i);
      } else if (!known_expr(*items[i].expr)) {
        return false;
      }
    }
    const int n = static_cast<int>(items.size());
    auto from_start = [&](int upto) {
      AxisPos p;
      for (int j = 0; j < upto; ++j) {
        if (items[static_cast<std::size_t>(j)].splice) {
          p.splices.push_back(items[static_cast<std::size_t>(j)].expr.get());
        } else {
          ++p.k;
        }
      }
      return p;
    };
    auto from_end = [&](int from) {
      AxisPos p;
      p.from_end = true;
      for (int j = from; j < n; ++j) {
        if (items[static_cast<std::size_t>(j)].splice) {
          p.splices.push_back(items[static_cast<std::size_t>(j)].expr.get());
        } else {
          ++p.k;
        }
      }
      return p;
    };
    PlanStep r;
    r.k = PlanStep::K::rank;
    r.tensor = t;
    r.at_least = unknown >= 0;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (static_cast<int>(i) == unknown) continue;
      if (items[i].splice) {
        r.splices.push_back(items[i].expr.get());
      } else {
        ++r.fixed;
      }
    }
    plan_.steps.push_back(std::move(r));
    for (int i = 0; i < n; ++i) {
      st.pos[static_cast<std::size_t>(i)] =
          unknown >= 0 && i > unknown ? from_end(i) : from_start(i);
    }
    if (unknown >= 0) {
      PlanStep s;
      s.k = PlanStep::K::splice_solve;
      s.tensor = t;
      s.name = items[static_cast<std::size_t>(unknown)].expr->sval;
      s.expr = items[static_cast<std::size_t>(unknown)].expr.get();
      s.pos = from_start(unknown);
      s.end = from_end(unknown + 1);
      plan_.steps.push_back(std::move(s));
      solved(items[static_cast<std::size_t>(unknown)].expr->sval, t);
      st.done[static_cast<std::size_t>(unknown)] = true;
    }
    st.structured = true;
    return true;
  }

  bool shape(int t) {
    TensorState& st = state_[static_cast<std::size_t>(t)];
    bool changed = false;
    if (!st.structured) {
      if (!structure(t)) return false;
      changed = true;
    }
    const auto& items = *in_[static_cast<std::size_t>(t)].axes;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (st.done[i]) continue;
      const ShapeItem& item = items[i];
      const auto unknown = unknown_names(*item.expr, info_, plan_.known);
      PlanStep s;
      s.tensor = t;
      s.pos = st.pos[i];
      s.expr = item.expr.get();
      if (unknown.empty()) {
        s.k = item.splice ? PlanStep::K::splice_check : PlanStep::K::axis_check;
      } else if (!item.splice && unknown.size() == 1 && is_index(unknown[0], IndexDecl::K::dim)) {
        ExprPtr a, rest;
        if (!linear_in(*item.expr, unknown[0], a, rest)) continue;
        s.name = unknown[0];
        if (item.expr->op == ExprOp::name) {
          s.k = PlanStep::K::axis_solve;
        } else {
          s.k = PlanStep::K::axis_affine;
          s.a = std::move(a);
          s.e = rest ? std::move(rest) : int_lit(0);
        }
        solved(unknown[0], t);
      } else {
        continue;
      }
      plan_.steps.push_back(std::move(s));
      st.done[i] = true;
      changed = true;
    }
    return changed;
  }

  const OpInfo& info_;
  const std::vector<PlanInput>& in_;
  std::set<std::string>& stuck_;
  const std::map<std::string, ExprPtr>* lets_;
  Plan plan_;
  std::vector<TensorState> state_;
};

}  // namespace

Plan make_plan(const OpInfo& info, const std::vector<PlanInput>& inputs,
               std::set<std::string> known, std::set<std::string>& stuck,
               const std::map<std::string, ExprPtr>* lets) {
  return Planner(info, inputs, std::move(known), stuck, lets).run();
}

}  // namespace tgen
