// The expression lexer and parser: precedence and associativity (seen through the normalised
// source text, which keeps only the parentheses the tree needs), literals, and every syntax
// error with its message and column.
#include <string>

#include <gtest/gtest.h>

#include "expr/parser.h"

namespace {

std::string norm(const std::string& src) {
  tgen::ExprError err;
  tgen::ExprPtr e = tgen::parse_expr(src, err);
  if (!e) return "error at " + std::to_string(err.col) + ": " + err.message;
  return tgen::to_source(*e);
}

struct ErrorCase {
  const char* src;
  int col;
  const char* message;
};

TEST(ExprParser, PrecedenceAndAssociativity) {
  EXPECT_EQ(norm("1 + 2 * 3"), "1 + 2 * 3");
  EXPECT_EQ(norm("(1 + 2) * 3"), "(1 + 2) * 3");
  EXPECT_EQ(norm("1 - (2 - 3)"), "1 - (2 - 3)");
  EXPECT_EQ(norm("(1 - 2) - 3"), "1 - 2 - 3");
  EXPECT_EQ(norm("a // b % c"), "a // b % c");
  EXPECT_EQ(norm("a // (b % c)"), "a // (b % c)");
  EXPECT_EQ(norm("-a * b"), "-a * b");
  EXPECT_EQ(norm("-(a * b)"), "-(a * b)");
  EXPECT_EQ(norm("not a and b or c"), "not a and b or c");
  EXPECT_EQ(norm("not (a and b)"), "not (a and b)");
  EXPECT_EQ(norm("a or b and c"), "a or b and c");
  EXPECT_EQ(norm("(a or b) and c"), "(a or b) and c");
  EXPECT_EQ(norm("a + 1 < b * 2"), "a + 1 < b * 2");
  EXPECT_EQ(norm("not a == b"), "not a == b");
  EXPECT_EQ(norm("x if c else y if d else z"), "x if c else y if d else z");
  EXPECT_EQ(norm("(x if c else y) if d else z"), "(x if c else y) if d else z");
  EXPECT_EQ(norm("1 + (x if c else y)"), "1 + (x if c else y)");
  EXPECT_EQ(norm("a in (1, 2) and b not in (3,)"), "a in (1, 2) and b not in (3,)");
}

TEST(ExprParser, Postfix) {
  EXPECT_EQ(norm("S[0]"), "S[0]");
  EXPECT_EQ(norm("S[-1]"), "S[-1]");
  EXPECT_EQ(norm("S[1:]"), "S[1:]");
  EXPECT_EQ(norm("S[:-1]"), "S[:-1]");
  EXPECT_EQ(norm("S[:]"), "S[:]");
  EXPECT_EQ(norm("S[a:b][0]"), "S[a:b][0]");
  EXPECT_EQ(norm("max(a, b, c)"), "max(a, b, c)");
  EXPECT_EQ(norm("prod(S[1:])"), "prod(S[1:])");
  EXPECT_EQ(norm("len([])"), "len([])");
  EXPECT_EQ(norm("ceil_div(a, b,)"), "ceil_div(a, b)");
  EXPECT_EQ(norm("v.value"), "v.value");
  EXPECT_EQ(norm("(a + b)[0]"), "(a + b)[0]");
}

TEST(ExprParser, Literals) {
  EXPECT_EQ(norm("0"), "0");
  EXPECT_EQ(norm("9223372036854775807"), "9223372036854775807");
  EXPECT_EQ(norm("1.0e-6"), "1e-06");
  EXPECT_EQ(norm("2.5"), "2.5");
  EXPECT_EQ(norm("10000.0"), "10000.0");
  EXPECT_EQ(norm(".5"), "0.5");
  EXPECT_EQ(norm("True and False"), "True and False");
  EXPECT_EQ(norm("None"), "None");
  EXPECT_EQ(norm("'sd'"), "'sd'");
  EXPECT_EQ(norm("\"bshd\""), "'bshd'");
  EXPECT_EQ(norm("\"it's\""), "\"it's\"");
  EXPECT_EQ(norm("(1,)"), "(1,)");
  EXPECT_EQ(norm("()"), "()");
  EXPECT_EQ(norm("[1, 2]"), "[1, 2]");
}

TEST(ExprParser, ColumnsOfNodes) {
  tgen::ExprError err;
  tgen::ExprPtr e = tgen::parse_expr("  a +  b", err);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->col, 5);  // the operator
  EXPECT_EQ(e->args[0]->col, 3);
  EXPECT_EQ(e->args[1]->col, 8);
}

