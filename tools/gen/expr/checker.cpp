#include "expr/checker.h"

#include <algorithm>

#include "dtypes.h"

namespace tgen {

const std::vector<std::string_view>& primitive_names() {
  static const std::vector<std::string_view> names = {
      "len", "prod", "sum", "max", "min", "ceil_div", "present", "category", "bits", "bytes"};
  return names;
}

namespace {

using Tag = Kind::Tag;
using Names = std::vector<std::string>;

bool contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string quoted_list(const std::vector<std::string>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += "'" + v[i] + "'";
  }
  return out;
}

// The optional name `e` tests, when `e` is present(name).
const Expr* presence_test(const Expr& e) {
  if (e.op == ExprOp::call && e.sval == "present" && e.args.size() == 1 &&
      e.args[0]->op == ExprOp::name) {
    return e.args[0].get();
  }
  return nullptr;
}

void facts_when_false(const Expr& e, Names& out);

// Names known present when `e` holds / does not hold.
void facts_when_true(const Expr& e, Names& out) {
  if (const Expr* n = presence_test(e)) {
    out.push_back(n->sval);
  } else if (e.op == ExprOp::and_) {
    facts_when_true(*e.args[0], out);
    facts_when_true(*e.args[1], out);
  } else if (e.op == ExprOp::not_) {
    facts_when_false(*e.args[0], out);
  }
}

void facts_when_false(const Expr& e, Names& out) {
  if (e.op == ExprOp::or_) {
    facts_when_false(*e.args[0], out);
    facts_when_false(*e.args[1], out);
  } else if (e.op == ExprOp::not_) {
    facts_when_true(*e.args[0], out);
  }
}

}  // namespace

bool comparable(const Expr& a, const Expr& b, std::string& why) {
  const Kind& ka = a.kind;
  const Kind& kb = b.kind;
  if (ka.is(Tag::none) || kb.is(Tag::none)) {
    why = "comparison with None is not supported (use present(x))";
    return false;
  }
  if (ka.is_number() && kb.is_number()) return true;
  if (ka.is(Tag::bool_) && kb.is(Tag::bool_)) return true;
  if (ka.is(Tag::seq) && kb.is(Tag::seq)) return true;
  if (ka.is(Tag::dtype) && kb.is(Tag::dtype)) {
    const Expr* lit = a.dtype_literal ? &a : b.dtype_literal ? &b : nullptr;
    const Expr* other = lit == &a ? &b : &a;
    if (lit && !other->dtype_literal && !other->kind.values.empty() &&
        !contains(other->kind.values, lit->sval)) {
      why = "'" + to_source(*other) + "' is " + other->kind.str() + ": it is never " + lit->sval;
      return false;
    }
    return true;
  }
  if (ka.is_stringy() && kb.is_stringy()) {
    const Expr* lit = a.op == ExprOp::str_lit ? &a : b.op == ExprOp::str_lit ? &b : nullptr;
    const Expr* other = lit == &a ? &b : &a;
    if (lit && other->kind.is(Tag::enum_) && !contains(other->kind.values, lit->sval)) {
      why = "'" + to_source(*other) + "' is one of " + quoted_list(other->kind.values) +
            ": it is never '" + lit->sval + "'";
      return false;
    }
    return true;
  }
  why = "cannot compare " + ka.str() + " with " + kb.str();
  return false;
}

namespace {

class Checker {
 public:
  Checker(const SymbolTable& syms, const CheckContext& ctx, ExprError& err)
      : syms_(syms), ctx_(ctx), err_(err) {}

  bool check(Expr& e, const Names& narrowed) {
    if (++depth_ > 200) return fail(e, "expression nested too deeply");
    const bool ok = check_inner(e, narrowed);
    --depth_;
    if (!ok) e.kind = Kind::error();
    return ok;
  }

 private:
  bool fail(const Expr& e, std::string msg) {
    if (err_.message.empty()) {
      err_.col = e.col;
      err_.message = std::move(msg);
    }
    return false;
  }

  // "'x' (Seq[Int])" for messages about an operand.
  static std::string what(const Expr& e) { return "'" + to_source(e) + "' (" + e.kind.str() + ")"; }

