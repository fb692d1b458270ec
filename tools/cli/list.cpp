// `tileops list`: every op of the manifest, with its family, status, the devices with an in-tree
// implementation, and the targets registered for it.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli.h"
#include "tileops/base/op_class.h"
#include "tileops/target/target.h"

namespace tileops::cli {

CLI::App* add_list_command(CLI::App& app, ListOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "list",
      "List every op of the manifest: name, family, status, devices with an in-tree "
      "implementation (from the registered op class), and registered targets");
  add_format_option(*cmd, options.format);
  return cmd;
}

int run_list(const ListOptions& options) {
  Table table;
  table.columns = {"op", "family", "status", "devices", "targets", "workload_cases"};
  for (const OpSchema* schema : all_schemas()) {
    const std::vector<std::string> devices = implemented_devices(schema->name);
    const std::vector<std::string> targets = registered_targets(schema->name);
    table.rows.push_back({
        Cell::string(std::string(schema->name)),
        Cell::string(std::string(schema->family)),
        Cell::string(std::string(schema->status)),
        Cell::string(devices.empty() ? (find_op_class(schema->name) ? "-" : "- (no class)")
                                     : join(devices, ",")),
        Cell::string(targets.empty() ? "-" : join(targets, ",")),
        Cell::integer_(static_cast<std::int64_t>(schema->workload_cases().size())),
    });
  }
  if (options.format == Format::table) {
    fmt::print("{}", render_table(table));
    fmt::print("{} ops, {} with an op class registered\n", table.rows.size(),
               registered_op_classes().size());
  } else {
    fmt::print("{}", render(table, options.format));
  }
  return 0;
}

}  // namespace tileops::cli
