#include "expr_fixture.h"

#include <stdexcept>

namespace tgen_test {

using tgen::Kind;
using tgen::Symbol;

TestSymbols::TestSymbols() {
  auto add = [this](const char* n, Symbol::Cat c, Kind k, bool optional = false) {
    Symbol s;
    s.cat = c;
    s.kind = std::move(k);
    s.optional = optional;
    map_.emplace(n, s);
  };
  add("D", Symbol::Cat::index, Kind::dim());
  add("M", Symbol::Cat::index, Kind::dim());
  add("N", Symbol::Cat::index, Kind::dim());
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
  add("rf", Symbol::Cat::ctor_tensor, Kind::of(Kind::Tag::tensor));
  add("k", Symbol::Cat::let, Kind::int_());
}

const Symbol* TestSymbols::find(std::string_view name) const {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : &it->second;
}

tgen::ExprPtr checked(const std::string& src, tgen::ExprError& err, bool roofline) {
  tgen::ExprPtr e = tgen::parse_expr(src, err);
  if (!e) return nullptr;
  static const TestSymbols syms;
  tgen::CheckContext ctx;
  ctx.roofline = roofline;
  if (!tgen::check_expr(*e, syms, ctx, err)) return nullptr;
  return e;
}

namespace {
class FixedEnv : public tgen::EvalEnv {
 public:
  FixedEnv() {
    values_["D"] = tgen::EValue(8);
    values_["M"] = tgen::EValue(3);
    values_["N"] = tgen::EValue(5);
    values_["S"] = tgen::EValue(tgen::Seq{2, 3, 4});
    values_["T"] = tgen::EValue(tgen::DTypeValue{"float16"});
    values_["n"] = tgen::EValue(-7);
    values_["f"] = tgen::EValue(2.5);
    values_["b"] = tgen::EValue(true);
    values_["lst"] = tgen::EValue(tgen::Seq{1, 2, 3});
    values_["mode"] = tgen::EValue("bshd");
    values_["opt"] = tgen::EValue(tgen::NoneValue{});
    values_["k"] = tgen::EValue(10);
  }
  const tgen::EValue* lookup(std::string_view name) const override {
    auto it = values_.find(std::string(name));
    return it == values_.end() ? nullptr : &it->second;
  }
  std::optional<bool> tensor_present(std::string_view name) const override {
    if (name == "o") return false;
    if (name == "x" || name == "rf") return true;
    return std::nullopt;
  }
  std::optional<std::int64_t> tensor_bytes(std::string_view name) const override {
    if (name == "x") return 64;
    return std::nullopt;
  }

 private:
  std::map<std::string, tgen::EValue> values_;
};
}  // namespace

tgen::EValue eval_src(const std::string& src) {
  tgen::ExprError err;
  tgen::ExprPtr e = checked(src, err, true);
  if (!e)
    throw std::runtime_error("does not check: column " + std::to_string(err.col) + ": " +
                             err.message);
  static const FixedEnv env;
  return tgen::eval(*e, env);
}

}  // namespace tgen_test
