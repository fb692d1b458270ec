// The tuning database: one line per key, "<key>\t<config>", under a header line naming the
// format. Written atomically; a file that does not parse is ignored with a warning. Processes
// tuning at once serialize their writes on a lock file beside the database and merge what the
// others stored before them, so that no process's winners are lost.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "kernels/common/cuda_tuning.h"

namespace tileops::tuning_db {
namespace {

constexpr const char* kHeader = "# tileops tuning database v1";

struct Db {
  std::mutex mutex;
  bool loaded = false;
  std::map<std::string, std::string> entries;
};

Db& db() {
  static Db instance;
  return instance;
}

/// The entries of the database file; nullopt (with a warning) when it does not parse, empty when
/// it does not exist.
std::optional<std::map<std::string, std::string>> read_file() {
  std::map<std::string, std::string> entries;
  std::ifstream in(path());
  if (!in) return entries;
  std::string line;
  if (!std::getline(in, line) || line != kHeader) {
    std::cerr << "tileops: warning: ignoring tuning database " << path() << " (unknown format)\n";
    return std::nullopt;
  }
  while (std::getline(in, line)) {
    const auto tab = line.find('\t');
    if (tab == std::string::npos || tab == 0 || tab + 1 == line.size()) {
      std::cerr << "tileops: warning: ignoring corrupt tuning database " << path() << "\n";
      return std::nullopt;
    }
    entries[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return entries;
}

void load_locked(Db& d) {
  if (d.loaded) return;
  d.loaded = true;
  d.entries = read_file().value_or(std::map<std::string, std::string>{});
}

/// An exclusive lock on "<database>.lock" for as long as it lives (none when the lock file
/// cannot be opened: the write is then only atomic, not merged under the lock).
class FileLock {
 public:
  explicit FileLock(const std::string& file)
      : fd_(::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }

 private:
  int fd_;
};

}  // namespace

std::string path() {
  if (const char* p = std::getenv("TILEOPS_TUNING_DB"); p != nullptr && *p != '\0') return p;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    return std::string(x) + "/tileops/tuning.tsv";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/tileops/tuning.tsv";
}

std::optional<std::string> lookup(const std::string& full_key) {
  Db& d = db();
  std::lock_guard lock(d.mutex);
  load_locked(d);
  const auto it = d.entries.find(full_key);
  if (it == d.entries.end()) return std::nullopt;
  return it->second;
}

void store(const std::string& full_key, const std::string& config) {
  Db& d = db();
  std::lock_guard lock(d.mutex);
  load_locked(d);
  const std::filesystem::path target(path());
  std::error_code ec;
  std::filesystem::create_directories(target.parent_path(), ec);
  const FileLock file_lock(target.string() + ".lock");
  // What other processes stored since this one loaded the file, then this winner.
  if (auto on_disk = read_file()) {
    for (auto& [key, value] : *on_disk) d.entries.try_emplace(key, std::move(value));
  }
  d.entries[full_key] = config;
  const std::filesystem::path temp = target.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::trunc);
    if (!out) {
      std::cerr << "tileops: warning: cannot write tuning database " << temp << "\n";
      return;
    }
    out << kHeader << "\n";
    for (const auto& [key, value] : d.entries) out << key << '\t' << value << '\n';
  }
  std::filesystem::rename(temp, target, ec);
  if (ec) std::cerr << "tileops: warning: cannot replace tuning database " << target << "\n";
}

}  // namespace tileops::tuning_db
