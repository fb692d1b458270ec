#include "expr/eval.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "dtypes.h"
#include "core/float_repr.h"

namespace tgen {

bool operator==(const EValue& a, const EValue& b) {
  if (a.v.index() != b.v.index()) return false;
  if (a.is<TupleValue>()) {
    const auto& x = a.as<TupleValue>().items;
    const auto& y = b.as<TupleValue>().items;
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (!(x[i] == y[i])) return false;
    }
    return true;
  }
  return std::visit(
      [&](const auto& x) -> bool {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, TupleValue>) {
          return false;
        } else {
          return x == std::get<T>(b.v);
        }
      },
      a.v);
}

std::string repr(const EValue& value) {
  struct V {
    std::string operator()(const NoneValue&) const { return "None"; }
    std::string operator()(bool b) const { return b ? "True" : "False"; }
    std::string operator()(std::int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return tileops::float_repr(d); }
    std::string operator()(const std::string& s) const { return "'" + s + "'"; }
    std::string operator()(const Seq& s) const {
      std::string out = "[";
      for (std::size_t i = 0; i < s.size(); ++i) {
        if (i) out += ", ";
        out += std::to_string(s[i]);
      }
      return out + "]";
    }
    std::string operator()(const DTypeValue& d) const { return d.name; }
    std::string operator()(const TupleValue& t) const {
      std::string out = "(";
      for (std::size_t i = 0; i < t.items.size(); ++i) {
        if (i) out += ", ";
        out += repr(t.items[i]);
      }
      return out + (t.items.size() == 1 ? ",)" : ")");
    }
  };
  return std::visit(V{}, value.v);
}

