// The expression checker: kinds of well-formed expressions, narrowing under present(), and
// every kind error with its message and column. Symbols: see manifest_test_util.h.
#include <string>

#include <gtest/gtest.h>

#include "manifest_test_util.h"

namespace {

std::string kind_of(const std::string& src, bool roofline = false) {
  tgen::ExprError err;
  tgen::ExprPtr e = tgen_test::checked(src, err, roofline);
  if (!e) return "error at " + std::to_string(err.col) + ": " + err.message;
  return e->kind.str();
}

TEST(ExprChecker, Kinds) {
  EXPECT_EQ(kind_of("D"), "Dim");
  EXPECT_EQ(kind_of("D + M"), "Dim");
  EXPECT_EQ(kind_of("D * 2"), "Dim");
  EXPECT_EQ(kind_of("D - 1"), "Int");
  EXPECT_EQ(kind_of("-D"), "Int");
  EXPECT_EQ(kind_of("n + D"), "Int");
  EXPECT_EQ(kind_of("D // 2"), "Dim");
  EXPECT_EQ(kind_of("f * D"), "Float");
  EXPECT_EQ(kind_of("D % 3.0"), "Float");
  EXPECT_EQ(kind_of("len(S)"), "Dim");
  EXPECT_EQ(kind_of("prod(S)"), "Dim");
  EXPECT_EQ(kind_of("sum(lst)"), "Int");
  EXPECT_EQ(kind_of("S[0]"), "Dim");
  EXPECT_EQ(kind_of("lst[-1]"), "Int");
  EXPECT_EQ(kind_of("S[1:]"), "Shape");
  EXPECT_EQ(kind_of("lst[:2]"), "Seq[Int]");
  EXPECT_EQ(kind_of("[D, M]"), "Seq[Int]");
  EXPECT_EQ(kind_of("max(S)"), "Dim");
  EXPECT_EQ(kind_of("max(D, n)"), "Int");
  EXPECT_EQ(kind_of("min(D, f)"), "Float");
  EXPECT_EQ(kind_of("ceil_div(D, 4)"), "Dim");
  EXPECT_EQ(kind_of("bits(T)"), "Dim");
  EXPECT_EQ(kind_of("category(T)"), "'float' | 'int' | 'bool'");
  EXPECT_EQ(kind_of("T"), "DType[float16 | bfloat16]");
  EXPECT_EQ(kind_of("mode"), "'sd' | 'bshd'");
  EXPECT_EQ(kind_of("D if b else n"), "Int");
  EXPECT_EQ(kind_of("D if b else f"), "Float");
  EXPECT_EQ(kind_of("'a' if b else 'c'"), "'a' | 'c'");
  EXPECT_EQ(kind_of("D > 1 and not b"), "Bool");
  EXPECT_EQ(kind_of("mode in ('sd', 'bshd')"), "Bool");
  EXPECT_EQ(kind_of("D in S"), "Bool");
  EXPECT_EQ(kind_of("present(o)"), "Bool");
  EXPECT_EQ(kind_of("present(opt)"), "Bool");
  EXPECT_EQ(kind_of("T == float16"), "Bool");
  EXPECT_EQ(kind_of("category(T) == 'float'"), "Bool");
  EXPECT_EQ(kind_of("S == lst"), "Bool");
  EXPECT_EQ(kind_of("k * 2"), "Int");
  EXPECT_EQ(kind_of("bytes(x) + bytes(rf) + bytes(y)", true), "Int");
}

TEST(ExprChecker, NarrowingUnderPresent) {
  EXPECT_EQ(kind_of("opt if present(opt) else 1.0"), "Float");
  EXPECT_EQ(kind_of("present(opt) and opt > 0"), "Bool");
  EXPECT_EQ(kind_of("not present(opt) or opt > 0"), "Bool");
  EXPECT_EQ(kind_of("1.0 if not present(opt) else opt"), "Float");
  EXPECT_EQ(kind_of("opt.value * 2 if present(opt) else 0.0"), "Float");
  EXPECT_EQ(kind_of("present(opt) and D > 0 and opt < 1"), "Bool");
}

struct ErrorCase {
  const char* src;
  int col;
  const char* message;
};

TEST(ExprChecker, KindErrorsWithColumns) {
  const ErrorCase cases[] = {
      {"foo + 1", 1, "unknown name 'foo'"},
      {"len(D)", 5, "len() expects a sequence (Shape or list), got 'D' (Dim)"},
      {"prod(D)", 6, "prod() expects a sequence (Shape or list), got 'D' (Dim)"},
      {"sum(f)", 5, "sum() expects a sequence"},
      {"mode == 'nchw'", 6, "'mode' is one of 'sd', 'bshd': it is never 'nchw'"},
      {"'nchw' != mode", 8, "it is never 'nchw'"},
      {"mode in ('sd', 'xd')", 16, "it is never 'xd'"},
      {"T == int8", 3, "'T' is DType[float16 | bfloat16]: it is never int8"},
      {"category(T) == 'complex'", 13, "it is never 'complex'"},
      {"present(x)", 9, "present() of 'x', which is not optional"},
      {"present(n)", 9,
       "present() of 'n', which is neither an optional tensor nor an 'X | None' param"},
      {"present(D + 1)", 11, "present() takes a name"},
      {"present(zz)", 9, "unknown name 'zz'"},
      {"log2(D)", 1,
       "unknown function 'log2' (primitives: len, prod, sum, max, min, ceil_div, present, "
       "category, bits, bytes)"},
      {"len(S, S)", 1, "len() takes 1 argument, got 2"},
      {"ceil_div(D)", 1, "ceil_div() takes 2 arguments, got 1"},
      {"bytes(x)", 1, "bytes() is allowed only in the roofline"},
      {"x + 1", 1, "'x' is a tensor: only present(x) and bytes(x) take a tensor"},
      {"opt + 1.0", 1, "'opt' may be None here: use it where present(opt) holds"},
      {"opt if present(o) else 0.0", 1, "'opt' may be None here"},
      {"opt.value", 4, "'opt.value' needs present(opt) to hold here"},
      {"n.value", 2, "'.value' of 'n', which is not an 'X | None' param"},
      {"opt.foo", 4, "unknown attribute 'foo'"},
      {"D / 2", 3, "'/' is not supported: use '//' (floor division)"},
      {"b + 1", 3, "'+' expects numbers, got 'b' (Bool)"},
      {"S * 2", 3, "'*' expects numbers, got 'S' (Shape)"},
      {"-S", 1, "unary '-' expects numbers, got 'S' (Shape)"},
      {"not D", 1, "'not' expects a Bool, got 'D' (Dim)"},
      {"D and b", 3, "'and' expects a Bool, got 'D' (Dim)"},
      {"b or n", 3, "'or' expects a Bool, got 'n' (Int)"},
      {"1 if D else 2", 6, "a conditional's condition expects a Bool, got 'D' (Dim)"},
      {"D if b else S", 3, "the branches of the conditional have different kinds: Dim and Shape"},
      {"S[b]", 3, "an index expects an Int, got 'b' (Bool)"},
      {"D[0]", 2, "a subscript expects a sequence (Shape or list), got 'D' (Dim)"},
      {"S[f:]", 3, "a slice bound expects an Int, got 'f' (Float)"},
      {"mode < 1", 6, "'<' expects numbers, got 'mode'"},
      {"None == D", 6, "comparison with None is not supported (use present(x))"},
      {"S == D", 3, "cannot compare Shape with Dim"},
      {"T == mode", 3, "cannot compare DType[float16 | bfloat16] with 'sd' | 'bshd'"},
      {"max()", 1, "max() takes at least one argument"},
      {"max(D)", 5, "max() of one argument expects a sequence"},
      {"min(D, S)", 8, "min() expects numbers, got 'S' (Shape)"},
      {"category(D)", 10, "category() expects a DType, got 'D' (Dim)"},
      {"bits(mode)", 6, "bits() expects a DType"},
      {"D in f", 3, "'in' expects a tuple literal or a sequence, got 'f' (Float)"},
      {"f in S", 3, "'in' a sequence expects an Int, got 'f' (Float)"},
      {"(1, 'a') == D", 10, "cannot compare Tuple[Dim, Str] with Dim"},
  };
  for (const auto& c : cases) {
    tgen::ExprError err;
    EXPECT_EQ(tgen_test::checked(c.src, err), nullptr) << c.src;
    EXPECT_EQ(err.col, c.col) << c.src << ": " << err.message;
    EXPECT_NE(err.message.find(c.message), std::string::npos) << c.src << ": " << err.message;
  }
}

TEST(ExprChecker, BytesInRooflineNeedsATensor) {
  tgen::ExprError err;
  EXPECT_EQ(tgen_test::checked("bytes(D)", err, true), nullptr);
  EXPECT_EQ(err.message, "bytes() of 'D', which is not a tensor");
  EXPECT_EQ(err.col, 7);
}

}  // namespace