TEST(ExprParser, SyntaxErrorsWithColumns) {
  const ErrorCase cases[] = {
      {"", 1, "empty expression"},
      {"1 +", 4, "unexpected end of expression"},
      {"a < b < c", 7, "chained comparisons are not supported"},
      {"(1, 2", 6, "expected ')' or ','"},
      {"[1, 2", 6, "expected ']' or ','"},
      {"x = 1", 3, "unexpected '=' (use '==' to compare)"},
      {"!x", 1, "unexpected '!' (use 'not')"},
      {"'abc", 1, "unterminated string literal"},
      {"'a\\n'", 3, "escape sequences are not supported"},
      {"S[1:2:3]", 6, "slice steps are not supported"},
      {"S[::2]", 4, "slice steps are not supported"},
      {"S[1, 2]", 4, "a subscript takes one index"},
      {"f(1)(2)", 5, "only named primitives can be called"},
      {"(a + b)(2)", 8, "only named primitives can be called"},
      {"1 if b", 7, "expected 'else' in a conditional"},
      {"2 ** 3", 3, "'**' is not supported"},
      {"01", 1, "integer literal with a leading zero"},
      {"99999999999999999999", 1, "integer literal out of range"},
      {"1e999", 1, "float literal out of range"},
      {"1e", 2, "malformed number exponent"},
      {"3x", 2, "unexpected character 'x' after a number"},
      {"x is None", 3, "'is' is not supported"},
      {"a $ b", 3, "unexpected character '$'"},
      {"a \x01", 3, "unexpected character '\\x01'"},
      {"*S", 1, "a splice '*' is allowed only as a shape axis"},
      {"a b", 3, "unexpected 'b'"},
      {"a.", 3, "expected an attribute name after '.'"},
      {"a.if", 3, "expected an attribute name after '.'"},
      {"2 .x", 3, "an attribute applies only to a name"},
      {"lambda: 1", 1, "lambda is not supported"},
      {"[x for x in S]", 4, "expected ']' or ',', got 'for'"},
      {"for", 1, "comprehensions are not supported"},
      {"else", 1, "unexpected keyword 'else'"},
      {"(", 2, "unexpected end of expression"},
      {")", 1, "unexpected ')'"},
  };
  for (const auto& c : cases) {
    tgen::ExprError err;
    EXPECT_EQ(tgen::parse_expr(c.src, err), nullptr) << c.src;
    EXPECT_EQ(err.col, c.col) << c.src << ": " << err.message;
    EXPECT_NE(err.message.find(c.message), std::string::npos) << c.src << ": " << err.message;
  }
}

TEST(ExprParser, DeepNestingIsAnErrorNotACrash) {
  const std::string deep = std::string(500, '(') + "1" + std::string(500, ')');
  tgen::ExprError err;
  EXPECT_EQ(tgen::parse_expr(deep, err), nullptr);
  EXPECT_EQ(err.message, "expression nested too deeply");
  const std::string negs = std::string(500, '-') + "1";
  EXPECT_EQ(tgen::parse_expr(negs, err), nullptr);
  EXPECT_EQ(err.message, "expression nested too deeply");
  std::string nots;
  for (int i = 0; i < 500; ++i) nots += "not ";
  EXPECT_EQ(tgen::parse_expr(nots + "True", err), nullptr);
}

TEST(ShapeParser, FormsAndErrors) {
  tgen::ShapeAst s;
  tgen::ExprError err;
  ASSERT_TRUE(tgen::parse_shape("[*S, *normalized_shape]", s, err));
  EXPECT_FALSE(s.is_family);
  ASSERT_EQ(s.items.size(), 2u);
  EXPECT_TRUE(s.items[0].splice);
  EXPECT_EQ(tgen::to_source(s), "[*S, *normalized_shape]");
  ASSERT_TRUE(tgen::parse_shape("[]", s, err));
  EXPECT_TRUE(s.items.empty());
  ASSERT_TRUE(tgen::parse_shape("[M, 2 * R + 1, *S[1:]]", s, err));
  EXPECT_EQ(tgen::to_source(s), "[M, 2 * R + 1, *S[1:]]");
  ASSERT_TRUE(tgen::parse_shape("XShape[layout, B, S, H, 2 * R]", s, err));
  EXPECT_TRUE(s.is_family);
  EXPECT_EQ(s.family, "XShape");
  EXPECT_EQ(s.family_args.size(), 5u);

  const ErrorCase cases[] = {
      {"M", 2, "expected '[' after the type family name 'M'"},
      {"[M", 3, "expected ']' or ','"},
      {"[M] x", 5, "unexpected 'x' after the shape"},
      {"(M)", 1, "a shape is '[axis, ...]'"},
      {"[M,, N]", 4, "unexpected ','"},
      {"[**S]", 2, "'**' is not supported"},
  };
  for (const auto& c : cases) {
    EXPECT_FALSE(tgen::parse_shape(c.src, s, err)) << c.src;
    EXPECT_EQ(err.col, c.col) << c.src << ": " << err.message;
    EXPECT_NE(err.message.find(c.message), std::string::npos) << c.src << ": " << err.message;
  }
}

}  // namespace
