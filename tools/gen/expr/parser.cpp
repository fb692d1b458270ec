#include "expr/parser.h"

#include <utility>

namespace tgen {

namespace {

constexpr int kMaxDepth = 64;

bool is_keyword(std::string_view s) {
  return s == "and" || s == "or" || s == "not" || s == "in" || s == "if" || s == "else" ||
         s == "True" || s == "False" || s == "None" || s == "for" || s == "lambda" || s == "is";
}

class Parser {
 public:
  Parser(std::vector<Token> toks, ExprError& err) : toks_(std::move(toks)), err_(err) {}

  ExprPtr expression() {
    if (!enter()) return nullptr;
    ExprPtr then = disjunction();
    if (then && peek_name("if")) {
      const int col = next().col;
      ExprPtr cond = disjunction();
      if (!cond) return leave(nullptr);
      if (!peek_name("else")) return leave(fail(cur().col, "expected 'else' in a conditional"));
      next();
      ExprPtr other = expression();
      if (!other) return leave(nullptr);
      auto e = node(ExprOp::cond, col);
      e->args.push_back(std::move(cond));
      e->args.push_back(std::move(then));
      e->args.push_back(std::move(other));
      return leave(std::move(e));
    }
    return leave(std::move(then));
  }

  bool at_end() const { return cur().kind == TokKind::end; }
  const Token& cur() const { return toks_[pos_]; }
  const Token& next() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  bool peek_op(std::string_view op) const { return cur().kind == TokKind::op && cur().text == op; }
  bool peek_name(std::string_view n) const {
    return cur().kind == TokKind::name && cur().text == n;
  }
  ExprPtr fail(int col, std::string msg) {
    if (!failed_) {
      err_.col = col;
      err_.message = std::move(msg);
      failed_ = true;
    }
    return nullptr;
  }
  bool failed() const { return failed_; }
  std::string describe(const Token& t) const {
    switch (t.kind) {
      case TokKind::end:
        return "end of expression";
      case TokKind::str_lit:
        return "string '" + t.text + "'";
      default:
        return "'" + t.text + "'";
    }
  }

 private:
  static ExprPtr node(ExprOp op, int col) {
    auto e = std::make_unique<Expr>();
    e->op = op;
    e->col = col;
    return e;
  }
  bool enter() {
    if (++depth_ > kMaxDepth) {
      fail(cur().col, "expression nested too deeply");
      return false;
    }
    return true;
  }
  ExprPtr leave(ExprPtr e) {
    --depth_;
    return e;
  }

  ExprPtr binary(ExprOp op, int col, ExprPtr l, ExprPtr r) {
    auto e = node(op, col);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }

  ExprPtr disjunction() {
    ExprPtr l = conjunction();
    while (l && peek_name("or")) {
      const int col = next().col;
      ExprPtr r = conjunction();
      if (!r) return nullptr;
      l = binary(ExprOp::or_, col, std::move(l), std::move(r));
    }
    return l;
  }

  ExprPtr conjunction() {
    ExprPtr l = negation();
    while (l && peek_name("and")) {
      const int col = next().col;
      ExprPtr r = negation();
      if (!r) return nullptr;
      l = binary(ExprOp::and_, col, std::move(l), std::move(r));
    }
    return l;
  }

  ExprPtr negation() {
    if (peek_name("not")) {
      if (!enter()) return nullptr;
      const int col = next().col;
      ExprPtr a = negation();
      if (!a) return leave(nullptr);
      auto e = node(ExprOp::not_, col);
      e->args.push_back(std::move(a));
      return leave(std::move(e));
    }
    return comparison();
  }

  bool comparison_op(ExprOp& op, int& col) {
    col = cur().col;
    if (cur().kind == TokKind::op) {
      const std::string& t = cur().text;
      if (t == "==")
        op = ExprOp::eq;
      else if (t == "!=")
        op = ExprOp::ne;
      else if (t == "<")
        op = ExprOp::lt;
      else if (t == "<=")
        op = ExprOp::le;
      else if (t == ">")
        op = ExprOp::gt;
      else if (t == ">=")
        op = ExprOp::ge;
      else
        return false;
      next();
      return true;
    }
    if (peek_name("in")) {
      next();
      op = ExprOp::in;
      return true;
    }
    if (peek_name("not") && pos_ + 1 < toks_.size() && toks_[pos_ + 1].kind == TokKind::name &&
        toks_[pos_ + 1].text == "in") {
      next();
      next();
      op = ExprOp::not_in;
      return true;
    }
    if (peek_name("is")) {
      fail(col, "'is' is not supported (use present(x) to test for None)");
    }
    return false;
  }

