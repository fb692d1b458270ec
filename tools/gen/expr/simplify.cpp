#include "expr/simplify.h"

namespace tgen {

namespace {

std::optional<bool> decide(const Expr& e, const EvalEnv& env) {
  try {
    EValue v = eval(e, env);
    if (v.is<bool>()) return v.as<bool>();
  } catch (const NotKnown&) {
  } catch (const EvalError&) {
  }
  return std::nullopt;
}

ExprPtr bool_lit(bool b, int col) {
  auto e = std::make_unique<Expr>();
  e->op = ExprOp::bool_lit;
  e->bval = b;
  e->col = col;
  e->kind = Kind::bool_();
  return e;
}

}  // namespace

ExprPtr simplify(const Expr& e, const EvalEnv& env) {
  switch (e.op) {
    case ExprOp::cond:
      if (auto c = decide(*e.args[0], env)) return simplify(*e.args[*c ? 1 : 2], env);
      break;
    case ExprOp::and_:
      if (auto c = decide(*e.args[0], env)) {
        return *c ? simplify(*e.args[1], env) : bool_lit(false, e.col);
      }
      break;
    case ExprOp::or_:
      if (auto c = decide(*e.args[0], env)) {
        return *c ? bool_lit(true, e.col) : simplify(*e.args[1], env);
      }
      break;
    case ExprOp::not_:
    case ExprOp::call:
      if (e.kind.is(Kind::Tag::bool_)) {
        if (e.op == ExprOp::not_ || e.sval == "present") {
          if (auto c = decide(e, env)) return bool_lit(*c, e.col);
        }
      }
      break;
    default:
      break;
  }
  auto out = std::make_unique<Expr>();
  out->op = e.op;
  out->col = e.col;
  out->ival = e.ival;
  out->fval = e.fval;
  out->bval = e.bval;
  out->sval = e.sval;
  out->kind = e.kind;
  out->narrowed = e.narrowed;
  out->dtype_literal = e.dtype_literal;
  for (const auto& a : e.args) {
    if (!a) {
      out->args.push_back(nullptr);
    } else if (e.op == ExprOp::call && (e.sval == "present" || e.sval == "bytes")) {
      out->args.push_back(a->clone());
    } else {
      out->args.push_back(simplify(*a, env));
    }
  }
  return out;
}

}  // namespace tgen