  bool need_number(const Expr& operand, const Expr& at, std::string_view op) {
    if (operand.kind.is_number()) return true;
    return fail(at, std::string(op) + " expects numbers, got " + what(operand));
  }
  bool need_int(const Expr& operand, const Expr& at, std::string_view op) {
    if (operand.kind.is_int()) return true;
    return fail(at, std::string(op) + " expects an Int, got " + what(operand));
  }
  bool need_bool(const Expr& operand, const Expr& at, std::string_view op) {
    if (operand.kind.is(Tag::bool_)) return true;
    return fail(at, std::string(op) + " expects a Bool, got " + what(operand));
  }
  bool need_seq(const Expr& operand, const Expr& at, std::string_view fn) {
    if (operand.kind.is(Tag::seq)) return true;
    return fail(at, std::string(fn) + " expects a sequence (Shape or list), got " + what(operand));
  }
  bool need_dtype(const Expr& operand, const Expr& at, std::string_view fn) {
    if (operand.kind.is(Tag::dtype)) return true;
    return fail(at, std::string(fn) + " expects a DType, got " + what(operand));
  }

  bool check_name(Expr& e, const Names& narrowed) {
    const Symbol* s = syms_.find(e.sval);
    if (!s) {
      if (find_dtype(e.sval)) {
        e.dtype_literal = true;
        e.kind = Kind::dtype({e.sval});
        return true;
      }
      return fail(e, "unknown name '" + e.sval + "'");
    }
    switch (s->cat) {
      case Symbol::Cat::input:
      case Symbol::Cat::output:
      case Symbol::Cat::ctor_tensor:
        return fail(e, "'" + e.sval + "' is a tensor: only present(" + e.sval + ") and bytes(" +
                           e.sval + ") take a tensor");
      default:
        break;
    }
    if (s->kind.is(Tag::maybe)) {
      if (!contains(narrowed, e.sval)) {
        return fail(
            e, "'" + e.sval + "' may be None here: use it where present(" + e.sval + ") holds");
      }
      e.narrowed = true;
      e.kind = *s->kind.inner;
      return true;
    }
    e.kind = s->kind;
    return true;
  }

  bool check_arith(Expr& e, const Names& narrowed) {
    if (!check(*e.args[0], narrowed) || !check(*e.args[1], narrowed)) return false;
    const Expr& l = *e.args[0];
    const Expr& r = *e.args[1];
    const char* sym = e.op == ExprOp::add        ? "'+'"
                      : e.op == ExprOp::sub      ? "'-'"
                      : e.op == ExprOp::mul      ? "'*'"
                      : e.op == ExprOp::floordiv ? "'//'"
                                                 : "'%'";
    if (e.op == ExprOp::div) {
      return fail(e, "'/' is not supported: use '//' (floor division)");
    }
    if (!need_number(l, e, sym) || !need_number(r, e, sym)) return false;
    if (l.kind.is(Tag::float_) || r.kind.is(Tag::float_)) {
      e.kind = Kind::float_();
    } else if (l.kind.is(Tag::dim) && r.kind.is(Tag::dim) && e.op != ExprOp::sub) {
      e.kind = Kind::dim();
    } else {
      e.kind = Kind::int_();
    }
    return true;
  }

  bool check_compare(Expr& e, const Names& narrowed) {
    if (!check(*e.args[0], narrowed) || !check(*e.args[1], narrowed)) return false;
    const Expr& l = *e.args[0];
    const Expr& r = *e.args[1];
    if (e.op == ExprOp::eq || e.op == ExprOp::ne) {
      std::string why;
      if (!comparable(l, r, why)) return fail(e, why);
    } else {
      const char* sym = e.op == ExprOp::lt   ? "'<'"
                        : e.op == ExprOp::le ? "'<='"
                        : e.op == ExprOp::gt ? "'>'"
                                             : "'>='";
      if (!need_number(l, e, sym) || !need_number(r, e, sym)) return false;
    }
    e.kind = Kind::bool_();
    return true;
  }

