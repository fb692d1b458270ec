// What the CLI tests expect, read straight from manifest/*.yaml by a line scanner of their own:
// the tests compare the command's output with the manifest text, not with the library's parse
// of it (which the command itself prints). The scanner knows only the layout the manifest files
// use (ops at column 0, two-space indents, one flow mapping per workload row).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tileops::cli_test {

struct ManifestWorkload {
  std::string label;
  /// One entry per dtype case: its dtype values in order ({T: bfloat16, P: int64} ->
  /// {"bfloat16", "int64"}); a row without dtype_cases has one case with no values.
  std::vector<std::vector<std::string>> dtype_cases;
};

struct ManifestOp {
  std::string name;
  std::string file;  ///< "manifest/norm.yaml"
  int line = 0;      ///< 1-based line of the op's key
  std::string family;
  std::string status;
  std::string flops;                ///< the roofline flops expression, unquoted
  std::vector<std::string> params;  ///< names, in order
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<ManifestWorkload> workloads;

  /// Case ids as the manifest defines them: the label, then each dtype value, joined with '-'.
  std::vector<std::string> case_ids() const;
};

/// Every op of every manifest/*.yaml under `source_dir`, sorted by name.
std::vector<ManifestOp> scan_manifest(const std::filesystem::path& source_dir);

/// The op named `name` among `ops`; throws std::out_of_range when there is none.
const ManifestOp& find_op(const std::vector<ManifestOp>& ops, const std::string& name);

}  // namespace tileops::cli_test
