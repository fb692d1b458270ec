// The evaluator: Python semantics of floor division and modulo (signs), conditionals and
// short-circuits, indexing and slicing, the primitives, and evaluation errors. Values: see
// manifest_test_util.h (D=8, M=3, N=5, S=[2, 3, 4], n=-7, f=2.5, lst=[1, 2, 3], ...).
#include <string>

#include <gtest/gtest.h>

#include "expr/eval.h"
#include "manifest_test_util.h"

namespace {

using tgen::EValue;
using tgen::Seq;
using tgen_test::eval_src;

std::string ev(const std::string& src) {
  try {
    return tgen::repr(eval_src(src));
  } catch (const tgen::EvalError& e) {
    return "error at " + std::to_string(e.col) + ": " + e.what();
  }
}

TEST(ExprEval, IntegerArithmetic) {
  EXPECT_EQ(ev("1 + 2 * 3"), "7");
  EXPECT_EQ(ev("(1 + 2) * 3"), "9");
  EXPECT_EQ(ev("1 - 2 - 3"), "-4");
  EXPECT_EQ(ev("2 * 3 // 4"), "1");
  EXPECT_EQ(ev("-D * 2"), "-16");
  EXPECT_EQ(ev("D + M * N"), "23");
}

TEST(ExprEval, FloorDivisionAndModuloTakePythonSigns) {
  EXPECT_EQ(ev("7 // 2"), "3");
  EXPECT_EQ(ev("-7 // 2"), "-4");
  EXPECT_EQ(ev("7 // -2"), "-4");
  EXPECT_EQ(ev("-7 // -2"), "3");
  EXPECT_EQ(ev("n // 2"), "-4");
  EXPECT_EQ(ev("7 % 3"), "1");
  EXPECT_EQ(ev("-7 % 3"), "2");
  EXPECT_EQ(ev("7 % -3"), "-2");
  EXPECT_EQ(ev("-7 % -3"), "-1");
  EXPECT_EQ(ev("n % 4"), "1");
  EXPECT_EQ(ev("6 % 3"), "0");
  EXPECT_EQ(ev("-6 // 3"), "-2");
  EXPECT_EQ(ev("-7.5 // 2"), "-4.0");
  EXPECT_EQ(ev("7.5 % -2"), "-0.5");
  EXPECT_EQ(ev("-7.5 % 2"), "0.5");
  EXPECT_EQ(ev("f // 1"), "2.0");
}

TEST(ExprEval, FloatsAndMixing) {
  EXPECT_EQ(ev("f * 2"), "5.0");
  EXPECT_EQ(ev("D + 0.5"), "8.5");
  EXPECT_EQ(ev("D == 8.0"), "True");
  EXPECT_EQ(ev("f > 2"), "True");
  EXPECT_EQ(ev("1.0e-6"), "1e-06");
  EXPECT_EQ(ev("10000.0"), "10000.0");
}

TEST(ExprEval, ConditionalsAndLogic) {
  EXPECT_EQ(ev("1 if b else 2"), "1");
  EXPECT_EQ(ev("1 if not b else 2"), "2");
  EXPECT_EQ(ev("1 if False else 2 if False else 3"), "3");
  EXPECT_EQ(ev("D if mode == 'bshd' else M"), "8");
  EXPECT_EQ(ev("b and D > 7"), "True");
  EXPECT_EQ(ev("not b or D > 100"), "False");
  // Short-circuits: the right side is not evaluated.
  EXPECT_EQ(ev("False and 1 // 0 == 0"), "False");
  EXPECT_EQ(ev("True or S[10] == 0"), "True");
  EXPECT_EQ(ev("0 if True else 1 // 0"), "0");
  // present() narrows: opt is None here, so its payload is never read.
  EXPECT_EQ(ev("opt if present(opt) else -1.0"), "-1.0");
  EXPECT_EQ(ev("present(o)"), "False");
  EXPECT_EQ(ev("not present(opt) or opt > 0"), "True");
}

TEST(ExprEval, IndexingAndSlicing) {
  EXPECT_EQ(ev("S[0]"), "2");
  EXPECT_EQ(ev("S[-1]"), "4");
  EXPECT_EQ(ev("S[-3]"), "2");
  EXPECT_EQ(ev("S[1:]"), "[3, 4]");
  EXPECT_EQ(ev("S[:-1]"), "[2, 3]");
  EXPECT_EQ(ev("S[-2:]"), "[3, 4]");
  EXPECT_EQ(ev("S[1:2]"), "[3]");
  EXPECT_EQ(ev("S[2:1]"), "[]");
  EXPECT_EQ(ev("S[5:]"), "[]");
  EXPECT_EQ(ev("S[-10:10]"), "[2, 3, 4]");
  EXPECT_EQ(ev("S[:]"), "[2, 3, 4]");
  EXPECT_EQ(ev("S[1:][0]"), "3");
  EXPECT_EQ(ev("[D, M][1]"), "3");
  EXPECT_EQ(ev("S[3]"), "error at 2: index 3 out of range for [2, 3, 4] (length 3)");
  EXPECT_EQ(ev("S[-4]"), "error at 2: index -4 out of range for [2, 3, 4] (length 3)");
}

TEST(ExprEval, Primitives) {
  EXPECT_EQ(ev("len(S)"), "3");
  EXPECT_EQ(ev("len([])"), "0");
  EXPECT_EQ(ev("prod(S)"), "24");
  EXPECT_EQ(ev("prod([])"), "1");
  EXPECT_EQ(ev("prod(S[3:])"), "1");
  EXPECT_EQ(ev("sum(S)"), "9");
  EXPECT_EQ(ev("sum([])"), "0");
  EXPECT_EQ(ev("max(S)"), "4");
  EXPECT_EQ(ev("min(lst)"), "1");
  EXPECT_EQ(ev("max(D, M, N)"), "8");
  EXPECT_EQ(ev("min(D, f)"), "2.5");
  EXPECT_EQ(ev("max(n, -8)"), "-7");
  EXPECT_EQ(ev("ceil_div(7, 2)"), "4");
  EXPECT_EQ(ev("ceil_div(8, 2)"), "4");
  EXPECT_EQ(ev("ceil_div(0, 3)"), "0");
  EXPECT_EQ(ev("ceil_div(-7, 2)"), "-3");
  EXPECT_EQ(ev("ceil_div(7, 0)"), "error at 1: ceil_div() by a non-positive divisor 0");
  EXPECT_EQ(ev("category(T)"), "'float'");
  EXPECT_EQ(ev("bits(T)"), "16");
  EXPECT_EQ(ev("bits(int64)"), "64");
  EXPECT_EQ(ev("category(bool)"), "'bool'");
  EXPECT_EQ(ev("bits(float8_e5m2)"), "8");  // a manifest may name it (no op does yet)
  EXPECT_EQ(ev("category(float8_e5m2)"), "'float'");
  EXPECT_EQ(ev("T == float16"), "True");
  EXPECT_EQ(ev("T != bfloat16"), "True");
  EXPECT_EQ(ev("mode in ('sd', 'bshd')"), "True");
  EXPECT_EQ(ev("mode not in ('sd',)"), "True");
  EXPECT_EQ(ev("3 in S"), "True");
  EXPECT_EQ(ev("D in S"), "False");
  EXPECT_EQ(ev("S == [2, 3, 4]"), "True");
  EXPECT_EQ(ev("bytes(x) * 2"), "128");
  EXPECT_EQ(ev("max(S[3:])"), "error at 1: max() of an empty sequence");
}

TEST(ExprEval, ErrorsAreReportedNotCrashes) {
  EXPECT_EQ(ev("1 // 0"), "error at 3: integer division by zero");
  EXPECT_EQ(ev("1 % 0"), "error at 3: integer modulo by zero");
  EXPECT_EQ(ev("1.0 // 0"), "error at 5: float floor division by zero");
  EXPECT_EQ(ev("9223372036854775807 + 1"), "error at 21: integer overflow");
  EXPECT_EQ(ev("-9223372036854775807 - 2"), "error at 22: integer overflow");
  EXPECT_EQ(ev("3037000500 * 3037000500"), "error at 12: integer overflow");
  EXPECT_EQ(ev("prod([4294967296, 4294967296])"), "error at 1: integer overflow in prod()");
}

TEST(ExprEval, UnknownNamesThrowNotKnown) {
  tgen::ExprError err;
  tgen::ExprPtr e = tgen_test::checked("D + 1", err);
  ASSERT_TRUE(e);
  class Empty : public tgen::EvalEnv {
   public:
    const EValue* lookup(std::string_view) const override { return nullptr; }
    std::optional<bool> tensor_present(std::string_view) const override { return std::nullopt; }
  } env;
  EXPECT_THROW(tgen::eval(*e, env), tgen::NotKnown);
}

}  // namespace
