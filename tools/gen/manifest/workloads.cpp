#include "manifest/workloads.h"

#include <algorithm>
#include <set>

#include "dtypes.h"
#include "expr/simplify.h"
#include "manifest/types.h"
#include "manifest/validator.h"
#include "manifest/yaml_util.h"

namespace tgen {

void collect_used(const OpInfo& info, const Expr& e, std::set<std::string>& used) {
  for (const auto& n : names_read(e)) {
    if (info.symbols.find(n)) used.insert(n);
  }
}

const Combo* find_combo(const OpInfo& info,
                        const std::map<std::string, EValue, std::less<>>& params,
                        const std::vector<bool>& input_present,
                        const std::vector<bool>& ctor_present) {
  for (const auto& c : info.combos) {
    if (c.input_present != input_present || c.ctor_present != ctor_present) continue;
    bool match = true;
    for (const auto& [n, v] : c.discr) {
      auto it = params.find(n);
      match = match && it != params.end() && it->second == v;
    }
    if (match) return &c;
  }
  return nullptr;
}

namespace {

std::int64_t eval_int(const Expr& e, const EvalEnv& env) {
  EValue v = eval(e, env);
  if (!v.is<std::int64_t>()) throw EvalError(e.col, "expected an integer, got " + repr(v));
  return v.as<std::int64_t>();
}

Seq eval_seq(const Expr& e, const EvalEnv& env) {
  EValue v = eval(e, env);
  if (!v.is<Seq>()) throw EvalError(e.col, "expected a sequence, got " + repr(v));
  return v.as<Seq>();
}

std::int64_t position(const AxisPos& p, std::int64_t rank, const EvalEnv& env) {
  std::int64_t off = p.k;
  for (const Expr* s : p.splices) off += static_cast<std::int64_t>(eval_seq(*s, env).size());
  return p.from_end ? rank - off : off;
}

std::string shape_text(const Seq& s) {
  return repr(EValue(s));
}

}  // namespace

bool run_plan(const OpInfo& info, const Plan& plan, const std::vector<Seq>& shapes,
              const std::vector<std::string>& dtypes, MapEnv& env, std::string& why) {
  try {
    for (const auto& s : plan.steps) {
      const std::size_t t = static_cast<std::size_t>(s.tensor);
      const std::string tname = s.tensor >= 0 ? plan.tensors[t].name : std::string();
      switch (s.k) {
        case PlanStep::K::dtype_solve: {
          const Symbol* sym = info.symbols.find(s.name);
          if (std::find(sym->kind.values.begin(), sym->kind.values.end(), dtypes[t]) ==
              sym->kind.values.end()) {
            why = "'" + tname + "' has dtype " + dtypes[t] + ", outside " + s.name + "'s " +
                  sym->kind.str();
            return false;
          }
          env.values[s.name] = EValue(DTypeValue{dtypes[t]});
          break;
        }
        case PlanStep::K::dtype_check: {
          std::string expected = s.name;
          if (const EValue* v = env.lookup(s.name)) {
            if (v->is<DTypeValue>()) expected = v->as<DTypeValue>().name;
          }
          if (expected != dtypes[t]) {
            why = "'" + tname + "' has dtype " + dtypes[t] + " but " + s.name + " is " + expected;
            return false;
          }
          break;
        }
        case PlanStep::K::rank: {
          std::int64_t want = s.fixed;
          for (const Expr* sp : s.splices)
            want += static_cast<std::int64_t>(eval_seq(*sp, env).size());
          const auto n = static_cast<std::int64_t>(shapes[t].size());
          if (s.at_least ? n < want : n != want) {
            why = "'" + tname + "' has shape " + shape_text(shapes[t]) + ", rank " +
                  (s.at_least ? "at least " : "") + std::to_string(want) + " expected";
            return false;
          }
          break;
        }
        case PlanStep::K::splice_solve: {
          const auto n = static_cast<std::int64_t>(shapes[t].size());
          const std::int64_t a = position(s.pos, n, env), b = position(s.end, n, env);
          env.values[s.name] = EValue(Seq(shapes[t].begin() + a, shapes[t].begin() + b));
          break;
        }
        case PlanStep::K::splice_check: {
          const auto n = static_cast<std::int64_t>(shapes[t].size());
          const std::int64_t a = position(s.pos, n, env);
          const Seq want = eval_seq(*s.expr, env);
          for (std::size_t i = 0; i < want.size(); ++i) {
            if (shapes[t][static_cast<std::size_t>(a) + i] != want[i]) {
              why = "'" + tname + "' has shape " + shape_text(shapes[t]) + ", splice " +
                    to_source(*s.expr) + " = " + shape_text(want) + " expected at axis " +
                    std::to_string(a);
              return false;
            }
          }
          break;
        }
        case PlanStep::K::axis_solve: {
          const auto n = static_cast<std::int64_t>(shapes[t].size());
          env.values[s.name] = EValue(shapes[t][static_cast<std::size_t>(position(s.pos, n, env))]);
          break;
        }
        case PlanStep::K::axis_affine: {
          const auto n = static_cast<std::int64_t>(shapes[t].size());
          const std::int64_t size = shapes[t][static_cast<std::size_t>(position(s.pos, n, env))];
          const std::int64_t a = eval_int(*s.a, env), e = eval_int(*s.e, env);
          if (a == 0 || (size - e) % a != 0 || (size - e) / a < 0) {
            why = "'" + tname + "' axis " + to_source(*s.expr) + " = " + std::to_string(size) +
                  " has no whole solution for " + s.name;
            return false;
          }
          env.values[s.name] = EValue((size - e) / a);
          break;
        }
        case PlanStep::K::axis_check: {
          const auto n = static_cast<std::int64_t>(shapes[t].size());
          const std::int64_t a = position(s.pos, n, env);
          const std::int64_t want = eval_int(*s.expr, env);
          if (shapes[t][static_cast<std::size_t>(a)] != want) {
            why = "'" + tname + "' has shape " + shape_text(shapes[t]) + ", axis " +
                  std::to_string(a) + " should be " + to_source(*s.expr) + " = " +
                  std::to_string(want);
            return false;
          }
          break;
        }
        case PlanStep::K::let:
          env.values[s.name] = eval(*s.expr, env);
          break;
      }
    }
  } catch (const EvalError& e) {
    why = e.what();
    return false;
  } catch (const NotKnown& e) {
    why = "'" + e.name + "' is not known at this step";
    return false;
  }
  return true;
}

namespace {

class RowChecker {
 public:
  RowChecker(OpInfo& info, Diagnostics& diags) : info_(info), op_(*info.decl), diags_(diags) {}

