#include "expr/lexer.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tgen {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

std::string printable(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string(1, c);
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", u);
  return buf;
}

}  // namespace

bool lex(std::string_view src, std::vector<Token>& out, ExprError& err) {
  out.clear();
  std::size_t i = 0;
  const std::size_t n = src.size();
  if (n > kMaxExprLength) {
    err.col = 1;
    err.message = "expression longer than " + std::to_string(kMaxExprLength) + " characters";
    return false;
  }
  auto fail = [&](std::size_t at, std::string msg) {
    err.col = static_cast<int>(at) + 1;
    err.message = std::move(msg);
    return false;
  };
  while (i < n) {
    const char c = src[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
      continue;
    }
    Token t;
    t.col = static_cast<int>(i) + 1;
    const std::size_t start = i;
    if (is_digit(c) || (c == '.' && i + 1 < n && is_digit(src[i + 1]))) {
      bool is_float = false;
      while (i < n && is_digit(src[i])) ++i;
      if (i < n && src[i] == '.') {
        is_float = true;
        ++i;
        while (i < n && is_digit(src[i])) ++i;
      }
      if (i < n && (src[i] == 'e' || src[i] == 'E')) {
        std::size_t j = i + 1;
        if (j < n && (src[j] == '+' || src[j] == '-')) ++j;
        if (j < n && is_digit(src[j])) {
          is_float = true;
          i = j;
          while (i < n && is_digit(src[i])) ++i;
        } else {
          return fail(i, "malformed number exponent");
        }
      }
      if (i < n && is_name_char(src[i])) {
        return fail(i, "unexpected character '" + printable(src[i]) + "' after a number");
      }
      const std::string text(src.substr(start, i - start));
      if (is_float) {
        errno = 0;
        const double v = std::strtod(text.c_str(), nullptr);
        if (errno == ERANGE || !std::isfinite(v)) return fail(start, "float literal out of range");
        t.kind = TokKind::float_lit;
        t.fval = v;
      } else {
        if (text.size() > 1 && text[0] == '0') {
          return fail(start, "integer literal with a leading zero");
        }
        std::int64_t v = 0;
        for (char d : text) {
          const int digit = d - '0';
          if (v > (INT64_MAX - digit) / 10) return fail(start, "integer literal out of range");
          v = v * 10 + digit;
        }
        t.kind = TokKind::int_lit;
        t.ival = v;
      }
      t.text = text;
      out.push_back(std::move(t));
      continue;
    }
    if (is_name_start(c)) {
      while (i < n && is_name_char(src[i])) ++i;
      t.kind = TokKind::name;
      t.text = std::string(src.substr(start, i - start));
      out.push_back(std::move(t));
      continue;
    }
    if (c == '\'' || c == '"') {
      ++i;
      std::string s;
      while (i < n && src[i] != c) {
        if (src[i] == '\\') return fail(i, "escape sequences are not supported in strings");
        if (src[i] == '\n') break;
        s += src[i];
        ++i;
      }
      if (i >= n || src[i] != c) return fail(start, "unterminated string literal");
      ++i;
      t.kind = TokKind::str_lit;
      t.text = std::move(s);
      out.push_back(std::move(t));
      continue;
    }
    static constexpr std::string_view two[] = {"//", "==", "!=", "<=", ">=", "**"};
    bool matched = false;
    for (std::string_view op : two) {
      if (src.substr(i, 2) == op) {
        if (op == "**") return fail(i, "'**' is not supported");
        t.kind = TokKind::op;
        t.text = std::string(op);
        i += 2;
        matched = true;
        break;
      }
    }
    if (matched) {
      out.push_back(std::move(t));
      continue;
    }
    static constexpr std::string_view one = "+-*/%<>()[],:.";
    if (one.find(c) != std::string_view::npos) {
      t.kind = TokKind::op;
      t.text = std::string(1, c);
      ++i;
      out.push_back(std::move(t));
      continue;
    }
    if (c == '=') return fail(i, "unexpected '=' (use '==' to compare)");
    if (c == '!') return fail(i, "unexpected '!' (use 'not')");
    return fail(i, "unexpected character '" + printable(c) + "'");
  }
  Token end;
  end.kind = TokKind::end;
  end.col = static_cast<int>(n) + 1;
  out.push_back(std::move(end));
  return true;
}

}  // namespace tgen