std::int64_t py_floordiv(std::int64_t a, std::int64_t b, int col) {
  if (b == 0) throw EvalError(col, "integer division by zero");
  if (a == INT64_MIN && b == -1) throw EvalError(col, "integer overflow");
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::int64_t py_mod(std::int64_t a, std::int64_t b, int col) {
  if (b == 0) throw EvalError(col, "integer modulo by zero");
  if (b == -1) return 0;
  std::int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

namespace {

class Evaluator {
 public:
  explicit Evaluator(const EvalEnv& env) : env_(env) {}

  EValue eval(const Expr& e) {
    switch (e.op) {
      case ExprOp::int_lit:
        return EValue(e.ival);
      case ExprOp::float_lit:
        return EValue(e.fval);
      case ExprOp::bool_lit:
        return EValue(e.bval);
      case ExprOp::none_lit:
        return EValue(NoneValue{});
      case ExprOp::str_lit:
        return EValue(e.sval);
      case ExprOp::name:
        return name(e);
      case ExprOp::neg: {
        EValue a = eval(*e.args[0]);
        if (a.is<double>()) return EValue(-a.as<double>());
        const std::int64_t i = to_int(a, e);
        if (i == INT64_MIN) throw EvalError(e.col, "integer overflow");
        return EValue(-i);
      }
      case ExprOp::pos:
        return eval(*e.args[0]);
      case ExprOp::not_:
        return EValue(!to_bool(eval(*e.args[0]), e));
      case ExprOp::add:
      case ExprOp::sub:
      case ExprOp::mul:
      case ExprOp::div:
      case ExprOp::floordiv:
      case ExprOp::mod:
        return arith(e, eval(*e.args[0]), eval(*e.args[1]));
      case ExprOp::eq:
        return EValue(equal(eval(*e.args[0]), eval(*e.args[1])));
      case ExprOp::ne:
        return EValue(!equal(eval(*e.args[0]), eval(*e.args[1])));
      case ExprOp::lt:
      case ExprOp::le:
      case ExprOp::gt:
      case ExprOp::ge:
        return EValue(order(e, eval(*e.args[0]), eval(*e.args[1])));
      case ExprOp::in:
      case ExprOp::not_in: {
        EValue x = eval(*e.args[0]);
        bool found = false;
        const Expr& r = *e.args[1];
        if (r.op == ExprOp::tuple || r.op == ExprOp::list) {
          for (const auto& item : r.args) {
            if (equal(x, eval(*item))) {
              found = true;
              break;
            }
          }
        } else {
          EValue s = eval(r);
          const Seq& seq = to_seq(s, r);
          const std::int64_t i = to_int(x, *e.args[0]);
          found = std::find(seq.begin(), seq.end(), i) != seq.end();
        }
        return EValue(e.op == ExprOp::in ? found : !found);
      }
      case ExprOp::and_:
        if (!to_bool(eval(*e.args[0]), e)) return EValue(false);
        return EValue(to_bool(eval(*e.args[1]), e));
      case ExprOp::or_:
        if (to_bool(eval(*e.args[0]), e)) return EValue(true);
        return EValue(to_bool(eval(*e.args[1]), e));
      case ExprOp::cond:
        return to_bool(eval(*e.args[0]), e) ? eval(*e.args[1]) : eval(*e.args[2]);
      case ExprOp::index: {
        EValue s = eval(*e.args[0]);
        const Seq& seq = to_seq(s, e);
        std::int64_t i = to_int(eval(*e.args[1]), e);
        const auto n = static_cast<std::int64_t>(seq.size());
        if (i < -n || i >= n) {
          throw EvalError(e.col, "index " + std::to_string(i) + " out of range for " + repr(s) +
                                     " (length " + std::to_string(n) + ")");
        }
        if (i < 0) i += n;
        return EValue(seq[static_cast<std::size_t>(i)]);
      }
      case ExprOp::slice: {
        EValue s = eval(*e.args[0]);
        const Seq& seq = to_seq(s, e);
        const auto n = static_cast<std::int64_t>(seq.size());
        auto clamp = [n](std::int64_t i) {
          if (i < 0) i = std::max<std::int64_t>(i + n, 0);
          return std::min(i, n);
        };
        const std::int64_t lo = e.args[1] ? clamp(to_int(eval(*e.args[1]), e)) : 0;
        const std::int64_t hi = e.args[2] ? clamp(to_int(eval(*e.args[2]), e)) : n;
        Seq out;
        for (std::int64_t i = lo; i < hi; ++i) out.push_back(seq[static_cast<std::size_t>(i)]);
        return EValue(std::move(out));
      }
      case ExprOp::tuple:
      case ExprOp::list: {
        std::vector<EValue> items;
        bool all_int = true;
        for (const auto& a : e.args) {
          items.push_back(eval(*a));
          if (!items.back().is<std::int64_t>()) all_int = false;
        }
        if (all_int) {
          Seq s;
          for (const auto& v : items) s.push_back(v.as<std::int64_t>());
          return EValue(std::move(s));
        }
        return EValue(TupleValue{std::move(items)});
      }
      case ExprOp::call:
        return call(e);
      case ExprOp::attr: {
        const EValue* v = env_.lookup(e.args[0]->sval);
        if (!v) throw NotKnown(e.args[0]->sval);
        if (v->is<NoneValue>()) throw EvalError(e.col, "'" + e.args[0]->sval + "' is None");
        return *v;
      }
    }
    throw EvalError(e.col, "unsupported expression");
  }

 private:
  EValue name(const Expr& e) {
    if (e.dtype_literal) return EValue(DTypeValue{e.sval});
    const EValue* v = env_.lookup(e.sval);
    if (!v) throw NotKnown(e.sval);
    if (e.narrowed && v->is<NoneValue>()) throw EvalError(e.col, "'" + e.sval + "' is None");
    return *v;
  }

  static std::int64_t to_int(const EValue& v, const Expr& at) {
    if (v.is<std::int64_t>()) return v.as<std::int64_t>();
    throw EvalError(at.col, "expected an integer, got " + repr(v));
  }
  static double to_double(const EValue& v, const Expr& at) {
    if (v.is<std::int64_t>()) return static_cast<double>(v.as<std::int64_t>());
    if (v.is<double>()) return v.as<double>();
    throw EvalError(at.col, "expected a number, got " + repr(v));
  }
  static bool to_bool(const EValue& v, const Expr& at) {
    if (v.is<bool>()) return v.as<bool>();
    throw EvalError(at.col, "expected a bool, got " + repr(v));
  }
  static const Seq& to_seq(const EValue& v, const Expr& at) {
    if (v.is<Seq>()) return v.as<Seq>();
    throw EvalError(at.col, "expected a sequence, got " + repr(v));
  }
  static bool is_number(const EValue& v) { return v.is<std::int64_t>() || v.is<double>(); }

  static bool equal(const EValue& a, const EValue& b) {
    if (is_number(a) && is_number(b) && (a.is<double>() || b.is<double>())) {
      const double x = a.is<double>() ? a.as<double>() : static_cast<double>(a.as<std::int64_t>());
      const double y = b.is<double>() ? b.as<double>() : static_cast<double>(b.as<std::int64_t>());
      return x == y;
    }
    return a == b;
  }

  static bool order(const Expr& e, const EValue& a, const EValue& b) {
    if (a.is<std::int64_t>() && b.is<std::int64_t>()) {
      const std::int64_t x = a.as<std::int64_t>(), y = b.as<std::int64_t>();
      switch (e.op) {
        case ExprOp::lt:
          return x < y;
        case ExprOp::le:
          return x <= y;
        case ExprOp::gt:
          return x > y;
        default:
          return x >= y;
      }
    }
    const double x = to_double(a, e), y = to_double(b, e);
    switch (e.op) {
      case ExprOp::lt:
        return x < y;
      case ExprOp::le:
        return x <= y;
      case ExprOp::gt:
        return x > y;
      default:
        return x >= y;
    }
  }

  static EValue arith(const Expr& e, const EValue& a, const EValue& b) {
    if (a.is<std::int64_t>() && b.is<std::int64_t>() && e.op != ExprOp::div) {
      const std::int64_t x = a.as<std::int64_t>(), y = b.as<std::int64_t>();
      std::int64_t r = 0;
      switch (e.op) {
        case ExprOp::add:
          if (__builtin_add_overflow(x, y, &r)) throw EvalError(e.col, "integer overflow");
          return EValue(r);
        case ExprOp::sub:
          if (__builtin_sub_overflow(x, y, &r)) throw EvalError(e.col, "integer overflow");
          return EValue(r);
        case ExprOp::mul:
          if (__builtin_mul_overflow(x, y, &r)) throw EvalError(e.col, "integer overflow");
          return EValue(r);
        case ExprOp::floordiv:
          return EValue(py_floordiv(x, y, e.col));
        default:
          return EValue(py_mod(x, y, e.col));
      }
    }
    const double x = to_double(a, e), y = to_double(b, e);
    switch (e.op) {
      case ExprOp::add:
        return EValue(x + y);
      case ExprOp::sub:
        return EValue(x - y);
      case ExprOp::mul:
        return EValue(x * y);
      case ExprOp::div:
        if (y == 0) throw EvalError(e.col, "float division by zero");
        return EValue(x / y);
      case ExprOp::floordiv:
        if (y == 0) throw EvalError(e.col, "float floor division by zero");
        return EValue(std::floor(x / y));
      default: {
        if (y == 0) throw EvalError(e.col, "float modulo by zero");
        double r = std::fmod(x, y);
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return EValue(r);
      }
    }
  }

  EValue call(const Expr& e) {
    const std::string& f = e.sval;
    if (f == "present") {
      const Expr& a = *e.args[0];
      if (a.kind.is(Kind::Tag::maybe)) {
        const EValue* v = env_.lookup(a.sval);
        if (!v) throw NotKnown(a.sval);
        return EValue(!v->is<NoneValue>());
      }
      const auto p = env_.tensor_present(a.sval);
      if (!p) throw NotKnown("present(" + a.sval + ")");
      return EValue(*p);
    }
    if (f == "bytes") {
      const auto b = env_.tensor_bytes(e.args[0]->sval);
      if (!b) throw NotKnown("bytes(" + e.args[0]->sval + ")");
      return EValue(*b);
    }
    std::vector<EValue> args;
    for (const auto& a : e.args) args.push_back(eval(*a));
    if (f == "len") return EValue(static_cast<std::int64_t>(to_seq(args[0], e).size()));
    if (f == "prod" || f == "sum") {
      const bool prod = f == "prod";
      std::int64_t acc = prod ? 1 : 0;
      for (std::int64_t x : to_seq(args[0], e)) {
        const bool over =
            prod ? __builtin_mul_overflow(acc, x, &acc) : __builtin_add_overflow(acc, x, &acc);
        if (over) throw EvalError(e.col, "integer overflow in " + f + "()");
      }
      return EValue(acc);
    }
    if (f == "max" || f == "min") {
      const bool mx = f == "max";
      if (args.size() == 1) {
        const Seq& s = to_seq(args[0], e);
        if (s.empty()) throw EvalError(e.col, f + "() of an empty sequence");
        return EValue(mx ? *std::max_element(s.begin(), s.end())
                         : *std::min_element(s.begin(), s.end()));
      }
      EValue best = args[0];
      for (std::size_t i = 1; i < args.size(); ++i) {
        const bool better = mx ? order_gt(e, args[i], best) : order_gt(e, best, args[i]);
        if (better) best = args[i];
      }
      return best;
    }
    if (f == "ceil_div") {
      const std::int64_t a = to_int(args[0], e), b = to_int(args[1], e);
      if (b <= 0)
        throw EvalError(e.col, "ceil_div() by a non-positive divisor " + std::to_string(b));
      if (a == INT64_MIN) throw EvalError(e.col, "integer overflow");
      return EValue(-py_floordiv(-a, b, e.col));
    }
    if (f == "category" || f == "bits") {
      if (!args[0].is<DTypeValue>()) throw EvalError(e.col, f + "() expects a dtype");
      const DTypeInfo* d = find_dtype(args[0].as<DTypeValue>().name);
      if (!d) throw EvalError(e.col, "unknown dtype");
      if (f == "bits") return EValue(std::int64_t{d->bits});
      return EValue(std::string(d->category));
    }
    throw EvalError(e.col, "unknown function '" + f + "'");
  }

  static bool order_gt(const Expr& e, const EValue& a, const EValue& b) {
    Expr gt;
    gt.op = ExprOp::gt;
    gt.col = e.col;
    return order(gt, a, b);
  }

  const EvalEnv& env_;
};

}  // namespace

EValue eval(const Expr& e, const EvalEnv& env) {
  Evaluator ev(env);
  return ev.eval(e);
}

}  // namespace tgen