  bool check_in(Expr& e, const Names& narrowed) {
    if (!check(*e.args[0], narrowed)) return false;
    Expr& l = *e.args[0];
    Expr& r = *e.args[1];
    if (r.op == ExprOp::tuple || r.op == ExprOp::list) {
      for (auto& item : r.args) {
        if (!check(*item, narrowed)) return false;
        std::string why;
        if (!comparable(l, *item, why)) return fail(*item, why);
      }
      r.kind = Kind::of(Tag::tuple);
      for (auto& item : r.args) r.kind.elems.push_back(item->kind);
    } else {
      if (!check(r, narrowed)) return false;
      if (!r.kind.is(Tag::seq)) {
        return fail(e, "'in' expects a tuple literal or a sequence, got " + what(r));
      }
      if (!need_int(l, e, "'in' a sequence")) return false;
    }
    e.kind = Kind::bool_();
    return true;
  }

  static Kind join(const Kind& a, const Kind& b, bool& ok) {
    ok = true;
    if (a.is_int() && b.is_int())
      return a.is(Tag::dim) && b.is(Tag::dim) ? Kind::dim() : Kind::int_();
    if (a.is_number() && b.is_number()) return Kind::float_();
    if (a.tag == b.tag) {
      if (a.is(Tag::enum_) || a.is(Tag::dtype)) {
        if (a.values.empty() || b.values.empty()) return a.is(Tag::dtype) ? Kind::dtype({}) : a;
        Kind k = a;
        for (const auto& v : b.values) {
          if (!contains(k.values, v)) k.values.push_back(v);
        }
        return k;
      }
      if (a.is(Tag::seq)) return Kind::seq(a.shape && b.shape);
      if (a.is(Tag::tuple) || a.is(Tag::none)) {
        ok = false;
        return a;
      }
      return a;
    }
    if (a.is_stringy() && b.is_stringy()) return Kind::of(Tag::str);
    ok = false;
    return a;
  }

  bool check_cond(Expr& e, const Names& narrowed) {
    Expr& c = *e.args[0];
    if (!check(c, narrowed)) return false;
    if (!need_bool(c, c, "a conditional's condition")) return false;
    Names when_true = narrowed, when_false = narrowed;
    facts_when_true(c, when_true);
    facts_when_false(c, when_false);
    if (!check(*e.args[1], when_true) || !check(*e.args[2], when_false)) return false;
    const Kind& a = e.args[1]->kind;
    const Kind& b = e.args[2]->kind;
    bool ok = true;
    Kind k = join(a, b, ok);
    if (!ok || a.is(Tag::tuple)) {
      return fail(e, "the branches of the conditional have different kinds: " + a.str() + " and " +
                         b.str());
    }
    if (a.is(Tag::str) && e.args[1]->op == ExprOp::str_lit && b.is(Tag::str) &&
        e.args[2]->op == ExprOp::str_lit) {
      k = Kind::enum_({e.args[1]->sval});
      if (e.args[2]->sval != e.args[1]->sval) k.values.push_back(e.args[2]->sval);
    }
    e.kind = k;
    return true;
  }

  bool check_literal_seq(Expr& e, const Names& narrowed) {
    bool all_int = true;
    for (auto& item : e.args) {
      if (!check(*item, narrowed)) return false;
      if (!item->kind.is_int()) all_int = false;
    }
    if (all_int) {
      e.kind = Kind::seq();
    } else {
      e.kind = Kind::of(Tag::tuple);
      for (auto& item : e.args) e.kind.elems.push_back(item->kind);
    }
    return true;
  }

  bool arity(const Expr& e, std::size_t n) {
    if (e.args.size() == n) return true;
    return fail(e, e.sval + "() takes " + std::to_string(n) + " argument" + (n == 1 ? "" : "s") +
                       ", got " + std::to_string(e.args.size()));
  }

