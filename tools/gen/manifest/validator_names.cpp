// Names (distinct, not reserved, C++ identifiers), the symbol table, lets (acyclic, checked in
// dependency order) and dtype references.
#include <algorithm>
#include <functional>

#include "dtypes.h"
#include "manifest/op_validator.h"
#include "manifest/types.h"

namespace tgen::validation {

bool OpValidator::names() {
  std::string why;
  bool ok = true;
  if (!valid_identifier(op_.name, why)) {
    error(op_.line, "op name: " + why);
    ok = false;
  }
  struct Decl {
    std::string name, cat;
    int line;
    bool buffer_out = false;
  };
  std::vector<Decl> all;
  for (const auto& f : op_.forall) all.push_back({f.name, "forall", f.line});
  for (const auto& p : op_.params) all.push_back({p.name, "param", p.line});
  for (const auto& l : op_.lets) all.push_back({l.name, "let", l.expr.line});
  for (const auto& t : op_.inputs) all.push_back({t.name, "input", t.line});
  for (const auto& t : op_.outputs) all.push_back({t.name, "output", t.line, t.buffer_out});
  std::map<std::string, const Decl*> seen;
  for (const auto& d : all) {
    // The buffer argument is named `out`: the output it fills may share the name (attention's
    // `out`, as FlashAttention names it), any other declaration may not.
    if (d.name == "out" && !d.buffer_out) {
      error(d.line, "'out' is reserved (the output buffer argument): rename this " + d.cat +
                        (d.cat == "output" ? " or declare it `buffer: out`" : ""));
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

void OpValidator::symbols() {
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

void OpValidator::lets() {
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
      error(l.expr.line, "let '" + n +
                             "' must be a value (Int, Float, Bool, Seq, DType or a string), got " +
                             k.str());
      continue;
    }
    info_.symbols.map[n].kind = k.is(Kind::Tag::str) ? Kind::of(Kind::Tag::str) : k;
  }
}

DTypeRef OpValidator::dtype_ref(const std::string& name, int line, const std::string& what) {
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

void OpValidator::dtype_refs() {
  for (const auto& t : op_.inputs) {
    info_.input_dtype.push_back(dtype_ref(t.dtype, t.dtype_line, "input '" + t.name + "'"));
  }
  for (const auto& t : op_.outputs) {
    info_.output_dtype.push_back(dtype_ref(t.dtype, t.dtype_line, "output '" + t.name + "'"));
  }
  for (const auto& p : op_.params) {
    info_.ctor_dtype.push_back(
        p.is_tensor ? dtype_ref(p.dtype, p.dtype_line, "construction-time tensor '" + p.name + "'")
                    : DTypeRef{});
  }
}

}  // namespace tgen::validation
