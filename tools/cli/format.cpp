// Output formatting (table, JSON, CSV) and op-name helpers of the `tileops` command.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "cli.h"
#include "tileops/base/op_class.h"

namespace tileops::cli {

void add_format_option(CLI::App& app, Format& format) {
  app.add_option_function<std::string>(
         "--format",
         [&format](const std::string& name) {
           format = name == "json" ? Format::json : name == "csv" ? Format::csv : Format::table;
         },
         "Output format")
      ->check(CLI::IsMember({"table", "json", "csv"}))
      ->default_str("table");
}

// ---- cells ----------------------------------------------------------------------------------

Cell Cell::null(std::string shown) {
  Cell c;
  c.text = std::move(shown);
  return c;
}
Cell Cell::string(std::string value) {
  Cell c;
  c.kind = Kind::string;
  c.text = value;
  c.str = std::move(value);
  return c;
}
Cell Cell::num(double value, std::string shown) {
  Cell c;
  c.kind = std::isfinite(value) ? Kind::number : Kind::null;
  c.number = value;
  c.text = std::move(shown);
  return c;
}
Cell Cell::integer_(std::int64_t value) {
  Cell c;
  c.kind = Kind::integer;
  c.integer = value;
  c.text = std::to_string(value);
  return c;
}
Cell Cell::boolean_(bool value) {
  Cell c;
  c.kind = Kind::boolean;
  c.boolean = value;
  c.text = value ? "yes" : "no";
  return c;
}

std::string json_number(double v) {
  return std::isfinite(v) ? fmt::format("{}", v) : "null";
}

std::string Cell::json() const {
  switch (kind) {
    case Kind::null:
      return "null";
    case Kind::string:
      return json_string(str);
    case Kind::number:
      return json_number(number);
    case Kind::integer:
      return std::to_string(integer);
    case Kind::boolean:
      return boolean ? "true" : "false";
  }
  return "null";
}

namespace {
std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}
}  // namespace

std::string Cell::csv() const {
  switch (kind) {
    case Kind::null:
      return "";
    case Kind::string:
      return csv_field(str);
    case Kind::number:
      return fmt::format("{}", number);
    case Kind::integer:
      return std::to_string(integer);
    case Kind::boolean:
      return boolean ? "true" : "false";
  }
  return "";
}

// ---- tables ---------------------------------------------------------------------------------

std::string render_table(const Table& table) {
  std::vector<std::size_t> width(table.columns.size(), 0);
  std::vector<bool> numeric(table.columns.size(), true);
  for (std::size_t c = 0; c < table.columns.size(); ++c) width[c] = table.columns[c].size();
  for (const auto& row : table.rows) {
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], row[c].text.size());
      if (row[c].kind == Cell::Kind::string || row[c].kind == Cell::Kind::boolean) {
        numeric[c] = false;
      }
    }
  }
  auto line = [&](auto text_of, auto right_of) {
    std::string out;
    for (std::size_t c = 0; c < width.size(); ++c) {
      const std::string text = text_of(c);
      const std::size_t pad = width[c] - std::min(width[c], text.size());
      const bool last = c + 1 == width.size();
      if (right_of(c)) {
        out += std::string(pad, ' ') + text;
      } else {
        out += text;
        if (!last) out += std::string(pad, ' ');
      }
      if (!last) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line([&](std::size_t c) { return table.columns[c]; },
                         [&](std::size_t c) { return numeric[c] && !table.rows.empty(); });
  std::size_t total = 0;
  for (std::size_t c = 0; c < width.size(); ++c) total += width[c] + (c + 1 < width.size() ? 2 : 0);
  out += std::string(total, '-') + "\n";
  for (const auto& row : table.rows) {
    out += line([&](std::size_t c) { return c < row.size() ? row[c].text : std::string(); },
                [&](std::size_t c) { return numeric[c]; });
  }
  return out;
}

std::string render_json_rows(const Table& table, int indent) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  if (table.rows.empty()) return "[]";
  std::string out = "[\n";
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    out += pad + "  {";
    const auto& row = table.rows[r];
    for (std::size_t c = 0; c < table.columns.size(); ++c) {
      if (c) out += ", ";
      out += json_string(table.columns[c]) + ": " + (c < row.size() ? row[c].json() : "null");
    }
    out += r + 1 < table.rows.size() ? "},\n" : "}\n";
  }
  return out + pad + "]";
}