  bool check_call(Expr& e, const Names& narrowed) {
    const std::string& f = e.sval;
    if (f == "present" || f == "bytes") {
      if (!arity(e, 1)) return false;
      Expr& a = *e.args[0];
      if (a.op != ExprOp::name) return fail(a, f + "() takes a name");
      const Symbol* s = syms_.find(a.sval);
      if (!s) return fail(a, "unknown name '" + a.sval + "'");
      if (f == "present") {
        const bool tensor = s->cat == Symbol::Cat::input || s->cat == Symbol::Cat::ctor_tensor;
        if (tensor && !s->optional) {
          return fail(a, "present() of '" + a.sval + "', which is not optional");
        }
        if (!tensor && !s->kind.is(Tag::maybe)) {
          return fail(a, "present() of '" + a.sval +
                             "', which is neither an optional tensor nor an 'X | None' param");
        }
        a.kind = s->kind;
        e.kind = Kind::bool_();
        return true;
      }
      if (!ctx_.roofline) return fail(e, "bytes() is allowed only in the roofline");
      if (s->cat != Symbol::Cat::input && s->cat != Symbol::Cat::output &&
          s->cat != Symbol::Cat::ctor_tensor) {
        return fail(a, "bytes() of '" + a.sval + "', which is not a tensor");
      }
      a.kind = Kind::of(Tag::tensor);
      e.kind = Kind::int_();
      return true;
    }
    const auto& prims = primitive_names();
    if (std::find(prims.begin(), prims.end(), f) == prims.end()) {
      std::string list;
      for (auto p : prims) {
        if (!list.empty()) list += ", ";
        list += p;
      }
      return fail(e, "unknown function '" + f + "' (primitives: " + list + ")");
    }
    for (auto& a : e.args) {
      if (!check(*a, narrowed)) return false;
    }
    if (f == "len" || f == "prod" || f == "sum") {
      if (!arity(e, 1)) return false;
      if (!need_seq(*e.args[0], *e.args[0], f + "()")) return false;
      const bool shape = e.args[0]->kind.shape;
      e.kind = f == "len" || shape ? Kind::dim() : Kind::int_();
      return true;
    }
    if (f == "max" || f == "min") {
      if (e.args.empty()) return fail(e, f + "() takes at least one argument");
      if (e.args.size() == 1) {
        if (!need_seq(*e.args[0], *e.args[0], f + "() of one argument")) return false;
        e.kind = e.args[0]->kind.shape ? Kind::dim() : Kind::int_();
        return true;
      }
      Kind k = Kind::dim();
      for (auto& a : e.args) {
        if (!need_number(*a, *a, f + "()")) return false;
        if (a->kind.is(Tag::float_))
          k = Kind::float_();
        else if (a->kind.is(Tag::int_) && k.is(Tag::dim))
          k = Kind::int_();
      }
      e.kind = k;
      return true;
    }
    if (f == "ceil_div") {
      if (!arity(e, 2)) return false;
      if (!need_int(*e.args[0], *e.args[0], "ceil_div()") ||
          !need_int(*e.args[1], *e.args[1], "ceil_div()")) {
        return false;
      }
      e.kind =
          e.args[0]->kind.is(Tag::dim) && e.args[1]->kind.is(Tag::dim) ? Kind::dim() : Kind::int_();
      return true;
    }
    if (f == "category" || f == "bits") {
      if (!arity(e, 1)) return false;
      if (!need_dtype(*e.args[0], *e.args[0], f + "()")) return false;
      e.kind = f == "bits" ? Kind::dim() : Kind::enum_({"float", "int", "bool"});
      return true;
    }
    return fail(e, "unknown function '" + f + "'");
  }

