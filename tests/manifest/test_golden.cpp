// The golden test: the files tileops-gen emits for tests/manifest/golden/mini.yaml must equal
// tests/manifest/golden/expected/* (rerun with --update-golden to rewrite them), and the
// generator writes a file only when its contents change.
#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "manifest_test_util.h"

namespace fs = std::filesystem;

namespace {

const fs::path kGolden = fs::path(TILEOPS_MANIFEST_TESTS_DIR) / "golden";

std::set<std::string> files_under(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.insert(fs::relative(e.path(), dir).string());
  }
  return out;
}

// "line N:\n  got:  ...\n  want: ..." for the first line where the texts differ.
std::string first_difference(const std::string& got, const std::string& want) {
  std::istringstream a(got), b(want);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ea = !std::getline(a, la), eb = !std::getline(b, lb);
    if (ea && eb) return "(no difference)";
    if (ea || eb || la != lb) {
      return "line " + std::to_string(line) + ":\n  got:  " + (ea ? "<end>" : la) +
             "\n  want: " + (eb ? "<end>" : lb);
    }
  }
}

TEST(Golden, EmittedFilesMatchExpected) {
  const fs::path out = tgen_test::scratch_dir("golden_out");
  const auto r =
      tgen_test::run_gen("--manifest '" + kGolden.string() + "' --out '" + out.string() + "'");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::set<std::string> generated = files_under(out);
  const std::set<std::string> want = {"include/tileops/gen/mini.h", "src/mini.cpp",
                                      "src/manifest_registry.cpp"};
  EXPECT_EQ(generated, want);
  for (const auto& rel : generated) {
    const fs::path expected = kGolden / "expected" / fs::path(rel).filename();
    const std::string got = tgen_test::read_file((out / rel).string());
    if (g_update_golden) {
      tgen_test::write_file(expected.string(), got);
      continue;
    }
    ASSERT_TRUE(fs::exists(expected)) << expected << " is missing; run with --update-golden";
    const std::string want = tgen_test::read_file(expected.string());
    EXPECT_TRUE(got == want) << rel << " differs from " << expected << " first at "
                             << first_difference(got, want)
                             << "\n(if the change is intended, rerun tileops_manifest_tests "
                                "--update-golden)";
  }
}

TEST(Golden, WritesOnlyChangedFiles) {
  const fs::path dir = tgen_test::scratch_dir("incremental");
  const fs::path manifest = dir / "golden";
  fs::create_directories(manifest);
  fs::copy_file(kGolden / "mini.yaml", manifest / "mini.yaml");
  const fs::path out = dir / "out";
  const fs::path stamp = dir / "stamp";
  const std::string args = "--manifest '" + manifest.string() + "' --out '" + out.string() +
                           "' --stamp '" + stamp.string() + "'";
  ASSERT_EQ(tgen_test::run_gen(args).status, 0);
  ASSERT_TRUE(fs::exists(stamp));
  const fs::path header = out / "include/tileops/gen/mini.h";
  const fs::path source = out / "src/mini.cpp";
  const fs::path registry = out / "src/manifest_registry.cpp";
  // Push the files' times into the past so that a rewrite is visible.
  const auto past = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (const auto& p : {header, source, registry}) fs::last_write_time(p, past);

  ASSERT_EQ(tgen_test::run_gen(args).status, 0);
  EXPECT_EQ(fs::last_write_time(header), past);
  EXPECT_EQ(fs::last_write_time(source), past);
  EXPECT_EQ(fs::last_write_time(registry), past);

  // A new workload label changes the schema data (source) but not the header.
  std::string yaml = tgen_test::read_file((manifest / "mini.yaml").string());
  const std::string from = "label: small}";
  const auto at = yaml.find(from);
  ASSERT_NE(at, std::string::npos);
  yaml.replace(at, from.size(), "label: smaller}");
  tgen_test::write_file((manifest / "mini.yaml").string(), yaml);
  ASSERT_EQ(tgen_test::run_gen(args).status, 0);
  EXPECT_EQ(fs::last_write_time(header), past);
  EXPECT_NE(fs::last_write_time(source), past);
  EXPECT_EQ(fs::last_write_time(registry), past);
}

TEST(Golden, NothingWrittenOnError) {
  const fs::path dir = tgen_test::scratch_dir("on_error");
  const fs::path manifest = dir / "golden";
  fs::create_directories(manifest);
  std::string yaml = tgen_test::read_file((kGolden / "mini.yaml").string());
  yaml.replace(yaml.find("status: spec-only"), 17, "status: maybe");
  tgen_test::write_file((manifest / "mini.yaml").string(), yaml);
  const fs::path out = dir / "out";
  const auto r = tgen_test::run_gen("--manifest '" + manifest.string() + "' --out '" +
                                    out.string() + "' --stamp '" + (dir / "stamp").string() + "'");
  EXPECT_EQ(r.status, 1);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(dir / "stamp"));
}

TEST(Cli, UsageErrors) {
  EXPECT_EQ(tgen_test::run_gen("").status, 2);
  EXPECT_EQ(tgen_test::run_gen("--bogus").status, 2);
  EXPECT_EQ(tgen_test::run_gen("--manifest /nonexistent-folder --check").status, 1);
}

}  // namespace
