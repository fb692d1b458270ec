#include "manifest/types.h"

#include <algorithm>
#include <set>

#include "dtypes.h"
#include "manifest/yaml_util.h"

namespace tgen {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Splits on '|' outside quotes and brackets.
std::vector<std::string> split_union(const std::string& text) {
  std::vector<std::string> parts;
  std::string cur;
  char quote = 0;
  int depth = 0;
  for (char c : text) {
    if (quote) {
      if (c == quote) quote = 0;
      cur += c;
      continue;
    }
    if (c == '\'' || c == '"') quote = c;
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == '|' && depth == 0) {
      parts.push_back(trim(cur));
      cur.clear();
      continue;
    }
    cur += c;
  }
  parts.push_back(trim(cur));
  return parts;
}

bool quoted(const std::string& s) {
  return s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front();
}

std::string strip_spaces(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c != ' ' && c != '\t') out += c;
  }
  return out;
}

const char* kTypeHelp =
    "int, float, bool, str, list[int], tuple[int, ...], a union of string literals, a dtype "
    "union, torch.dtype, torch.Tensor, or X | None";

}  // namespace

std::string enum_text(const std::vector<std::string>& values) {
  std::string out;
  for (const auto& v : values) {
    if (!out.empty()) out += " | ";
    out += "'" + v + "'";
  }
  return out;
}

