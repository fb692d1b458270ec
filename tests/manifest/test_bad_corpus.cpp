// The bad-manifest corpus: every tests/manifest/bad/<case>.yaml (or folder of files) breaks one
// thing, and states in a first-line comment `# expect: <line>: <message substring>` the one
// diagnostic tileops-gen must report. The case runs the executable on it alone.
#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "manifest_test_util.h"

namespace fs = std::filesystem;

namespace {

const fs::path kBadDir = fs::path(TILEOPS_MANIFEST_TESTS_DIR) / "bad";

std::vector<std::string> bad_cases() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kBadDir)) {
    if (e.is_directory() || e.path().extension() == ".yaml")
      out.push_back(e.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Expectation {
  std::string file;  // the file the diagnostic names
  int line = 0;
  std::string message;
};

bool read_expectation(const fs::path& file, Expectation& e) {
  std::istringstream in(tgen_test::read_file(file.string()));
  std::string first;
  std::getline(in, first);
  static const std::regex re(R"(^# expect: (\d+): (.+)$)");
  std::smatch m;
  if (!std::regex_match(first, m, re)) return false;
  e.file = file.filename().string();
  e.line = std::stoi(m[1]);
  e.message = m[2];
  return true;
}

// Diagnostic lines of the output ("<path>:<line>: <message>").
std::vector<std::string> diagnostics(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  std::string l;
  static const std::regex re(R"(^.+\.yaml:\d+: .+$)");
  while (std::getline(in, l)) {
    if (std::regex_match(l, re)) lines.push_back(l);
  }
  return lines;
}

class BadManifest : public ::testing::TestWithParam<std::string> {};

TEST_P(BadManifest, ReportsItsOneDiagnostic) {
  const std::string name = GetParam();
  const fs::path scratch = tgen_test::scratch_dir("bad/" + name);
  Expectation expect;
  bool found = false;
  const fs::path src = kBadDir / name;
  if (fs::is_directory(src)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(src)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      fs::copy_file(f, scratch / f.filename());
      if (!found) found = read_expectation(f, expect);
    }
  } else {
    const fs::path file = kBadDir / (name + ".yaml");
    fs::copy_file(file, scratch / file.filename());
    found = read_expectation(file, expect);
  }
  ASSERT_TRUE(found) << name << ": no '# expect: <line>: <message>' first line";

  const auto r = tgen_test::run_gen("--check --manifest '" + scratch.string() + "'");
  EXPECT_EQ(r.status, 1) << r.out;
  const auto diags = diagnostics(r.out);
  ASSERT_EQ(diags.size(), 1u) << r.out;
  const std::string where = expect.file + ":" + std::to_string(expect.line) + ": ";
  EXPECT_NE(diags[0].find(where), std::string::npos) << "expected at " << where << "\n" << r.out;
  EXPECT_NE(diags[0].find(expect.message), std::string::npos)
      << "expected message containing: " << expect.message << "\n"
      << r.out;

  // Deterministic: the same output again.
  EXPECT_EQ(tgen_test::run_gen("--check --manifest '" + scratch.string() + "'").out, r.out);
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadManifest, ::testing::ValuesIn(bad_cases()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(BadManifestCorpus, HasAtLeastThirtyCases) {
  EXPECT_GE(bad_cases().size(), 30u);
}

// Every diagnostic is reported (not just the first), sorted by file and then line.
TEST(Diagnostics, AllReportedSortedByFileAndLine) {
  const fs::path scratch = tgen_test::scratch_dir("many");
  tgen_test::write_file((scratch / "b.yaml").string(), R"Y(OpB:
  family: b
  status: spec-only
  signature:
    outputs:
      y: {dtype: float32, shape: "[Q]"}
  roofline:
    flops: "1"
  workloads:
    - {label: one}
)Y");
  tgen_test::write_file((scratch / "a.yaml").string(), R"Y(OpA:
  family: a
  status: sideways
  signature:
    shape_rules:
      - "nope > 1"
  roofline:
    flops: "prod(1)"
  workloads:
    - {label: "bad label"}
)Y");
  const auto r = tgen_test::run_gen("--check --manifest '" + scratch.string() + "'");
  EXPECT_EQ(r.status, 1);
  const auto d = diagnostics(r.out);
  ASSERT_EQ(d.size(), 5u) << r.out;
  EXPECT_NE(d[0].find("a.yaml:3: status must be"), std::string::npos) << r.out;
  EXPECT_NE(d[1].find("a.yaml:6: shape_rules[0]"), std::string::npos) << r.out;
  EXPECT_NE(d[2].find("a.yaml:8: roofline.flops"), std::string::npos) << r.out;
  EXPECT_NE(d[3].find("a.yaml:10: label 'bad label'"), std::string::npos) << r.out;
  EXPECT_NE(d[4].find("b.yaml:6: shape of output 'y' \"[Q]\", column 2: unknown name 'Q'"),
            std::string::npos)
      << r.out;
}

}  // namespace
