#include "manifest/validator.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "dtypes.h"
#include "expr/simplify.h"
#include "manifest/planner.h"
#include "manifest/types.h"
#include "manifest/workloads.h"

namespace tgen {

namespace {

constexpr std::size_t kMaxCombos = 256;

// The partial environment of a combination: discriminant values and tensor presence.
class ComboEnv : public EvalEnv {
 public:
  ComboEnv(const OpDecl& op, const Combo& c) : op_(op), c_(c) {}
  const EValue* lookup(std::string_view name) const override {
    for (const auto& [n, v] : c_.discr) {
      if (n == name) return &v;
    }
    return nullptr;
  }
  std::optional<bool> tensor_present(std::string_view name) const override {
    for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
      if (op_.inputs[i].name == name) return c_.input_present[i];
    }
    for (std::size_t i = 0; i < op_.params.size(); ++i) {
      if (op_.params[i].name == name && op_.params[i].is_tensor) return c_.ctor_present[i];
    }
    return std::nullopt;
  }

 private:
  const OpDecl& op_;
  const Combo& c_;
};

class FormalSymbols : public SymbolTable {
 public:
  explicit FormalSymbols(const FamilyDecl& f) {
    for (const auto& formal : f.formals) {
      Symbol s;
      s.cat = Symbol::Cat::formal;
      s.kind = formal.kind;
      map_.emplace(formal.name, s);
    }
  }
  const Symbol* find(std::string_view name) const override {
    auto it = map_.find(std::string(name));
    return it == map_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::string, Symbol> map_;
};

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

class OpValidator {
 public:
  OpValidator(OpDecl& op, const Manifest& m, Diagnostics& diags) : op_(op), m_(m), diags_(diags) {
    info_.decl = &op;
  }