  void run() {
    for (const auto& row : op_.workloads) check_row(row);
  }

 private:
  void error(int line, const std::string& msg) { diags_.error(op_.file, line, msg); }

  const ParamDecl* param(const std::string& n) const {
    for (const auto& p : op_.params) {
      if (p.name == n) return &p;
    }
    return nullptr;
  }
  const IndexDecl* index(const std::string& n) const {
    for (const auto& f : op_.forall) {
      if (f.name == n) return &f;
    }
    return nullptr;
  }

  void check_row(const WorkloadDecl& row) {
    RowInfo ri;
    ri.label = row.label;
    const std::string who = "workload row '" + row.label + "'";
    bool ok = true;
    MapEnv params_env;  // params (given or default) and presence
    std::map<std::string, EValue, std::less<>> indices;
    std::map<std::string, int> index_lines;
    for (const auto& v : row.values) {
      if (const ParamDecl* p = param(v.name)) {
        if (p->is_tensor) {
          error(v.line, who + ": construction-time tensor '" + v.name +
                            "' is created by instantiation (random values); do not give it");
          ok = false;
          continue;
        }
        std::string why;
        auto val = value_of_type(v.node, p->type, why);
        if (!val) {
          error(v.line, who + ": param '" + v.name + "' = " + node_text(v.node) +
                            " does not fit type '" + p->type.text + "': " + why);
          ok = false;
          continue;
        }
        params_env.values[v.name] = *val;
        ri.values.emplace_back(v.name, *val);
      } else if (const IndexDecl* idx = index(v.name)) {
        if (idx->k == IndexDecl::K::dtype) {
          error(v.line,
                who + ": DType index '" + v.name + "' is given in dtype_cases, not in the row");
          ok = false;
          continue;
        }
        std::optional<EValue> val;
        if (idx->k == IndexDecl::K::dim) {
          if (auto i = scalar_int(v.node); i && *i >= 0) val = EValue(*i);
        } else if (v.node.IsSequence()) {
          Seq s;
          bool good = true;
          for (const auto& item : v.node) {
            auto i = scalar_int(item);
            good = good && i && *i >= 0;
            if (good) s.push_back(*i);
          }
          if (good) val = EValue(std::move(s));
        }
        if (!val) {
          error(v.line, who + ": index '" + v.name + "' (" + idx->kind_text + ") must be " +
                            (idx->k == IndexDecl::K::dim ? "an int >= 0" : "a list of ints >= 0") +
                            ", got " + node_text(v.node));
          ok = false;
          continue;
        }
        indices[v.name] = *val;
        index_lines[v.name] = v.line;
        ri.values.emplace_back(v.name, *val);
      } else {
        bool is_let = false;
        for (const auto& l : op_.lets) is_let = is_let || l.name == v.name;
        error(v.line,
              is_let
                  ? who + ": '" + v.name + "' is a let: lets are computed, never given in rows"
                  : who + ": unknown key '" + v.name +
                        "' (a row gives params, Dim/Shape indices, some, dtype_cases and label)");
        ok = false;
      }
    }
    for (const auto& p : op_.params) {
      if (p.is_tensor || params_env.values.count(p.name)) continue;
      if (!p.has_default) {
        error(row.line, who + " does not give param '" + p.name + "', which has no default");
        ok = false;
        continue;
      }
      params_env.values[p.name] = p.default_value;
    }
    // Presence.
    std::vector<bool> input_present(op_.inputs.size());
    std::vector<bool> ctor_present(op_.params.size(), false);
    for (std::size_t i = 0; i < op_.inputs.size(); ++i) input_present[i] = !op_.inputs[i].optional;
    for (std::size_t i = 0; i < op_.params.size(); ++i) {
      ctor_present[i] = op_.params[i].is_tensor && !op_.params[i].optional;
    }
    std::set<std::string> some_seen;
    for (const auto& [name, line] : row.some) {
      if (!some_seen.insert(name).second) {
        error(line, who + ": '" + name + "' is listed twice in some");
        ok = false;
        continue;
      }
      bool found = false;
      for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
        if (op_.inputs[i].name != name) continue;
        found = true;
        if (!op_.inputs[i].optional) {
          error(line, who + ": some lists '" + name + "', which is not an optional input");
          ok = false;
        }
        input_present[i] = true;
      }
      for (std::size_t i = 0; i < op_.params.size(); ++i) {
        if (op_.params[i].name != name) continue;
        found = true;
        if (!op_.params[i].is_tensor || !op_.params[i].optional) {
          error(line, who + ": some lists '" + name + "', which is not an optional tensor");
          ok = false;
        }
        ctor_present[i] = true;
      }
      if (!found) {
        error(line, who + ": some lists '" + name + "', which is not an optional input");
        ok = false;
      }
      ri.some.push_back(name);
    }
    for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
      params_env.present[op_.inputs[i].name] = input_present[i];
    }
    for (std::size_t i = 0; i < op_.params.size(); ++i) {
      if (op_.params[i].is_tensor) params_env.present[op_.params[i].name] = ctor_present[i];
    }
    if (!ok) return;
    const Combo* combo = find_combo(info_, params_env.values, input_present, ctor_present);
    if (!combo) {
      error(row.line, who + ": no branch of the signature matches this row");
      return;
    }

