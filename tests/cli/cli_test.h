// The fixture of the `tileops` command tests and the parsing of its bench output.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/manifest_scan.h"
#include "cli/run_command.h"

namespace tileops::cli_test {

/// Exit codes the command documents (`tileops --help`): 1 a failed case, 2 bad usage.
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

class CliTest : public testing::Test {
 public:
  /// The manifest, scanned from the source tree.
  static const std::vector<ManifestOp>& manifest();

 protected:
  /// Runs the built `tileops` with `args`. Every run gets this test's own empty cache directory
  /// (XDG_CACHE_HOME): no profile the user saved changes the output, and `calibrate` never
  /// writes into their home. Plugins of the caller's environment are not loaded.
  CommandResult tileops(const std::vector<std::string>& args,
                        const std::map<std::string, std::optional<std::string>>& env = {}) const;

  /// The profile file `tileops calibrate` saves for the CPU, under the test's cache directory.
  std::filesystem::path cpu_profile_path() const;

  TempDir cache_;
};

/// Lines of `text`, without their '\n'.
std::vector<std::string> lines_of(const std::string& text);
/// Whitespace-separated words of `line`.
std::vector<std::string> words_of(const std::string& line);
/// Fields of one CSV line (RFC 4180 quoting, no newlines inside fields).
std::vector<std::string> csv_fields(const std::string& line);

/// One case row of the bench table.
struct BenchRow {
  std::string op;
  std::string case_id;
  std::string target;
  std::string median;  ///< "-" when the case was not timed
  std::string result;
};

/// The summary line "N cases: P passed, F failed, E errors, U unchecked, S skipped".
struct BenchSummary {
  int cases = -1, passed = -1, failed = -1, errors = -1, unchecked = -1, skipped = -1;
};

/// The case rows of a `--format table` bench output: the lines under the header rule whose first
/// word is an op of the manifest, read by the header's column names; case ids with their dtypes
/// spelled whole again, the target from the line above the table when every case shares it.
std::vector<BenchRow> bench_rows(const std::string& out);
/// The summary line among `text`'s lines; nullopt when there is none.
std::optional<BenchSummary> bench_summary(const std::string& text);

}  // namespace tileops::cli_test