  OpInfo run() {
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

 private:
  void error(int line, std::string msg) { diags_.error(op_.file, line, std::move(msg)); }
  void expr_error(const ExprSrc& src, const ExprError& err) {
    error(src.line, expr_message(src.where, src.text, err.col, err.message));
  }

  // ---- names ----------------------------------------------------------------------------

  bool names() {
    std::string why;
    bool ok = true;
    if (!valid_identifier(op_.name, why)) {
      error(op_.line, "op name: " + why);
      ok = false;
    }
    struct Decl {
      std::string name, cat;
      int line;
    };
    std::vector<Decl> all;
    for (const auto& f : op_.forall) all.push_back({f.name, "forall", f.line});
    for (const auto& p : op_.params) all.push_back({p.name, "param", p.line});
    for (const auto& l : op_.lets) all.push_back({l.name, "let", l.expr.line});
    for (const auto& t : op_.inputs) all.push_back({t.name, "input", t.line});
    for (const auto& t : op_.outputs) all.push_back({t.name, "output", t.line});
    std::map<std::string, const Decl*> seen;
    for (const auto& d : all) {
      if (d.name == "out") {
        error(d.line, "'out' is reserved (the output buffer argument): rename this " + d.cat);
        ok = false;
        continue;
      }
      if (!valid_identifier(d.name, why)) {
        error(d.line, d.cat + " name: " + why);
        ok = false;
        continue;
      }
      if (find_dtype(d.name)) {
        error(d.line, d.cat + " name '" + d.name + "' is a dtype spelling and cannot be a name");
        ok = false;
        continue;
      }
      auto it = seen.find(d.name);
      if (it == seen.end()) {
        seen.emplace(d.name, &d);
        continue;
      }
      ok = false;
      const Decl& first = *it->second;
      auto as = [](const std::string& cat) {
        return cat == "forall" ? std::string("in forall")
                               : "as " + std::string(cat == "input" ? "an " : "a ") + cat;
      };
      const bool index_like = [&] {
        auto solving = [](const std::string& c) {
          return c == "forall" || c == "param" || c == "let";
        };
        return solving(first.cat) && solving(d.cat);
      }();
      if (index_like) {
        error(d.line, "index '" + d.name + "' is doubly solved: declared " + as(first.cat) +
                          " (line " + std::to_string(first.line) + ") and " + as(d.cat));
      } else {
        error(d.line, "name '" + d.name + "' is declared twice: " + as(first.cat) + " (line " +
                          std::to_string(first.line) + ") and " + as(d.cat) +
                          " (index, param, let and tensor names must be distinct)");
      }
    }
    return ok;
  }

  void symbols() {
    auto& map = info_.symbols.map;
    for (const auto& f : op_.forall) {
      Symbol s;
      s.cat = Symbol::Cat::index;
      s.kind = f.k == IndexDecl::K::dim     ? Kind::dim()
               : f.k == IndexDecl::K::shape ? Kind::seq(true)
                                            : Kind::dtype(f.dtypes);
      map.emplace(f.name, s);
    }
    for (const auto& p : op_.params) {
      Symbol s;
      if (p.is_tensor) {
        s.cat = Symbol::Cat::ctor_tensor;
        s.kind = Kind::of(Kind::Tag::tensor);
        s.optional = p.optional;
      } else {
        s.cat = Symbol::Cat::param;
        s.kind = kind_of(p.type);
      }
      map.emplace(p.name, s);
    }
    for (const auto& t : op_.inputs) {
      Symbol s;
      s.cat = Symbol::Cat::input;
      s.kind = Kind::of(Kind::Tag::tensor);
      s.optional = t.optional;
      map.emplace(t.name, s);
    }
    for (const auto& t : op_.outputs) {
      Symbol s;
      s.cat = Symbol::Cat::output;
      s.kind = Kind::of(Kind::Tag::tensor);
      map.emplace(t.name, s);
    }
    for (const auto& l : op_.lets) {
      Symbol s;
      s.cat = Symbol::Cat::let;
      s.kind = Kind::error();
      map.emplace(l.name, s);
    }
  }

  // ---- lets -----------------------------------------------------------------------------

  void lets() {
    std::map<std::string, const LetDecl*> by_name;
    for (const auto& l : op_.lets) by_name[l.name] = &l;
    std::map<std::string, int> state;  // 0 new, 1 visiting, 2 done
    std::vector<std::string> stack;
    std::set<std::string> in_cycle;
    std::function<void(const std::string&)> visit = [&](const std::string& n) {
      state[n] = 1;
      stack.push_back(n);
      const LetDecl* l = by_name[n];
      if (l->expr.ast) {
        for (const auto& dep : names_read(*l->expr.ast)) {
          if (!by_name.count(dep)) continue;
          if (state[dep] == 1) {
            std::string path;
            auto it = std::find(stack.begin(), stack.end(), dep);
            for (; it != stack.end(); ++it) {
              path += *it + " -> ";
              in_cycle.insert(*it);
            }
            path += dep;
            error(by_name[dep]->expr.line, "let '" + dep + "' is part of a cycle: " + path);
          } else if (state[dep] == 0) {
            visit(dep);
          }
        }
      }
      stack.pop_back();
      state[n] = 2;
      info_.let_order.push_back(n);
    };
    for (const auto& l : op_.lets) {
      if (state[l.name] == 0) visit(l.name);
    }
    if (!in_cycle.empty()) {
      info_.let_order.clear();
      return;
    }
    for (const auto& n : info_.let_order) {
      LetDecl& l = const_cast<LetDecl&>(*by_name[n]);
      if (!l.expr.ast) continue;
      ExprError err;
      if (!check_expr(*l.expr.ast, info_.symbols, CheckContext{}, err)) {
        expr_error(l.expr, err);
        continue;
      }
      const Kind& k = l.expr.ast->kind;
      if (k.is(Kind::Tag::tuple) || k.is(Kind::Tag::none) || k.is(Kind::Tag::tensor)) {
        error(l.expr.line,
              "let '" + n + "' must be a value (Int, Float, Bool, Seq, DType or a string), got " +
                  k.str());
        continue;
      }
      info_.symbols.map[n].kind = k.is(Kind::Tag::str) ? Kind::of(Kind::Tag::str) : k;
    }
  }

  // ---- dtypes ---------------------------------------------------------------------------

  DTypeRef dtype_ref(const std::string& name, int line, const std::string& what) {
    DTypeRef r;
    r.name = name;
    const Symbol* s = info_.symbols.find(name);
    if (s && s->cat == Symbol::Cat::index && s->kind.is(Kind::Tag::dtype)) {
      r.k = DTypeRef::K::index;
    } else if (s && s->cat == Symbol::Cat::param && s->kind.is(Kind::Tag::dtype)) {
      r.k = DTypeRef::K::param;
    } else if (!s && find_dtype(name)) {
      r.k = DTypeRef::K::literal;
    } else {
      error(line, what + ": dtype '" + name +
                      "' is not a DType index, a dtype param or a dtype (valid dtypes: " +
                      dtype_spellings() + ")");
    }
    return r;
  }

  void dtype_refs() {
    for (const auto& t : op_.inputs) {
      info_.input_dtype.push_back(dtype_ref(t.dtype, t.dtype_line, "input '" + t.name + "'"));
    }
    for (const auto& t : op_.outputs) {
      info_.output_dtype.push_back(dtype_ref(t.dtype, t.dtype_line, "output '" + t.name + "'"));
    }
    for (const auto& p : op_.params) {
      info_.ctor_dtype.push_back(
          p.is_tensor
              ? dtype_ref(p.dtype, p.dtype_line, "construction-time tensor '" + p.name + "'")
              : DTypeRef{});
    }
  }

  // ---- type families ----------------------------------------------------------------------

  const FamilyDecl* family(const std::string& name) const {
    for (const auto& f : op_.families) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }

  const FamilyFormal* formal(const FamilyDecl& f, const std::string& name) const {
    for (const auto& p : f.formals) {
      if (p.name == name) return &p;
    }
    return nullptr;
  }

  void families() {
    for (auto& f : op_.families) {
      const std::string what = "type family '" + f.name + "'";
      const FamilyFormal* m = formal(f, f.match);
      if (!m) {
        error(f.match_line, what + ": match '" + f.match + "' is not one of its parameters");
        continue;
      }
      if (!m->kind.is(Kind::Tag::enum_) && !m->kind.is(Kind::Tag::bool_)) {
        error(f.match_line, what + ": match '" + f.match +
                                "' must be an enum or bool parameter, not " + m->kind.str());
        continue;
      }
      std::vector<EValue> domain;
      if (m->kind.is(Kind::Tag::bool_)) {
        domain = {EValue(false), EValue(true)};
      } else {
        for (const auto& v : m->kind.values) domain.push_back(EValue(v));
      }
      std::vector<std::pair<EValue, int>> seen;
      for (auto& c : f.cases) {
        bool fits = false;
        for (const auto& d : domain) fits = fits || d == c.when;
        if (!fits) {
          error(c.line, what + ": case 'when: " + repr(c.when) + "' is not a value of '" + f.match +
                            "' (" + m->kind.str() + ")");
          continue;
        }
        for (const auto& [v, line] : seen) {
          if (v == c.when) {
            error(c.line, what + " has two cases for " + f.match + " = " + repr(c.when) +
                              " (lines " + std::to_string(line) + " and " + std::to_string(c.line) +
                              ")");
          }
        }
        seen.emplace_back(c.when, c.line);
        if (c.is.ast.is_family) {
          error(c.is.line, what + ": a case shape cannot apply another type family");
          continue;
        }
        FormalSymbols syms(f);
        for (auto& item : c.is.ast.items) check_axis_item(item, c.is, syms);
      }
      for (const auto& d : domain) {
        bool covered = false;
        for (const auto& [v, line] : seen) covered = covered || v == d;
        if (!covered) {
          error(f.line, what + " has no case for " + f.match + " = " + repr(d) +
                            " (cases must cover every value)");
        }
      }
    }
  }

  // Checks one axis of a shape in `syms`; reports errors with the shape's column.
  bool check_axis_item(ShapeItem& item, const ShapeSrc& src, const SymbolTable& syms) {
    ExprError err;
    if (!check_expr(*item.expr, syms, CheckContext{}, err)) {
      error(src.line, expr_message(src.where, src.text, err.col, err.message));
      return false;
    }
    const Kind& k = item.expr->kind;
    if (item.splice && !k.is(Kind::Tag::seq)) {
      error(src.line, expr_message(src.where, src.text, item.expr->col,
                                   "a splice '*" + to_source(*item.expr) +
                                       "' needs a Shape index or a list param, got " + k.str()));
      return false;
    }
    if (!item.splice && !k.is_int()) {
      error(src.line,
            expr_message(src.where, src.text, item.expr->col,
                         "axis '" + to_source(*item.expr) + "' must be an Int, got " + k.str()));
      return false;
    }
    return true;
  }

  // ---- shapes -------------------------------------------------------------------------------

  void note_params(const ShapeAst& ast) {
    for (const auto& item : ast.items) {
      if (item.expr->op != ExprOp::name) continue;
      const Symbol* s = info_.symbols.find(item.expr->sval);
      if (!s || s->cat != Symbol::Cat::param) continue;
      (item.splice ? info_.splice_params : info_.axis_params).insert(item.expr->sval);
    }
  }

  void check_shape(ShapeSrc& src, const std::string& tensor, bool ctor) {
    if (!src.ok) return;
    ShapeAst& ast = src.ast;
    if (!ast.is_family) {
      for (auto& item : ast.items) check_axis_item(item, src, info_.symbols);
      note_params(ast);
      return;
    }
    if (ctor) {
      error(src.line,
            "construction-time tensor '" + tensor + "': its shape cannot apply a type family");
      return;
    }
    const FamilyDecl* f = family(ast.family);
    if (!f) {
      error(src.line, expr_message(src.where, src.text, ast.family_col,
                                   "unknown type family '" + ast.family + "'"));
      return;
    }
    used_families_.insert(f->name);
    if (ast.family_args.size() != f->formals.size()) {
      error(src.line, expr_message(src.where, src.text, ast.family_col,
                                   "type family '" + f->name + "' takes " +
                                       std::to_string(f->formals.size()) + " arguments, got " +
                                       std::to_string(ast.family_args.size())));
      return;
    }
    for (std::size_t i = 0; i < f->formals.size(); ++i) {
      const FamilyFormal& formal = f->formals[i];
      Expr& arg = *ast.family_args[i];
      ExprError err;
      if (!check_expr(arg, info_.symbols, CheckContext{}, err)) {
        error(src.line, expr_message(src.where, src.text, err.col, err.message));
        continue;
      }
      if (formal.kind.is(Kind::Tag::dim)) {
        if (!arg.kind.is_int()) {
          error(src.line, expr_message(src.where, src.text, arg.col,
                                       "argument '" + formal.name + "' of '" + f->name +
                                           "' must be an Int, got " + arg.kind.str()));
        }
        continue;
      }
      // A discriminant: a param of the formal's kind, or a literal of it.
      bool ok = false;
      if (arg.op == ExprOp::name) {
        const Symbol* s = info_.symbols.find(arg.sval);
        if (s && s->cat == Symbol::Cat::param) {
          if (formal.kind.is(Kind::Tag::bool_)) {
            ok = s->kind.is(Kind::Tag::bool_);
          } else if (s->kind.is(Kind::Tag::enum_)) {
            ok = std::all_of(
                s->kind.values.begin(), s->kind.values.end(), [&](const std::string& v) {
                  return std::find(formal.kind.values.begin(), formal.kind.values.end(), v) !=
                         formal.kind.values.end();
                });
          }
        }
      } else if (arg.op == ExprOp::bool_lit) {
        ok = formal.kind.is(Kind::Tag::bool_);
      } else if (arg.op == ExprOp::str_lit) {
        ok = formal.kind.is(Kind::Tag::enum_) &&
             std::find(formal.kind.values.begin(), formal.kind.values.end(), arg.sval) !=
                 formal.kind.values.end();
      }
      if (!ok) {
        error(src.line,
              expr_message(src.where, src.text, arg.col,
                           "argument '" + formal.name + "' of '" + f->name +
                               "' must be a param or literal of " + formal.kind.str() + ", got '" +
                               to_source(arg) + "' (" + arg.kind.str() + ")"));
        continue;
      }
      if (formal.name == f->match) {
        const std::string text = to_source(arg);
        auto it = discriminant_.find(f->name);
        if (it == discriminant_.end()) {
          discriminant_.emplace(f->name, std::make_pair(text, tensor));
        } else if (it->second.first != text) {
          error(src.line, "tensors '" + it->second.second + "' and '" + tensor +
                              "' apply type family '" + f->name +
                              "' with different discriminants ('" + it->second.first + "' and '" +
                              text + "'): they must take the same branch");
        }
        if (arg.op == ExprOp::name &&
            std::find(info_.discr_params.begin(), info_.discr_params.end(), arg.sval) ==
                info_.discr_params.end()) {
          info_.discr_params.push_back(arg.sval);
        }
      }
    }
  }

  void shapes() {
    for (auto& p : op_.params) {
      if (p.is_tensor) check_shape(p.shape, p.name, true);
    }
    for (auto& t : op_.inputs) check_shape(t.shape, t.name, false);
    for (auto& t : op_.outputs) check_shape(t.shape, t.name, false);
    for (const auto& f : op_.families) {
      if (!used_families_.count(f.name)) {
        error(f.line, "type family '" + f.name + "' is never used");
      }
    }
    // Order discriminant params as the params are declared.
    std::vector<std::string> ordered;
    for (const auto& p : op_.params) {
      if (std::find(info_.discr_params.begin(), info_.discr_params.end(), p.name) !=
          info_.discr_params.end()) {
        ordered.push_back(p.name);
      }
    }
    info_.discr_params = ordered;
  }

  void tensor_flags() {
    const TensorDecl* first_optional = nullptr;
    for (const auto& t : op_.inputs) {
      if (t.optional) {
        if (!first_optional) first_optional = &t;
      } else if (first_optional) {
        error(t.line, "required input '" + t.name + "' comes after optional input '" +
                          first_optional->name + "' (optional inputs come last)");
      }
    }
    const TensorDecl* buffer = nullptr;
    for (const auto& t : op_.outputs) {
      if (!t.buffer_out) continue;
      if (buffer) {
        error(t.line, "output '" + t.name + "': at most one output may have buffer: out ('" +
                          buffer->name + "' has it)");
      } else {
        buffer = &t;
      }
    }
  }

  // ---- rules, combos, roofline, composition ---------------------------------------------------

  void rules() {
    for (auto& r : op_.shape_rules) {
      if (!r.ast) continue;
      ExprError err;
      if (!check_expr(*r.ast, info_.symbols, CheckContext{}, err)) {
        expr_error(r, err);
        continue;
      }
      if (!r.ast->kind.is(Kind::Tag::bool_)) {
        error(r.line, r.where + " \"" + r.text + "\" must be a boolean expression, got " +
                          r.ast->kind.str());
      }
    }
  }

  void combos_table() {
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < op_.dtype_combos.size(); ++i) {
      const DTypeRow& row = op_.dtype_combos[i];
      std::vector<std::string> row_keys;
      for (const auto& [k, v] : row.cells) {
        row_keys.push_back(k);
        const Symbol* s = info_.symbols.find(k);
        const bool ok_key = s && s->kind.is(Kind::Tag::dtype) &&
                            (s->cat == Symbol::Cat::index || s->cat == Symbol::Cat::param);
        if (!ok_key) {
          error(row.line, "dtype_combos key '" + k + "' is not a DType index or a dtype param");
          continue;
        }
        if (!find_dtype(v)) {
          error(row.line,
                "dtype_combos: '" + v + "' is not a dtype (valid: " + dtype_spellings() + ")");
        } else if (std::find(s->kind.values.begin(), s->kind.values.end(), v) ==
                   s->kind.values.end()) {
          error(row.line,
                "dtype_combos: " + k + " = " + v + " is outside " + k + "'s " + s->kind.str());
        }
      }
      std::sort(row_keys.begin(), row_keys.end());
      if (i == 0) {
        keys = row_keys;
      } else if (row_keys != keys) {
        auto join = [](const std::vector<std::string>& v) {
          std::string out;
          for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
          return "{" + out + "}";
        };
        error(row.line, "dtype_combos rows must have the same keys: this row has " +
                            join(row_keys) + ", the first has " + join(keys));
      }
      for (std::size_t j = 0; j < i; ++j) {
        auto a = op_.dtype_combos[j].cells;
        auto b = row.cells;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        if (a == b) {
          error(row.line, "duplicate dtype_combos row (same as line " +
                              std::to_string(op_.dtype_combos[j].line) + ")");
          break;
        }
      }
    }
  }

