// The lexer of manifest expressions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tgen {

/// An error inside an expression: the 1-based column and the message.
struct ExprError {
  int col = 0;
  std::string message;
};

enum class TokKind : std::uint8_t { end, int_lit, float_lit, str_lit, name, op };

struct Token {
  TokKind kind = TokKind::end;
  std::string text;  // the name, the string literal's contents, or the operator
  int col = 1;
  std::int64_t ival = 0;
  double fval = 0;
};

/// The longest expression accepted (keeps every recursive walk of an AST shallow).
inline constexpr std::size_t kMaxExprLength = 4096;

/// Splits `src` into tokens (ending with an `end` token). False, with `err`, on a lexical error.
bool lex(std::string_view src, std::vector<Token>& out, ExprError& err);

}  // namespace tgen
