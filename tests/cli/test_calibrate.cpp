// `tileops calibrate` and the hardware profile `bench` prices against, all inside the test's own
// XDG_CACHE_HOME. One test measures for real (about 1.6 s and 1 GB of buffers on a 2-core
// machine, twice); the others write a profile file themselves.
#include <gmock/gmock-matchers.h>

#include <fstream>
#include <regex>

#include "cli/cli_test.h"

namespace tileops::cli_test {
namespace {

using testing::HasSubstr;

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

/// A profile in the format docs/perf/README.md describes, with figures no machine measures.
const char* const kProfile = R"({
  "format": "tileops-hardware-profile-1",
  "name": "cli-test-machine",
  "source": "written by the cli test",
  "mem_bandwidth_bytes_per_s": 12340000000,
  "flops_per_s": {"cpu.fp32": 567800000000}
}
)";

bool has_line(const std::string& text, const std::string& pattern) {
  return std::regex_search(text, std::regex(pattern, std::regex::multiline));
}

TEST_F(CliTest, CalibrateShowReadsTheSavedProfile) {
  write_file(cpu_profile_path(), kProfile);
  const CommandResult r = tileops({"calibrate", "--show"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(has_line(r.out, "^device +cpu$")) << r;
  EXPECT_TRUE(has_line(r.out, "^name +cli-test-machine$")) << r;
  EXPECT_TRUE(has_line(r.out, R"(^mem_bandwidth +12\.34 GB/s$)")) << r;  // 4 digits
  EXPECT_TRUE(has_line(r.out, R"(^cpu\.fp32 +0\.5678 TFLOP/s$)")) << r;
  EXPECT_TRUE(has_line(r.out, "^source +written by the cli test$")) << r;

  const CommandResult json = tileops({"calibrate", "--show", "--format", "json"});
  ASSERT_EQ(json.exit_code, 0) << json;
  EXPECT_THAT(json.out, HasSubstr("\"name\": \"cli-test-machine\""));
  EXPECT_THAT(json.out, HasSubstr("\"format\": \"tileops-hardware-profile-1\""));
}

TEST_F(CliTest, BenchPricesAgainstTheSavedProfile) {
  write_file(cpu_profile_path(), kProfile);
  const CommandResult r = tileops({"bench", "RMSNormFwdOp", "--workload", "llama3-8b-decode",
                                   "--budget-ms", "1", "--warmup-ms", "0"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.out, HasSubstr("\n# profile cli-test-machine: 12.3 GB/s, cpu.fp32 0.568 TFLOP/s "
                               "[written by the cli test]\n"));
}

TEST_F(CliTest, CorruptProfileIsIgnoredWithAWarning) {
  write_file(cpu_profile_path(), "this is not json\n");
  const CommandResult r = tileops({"calibrate", "--show"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.err, HasSubstr("tileops: warning: ignoring hardware profile " +
                               cpu_profile_path().string() + ": "));
  // Falls back to the quick probe, which it does not save.
  EXPECT_TRUE(has_line(r.out, "^source +probe at first use")) << r;
  std::ifstream in(cpu_profile_path());
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "this is not json");
}

TEST_F(CliTest, CalibrateMeasuresAndSavesIntoTheCacheDirectory) {
  const CommandResult dry = tileops({"calibrate", "--no-save", "--format", "csv"});
  ASSERT_EQ(dry.exit_code, 0) << dry;
  EXPECT_FALSE(std::filesystem::exists(cpu_profile_path()));
  EXPECT_THAT(dry.out, HasSubstr("figure,value\ndevice,cpu\n"));
  EXPECT_THAT(dry.out, HasSubstr("\nsource,\"measured "));
  EXPECT_THAT(dry.err, testing::Not(HasSubstr("saved")));

  const CommandResult r = tileops({"calibrate"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.err, HasSubstr("tileops calibrate: measuring cpu ...\n"));
  EXPECT_THAT(r.err, HasSubstr("tileops calibrate: saved " + cpu_profile_path().string() + "\n"));
  ASSERT_TRUE(std::filesystem::exists(cpu_profile_path()));
  EXPECT_TRUE(has_line(r.out, R"(^mem_bandwidth +[0-9.e+]+ GB/s$)")) << r;

  // The saved profile is the one in use from now on.
  const CommandResult show = tileops({"calibrate", "--show"});
  ASSERT_EQ(show.exit_code, 0) << show;
  EXPECT_TRUE(has_line(show.out, "^source +measured ")) << show;
  EXPECT_EQ(show.err, "");
}

TEST_F(CliTest, CalibrateBadDeviceIsAUsageError) {
  const CommandResult bad = tileops({"calibrate", "--device", "tpu"});
  EXPECT_EQ(bad.exit_code, kExitUsage) << bad;
  EXPECT_THAT(bad.err, HasSubstr("tileops: error: --device 'tpu': expected cpu, cuda or cuda:<n>"));

  const CommandResult missing = tileops({"calibrate", "--device", "cuda:99"});
  EXPECT_EQ(missing.exit_code, kExitUsage) << missing;
  EXPECT_THAT(missing.err, HasSubstr("tileops: error: --device cuda:99: no such CUDA device"));
  EXPECT_FALSE(std::filesystem::exists(cache_.path() / "tileops"));  // nothing was measured
}

}  // namespace
}  // namespace tileops::cli_test