  void roofline() {
    CheckContext ctx;
    ctx.roofline = true;
    for (ExprSrc* src : {&op_.flops, op_.has_bytes ? &op_.bytes : nullptr}) {
      if (!src || !src->ast) continue;
      ExprError err;
      if (!check_expr(*src->ast, info_.symbols, ctx, err)) {
        expr_error(*src, err);
        continue;
      }
      if (!src->ast->kind.is_number()) {
        error(src->line,
              src->where + " \"" + src->text + "\" must be a number, got " + src->ast->kind.str());
      }
    }
  }

  void composition() {
    for (const auto& s : op_.stages) {
      if (s.op.empty()) continue;
      bool found = false;
      for (const auto& o : m_.ops) found = found || o->name == s.op;
      if (!found) {
        error(s.line, "composition stage '" + s.name + "' names op '" + s.op +
                          "', which the manifest does not declare");
      }
    }
  }

  void read_names(const Expr& e, std::set<std::string>& out) {
    for (const auto& n : names_read(e)) out.insert(n);
  }

  void unused_indices() {
    std::set<std::string> read;
    auto shape = [&](const ShapeSrc& s) {
      if (!s.ok) return;
      for (const auto& a : s.ast.family_args) read_names(*a, read);
      for (const auto& i : s.ast.items) read_names(*i.expr, read);
    };
    for (const auto& p : op_.params) {
      if (p.is_tensor) {
        shape(p.shape);
        read.insert(p.dtype);
      }
    }
    for (const auto* list : {&op_.inputs, &op_.outputs}) {
      for (const auto& t : *list) {
        shape(t.shape);
        read.insert(t.dtype);
      }
    }
    for (const auto& l : op_.lets) {
      if (l.expr.ast) read_names(*l.expr.ast, read);
    }
    for (const auto& r : op_.shape_rules) {
      if (r.ast) read_names(*r.ast, read);
    }
    if (op_.flops.ast) read_names(*op_.flops.ast, read);
    if (op_.has_bytes && op_.bytes.ast) read_names(*op_.bytes.ast, read);
    for (const auto& f : op_.forall) {
      if (!read.count(f.name)) {
        error(f.line, "forall index '" + f.name + "' is never used");
      }
    }
    read_names_ = std::move(read);
  }