std::string render_csv(const Table& table) {
  std::string out;
  for (std::size_t c = 0; c < table.columns.size(); ++c) {
    if (c) out += ',';
    out += csv_field(table.columns[c]);
  }
  out += "\n";
  for (const auto& row : table.rows) {
    for (std::size_t c = 0; c < table.columns.size(); ++c) {
      if (c) out += ',';
      if (c < row.size()) out += row[c].csv();
    }
    out += "\n";
  }
  return out;
}

std::string render(const Table& table, Format format) {
  switch (format) {
    case Format::table:
      return render_table(table);
    case Format::json:
      return render_json_rows(table) + "\n";
    case Format::csv:
      return render_csv(table);
  }
  return {};
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  if (seconds < 1e-3) return fmt::format("{:.2f} us", seconds * 1e6);
  if (seconds < 1.0) return fmt::format("{:.3f} ms", seconds * 1e3);
  return fmt::format("{:.2f} s", seconds);
}

std::string format_rate(double value) {
  if (!std::isfinite(value)) return "-";
  if (std::fabs(value) >= 100) return fmt::format("{:.0f}", value);
  return fmt::format("{:.3g}", value);
}

std::string format_sig(double value, int digits) {
  if (!std::isfinite(value)) return "-";
  return fmt::format("{:.{}g}", value, digits);
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

// ---- op names -------------------------------------------------------------------------------

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      cur[j] =
          std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::vector<std::string> close_op_names(std::string_view name, std::size_t limit) {
  const std::string wanted = lower(name);
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const OpSchema* schema : all_schemas()) {
    const std::string candidate = lower(schema->name);
    const std::size_t d = edit_distance(wanted, candidate);
    const bool substring = !wanted.empty() && (candidate.find(wanted) != std::string::npos ||
                                               wanted.find(candidate) != std::string::npos);
    if (substring || d <= std::max<std::size_t>(2, wanted.size() / 3)) {
      scored.emplace_back(d, std::string(schema->name));
    }
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (const auto& [d, n] : scored) {
    if (out.size() == limit) break;
    out.push_back(n);
  }
  return out;
}

const OpSchema& schema_or_fail(std::string_view name) {
  if (const OpSchema* schema = find_schema(name)) return *schema;
  const auto close = close_op_names(name);
  std::string msg = fmt::format("unknown op '{}'", name);
  if (!close.empty()) {
    msg += fmt::format("; did you mean {}?", join(close, ", "));
  } else {
    msg += "; `tileops list` shows every op";
  }
  throw UsageFailure(msg);
}

namespace {

std::set<Device::Type> devices_of(const OpClass& op_class, int depth) {
  std::set<Device::Type> out;
  for (const auto& impl : op_class.kernel_types)
    out.insert(impl.devices.begin(), impl.devices.end());
  if (op_class.kernel_types.empty() && !op_class.delegate_types.empty() && depth < 8) {
    bool first = true;
    for (const auto& delegate : op_class.delegate_types) {
      const OpClass* sub = find_op_class(delegate.op);
      const std::set<Device::Type> sub_devices =
          sub != nullptr ? devices_of(*sub, depth + 1) : std::set<Device::Type>{};
      if (first) {
        out = sub_devices;
        first = false;
      } else {
        std::set<Device::Type> both;
        for (auto d : out) {
          if (sub_devices.contains(d)) both.insert(d);
        }
        out = std::move(both);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> implemented_devices(std::string_view op) {
  const OpClass* op_class = find_op_class(op);
  if (op_class == nullptr) return {};
  std::vector<std::string> out;
  for (Device::Type t : devices_of(*op_class, 0)) {
    out.emplace_back(t == Device::Type::cpu ? "cpu" : "cuda");
  }
  return out;
}

}  // namespace tileops::cli
