#include "cli/cli_test.h"

#include <algorithm>
#include <map>
#include <regex>
#include <sstream>
#include <string_view>

namespace tileops::cli_test {

CommandResult CliTest::tileops(const std::vector<std::string>& args,
                               const std::map<std::string, std::optional<std::string>>& env) const {
  Command command;
  command.argv.emplace_back(TILEOPS_CLI_PATH);
  command.argv.insert(command.argv.end(), args.begin(), args.end());
  command.env = {{"XDG_CACHE_HOME", cache_.path().string()},
                 {"TILEOPS_BACKENDS", std::nullopt},
                 {"TILEOPS_TUNING_DB", std::nullopt}};
  for (const auto& [name, value] : env) command.env[name] = value;
  return run_command(command);
}

std::filesystem::path CliTest::cpu_profile_path() const {
  // docs/perf/README.md: `$XDG_CACHE_HOME/tileops/hardware-<device>.json`.
  return cache_.path() / "tileops" / "hardware-cpu.json";
}

const std::vector<ManifestOp>& CliTest::manifest() {
  static const std::vector<ManifestOp> ops = scan_manifest(TILEOPS_SOURCE_DIR);
  return ops;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

namespace {

/// A case id as the narrow table shows it, its dtypes spelled whole again.
std::string whole_case_id(const std::string& shown) {
  static const std::map<std::string, std::string, std::less<>> kWhole = {
      {"bf16", "bfloat16"},      {"f16", "float16"},      {"f32", "float32"}, {"f64", "float64"},
      {"e4m3", "float8_e4m3fn"}, {"e5m2", "float8_e5m2"}, {"i32", "int32"},   {"i64", "int64"}};
  std::string out;
  std::size_t start = 0;
  while (start <= shown.size()) {
    const std::size_t end = std::min(shown.find('-', start), shown.size());
    const std::string part = shown.substr(start, end - start);
    const auto it = kWhole.find(part);
    if (start > 0) out += '-';
    out += it == kWhole.end() ? part : it->second;
    start = end + 1;
  }
  return out;
}

}  // namespace

std::vector<BenchRow> bench_rows(const std::string& out) {
  const auto& ops = CliTest::manifest();
  // Cells are separated by two or more spaces; a cell ("16.95 us") has at most one.
  static const std::regex separator(" {2,}");
  const auto cells_of = [](const std::string& line) {
    return std::vector<std::string>(
        std::sregex_token_iterator(line.begin(), line.end(), separator, -1),
        std::sregex_token_iterator());
  };
  static const std::regex shared_target(R"(^# target (\S+) for every case$)");
  std::string target;  // the shared target, when the table names it above itself
  std::vector<std::string> columns;
  std::vector<BenchRow> rows;
  bool under_rule = false;
  std::string previous;
  for (const auto& line : lines_of(out)) {
    std::smatch m;
    if (std::regex_match(line, m, shared_target)) target = m[1];
    if (!under_rule) {
      under_rule = !line.empty() && line.find_first_not_of('-') == std::string::npos;
      if (under_rule) columns = cells_of(previous);
      previous = line;
      continue;
    }
    const std::vector<std::string> words = words_of(line);
    const bool is_op = !words.empty() && std::any_of(ops.begin(), ops.end(), [&](const auto& op) {
      return op.name == words.front();
    });
    if (!is_op) continue;
    const std::vector<std::string> cells = cells_of(line);
    if (cells.size() != columns.size()) continue;
    const auto cell = [&](std::string_view column) -> std::string {
      const auto it = std::find(columns.begin(), columns.end(), column);
      return it == columns.end() ? std::string() : cells[it - columns.begin()];
    };
    const std::string shown_target = cell("target");
    rows.push_back({cell("op"), whole_case_id(cell("case")),
                    shown_target.empty() ? target : shown_target, cell("median"), cell("result")});
  }
  return rows;
}

std::optional<BenchSummary> bench_summary(const std::string& text) {
  static const std::regex summary_re(
      R"(^(\d+) cases: (\d+) passed, (\d+) failed, (\d+) errors, (\d+) unchecked, (\d+) skipped$)");
  for (const auto& line : lines_of(text)) {
    std::smatch m;
    if (!std::regex_match(line, m, summary_re)) continue;
    return BenchSummary{std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3]),
                        std::stoi(m[4]), std::stoi(m[5]), std::stoi(m[6])};
  }
  return std::nullopt;
}

}  // namespace tileops::cli_test
