// Runs a program as a child process and captures what it prints, for tests of the `tileops`
// command that must see its real exit status and both streams (the usage errors go to stderr).
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace tileops::cli_test {

struct CommandResult {
  /// The exit status; 128 + the signal's number when a signal ended the child.
  int exit_code = -1;
  bool timed_out = false;  ///< killed because it ran past its timeout
  std::string out;
  std::string err;
  long max_rss_kb = 0;  ///< the child's peak resident set size (wait4), in KiB
};

/// What a failed expectation prints: the exit status and both streams.
std::ostream& operator<<(std::ostream& os, const CommandResult& result);

struct Command {
  std::vector<std::string> argv;  ///< argv[0] is the program's path (no PATH search)
  /// Changes to this process's environment: a value sets the variable, nullopt removes it.
  std::map<std::string, std::optional<std::string>> env;
  /// The child is killed after this long (a hung command must not hang the test program).
  std::chrono::milliseconds timeout{60'000};
};

/// Runs `command` with stdin from /dev/null and waits for it. Throws std::runtime_error when the
/// child cannot be started.
CommandResult run_command(const Command& command);

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace tileops::cli_test