    // Indices this row uses (after folding what its params and presence decide).
    std::set<std::string> used;
    auto use = [&](const Expr& e) {
      ExprPtr s = simplify(e, params_env);
      collect_used(info_, *s, used);
    };
    for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
      if (!input_present[i]) continue;
      for (const auto& a : combo->input_axes[i]) use(*a.expr);
      used.insert(op_.inputs[i].dtype);
    }
    for (std::size_t i = 0; i < op_.params.size(); ++i) {
      if (!ctor_present[i]) continue;
      for (const auto& a : combo->ctor_axes[i]) use(*a.expr);
      used.insert(op_.params[i].dtype);
    }
    for (std::size_t i = 0; i < op_.outputs.size(); ++i) {
      for (const auto& a : combo->output_axes[i]) use(*a.expr);
      used.insert(op_.outputs[i].dtype);
    }
    for (const auto& r : op_.shape_rules) {
      if (r.ast) use(*r.ast);
    }
    if (op_.flops.ast) use(*op_.flops.ast);
    if (op_.has_bytes && op_.bytes.ast) use(*op_.bytes.ast);
    for (const auto& l : op_.lets) {
      if (l.expr.ast) use(*l.expr.ast);  // every let is computed, so what it reads is used
    }

    std::vector<std::string> used_dtypes;
    for (const auto& f : op_.forall) {
      const bool is_used = used.count(f.name) > 0;
      if (f.k == IndexDecl::K::dtype) {
        if (is_used) used_dtypes.push_back(f.name);
        continue;
      }
      const bool given = indices.count(f.name) > 0;
      if (is_used && !given) {
        error(row.line, who + " does not give index '" + f.name + "', which this row uses");
        ok = false;
      } else if (!is_used && given) {
        error(index_lines[f.name],
              who + " gives index '" + f.name + "', which this row does not use" +
                  (combo->description.empty() ? "" : " (" + combo->description + ")"));
        ok = false;
      }
    }
    // dtype cases.
    std::vector<std::vector<std::pair<std::string, std::string>>> cases;
    if (!row.has_dtype_cases) {
      if (!used_dtypes.empty()) {
        std::string list;
        for (const auto& d : used_dtypes) list += (list.empty() ? "" : ", ") + d;
        error(row.line, who + " needs dtype_cases assigning " + list);
        ok = false;
      }
      cases.emplace_back();
    }
    for (const auto& dc : row.dtype_cases) {
      std::vector<std::pair<std::string, std::string>> assignment;
      std::set<std::string> given;
      for (const auto& [k, v] : dc.cells) {
        const IndexDecl* idx = index(k);
        if (!idx || idx->k != IndexDecl::K::dtype) {
          error(dc.line, who + ": dtype case key '" + k + "' is not a DType index" +
                             (param(k) ? " (dtype params are given as params in the row)" : ""));
          ok = false;
          continue;
        }
        if (std::find(used_dtypes.begin(), used_dtypes.end(), k) == used_dtypes.end()) {
          error(dc.line, who + ": dtype case assigns '" + k + "', which this row does not use" +
                             (combo->description.empty() ? "" : " (" + combo->description + ")"));
          ok = false;
          continue;
        }
        if (std::find(idx->dtypes.begin(), idx->dtypes.end(), v) == idx->dtypes.end()) {
          error(dc.line, who + ": dtype case " + k + " = " + v + " is outside " + idx->kind_text);
          ok = false;
          given.insert(k);
          continue;
        }
        given.insert(k);
      }
      for (const auto& d : used_dtypes) {
        if (!given.count(d)) {
          error(dc.line, who + ": dtype case does not assign '" + d + "', which this row uses");
          ok = false;
        }
      }
      for (const auto& f : op_.forall) {
        for (const auto& [k, v] : dc.cells) {
          if (k == f.name && given.count(k)) assignment.emplace_back(k, v);
        }
      }
      if (ok && !op_.dtype_combos.empty() && !in_combos(assignment, params_env)) {
        std::string text;
        for (const auto& [k, v] : assignment) text += (text.empty() ? "" : ", ") + k + ": " + v;
        error(dc.line, who + ": dtype case {" + text + "} is not one of dtype_combos");
        ok = false;
      }
      cases.push_back(std::move(assignment));
    }
    if (!ok) return;
    for (std::size_t ci = 0; ci < cases.size(); ++ci) {
      const auto& assignment = cases[ci];
      std::string id = row.label;
      for (const auto& [k, v] : assignment) id += "-" + v;
      const int line = row.has_dtype_cases ? row.dtype_cases[ci].line : row.line;
      auto it = case_ids_.find(id);
      if (it != case_ids_.end()) {
        error(line, "duplicate workload case id '" + id + "' (also at line " +
                        std::to_string(it->second) + ")");
        ok = false;
      } else {
        case_ids_.emplace(id, line);
      }
      if (ok)
        instantiate(*combo, params_env, indices, assignment, who + " (case '" + id + "')", line);
    }
    if (row.has_dtype_cases) {
      for (const auto& a : cases) ri.dtype_cases.push_back(a);
    } else {
      ri.dtype_cases.emplace_back();
    }
    info_.rows.push_back(std::move(ri));
  }

  bool in_combos(const std::vector<std::pair<std::string, std::string>>& assignment,
                 const MapEnv& params_env) const {
    for (const auto& row : op_.dtype_combos) {
      bool match = true;
      for (const auto& [k, v] : row.cells) {
        bool checked = false;
        for (const auto& [ak, av] : assignment) {
          if (ak == k) {
            match = match && av == v;
            checked = true;
          }
        }
        if (!checked) {
          if (const EValue* pv = params_env.lookup(k); pv && pv->is<DTypeValue>()) {
            match = match && pv->as<DTypeValue>().name == v;
          }
        }
      }
      if (match) return true;
    }
    return false;
  }

  void instantiate(const Combo& combo, const MapEnv& params_env,
                   const std::map<std::string, EValue, std::less<>>& indices,
                   const std::vector<std::pair<std::string, std::string>>& assignment,
                   const std::string& who, int line) {
    MapEnv env = params_env;
    for (const auto& [k, v] : indices) env.values[k] = v;
    for (const auto& [k, v] : assignment) env.values[k] = EValue(DTypeValue{v});
    std::string stage = "instantiating";
    try {
      auto shape_of = [&](const std::vector<ShapeItem>& axes, const std::string& what) {
        Seq out;
        for (const auto& a : axes) {
          if (a.splice) {
            for (std::int64_t x : eval_seq(*a.expr, env)) {
              if (x < 0)
                throw EvalError(a.expr->col, what + ": spliced '" + to_source(*a.expr) +
                                                 "' has a negative element");
              out.push_back(x);
            }
          } else {
            const std::int64_t x = eval_int(*a.expr, env);
            if (x < 0) {
              throw EvalError(a.expr->col, what + ": axis " + std::to_string(out.size()) + " (" +
                                               to_source(*a.expr) + ") is " + std::to_string(x));
            }
            out.push_back(x);
          }
        }
        return out;
      };
      auto dtype_of = [&](const DTypeRef& d) {
        if (d.k == DTypeRef::K::literal) return d.name;
        const EValue* v = env.lookup(d.name);
        if (!v || !v->is<DTypeValue>()) throw NotKnown(d.name);
        return v->as<DTypeValue>().name;
      };
      auto bytes_of = [](const Seq& s, const std::string& dtype) {
        std::int64_t n = 1;
        for (std::int64_t x : s) n *= x;
        return n * find_dtype(dtype)->bits / 8;
      };
      std::vector<Seq> shapes;
      std::vector<std::string> dtypes;
      for (const auto& t : combo.plan.tensors) {
        const auto i = static_cast<std::size_t>(t.index);
        const std::string what = (t.ctor ? "construction-time tensor '" : "input '") + t.name + "'";
        shapes.push_back(shape_of(t.ctor ? combo.ctor_axes[i] : combo.input_axes[i], what));
        dtypes.push_back(dtype_of(t.ctor ? info_.ctor_dtype[i] : info_.input_dtype[i]));
        env.bytes[t.name] = bytes_of(shapes.back(), dtypes.back());
      }
      // The generated check must re-solve the row from the instantiated tensors.
      stage = "re-solving the instantiated call";
      MapEnv solve = params_env;
      std::string why;
      if (!run_plan(info_, combo.plan, shapes, dtypes, solve, why)) {
        error(line, who + ": the instantiated call fails the signature check: " + why);
        return;
      }
      for (const auto& [k, v] : env.values) {
        const EValue* got = solve.lookup(k);
        if (index(k) && got && !(*got == v)) {
          error(line, who + ": the instantiated call solves " + k + " = " + repr(*got) +
                          " but the row gives " + repr(v));
          return;
        }
      }
      stage = "evaluating lets";
      for (const auto& n : info_.let_order) {
        for (const auto& l : op_.lets) {
          if (l.name != n || !l.expr.ast) continue;
          env.values[n] = eval(*simplify(*l.expr.ast, params_env), env);
        }
      }
      stage = "checking shape rules";
      for (const auto& r : op_.shape_rules) {
        if (!r.ast) continue;
        ExprPtr s = simplify(*r.ast, params_env);
        EValue v = eval(*s, env);
        if (v.is<bool>() && !v.as<bool>()) {
          std::string values;
          for (const auto& n : names_read(*s)) {
            if (const EValue* x = env.lookup(n))
              values += (values.empty() ? "" : ", ") + n + " = " + repr(*x);
          }
          error(line, who + " violates shape rule '" + r.text + "'" +
                          (values.empty() ? "" : " (" + values + ")"));
          return;
        }
      }
      stage = "inferring outputs";
      for (std::size_t i = 0; i < op_.outputs.size(); ++i) {
        const Seq s = shape_of(combo.output_axes[i], "output '" + op_.outputs[i].name + "'");
        env.bytes[op_.outputs[i].name] = bytes_of(s, dtype_of(info_.output_dtype[i]));
      }
      stage = "evaluating the roofline";
      if (op_.flops.ast) eval(*simplify(*op_.flops.ast, params_env), env);
      if (op_.has_bytes && op_.bytes.ast) eval(*simplify(*op_.bytes.ast, params_env), env);
    } catch (const EvalError& e) {
      error(line, who + ": " + stage + ": " + e.what());
    } catch (const NotKnown& e) {
      error(line, who + ": " + stage + ": '" + e.name + "' is not known");
    }
  }

  OpInfo& info_;
  const OpDecl& op_;
  Diagnostics& diags_;
  std::map<std::string, int> case_ids_;
};

}  // namespace

void check_workloads(OpInfo& info, Diagnostics& diags) {
  RowChecker(info, diags).run();
}

}  // namespace tgen
