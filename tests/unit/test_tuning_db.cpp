// The tuning database's writer: processes that tune at once each store their winners; the file
// they leave parses and holds every winner of every process. The writers are this test program
// itself, started again with a filter that runs only TuningDbWriter.StoresItsKeys.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "kernels/common/cuda_tuning.h"

extern char** environ;

namespace tileops {
namespace {

constexpr int kWriters = 4;
constexpr int kKeysPerWriter = 40;

std::string key_of(int writer, int i) {
  return "kernel_" + std::to_string(writer) + "|identity_" + std::to_string(i);
}

// Runs only as a child of the test below (TILEOPS_TEST_TUNING_WRITER names the writer).
TEST(TuningDbWriter, StoresItsKeys) {
  const char* writer = std::getenv("TILEOPS_TEST_TUNING_WRITER");
  if (writer == nullptr) GTEST_SKIP() << "a child of TuningDb.ProcessesStoringAtOnceLoseNothing";
  const int w = std::atoi(writer);
  for (int i = 0; i < kKeysPerWriter; ++i) {
    tuning_db::store(key_of(w, i), "config_" + std::to_string(w) + "_" + std::to_string(i));
  }
}

TEST(TuningDb, ProcessesStoringAtOnceLoseNothing) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tileops-tuning-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::string db = (dir / "tuning.tsv").string();
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    env.push_back("TILEOPS_TUNING_DB=" + db);
    env.push_back("TILEOPS_TEST_TUNING_WRITER=" + std::to_string(w));
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
    std::string filter = "--gtest_filter=TuningDbWriter.StoresItsKeys";
    char* argv[] = {exe.data(), filter.data(), nullptr};
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()), 0);
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer " << pid;
  }

  std::ifstream in(db);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line, "# tileops tuning database v1");
  std::map<std::string, std::string> entries;
  while (std::getline(in, line)) {
    const auto tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    entries[line.substr(0, tab)] = line.substr(tab + 1);
  }
  EXPECT_EQ(entries.size(), static_cast<std::size_t>(kWriters * kKeysPerWriter));
  for (int w = 0; w < kWriters; ++w) {
    for (int i = 0; i < kKeysPerWriter; ++i) {
      EXPECT_EQ(entries[key_of(w, i)], "config_" + std::to_string(w) + "_" + std::to_string(i));
    }
  }
  // No temporary file is left behind.
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    EXPECT_TRUE(f.path().filename() == "tuning.tsv" || f.path().filename() == "tuning.tsv.lock")
        << f.path();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tileops
