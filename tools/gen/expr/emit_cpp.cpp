#include "expr/emit_cpp.h"

#include <cstdio>
#include <cstdlib>

#include "dtypes.h"
#include "core/float_repr.h"

namespace tgen {

using Tag = Kind::Tag;

std::string cpp_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u == 0x7f || c == '?') {
      // '?' is escaped so that no trigraph-like sequence can form.
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string cpp_double(double v) {
  return tileops::float_repr(v);
}

std::string cpp_dtype(std::string_view name) {
  const DTypeInfo* d = find_dtype(name);
  return "::tileops::DType::" + std::string(d ? d->enumerator : name);
}

std::string cpp_type(const Kind& k) {
  switch (k.tag) {
    case Tag::int_:
    case Tag::dim:
      return "std::int64_t";
    case Tag::float_:
      return "double";
    case Tag::bool_:
      return "bool";
    case Tag::seq:
      return "::tileops::Sizes";
    case Tag::dtype:
      return "::tileops::DType";
    case Tag::enum_:
    case Tag::str:
      return "std::string";
    case Tag::maybe:
      return "std::optional<" + cpp_type(*k.inner) + ">";
    default:
      return "void";
  }
}

namespace {

class Emitter {
 public:
  explicit Emitter(CppNames& names) : names_(names) {}

  std::string emit(const Expr& e) {
    switch (e.op) {
      case ExprOp::int_lit:
        return "std::int64_t{" + std::to_string(e.ival) + "}";
      case ExprOp::float_lit:
        return cpp_double(e.fval);
      case ExprOp::bool_lit:
        return e.bval ? "true" : "false";
      case ExprOp::none_lit:
        return "std::nullopt";
      case ExprOp::str_lit:
        return "std::string_view{" + cpp_string(e.sval) + "}";
      case ExprOp::name:
        if (e.dtype_literal) return cpp_dtype(e.sval);
        return names_.value(e.sval, e.narrowed);
      case ExprOp::neg:
        if (e.kind.is(Tag::float_)) return "(-" + emit(*e.args[0]) + ")";
        if (e.args[0]->op == ExprOp::int_lit)
          return "std::int64_t{-" + std::to_string(e.args[0]->ival) + "}";
        return "ex::neg(" + emit(*e.args[0]) + ")";
      case ExprOp::pos:
        return emit(*e.args[0]);
      case ExprOp::not_:
        return "(!" + emit(*e.args[0]) + ")";
      case ExprOp::add:
      case ExprOp::sub:
      case ExprOp::mul:
      case ExprOp::div:
      case ExprOp::floordiv:
      case ExprOp::mod:
        return arith(e);
      case ExprOp::eq:
      case ExprOp::ne:
      case ExprOp::lt:
      case ExprOp::le:
      case ExprOp::gt:
      case ExprOp::ge:
        return compare(e);
      case ExprOp::and_:
        return "(" + emit(*e.args[0]) + " && " + emit(*e.args[1]) + ")";
      case ExprOp::or_:
        return "(" + emit(*e.args[0]) + " || " + emit(*e.args[1]) + ")";
      case ExprOp::in:
      case ExprOp::not_in: {
        std::string s = membership(e);
        return e.op == ExprOp::in ? s : "(!" + s + ")";
      }
      case ExprOp::cond:
        return "(" + emit(*e.args[0]) + " ? " + as(*e.args[1], e.kind) + " : " +
               as(*e.args[2], e.kind) + ")";
      case ExprOp::index:
        return "ex::at(" + emit(*e.args[0]) + ", " + emit(*e.args[1]) + ")";
      case ExprOp::slice:
        return "ex::slice(" + emit(*e.args[0]) + ", " +
               (e.args[1] ? emit(*e.args[1]) : std::string("std::nullopt")) + ", " +
               (e.args[2] ? emit(*e.args[2]) : std::string("std::nullopt")) + ")";
      case ExprOp::tuple:
      case ExprOp::list: {
        std::string out = "::tileops::Sizes{";
        for (std::size_t i = 0; i < e.args.size(); ++i) {
          if (i) out += ", ";
          out += emit(*e.args[i]);
        }
        return out + "}";
      }
      case ExprOp::call:
        return call(e);
      case ExprOp::attr:
        return names_.value(e.args[0]->sval, true);
    }
    return "/* unsupported */";
  }

 private:
  // The operand converted to kind `k` where C++ needs it (Int → double, enum → string_view).
  std::string as(const Expr& e, const Kind& k) {
    if (k.is(Tag::float_) && e.kind.is_int()) return "static_cast<double>(" + emit(e) + ")";
    if (k.is_stringy()) {
      return e.op == ExprOp::str_lit ? emit(e) : "std::string_view(" + emit(e) + ")";
    }
    return emit(e);
  }

  std::string arith(const Expr& e) {
    const Expr& l = *e.args[0];
    const Expr& r = *e.args[1];
    if (e.kind.is_int()) {
      const char* fn = e.op == ExprOp::add        ? "ex::add"
                       : e.op == ExprOp::sub      ? "ex::sub"
                       : e.op == ExprOp::mul      ? "ex::mul"
                       : e.op == ExprOp::floordiv ? "ex::floordiv"
                                                  : "ex::mod";
      return std::string(fn) + "(" + emit(l) + ", " + emit(r) + ")";
    }
    const Kind f = Kind::float_();
    switch (e.op) {
      case ExprOp::add:
        return "(" + as(l, f) + " + " + as(r, f) + ")";
      case ExprOp::sub:
        return "(" + as(l, f) + " - " + as(r, f) + ")";
      case ExprOp::mul:
        return "(" + as(l, f) + " * " + as(r, f) + ")";
      case ExprOp::floordiv:
        return "ex::floordiv(" + as(l, f) + ", " + as(r, f) + ")";
      default:
        return "ex::mod(" + as(l, f) + ", " + as(r, f) + ")";
    }
  }

  std::string compare(const Expr& e) {
    const Expr& l = *e.args[0];
    const Expr& r = *e.args[1];
    const char* op = e.op == ExprOp::eq   ? " == "
                     : e.op == ExprOp::ne ? " != "
                     : e.op == ExprOp::lt ? " < "
                     : e.op == ExprOp::le ? " <= "
                     : e.op == ExprOp::gt ? " > "
                                          : " >= ";
    if (l.kind.is_number() && r.kind.is_number() &&
        (l.kind.is(Tag::float_) || r.kind.is(Tag::float_))) {
      const Kind f = Kind::float_();
      return "(" + as(l, f) + op + as(r, f) + ")";
    }
    if (l.kind.is_stringy()) {
      return "(" + as(l, l.kind) + op + as(r, r.kind) + ")";
    }
    return "(" + emit(l) + op + emit(r) + ")";
  }

  std::string membership(const Expr& e) {
    const Expr& x = *e.args[0];
    const Expr& r = *e.args[1];
    if (r.op != ExprOp::tuple && r.op != ExprOp::list) {
      return "ex::contains(" + emit(r) + ", " + emit(x) + ")";
    }
    Kind k = x.kind;
    for (const auto& item : r.args) {
      if (item->kind.is(Tag::float_)) k = Kind::float_();
    }
    std::string type;
    if (k.is(Tag::float_))
      type = "double";
    else if (k.is_int())
      type = "std::int64_t";
    else if (k.is_stringy())
      type = "std::string_view";
    else
      type = cpp_type(k);
    auto cast = [&](const Expr& e) {
      const bool same = (e.op == ExprOp::str_lit && type == "std::string_view") ||
                        (e.op == ExprOp::int_lit && type == "std::int64_t");
      return same ? emit(e) : type + "(" + emit(e) + ")";
    };
    std::string out = "ex::in(" + cast(x) + ", {";
    for (std::size_t i = 0; i < r.args.size(); ++i) {
      if (i) out += ", ";
      out += cast(*r.args[i]);
    }
    return out + "})";
  }

  std::string call(const Expr& e) {
    const std::string& f = e.sval;
    if (f == "present") return names_.present(e.args[0]->sval);
    if (f == "bytes") return names_.bytes(e.args[0]->sval);
    if (f == "len" || f == "prod" || f == "sum") return "ex::" + f + "(" + emit(*e.args[0]) + ")";
    if (f == "max" || f == "min") {
      if (e.args.size() == 1) return "ex::" + f + "_seq(" + emit(*e.args[0]) + ")";
      std::string out = "ex::" + f + "_of(";
      const Kind k = e.kind.is(Tag::float_) ? Kind::float_() : Kind::int_();
      for (std::size_t i = 0; i < e.args.size(); ++i) {
        if (i) out += ", ";
        out += as(*e.args[i], k);
      }
      return out + ")";
    }
    if (f == "ceil_div") {
      return "ex::ceil_div(" + emit(*e.args[0]) + ", " + emit(*e.args[1]) + ")";
    }
    if (f == "category") return "ex::category_of(" + emit(*e.args[0]) + ")";
    if (f == "bits") return "ex::bits_of(" + emit(*e.args[0]) + ")";
    return "/* unknown primitive */";
  }

  CppNames& names_;
};

}  // namespace

std::string emit_cpp(const Expr& e, CppNames& names) {
  Emitter em(names);
  return em.emit(e);
}

}  // namespace tgen
