#include "manifest/yaml_util.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace tgen {

namespace {

bool plain(const YAML::Node& n) {
  return n.Tag() == "?";
}

bool is_int_text(const std::string& s) {
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

bool is_float_text(const std::string& s) {
  if (s == ".inf" || s == "-.inf" || s == "+.inf" || s == ".nan" || s == ".Inf" || s == ".NaN") {
    return true;
  }
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  bool digits = false;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    ++i;
    digits = true;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      ++i;
      digits = true;
    }
  }
  if (!digits) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    bool exp = false;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      ++i;
      exp = true;
    }
    if (!exp) return false;
  }
  return i == s.size();
}

}  // namespace

ScalarKind scalar_kind(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return ScalarKind::null;
  if (!n.IsScalar()) return ScalarKind::collection;
  if (!plain(n)) return ScalarKind::string;
  const std::string& s = n.Scalar();
  if (s == "~" || s == "null" || s == "Null" || s == "NULL" || s.empty()) return ScalarKind::null;
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE") {
    return ScalarKind::bool_;
  }
  if (is_int_text(s)) return ScalarKind::int_;
  if (is_float_text(s)) return ScalarKind::float_;
  return ScalarKind::string;
}

std::optional<std::int64_t> scalar_int(const YAML::Node& n) {
  if (scalar_kind(n) != ScalarKind::int_) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(n.Scalar().c_str(), &end, 10);
  if (errno == ERANGE) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

std::optional<double> scalar_number(const YAML::Node& n) {
  const ScalarKind k = scalar_kind(n);
  if (k == ScalarKind::int_) {
    if (auto i = scalar_int(n)) return static_cast<double>(*i);
    return std::nullopt;
  }
  if (k != ScalarKind::float_) return std::nullopt;
  const double v = std::strtod(n.Scalar().c_str(), nullptr);
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<bool> scalar_bool(const YAML::Node& n) {
  if (scalar_kind(n) != ScalarKind::bool_) return std::nullopt;
  const char c = n.Scalar()[0];
  return c == 't' || c == 'T';
}

std::optional<std::string> scalar_string(const YAML::Node& n, bool any_scalar) {
  const ScalarKind k = scalar_kind(n);
  if (k == ScalarKind::string) return n.Scalar();
  if (any_scalar && (k == ScalarKind::int_ || k == ScalarKind::float_ || k == ScalarKind::bool_)) {
    return n.Scalar();
  }
  return std::nullopt;
}

std::string node_text(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "null";
  if (n.IsScalar()) return n.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << n;
  return out.c_str();
}

std::vector<MapEntry> map_entries(const YAML::Node& map, const std::string& what,
                                  const std::vector<std::string_view>& allowed, Diagnostics& diags,
                                  const std::string& file) {
  std::vector<MapEntry> out;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const int line = line_of(it->first);
    if (!it->first.IsScalar()) {
      diags.error(file, line, "a key of " + what + " must be a name");
      continue;
    }
    std::string key = it->first.Scalar();
    bool dup = false;
    for (const auto& e : out) {
      if (e.key == key) {
        diags.error(file, line,
                    "duplicate key '" + key + "' in " + what + " (first at line " +
                        std::to_string(e.line) + ")");
        dup = true;
        break;
      }
    }
    if (dup) continue;
    if (!allowed.empty()) {
      bool ok = false;
      for (auto a : allowed) ok = ok || a == key;
      if (!ok) {
        std::string list;
        for (auto a : allowed) {
          if (!list.empty()) list += ", ";
          list += a;
        }
        diags.error(file, line,
                    "unknown field '" + key + "' in " + what + " (allowed: " + list + ")");
        continue;
      }
    }
    out.push_back(MapEntry{std::move(key), line, it->second});
  }
  return out;
}

namespace {
std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}
std::string strip_hash(const std::string& t) {
  std::string s = t.substr(1);
  if (!s.empty() && s[0] == ' ') s = s.substr(1);
  return s;
}
}  // namespace

std::string comment_doc(const std::vector<std::string>& lines, int line, bool include_above) {
  std::vector<std::string> block;
  if (include_above) {
    for (int i = line - 2; i >= 0 && i < static_cast<int>(lines.size()); --i) {
      const std::string t = trim(lines[static_cast<std::size_t>(i)]);
      if (t.empty() || t[0] != '#') break;
      block.insert(block.begin(), strip_hash(t));
    }
  }
  if (line >= 1 && line <= static_cast<int>(lines.size())) {
    // A trailing comment: ' #' outside quotes.
    const std::string& l = lines[static_cast<std::size_t>(line - 1)];
    char quote = 0;
    for (std::size_t i = 0; i < l.size(); ++i) {
      const char c = l[i];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '#' && i > 0 && (l[i - 1] == ' ' || l[i - 1] == '\t')) {
        block.push_back(strip_hash(trim(l.substr(i))));
        break;
      }
    }
  }
  std::string out;
  for (const auto& b : block) {
    if (!out.empty()) out += "\n";
    out += b;
  }
  return out;
}

}  // namespace tgen