  ExprPtr comparison() {
    ExprPtr l = sum();
    if (!l) return nullptr;
    ExprOp op{};
    int col = 0;
    if (!comparison_op(op, col)) return failed_ ? nullptr : std::move(l);
    ExprPtr r = sum();
    if (!r) return nullptr;
    ExprOp op2{};
    int col2 = 0;
    if (comparison_op(op2, col2)) return fail(col2, "chained comparisons are not supported");
    if (failed_) return nullptr;
    return binary(op, col, std::move(l), std::move(r));
  }

  ExprPtr sum() {
    ExprPtr l = term();
    while (l && (peek_op("+") || peek_op("-"))) {
      const Token& t = next();
      const ExprOp op = t.text == "+" ? ExprOp::add : ExprOp::sub;
      const int col = t.col;
      ExprPtr r = term();
      if (!r) return nullptr;
      l = binary(op, col, std::move(l), std::move(r));
    }
    return l;
  }

  ExprPtr term() {
    ExprPtr l = unary();
    while (l && (peek_op("*") || peek_op("/") || peek_op("//") || peek_op("%"))) {
      const Token& t = next();
      const ExprOp op = t.text == "*"    ? ExprOp::mul
                        : t.text == "/"  ? ExprOp::div
                        : t.text == "//" ? ExprOp::floordiv
                                         : ExprOp::mod;
      const int col = t.col;
      ExprPtr r = unary();
      if (!r) return nullptr;
      l = binary(op, col, std::move(l), std::move(r));
    }
    return l;
  }

  ExprPtr unary() {
    if (peek_op("-") || peek_op("+")) {
      if (!enter()) return nullptr;
      const Token& t = next();
      const ExprOp op = t.text == "-" ? ExprOp::neg : ExprOp::pos;
      const int col = t.col;
      ExprPtr a = unary();
      if (!a) return leave(nullptr);
      auto e = node(op, col);
      e->args.push_back(std::move(a));
      return leave(std::move(e));
    }
    return postfix();
  }

