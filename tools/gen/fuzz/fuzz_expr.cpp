// libFuzzer target of the expression language: lexer, parser (expressions and shapes), checker,
// and on checked expressions the simplifier, evaluator and C++ emitter. None may crash, hang or
// leak on any input; the normalised source of a parsed expression must parse back to itself.
// Built and run by scripts/fuzz-expr.sh (clang++ -fsanitize=fuzzer,address,undefined).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "expr/ast.h"
#include "expr/checker.h"
#include "expr/emit_cpp.h"
#include "expr/eval.h"
#include "expr/parser.h"
#include "expr/simplify.h"

namespace {

using tgen::Kind;
using tgen::Symbol;

class Symbols : public tgen::SymbolTable {
 public:
  Symbols() {
    add("D", Symbol::Cat::index, Kind::dim());
    add("M", Symbol::Cat::index, Kind::dim());
    add("S", Symbol::Cat::index, Kind::seq(true));
    add("T", Symbol::Cat::index, Kind::dtype({"float16", "bfloat16"}));
    add("n", Symbol::Cat::param, Kind::int_());
    add("f", Symbol::Cat::param, Kind::float_());
    add("b", Symbol::Cat::param, Kind::bool_());
    add("lst", Symbol::Cat::param, Kind::seq());
    add("mode", Symbol::Cat::param, Kind::enum_({"sd", "bshd"}));
    add("opt", Symbol::Cat::param, Kind::maybe(Kind::float_()));
    add("x", Symbol::Cat::input, Kind::of(Kind::Tag::tensor));
    add("o", Symbol::Cat::input, Kind::of(Kind::Tag::tensor), true);
    add("y", Symbol::Cat::output, Kind::of(Kind::Tag::tensor));
    add("k", Symbol::Cat::let, Kind::int_());
  }
  const Symbol* find(std::string_view name) const override {
    auto it = map_.find(name);
    return it == map_.end() ? nullptr : &it->second;
  }

 private:
  void add(const char* n, Symbol::Cat c, Kind k, bool optional = false) {
    Symbol s;
    s.cat = c;
    s.kind = std::move(k);
    s.optional = optional;
    map_.emplace(n, s);
  }
  std::map<std::string, Symbol, std::less<>> map_;
};

class Env : public tgen::EvalEnv {
 public:
  Env() {
    values_["D"] = tgen::EValue(8);
    values_["M"] = tgen::EValue(0);
    values_["S"] = tgen::EValue(tgen::Seq{2, 3, 4});
    values_["T"] = tgen::EValue(tgen::DTypeValue{"bfloat16"});
    values_["n"] = tgen::EValue(std::int64_t{-9223372036854775807LL});
    values_["f"] = tgen::EValue(2.5);
    values_["b"] = tgen::EValue(false);
    values_["lst"] = tgen::EValue(tgen::Seq{});
    values_["mode"] = tgen::EValue("sd");
    values_["opt"] = tgen::EValue(0.5);
    // "k" is left unknown: evaluation of expressions reading it throws NotKnown.
  }
  const tgen::EValue* lookup(std::string_view name) const override {
    auto it = values_.find(name);
    return it == values_.end() ? nullptr : &it->second;
  }
  std::optional<bool> tensor_present(std::string_view name) const override {
    if (name == "o") return true;
    return std::nullopt;
  }
  std::optional<std::int64_t> tensor_bytes(std::string_view name) const override {
    if (name == "x") return 4096;
    return std::nullopt;
  }

 private:
  std::map<std::string, tgen::EValue, std::less<>> values_;
};

class Names : public tgen::CppNames {
 public:
  std::string value(const std::string& name, bool payload) override {
    return payload ? "(*p." + name + ")" : "v_" + name;
  }
  std::string present(const std::string& name) override { return "has_" + name; }
  std::string bytes(const std::string& name) override { return "b_" + name; }
};

[[noreturn]] void fail(const char* what, const std::string& a, const std::string& b) {
  std::fprintf(stderr, "fuzz_expr: %s\n  first:  %s\n  second: %s\n", what, a.c_str(), b.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view src(reinterpret_cast<const char*>(data), size);
  static const Symbols symbols;
  static const Env env;

  tgen::ShapeAst shape;
  tgen::ExprError err;
  if (tgen::parse_shape(src, shape, err)) (void)tgen::to_source(shape);

  tgen::ExprPtr e = tgen::parse_expr(src, err);
  if (!e) return 0;
  const std::string text = tgen::to_source(*e);
  tgen::ExprError err2;
  tgen::ExprPtr again = tgen::parse_expr(text, err2);
  if (!again) fail("the normalised source does not parse", text, err2.message);
  if (tgen::to_source(*again) != text)
    fail("the normalised source is not stable", text, tgen::to_source(*again));
  (void)tgen::names_read(*e);

  for (const bool roofline : {false, true}) {
    tgen::ExprPtr copy = e->clone();
    tgen::CheckContext ctx;
    ctx.roofline = roofline;
    if (!tgen::check_expr(*copy, symbols, ctx, err)) continue;
    Names names;
    (void)tgen::emit_cpp(*copy, names);
    tgen::ExprPtr folded = tgen::simplify(*copy, env);
    (void)tgen::emit_cpp(*folded, names);
    try {
      (void)tgen::repr(tgen::eval(*copy, env));
    } catch (const tgen::EvalError&) {
    } catch (const tgen::NotKnown&) {
    }
  }
  return 0;
}