  // ---- index slots and the construction check ----------------------------------------------

  void slots() {
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

  std::set<std::string> base_known(bool call) const {
    std::set<std::string> known;
    for (const auto& p : op_.params) known.insert(p.name);
    if (call) {
      for (const auto& t : op_.inputs) known.insert(t.name);
    }
    return known;
  }

  std::vector<ShapeItem> clone_items(const ShapeAst& ast) const {
    std::vector<ShapeItem> out;
    for (const auto& i : ast.items) out.push_back(ShapeItem{i.splice, i.expr->clone()});
    return out;
  }

  void construction() {
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
          PlanInput{PlanTensor{true, static_cast<int>(i), p.name, p.shape.text},
                    &info_.ctor_axes[i], info_.ctor_dtype[i]}};
      std::set<std::string> ignored;
      info_.optional_ctor_plans.emplace_back(static_cast<int>(i),
                                             make_plan(info_, one, info_.ctor_known, ignored));
    }
    for (const auto& r : op_.shape_rules) {
      info_.rule_at_construction.push_back(r.ast &&
                                           unknown_names(*r.ast, info_, info_.ctor_known).empty());
    }
  }

  // ---- branch / presence combinations -------------------------------------------------------

  std::vector<ShapeItem> expand(const ShapeSrc& src, const Combo& c, const ComboEnv& env,
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

  std::string describe(const Combo& c) const {
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

  int index_line(const std::string& name) const {
    for (const auto& f : op_.forall) {
      if (f.name == name) return f.line;
    }
    for (const auto& l : op_.lets) {
      if (l.name == name) return l.expr.line;
    }
    return op_.line;
  }

  void unsolvable(const std::string& name, const Combo& c, std::size_t ncombos) {
    if (reported_unsolvable_.count(name)) return;
    reported_unsolvable_.insert(name);
    std::string msg = "index '" + name + "' cannot be solved from any input";
    if (ncombos > 1) msg += " (when " + c.description + ")";
    error(index_line(name), msg);
  }

  bool combos() {
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
      if (op_.params[i].is_tensor && op_.params[i].optional)
        opt_ctor.push_back(static_cast<int>(i));
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

  void build_combo(Combo& c, std::size_t ncombos) {
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

  OpDecl& op_;
  const Manifest& m_;
  Diagnostics& diags_;
  OpInfo info_;
  std::set<std::string> used_families_;
  std::map<std::string, std::pair<std::string, std::string>>
      discriminant_;  // family → (arg, tensor)
  std::set<std::string> read_names_;
  std::set<std::string> reported_unsolvable_;
};

}  // namespace

std::vector<OpInfo> validate(Manifest& manifest, Diagnostics& diags) {
  std::vector<OpInfo> out;
  for (auto& op : manifest.ops) out.push_back(OpValidator(*op, manifest, diags).run());
  return out;
}

}  // namespace tgen
