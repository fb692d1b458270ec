// Helpers of the manifest compiler's tests: parsing and checking expressions against a fixed
// symbol table, and running the tileops-gen executable.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "expr_fixture.h"

extern bool g_update_golden;

namespace tgen_test {

struct RunResult {
  int status = -1;
  std::string out;  // stdout and stderr together
};

/// Runs the tileops-gen executable with `args` (shell-quoted by the caller).
RunResult run_gen(const std::string& args);

/// A fresh scratch folder under the build tree.
std::string scratch_dir(const std::string& name);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& content);

}  // namespace tgen_test