bool parse_param_type(const std::string& text_in, ParamType& out, std::string& why) {
  const std::string text = trim(text_in);
  out = ParamType{};
  out.text = text;
  if (text.empty()) {
    why = "empty parameter type";
    return false;
  }
  std::vector<std::string> parts = split_union(text);
  if (parts.size() > 1) {
    const auto nones = std::count(parts.begin(), parts.end(), "None");
    if (nones > 1) {
      why = "'None' appears twice in type '" + text + "'";
      return false;
    }
    if (nones == 1) {
      std::string rest;
      for (const auto& p : parts) {
        if (p == "None") continue;
        if (!rest.empty()) rest += " | ";
        rest += p;
      }
      ParamType inner;
      if (!parse_param_type(rest, inner, why)) return false;
      if (inner.tag == ParamType::Tag::tensor) {
        why =
            "an optional construction-time tensor is written 'type: torch.Tensor' with "
            "'optional: true'";
        return false;
      }
      out.tag = ParamType::Tag::optional;
      out.inner = std::make_shared<const ParamType>(std::move(inner));
      return true;
    }
    for (const auto& p : parts) {
      if (p.empty()) {
        why = "empty member in type '" + text + "'";
        return false;
      }
    }
    if (std::all_of(parts.begin(), parts.end(), quoted)) {
      out.tag = ParamType::Tag::enum_;
      for (const auto& p : parts) {
        std::string v = p.substr(1, p.size() - 2);
        if (std::find(out.values.begin(), out.values.end(), v) != out.values.end()) {
          why = "literal '" + v + "' appears twice in type '" + text + "'";
          return false;
        }
        out.values.push_back(v);
      }
      return true;
    }
    if (std::all_of(parts.begin(), parts.end(),
                    [](const std::string& p) { return find_dtype(p); })) {
      out.tag = ParamType::Tag::dtype;
      for (const auto& p : parts) {
        if (std::find(out.values.begin(), out.values.end(), p) != out.values.end()) {
          why = "dtype '" + p + "' appears twice in type '" + text + "'";
          return false;
        }
        out.values.push_back(p);
      }
      return true;
    }
    why = "unsupported union type '" + text + "' (" + kTypeHelp + ")";
    return false;
  }
  const std::string t = strip_spaces(text);
  using Tag = ParamType::Tag;
  if (t == "int") {
    out.tag = Tag::int_;
  } else if (t == "float") {
    out.tag = Tag::float_;
  } else if (t == "bool") {
    out.tag = Tag::bool_;
  } else if (t == "str") {
    out.tag = Tag::str;
  } else if (t == "list[int]" || t == "tuple[int,...]") {
    out.tag = Tag::int_list;
  } else if (t.rfind("tuple[", 0) == 0 && t.back() == ']') {
    // tuple[int, int, ...] of a fixed length.
    const std::string body = t.substr(6, t.size() - 7);
    int n = 0;
    std::size_t pos = 0;
    while (pos <= body.size()) {
      const auto comma = body.find(',', pos);
      const std::string item =
          body.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      if (item != "int") {
        why = "unsupported parameter type '" + text + "' (" + kTypeHelp + ")";
        return false;
      }
      ++n;
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    out.tag = Tag::int_list;
    out.tuple_len = n;
  } else if (t == "torch.Tensor") {
    out.tag = Tag::tensor;
  } else if (t == "torch.dtype") {
    out.tag = Tag::dtype;
    for (const auto& d : all_dtypes()) out.values.emplace_back(d.name);
  } else if (quoted(t)) {
    out.tag = Tag::enum_;
    out.values.push_back(trim(text).substr(1, trim(text).size() - 2));
  } else if (find_dtype(t)) {
    out.tag = Tag::dtype;
    out.values.push_back(t);
  } else {
    why = "unsupported parameter type '" + text + "' (" + kTypeHelp + ")";
    return false;
  }
  return true;
}

bool parse_index_kind(const std::string& text_in, IndexDecl& out, std::string& why) {
  const std::string text = trim(text_in);
  if (text == "Dim") {
    out.k = IndexDecl::K::dim;
    out.kind_text = "Dim";
    return true;
  }
  if (text == "Shape") {
    out.k = IndexDecl::K::shape;
    out.kind_text = "Shape";
    return true;
  }
  const std::string t = strip_spaces(text);
  if (t.rfind("DType[", 0) == 0 && t.back() == ']') {
    const std::string body = text.substr(text.find('[') + 1, text.rfind(']') - text.find('[') - 1);
    out.k = IndexDecl::K::dtype;
    out.dtypes.clear();
    for (const auto& p : split_union(body)) {
      if (p.empty()) {
        why = "empty dtype in '" + text + "'";
        return false;
      }
      if (!find_dtype(p)) {
        why = "unknown dtype '" + p + "' in '" + text + "' (valid: " + dtype_spellings() + ")";
        return false;
      }
      if (std::find(out.dtypes.begin(), out.dtypes.end(), p) != out.dtypes.end()) {
        why = "dtype '" + p + "' appears twice in '" + text + "'";
        return false;
      }
      out.dtypes.push_back(p);
    }
    out.kind_text = "DType[";
    for (std::size_t i = 0; i < out.dtypes.size(); ++i) {
      if (i) out.kind_text += " | ";
      out.kind_text += out.dtypes[i];
    }
    out.kind_text += "]";
    return true;
  }
  why = "unknown index kind '" + text + "' (Dim, Shape or DType[a | b | ...])";
  return false;
}

Kind kind_of(const ParamType& t) {
  using Tag = ParamType::Tag;
  switch (t.tag) {
    case Tag::int_:
      return Kind::int_();
    case Tag::float_:
      return Kind::float_();
    case Tag::bool_:
      return Kind::bool_();
    case Tag::str:
      return Kind::of(Kind::Tag::str);
    case Tag::int_list:
      return Kind::seq();
    case Tag::enum_:
      return Kind::enum_(t.values);
    case Tag::dtype:
      return Kind::dtype(t.values);
    case Tag::tensor:
      return Kind::of(Kind::Tag::tensor);
    case Tag::optional:
      return Kind::maybe(kind_of(*t.inner));
  }
  return Kind::error();
}

std::optional<EValue> value_of_type(const YAML::Node& n, const ParamType& t, std::string& why) {
  using Tag = ParamType::Tag;
  const ScalarKind k = scalar_kind(n);
  switch (t.tag) {
    case Tag::int_:
      if (auto i = scalar_int(n)) return EValue(*i);
      why = "expected an int";
      return std::nullopt;
    case Tag::float_:
      if (auto d = scalar_number(n)) return EValue(*d);
      why = "expected a float";
      return std::nullopt;
    case Tag::bool_:
      if (auto b = scalar_bool(n)) return EValue(*b);
      why = "expected a bool (true or false)";
      return std::nullopt;
    case Tag::str:
      if (auto s = scalar_string(n)) return EValue(*s);
      why = "expected a string";
      return std::nullopt;
    case Tag::int_list: {
      if (!n.IsSequence()) {
        why = "expected a list of ints";
        return std::nullopt;
      }
      Seq s;
      for (const auto& item : n) {
        auto i = scalar_int(item);
        if (!i) {
          why = "expected a list of ints";
          return std::nullopt;
        }
        s.push_back(*i);
      }
      if (t.tuple_len >= 0 && static_cast<int>(s.size()) != t.tuple_len) {
        why = "expected " + std::to_string(t.tuple_len) + " ints";
        return std::nullopt;
      }
      return EValue(std::move(s));
    }
    case Tag::enum_: {
      auto s = scalar_string(n);
      if (s && quoted(*s)) s = s->substr(1, s->size() - 2);
      if (s && std::find(t.values.begin(), t.values.end(), *s) != t.values.end()) return EValue(*s);
      why = "expected one of " + enum_text(t.values);
      return std::nullopt;
    }
    case Tag::dtype: {
      auto s = scalar_string(n);
      if (s && std::find(t.values.begin(), t.values.end(), *s) != t.values.end()) {
        return EValue(DTypeValue{*s});
      }
      std::string list;
      for (const auto& v : t.values) list += (list.empty() ? "" : ", ") + v;
      why = "expected a dtype among " + list;
      return std::nullopt;
    }
    case Tag::tensor:
      why = "a construction-time tensor takes no value here";
      return std::nullopt;
    case Tag::optional:
      if (k == ScalarKind::null) return EValue(NoneValue{});
      return value_of_type(n, *t.inner, why);
  }
  why = "unsupported type";
  return std::nullopt;
}

bool valid_identifier(const std::string& s, std::string& why) {
  static const std::set<std::string> kKeywords = {"alignas",
                                                  "alignof",
                                                  "and",
                                                  "and_eq",
                                                  "asm",
                                                  "auto",
                                                  "bitand",
                                                  "bitor",
                                                  "bool",
                                                  "break",
                                                  "case",
                                                  "catch",
                                                  "char",
                                                  "char8_t",
                                                  "char16_t",
                                                  "char32_t",
                                                  "class",
                                                  "compl",
                                                  "concept",
                                                  "const",
                                                  "consteval",
                                                  "constexpr",
                                                  "constinit",
                                                  "const_cast",
                                                  "continue",
                                                  "co_await",
                                                  "co_return",
                                                  "co_yield",
                                                  "decltype",
                                                  "default",
                                                  "delete",
                                                  "do",
                                                  "double",
                                                  "dynamic_cast",
                                                  "else",
                                                  "enum",
                                                  "explicit",
                                                  "export",
                                                  "extern",
                                                  "false",
                                                  "float",
                                                  "for",
                                                  "friend",
                                                  "goto",
                                                  "if",
                                                  "inline",
                                                  "int",
                                                  "long",
                                                  "mutable",
                                                  "namespace",
                                                  "new",
                                                  "noexcept",
                                                  "not",
                                                  "not_eq",
                                                  "nullptr",
                                                  "operator",
                                                  "or",
                                                  "or_eq",
                                                  "private",
                                                  "protected",
                                                  "public",
                                                  "register",
                                                  "reinterpret_cast",
                                                  "requires",
                                                  "return",
                                                  "short",
                                                  "signed",
                                                  "sizeof",
                                                  "static",
                                                  "static_assert",
                                                  "static_cast",
                                                  "struct",
                                                  "switch",
                                                  "template",
                                                  "this",
                                                  "thread_local",
                                                  "throw",
                                                  "true",
                                                  "try",
                                                  "typedef",
                                                  "typeid",
                                                  "typename",
                                                  "union",
                                                  "unsigned",
                                                  "using",
                                                  "virtual",
                                                  "void",
                                                  "volatile",
                                                  "wchar_t",
                                                  "while",
                                                  "xor",
                                                  "xor_eq",
                                                  "in",
                                                  "is",
                                                  "lambda",
                                                  "None",
                                                  "True",
                                                  "False",
                                                  "if",
                                                  "else"};
  if (s.empty()) {
    why = "an empty name";
    return false;
  }
  const auto ok_start = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  if (!ok_start(s[0])) {
    why = "'" + s + "' is not a valid name ([A-Za-z_][A-Za-z0-9_]*)";
    return false;
  }
  for (char c : s) {
    if (!ok_start(c) && !(c >= '0' && c <= '9')) {
      why = "'" + s + "' is not a valid name ([A-Za-z_][A-Za-z0-9_]*)";
      return false;
    }
  }
  if (s.find("__") != std::string::npos ||
      (s.size() > 1 && s[0] == '_' && s[1] >= 'A' && s[1] <= 'Z')) {
    why = "'" + s + "' is a name reserved in C++ (double underscore or _Capital)";
    return false;
  }
  if (kKeywords.count(s)) {
    why = "'" + s + "' is a keyword and cannot be a name";
    return false;
  }
  return true;
}

}  // namespace tgen
