// `tileops` without a valid subcommand: --version, --help and the usage errors (exit 2, stderr).
#include <gmock/gmock-matchers.h>

#include "cli/cli_test.h"

namespace tileops::cli_test {
namespace {

using testing::HasSubstr;

TEST_F(CliTest, VersionPrintsTheProjectVersion) {
  const CommandResult r = tileops({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r;
  // TILEOPS_EXPECTED_VERSION is CMake's PROJECT_VERSION, which the build gives the command.
  EXPECT_EQ(r.out, "tileops " TILEOPS_EXPECTED_VERSION "\n") << r;
}

TEST_F(CliTest, HelpNamesEverySubcommandAndTheExitCodes) {
  const CommandResult r = tileops({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r;
  for (const char* sub : {"list", "describe", "bench", "calibrate"}) {
    EXPECT_THAT(r.out, HasSubstr(std::string("\n  ") + sub + " ")) << sub;
  }
  EXPECT_THAT(r.out, HasSubstr("2 bad usage"));
}

TEST_F(CliTest, NoSubcommandIsAUsageError) {
  const CommandResult r = tileops({});
  EXPECT_EQ(r.exit_code, kExitUsage) << r;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("subcommand is required"));
}

TEST_F(CliTest, UnknownSubcommandIsNamedInTheError) {
  // Before the fix in tools/cli/main.cpp this said only "A subcommand is required".
  const CommandResult r = tileops({"lst"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("tileops: error: unknown subcommand 'lst'")) << r;
}

TEST_F(CliTest, UnknownOptionIsAUsageError) {
  const CommandResult top = tileops({"--frobnicate"});
  EXPECT_EQ(top.exit_code, kExitUsage) << top;
  EXPECT_THAT(top.err, HasSubstr("unknown option '--frobnicate'")) << top;

  const CommandResult sub = tileops({"list", "--frobnicate"});
  EXPECT_EQ(sub.exit_code, kExitUsage) << sub;
  EXPECT_EQ(sub.out, "");
  EXPECT_THAT(sub.err, HasSubstr("--frobnicate")) << sub;
}

TEST_F(CliTest, BadFormatIsAUsageError) {
  const CommandResult r = tileops({"list", "--format", "xml"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("--format")) << r;
}

}  // namespace
}  // namespace tileops::cli_test