  ExprPtr postfix() {
    ExprPtr e = atom();
    while (e) {
      if (peek_op("(")) {
        const int col = cur().col;
        if (e->op != ExprOp::name) return fail(col, "only named primitives can be called");
        next();
        auto call = node(ExprOp::call, e->col);
        call->sval = e->sval;
        if (!peek_op(")")) {
          while (true) {
            ExprPtr a = expression();
            if (!a) return nullptr;
            call->args.push_back(std::move(a));
            if (peek_op(",")) {
              next();
              if (peek_op(")")) break;
              continue;
            }
            break;
          }
        }
        if (!peek_op(")")) return fail(cur().col, "expected ')' or ',', got " + describe(cur()));
        next();
        e = std::move(call);
      } else if (peek_op("[")) {
        const int col = next().col;
        ExprPtr lo, hi;
        bool is_slice = false;
        if (!peek_op(":")) {
          lo = expression();
          if (!lo) return nullptr;
        }
        if (peek_op(":")) {
          is_slice = true;
          next();
          if (!peek_op("]")) {
            if (peek_op(":")) return fail(cur().col, "slice steps are not supported");
            hi = expression();
            if (!hi) return nullptr;
          }
          if (peek_op(":")) return fail(cur().col, "slice steps are not supported");
        }
        if (peek_op(",")) return fail(cur().col, "a subscript takes one index");
        if (!peek_op("]")) return fail(cur().col, "expected ']', got " + describe(cur()));
        next();
        auto s = node(is_slice ? ExprOp::slice : ExprOp::index, col);
        s->args.push_back(std::move(e));
        s->args.push_back(std::move(lo));
        if (is_slice) s->args.push_back(std::move(hi));
        e = std::move(s);
      } else if (peek_op(".")) {
        if (e->op != ExprOp::name) return fail(cur().col, "an attribute applies only to a name");
        const int col = next().col;
        if (cur().kind != TokKind::name || is_keyword(cur().text)) {
          return fail(cur().col, "expected an attribute name after '.'");
        }
        auto a = node(ExprOp::attr, col);
        a->sval = next().text;
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else {
        break;
      }
    }
    return e;
  }

  ExprPtr atom() {
    const Token& t = cur();
    switch (t.kind) {
      case TokKind::int_lit: {
        auto e = node(ExprOp::int_lit, t.col);
        e->ival = t.ival;
        next();
        return e;
      }
      case TokKind::float_lit: {
        auto e = node(ExprOp::float_lit, t.col);
        e->fval = t.fval;
        next();
        return e;
      }
      case TokKind::str_lit: {
        auto e = node(ExprOp::str_lit, t.col);
        e->sval = t.text;
        next();
        return e;
      }
      case TokKind::name: {
        if (t.text == "True" || t.text == "False") {
          auto e = node(ExprOp::bool_lit, t.col);
          e->bval = t.text == "True";
          next();
          return e;
        }
        if (t.text == "None") {
          auto e = node(ExprOp::none_lit, t.col);
          next();
          return e;
        }
        if (t.text == "for") return fail(t.col, "comprehensions are not supported");
        if (t.text == "lambda") return fail(t.col, "lambda is not supported");
        if (is_keyword(t.text)) return fail(t.col, "unexpected keyword '" + t.text + "'");
        auto e = node(ExprOp::name, t.col);
        e->sval = t.text;
        next();
        return e;
      }
      case TokKind::op:
        if (t.text == "(" || t.text == "[") {
          if (!enter()) return nullptr;
          const bool paren = t.text == "(";
          const int col = next().col;
          const char* close = paren ? ")" : "]";
          std::vector<ExprPtr> items;
          bool trailing_comma = false;
          while (!peek_op(close)) {
            ExprPtr a = expression();
            if (!a) return leave(nullptr);
            items.push_back(std::move(a));
            trailing_comma = false;
            if (peek_op(",")) {
              next();
              trailing_comma = true;
              continue;
            }
            break;
          }
          if (!peek_op(close)) {
            return leave(fail(
                cur().col, std::string("expected '") + close + "' or ',', got " + describe(cur())));
          }
          next();
          if (paren && items.size() == 1 && !trailing_comma) return leave(std::move(items[0]));
          auto e = node(paren ? ExprOp::tuple : ExprOp::list, col);
          e->args = std::move(items);
          return leave(std::move(e));
        }
        if (t.text == "*") return fail(t.col, "a splice '*' is allowed only as a shape axis");
        return fail(t.col, "unexpected " + describe(t));
      case TokKind::end:
        return fail(t.col, "unexpected end of expression");
    }
    return fail(t.col, "unexpected " + describe(t));
  }

  std::vector<Token> toks_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  bool failed_ = false;
  ExprError& err_;
};

}  // namespace

ExprPtr parse_expr(std::string_view src, ExprError& err) {
  std::vector<Token> toks;
  if (!lex(src, toks, err)) return nullptr;
  Parser p(std::move(toks), err);
  if (p.at_end()) {
    p.fail(p.cur().col, "empty expression");
    return nullptr;
  }
  ExprPtr e = p.expression();
  if (!e) return nullptr;
  if (!p.at_end()) return p.fail(p.cur().col, "unexpected " + p.describe(p.cur()));
  return e;
}

bool parse_shape(std::string_view src, ShapeAst& out, ExprError& err) {
  out = ShapeAst{};
  std::vector<Token> toks;
  if (!lex(src, toks, err)) return false;
  Parser p(std::move(toks), err);
  if (p.cur().kind == TokKind::name && !is_keyword(p.cur().text)) {
    // A type-family application Fam[arg, ...].
    out.is_family = true;
    out.family = p.cur().text;
    out.family_col = p.cur().col;
    p.next();
    if (!p.peek_op("[")) {
      p.fail(p.cur().col, "expected '[' after the type family name '" + out.family + "'");
      return false;
    }
    p.next();
    while (!p.peek_op("]")) {
      ExprPtr a = p.expression();
      if (!a) return false;
      out.family_args.push_back(std::move(a));
      if (p.peek_op(",")) {
        p.next();
        continue;
      }
      break;
    }
    if (!p.peek_op("]")) {
      p.fail(p.cur().col, "expected ']' or ',', got " + p.describe(p.cur()));
      return false;
    }
    p.next();
  } else {
    if (!p.peek_op("[")) {
      p.fail(p.cur().col, "a shape is '[axis, ...]' or a type family application 'Fam[...]'");
      return false;
    }
    p.next();
    while (!p.peek_op("]")) {
      ShapeItem item;
      if (p.peek_op("*")) {
        p.next();
        item.splice = true;
      }
      item.expr = p.expression();
      if (!item.expr) return false;
      out.items.push_back(std::move(item));
      if (p.peek_op(",")) {
        p.next();
        continue;
      }
      break;
    }
    if (!p.peek_op("]")) {
      p.fail(p.cur().col, "expected ']' or ',', got " + p.describe(p.cur()));
      return false;
    }
    p.next();
  }
  if (!p.at_end()) {
    p.fail(p.cur().col, "unexpected " + p.describe(p.cur()) + " after the shape");
    return false;
  }
  return true;
}

std::string to_source(const ShapeAst& shape) {
  std::string out;
  if (shape.is_family) {
    out = shape.family + "[";
    for (std::size_t i = 0; i < shape.family_args.size(); ++i) {
      if (i) out += ", ";
      out += to_source(*shape.family_args[i]);
    }
    return out + "]";
  }
  out = "[";
  for (std::size_t i = 0; i < shape.items.size(); ++i) {
    if (i) out += ", ";
    if (shape.items[i].splice) out += "*";
    out += to_source(*shape.items[i].expr);
  }
  return out + "]";
}

}  // namespace tgen