  bool check_inner(Expr& e, const Names& narrowed) {
    switch (e.op) {
      case ExprOp::int_lit:
        e.kind = Kind::dim();
        return true;
      case ExprOp::float_lit:
        e.kind = Kind::float_();
        return true;
      case ExprOp::bool_lit:
        e.kind = Kind::bool_();
        return true;
      case ExprOp::none_lit:
        e.kind = Kind::of(Tag::none);
        return true;
      case ExprOp::str_lit:
        e.kind = Kind::of(Tag::str);
        return true;
      case ExprOp::name:
        return check_name(e, narrowed);
      case ExprOp::neg:
      case ExprOp::pos:
        if (!check(*e.args[0], narrowed)) return false;
        if (!need_number(*e.args[0], e, e.op == ExprOp::neg ? "unary '-'" : "unary '+'")) {
          return false;
        }
        e.kind = e.args[0]->kind.is(Tag::float_) ? Kind::float_()
                 : e.op == ExprOp::pos           ? e.args[0]->kind
                                                 : Kind::int_();
        return true;
      case ExprOp::not_:
        if (!check(*e.args[0], narrowed)) return false;
        if (!need_bool(*e.args[0], e, "'not'")) return false;
        e.kind = Kind::bool_();
        return true;
      case ExprOp::add:
      case ExprOp::sub:
      case ExprOp::mul:
      case ExprOp::div:
      case ExprOp::floordiv:
      case ExprOp::mod:
        return check_arith(e, narrowed);
      case ExprOp::eq:
      case ExprOp::ne:
      case ExprOp::lt:
      case ExprOp::le:
      case ExprOp::gt:
      case ExprOp::ge:
        return check_compare(e, narrowed);
      case ExprOp::in:
      case ExprOp::not_in:
        return check_in(e, narrowed);
      case ExprOp::and_:
      case ExprOp::or_: {
        if (!check(*e.args[0], narrowed)) return false;
        const char* sym = e.op == ExprOp::and_ ? "'and'" : "'or'";
        if (!need_bool(*e.args[0], e, sym)) return false;
        Names more = narrowed;
        if (e.op == ExprOp::and_) {
          facts_when_true(*e.args[0], more);
        } else {
          facts_when_false(*e.args[0], more);
        }
        if (!check(*e.args[1], more)) return false;
        if (!need_bool(*e.args[1], e, sym)) return false;
        e.kind = Kind::bool_();
        return true;
      }
      case ExprOp::cond:
        return check_cond(e, narrowed);
      case ExprOp::index: {
        if (!check(*e.args[0], narrowed) || !check(*e.args[1], narrowed)) return false;
        if (!need_seq(*e.args[0], e, "a subscript")) return false;
        if (!need_int(*e.args[1], *e.args[1], "an index")) return false;
        e.kind = e.args[0]->kind.shape ? Kind::dim() : Kind::int_();
        return true;
      }
      case ExprOp::slice: {
        if (!check(*e.args[0], narrowed)) return false;
        if (!need_seq(*e.args[0], e, "a slice")) return false;
        for (int i = 1; i <= 2; ++i) {
          if (!e.args[i]) continue;
          if (!check(*e.args[i], narrowed)) return false;
          if (!need_int(*e.args[i], *e.args[i], "a slice bound")) return false;
        }
        e.kind = Kind::seq(e.args[0]->kind.shape);
        return true;
      }
      case ExprOp::tuple:
      case ExprOp::list:
        return check_literal_seq(e, narrowed);
      case ExprOp::call:
        return check_call(e, narrowed);
      case ExprOp::attr: {
        Expr& obj = *e.args[0];
        if (e.sval != "value") return fail(e, "unknown attribute '" + e.sval + "'");
        if (obj.op != ExprOp::name) return fail(e, "'.value' applies to an 'X | None' param");
        const Symbol* s = syms_.find(obj.sval);
        if (!s) return fail(obj, "unknown name '" + obj.sval + "'");
        if (!s->kind.is(Tag::maybe)) {
          return fail(e, "'.value' of '" + obj.sval + "', which is not an 'X | None' param");
        }
        if (!contains(narrowed, obj.sval)) {
          return fail(e, "'" + obj.sval + ".value' needs present(" + obj.sval + ") to hold here");
        }
        obj.kind = s->kind;
        e.kind = *s->kind.inner;
        return true;
      }
    }
    return fail(e, "unsupported expression");
  }

  const SymbolTable& syms_;
  const CheckContext& ctx_;
  ExprError& err_;
  int depth_ = 0;
};

}  // namespace

bool check_expr(Expr& e, const SymbolTable& symbols, const CheckContext& ctx, ExprError& err) {
  err = ExprError{};
  Checker c(symbols, ctx, err);
  return c.check(e, {});
}

}  // namespace tgen
