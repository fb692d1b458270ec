#include "cli/cli_test.h"

#include <algorithm>
#include <regex>
#include <sstream>

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

std::vector<BenchRow> bench_rows(const std::string& out) {
  const auto& ops = CliTest::manifest();
  std::vector<BenchRow> rows;
  bool under_rule = false;
  for (const auto& line : lines_of(out)) {
    if (!under_rule) {
      under_rule = !line.empty() && line.find_first_not_of('-') == std::string::npos;
      continue;
    }
    const std::vector<std::string> words = words_of(line);
    const bool is_op = !words.empty() && std::any_of(ops.begin(), ops.end(), [&](const auto& op) {
      return op.name == words.front();
    });
    if (!is_op) continue;
    // Cells are separated by two or more spaces; a cell ("16.95 us") has at most one.
    static const std::regex separator(" {2,}");
    std::vector<std::string> cells(
        std::sregex_token_iterator(line.begin(), line.end(), separator, -1),
        std::sregex_token_iterator());
    if (cells.size() < 6) continue;
    rows.push_back({cells[0], cells[1], cells[2], cells[4], cells.back()});
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
