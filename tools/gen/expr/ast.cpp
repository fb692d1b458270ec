#include "expr/ast.h"

#include "core/float_repr.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace tgen {

ExprPtr Expr::clone() const {
  auto e = std::make_unique<Expr>();
  e->op = op;
  e->col = col;
  e->ival = ival;
  e->fval = fval;
  e->bval = bval;
  e->sval = sval;
  e->kind = kind;
  e->narrowed = narrowed;
  e->dtype_literal = dtype_literal;
  e->args.reserve(args.size());
  for (const auto& a : args) e->args.push_back(a ? a->clone() : nullptr);
  return e;
}

int precedence(const Expr& e) {
  switch (e.op) {
    case ExprOp::cond:
      return 1;
    case ExprOp::or_:
      return 2;
    case ExprOp::and_:
      return 3;
    case ExprOp::not_:
      return 4;
    case ExprOp::eq:
    case ExprOp::ne:
    case ExprOp::lt:
    case ExprOp::le:
    case ExprOp::gt:
    case ExprOp::ge:
    case ExprOp::in:
    case ExprOp::not_in:
      return 5;
    case ExprOp::add:
    case ExprOp::sub:
      return 6;
    case ExprOp::mul:
    case ExprOp::div:
    case ExprOp::floordiv:
    case ExprOp::mod:
      return 7;
    case ExprOp::neg:
    case ExprOp::pos:
      return 8;
    default:
      return 10;
  }
}

namespace {

const char* op_text(ExprOp op) {
  switch (op) {
    case ExprOp::add:
      return "+";
    case ExprOp::sub:
      return "-";
    case ExprOp::mul:
      return "*";
    case ExprOp::div:
      return "/";
    case ExprOp::floordiv:
      return "//";
    case ExprOp::mod:
      return "%";
    case ExprOp::eq:
      return "==";
    case ExprOp::ne:
      return "!=";
    case ExprOp::lt:
      return "<";
    case ExprOp::le:
      return "<=";
    case ExprOp::gt:
      return ">";
    case ExprOp::ge:
      return ">=";
    case ExprOp::and_:
      return "and";
    case ExprOp::or_:
      return "or";
    case ExprOp::in:
      return "in";
    case ExprOp::not_in:
      return "not in";
    default:
      return "?";
  }
}

std::string wrap(const Expr& child, int min_prec) {
  std::string s = to_source(child);
  if (precedence(child) < min_prec) return "(" + s + ")";
  return s;
}

}  // namespace

std::string to_source(const Expr& e) {
  const int p = precedence(e);
  switch (e.op) {
    case ExprOp::int_lit:
      return std::to_string(e.ival);
    case ExprOp::float_lit:
      return tileops::float_repr(e.fval);
    case ExprOp::bool_lit:
      return e.bval ? "True" : "False";
    case ExprOp::none_lit:
      return "None";
    case ExprOp::str_lit:
      // Strings have no escapes, so a string holds at most one kind of quote.
      if (e.sval.find('\'') != std::string::npos) return "\"" + e.sval + "\"";
      return "'" + e.sval + "'";
    case ExprOp::name:
      return e.sval;
    case ExprOp::neg:
      return "-" + wrap(*e.args[0], p);
    case ExprOp::pos:
      return "+" + wrap(*e.args[0], p);
    case ExprOp::not_:
      return "not " + wrap(*e.args[0], p);
    case ExprOp::add:
    case ExprOp::sub:
    case ExprOp::mul:
    case ExprOp::div:
    case ExprOp::floordiv:
    case ExprOp::mod:
    case ExprOp::and_:
    case ExprOp::or_:
      // Left-associative: the right operand needs parentheses at equal precedence.
      return wrap(*e.args[0], p) + " " + op_text(e.op) + " " + wrap(*e.args[1], p + 1);
    case ExprOp::eq:
    case ExprOp::ne:
    case ExprOp::lt:
    case ExprOp::le:
    case ExprOp::gt:
    case ExprOp::ge:
    case ExprOp::in:
    case ExprOp::not_in:
      return wrap(*e.args[0], p + 1) + " " + op_text(e.op) + " " + wrap(*e.args[1], p + 1);
    case ExprOp::cond:
      return wrap(*e.args[1], p + 1) + " if " + wrap(*e.args[0], p + 1) + " else " +
             wrap(*e.args[2], p);
    case ExprOp::index:
      return wrap(*e.args[0], 10) + "[" + to_source(*e.args[1]) + "]";
    case ExprOp::slice:
      return wrap(*e.args[0], 10) + "[" + (e.args[1] ? to_source(*e.args[1]) : "") + ":" +
             (e.args[2] ? to_source(*e.args[2]) : "") + "]";
    case ExprOp::tuple:
    case ExprOp::list:
    case ExprOp::call: {
      std::string out;
      if (e.op == ExprOp::call) out = e.sval;
      out += e.op == ExprOp::list ? "[" : "(";
      for (std::size_t i = 0; i < e.args.size(); ++i) {
        if (i) out += ", ";
        out += to_source(*e.args[i]);
      }
      if (e.op == ExprOp::tuple && e.args.size() == 1) out += ",";
      out += e.op == ExprOp::list ? "]" : ")";
      return out;
    }
    case ExprOp::attr:
      return wrap(*e.args[0], 10) + "." + e.sval;
  }
  return "?";
}

namespace {
void collect_names(const Expr& e, std::vector<std::string>& out) {
  if (e.op == ExprOp::name) {
    if (std::find(out.begin(), out.end(), e.sval) == out.end()) out.push_back(e.sval);
    return;
  }
  for (const auto& a : e.args) {
    if (a) collect_names(*a, out);
  }
}
}  // namespace

std::vector<std::string> names_read(const Expr& e) {
  std::vector<std::string> out;
  collect_names(e, out);
  return out;
}

}  // namespace tgen
