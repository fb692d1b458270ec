// Type families (cases cover the discriminant once, one discriminant per family) and tensor
// shapes (axes, splices, family applications), then the tensor flags.
#include <algorithm>

#include "manifest/op_validator.h"

namespace tgen::validation {

const FamilyDecl* OpValidator::family(const std::string& name) const {
  for (const auto& f : op_.families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const FamilyFormal* OpValidator::formal(const FamilyDecl& f, const std::string& name) const {
  for (const auto& p : f.formals) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

void OpValidator::families() {
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
          error(c.line, what + " has two cases for " + f.match + " = " + repr(c.when) + " (lines " +
                            std::to_string(line) + " and " + std::to_string(c.line) + ")");
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

bool OpValidator::check_axis_item(ShapeItem& item, const ShapeSrc& src, const SymbolTable& syms) {
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

void OpValidator::note_params(const ShapeAst& ast) {
  for (const auto& item : ast.items) {
    if (item.expr->op != ExprOp::name) continue;
    const Symbol* s = info_.symbols.find(item.expr->sval);
    if (!s || s->cat != Symbol::Cat::param) continue;
    (item.splice ? info_.splice_params : info_.axis_params).insert(item.expr->sval);
  }
}

void OpValidator::check_shape(ShapeSrc& src, const std::string& tensor, bool ctor) {
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
    error(src.line,
          expr_message(src.where, src.text, ast.family_col,
                       "type family '" + f->name + "' takes " + std::to_string(f->formals.size()) +
                           " arguments, got " + std::to_string(ast.family_args.size())));
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
          ok = std::all_of(s->kind.values.begin(), s->kind.values.end(), [&](const std::string& v) {
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
      error(src.line, expr_message(src.where, src.text, arg.col,
                                   "argument '" + formal.name + "' of '" + f->name +
                                       "' must be a param or literal of " + formal.kind.str() +
                                       ", got '" + to_source(arg) + "' (" + arg.kind.str() + ")"));
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
      if (arg.op == ExprOp::name && std::find(info_.discr_params.begin(), info_.discr_params.end(),
                                              arg.sval) == info_.discr_params.end()) {
        info_.discr_params.push_back(arg.sval);
      }
    }
  }
}

void OpValidator::shapes() {
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

void OpValidator::tensor_flags() {
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

}  // namespace tgen::validation
