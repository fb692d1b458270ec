// The `tileops` command: list, describe and benchmark the manifest's ops, calibrate the hardware
// profile. See `tileops --help`.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include "cli.h"
#include "tileops/core/error.h"
#include "tileops/target/target.h"

int main(int argc, char** argv) {
  using namespace tileops::cli;
  CLI::App app{
      "tileops: the operators of the tileops library, from their manifest entries.\n"
      "Exit codes: 0 success, 1 a wrong result or a failed case, 2 bad usage.",
      "tileops"};
  app.set_version_flag("--version", "tileops " TILEOPS_VERSION_STRING);
  app.require_subcommand(1);

  ListOptions list_options;
  DescribeOptions describe_options;
  BenchOptions bench_options;
  CalibrateOptions calibrate_options;
  CLI::App* list = add_list_command(app, list_options);
  CLI::App* describe = add_describe_command(app, describe_options);
  CLI::App* bench = add_bench_command(app, bench_options);
  CLI::App* calibrate = add_calibrate_command(app, calibrate_options);
  EpCheckOptions ep_check_options;
  CLI::App* ep_check = add_ep_check_command(app, ep_check_options);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 checks "a subcommand is required" before it reports unexpected arguments, so
    // `tileops lst` or `tileops --frob` would only hear that a subcommand is required: name the
    // word that was not understood instead.
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && app.get_subcommands().empty() &&
        !app.remaining().empty()) {
      const std::string word = app.remaining().front();
      fmt::print(stderr,
                 "tileops: error: unknown {} '{}' (subcommands: list, describe, bench, "
                 "calibrate, ep-check; see `tileops --help`)\n",
                 word.starts_with('-') ? "option" : "subcommand", word);
      return kExitUsage;
    }
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }

  try {
    // Plugins register targets when loaded, and the library loads them only when the first op
    // is constructed: load them now so that `list`, `describe` and `bench --target` see them.
    tileops::load_backends();
    if (list->parsed()) return run_list(list_options);
    if (describe->parsed()) return run_describe(describe_options);
    if (bench->parsed()) return run_bench(bench_options);
    if (calibrate->parsed()) return run_calibrate(calibrate_options);
    if (ep_check->parsed()) return run_ep_check(ep_check_options);
  } catch (const UsageFailure& e) {
    fmt::print(stderr, "tileops: error: {}\n", e.what());
    return kExitUsage;
  } catch (const tileops::Error& e) {
    fmt::print(stderr, "tileops: error: {}\n", e.what());
    return kExitFailure;
  } catch (const std::exception& e) {
    fmt::print(stderr, "tileops: error: {}\n", e.what());
    return kExitFailure;
  }
  return kExitUsage;
}
