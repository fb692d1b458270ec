// posix_spawn with both output streams on pipes, drained together with poll() so that a child
// that fills one pipe while we wait on the other cannot deadlock.
#include "cli/run_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>

extern char** environ;

namespace tileops::cli_test {
namespace {

[[noreturn]] void fail(const std::string& what, int error) {
  throw std::runtime_error(what + ": " + std::strerror(error));
}

/// An owned file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Pipe make_pipe() {
  // Close-on-exec: the child keeps only the copies dup2'd onto 1 and 2, so our read ends see
  // end-of-file as soon as it exits.
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) fail("pipe2", errno);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

class FileActions {
 public:
  FileActions() {
    if (const int rc = posix_spawn_file_actions_init(&actions_); rc != 0) {
      fail("posix_spawn_file_actions_init", rc);
    }
  }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions_); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_{};
};

/// This process's environment with `changes` applied, as "NAME=value" strings.
std::vector<std::string> child_environment(
    const std::map<std::string, std::optional<std::string>>& changes) {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string item(*entry);
    if (!changes.contains(item.substr(0, item.find('=')))) env.push_back(item);
  }
  for (const auto& [name, value] : changes) {
    if (value) env.push_back(name + "=" + *value);
  }
  return env;
}

/// Pointers for exec: the strings' data and a terminating null.
std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

/// Reads both pipes until both are closed, or until the deadline, when it kills the child and
/// keeps reading (what the child printed before is still useful in a failure message).
bool drain(pid_t pid, UniqueFd& out_fd, UniqueFd& err_fd, std::string& out, std::string& err,
           std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  std::array<char, 65536> buffer{};
  while (out_fd.get() >= 0 || err_fd.get() >= 0) {
    std::array<pollfd, 2> fds{{{out_fd.get(), POLLIN, 0}, {err_fd.get(), POLLIN, 0}}};
    int wait_ms = -1;
    if (!timed_out) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      wait_ms = static_cast<int>(std::max<std::chrono::milliseconds::rep>(left.count(), 0));
    }
    const int ready = ::poll(fds.data(), fds.size(), wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      fail("poll", errno);
    }
    if (ready == 0) {  // only without a pending kill: wait_ms is -1 after it
      ::kill(pid, SIGKILL);
      timed_out = true;
      continue;
    }
    const std::array<std::pair<UniqueFd*, std::string*>, 2> streams{
        {{&out_fd, &out}, {&err_fd, &err}}};
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer.data(), buffer.size());
      if (n > 0) {
        streams[i].second->append(buffer.data(), static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        streams[i].first->reset();  // end of file (or an error: nothing more will come)
      }
    }
  }
  return timed_out;
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const CommandResult& result) {
  os << "exit " << result.exit_code << (result.timed_out ? " (timed out)" : "")
     << "\n--- stdout ---\n"
     << result.out << "\n--- stderr ---\n"
     << result.err << "\n---";
  return os;
}

CommandResult run_command(const Command& command) {
  if (command.argv.empty()) throw std::invalid_argument("run_command: empty argv");
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  FileActions actions;
  posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(actions.get(), out.write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(actions.get(), err.write.get(), STDERR_FILENO);

  std::vector<std::string> args = command.argv;
  std::vector<std::string> env = child_environment(command.env);
  const std::vector<char*> argv = c_strings(args);
  const std::vector<char*> envp = c_strings(env);
  pid_t pid = -1;
  if (const int rc = ::posix_spawn(&pid, argv[0], actions.get(), nullptr, argv.data(), envp.data());
      rc != 0) {
    fail("posix_spawn " + command.argv[0], rc);
  }
  out.write.reset();  // the child holds its own copies
  err.write.reset();

  CommandResult result;
  result.timed_out = drain(pid, out.read, err.read, result.out, result.err, command.timeout);
  int status = 0;
  rusage usage{};
  while (::wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) fail("wait4", errno);
  }
  result.max_rss_kb = usage.ru_maxrss;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      (std::filesystem::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") / "tileops-cli-XXXXXX")
          .string();
  if (::mkdtemp(pattern.data()) == nullptr) fail("mkdtemp " + pattern, errno);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;  // a destructor must not throw; a leftover temp dir is harmless
  std::filesystem::remove_all(path_, ec);
}

}  // namespace tileops::cli_test
