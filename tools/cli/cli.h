// The `tileops` command: shared declarations of its subcommands and output helpers.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_text.h"  // json_string, shared with the library
#include "tileops/base/schema.h"

#ifndef TILEOPS_VERSION_STRING
#define TILEOPS_VERSION_STRING "0.1.0"
#endif

// CLI11 is header-only and costs about 10 s of compile time per source that includes it: only
// the sources that declare options include it.
namespace CLI {
class App;
}  // namespace CLI

namespace tileops::cli {

/// Exit codes: 0 success, 1 a wrong result or a failed case, 2 bad usage (unknown op, bad
/// option value, a device that is not available).
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

/// An error of the command line itself: printed as "tileops: error: ..." and exits 2.
class UsageFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- output ---------------------------------------------------------------------------------

enum class Format { table, json, csv };
/// Adds `--format table|json|csv` to a subcommand.
void add_format_option(CLI::App& app, Format& format);

/// One cell: the text shown in a table and the value written to JSON/CSV.
struct Cell {
  enum class Kind : std::uint8_t { null, string, number, integer, boolean };
  Kind kind = Kind::null;
  std::string text;  ///< table text
  std::string str;   ///< string value
  double number = 0;
  std::int64_t integer = 0;
  bool boolean = false;

  static Cell null(std::string shown = "-");
  static Cell string(std::string value);
  /// A number shown as `shown`; NaN/inf are written as null.
  static Cell num(double value, std::string shown);
  static Cell integer_(std::int64_t value);
  static Cell boolean_(bool value);
  /// The JSON literal of the value.
  std::string json() const;
  /// The CSV field of the value.
  std::string csv() const;
};

struct Table {
  std::vector<std::string> columns;  ///< JSON keys / CSV header / table header
  std::vector<std::vector<Cell>> rows;
};

/// Aligned text table (numbers right-aligned), header and a rule.
std::string render_table(const Table& table);
/// A JSON array of objects, one per row.
std::string render_json_rows(const Table& table, int indent = 0);
/// CSV with a header line (RFC 4180 quoting).
std::string render_csv(const Table& table);
std::string render(const Table& table, Format format);

/// A finite number as JSON (shortest round-trip form), else null.
std::string json_number(double v);

/// "12.3 us", "1.234 ms", "2.10 s".
std::string format_duration(double seconds);
/// A rate for a table: no decimals from 100 up, else 3 significant digits; "-" for NaN.
std::string format_rate(double value);
/// A number with `digits` significant digits, "-" for NaN.
std::string format_sig(double value, int digits = 3);

// ---- ops ------------------------------------------------------------------------------------

/// The schema named `name`; UsageFailure naming close names when there is none.
const OpSchema& schema_or_fail(std::string_view name);
/// Up to `limit` names among the schemas close to `name` (edit distance, substrings).
std::vector<std::string> close_op_names(std::string_view name, std::size_t limit = 5);
/// Device kinds with an in-tree implementation ("cpu", "cuda"), from the registered class's
/// kernel types (a composite op: the devices all its delegate classes serve). Empty when no
/// class is registered.
std::vector<std::string> implemented_devices(std::string_view op);
std::string join(const std::vector<std::string>& items, std::string_view sep);

// ---- subcommands ----------------------------------------------------------------------------

struct ListOptions {
  Format format = Format::table;
};
CLI::App* add_list_command(CLI::App& app, ListOptions& options);
int run_list(const ListOptions& options);

struct DescribeOptions {
  std::vector<std::string> ops;
};
CLI::App* add_describe_command(CLI::App& app, DescribeOptions& options);
int run_describe(const DescribeOptions& options);

struct BenchOptions {
  std::vector<std::string> ops;
  bool all = false;
  std::string device = "cpu";
  std::string target;
  std::vector<std::string> workloads;
  Format format = Format::table;
  std::uint64_t seed = 0;
  double budget_ms = 100;
  double warmup_ms = 25;
  std::optional<int> min_iters;
  int max_iters = 200;
  std::string json_path;
  bool no_check = false;
  bool quiet = false;
  bool tune = false;
  std::string flush = "memset";  ///< how the GPU timer flushes the L2: memset or kernel
  /// Cases whose estimated call time exceeds this are skipped (unset: the device's default).
  std::optional<double> max_case_s;
  bool all_cases = false;        ///< run every case whatever its estimate
  bool wide = false;             ///< the table shows the kernel configuration whole
  std::int64_t sample_rows = 0;  ///< > 0: check every case that can be sampled on this many rows
};
CLI::App* add_bench_command(CLI::App& app, BenchOptions& options);
int run_bench(const BenchOptions& options);

struct CalibrateOptions {
  std::string device = "cpu";
  Format format = Format::table;
  bool save = true;
  bool show = false;
};
CLI::App* add_calibrate_command(CLI::App& app, CalibrateOptions& options);
int run_calibrate(const CalibrateOptions& options);

/// `tileops ep-check` runs one expert-parallel MoE layer per rank under scripts/ep-launch.sh
/// (expert_parallel.cpp).
struct EpCheckOptions {
  std::int64_t tokens = 512;  ///< per rank
  std::int64_t experts = 256;
  std::int64_t hidden = 7168;
  std::int64_t ffn = 2048;
  std::int64_t top_k = 8;
  std::string routing = "random";  ///< random or hot (one expert takes every token)
  std::string dtype = "bfloat16";
  int iters = 10;
  bool reference = true;  ///< compare with the single-device layer (every rank holds all experts)
  std::int64_t mismatch_rank = -1;  ///< this rank asks for a different top_k (a config error)
  std::int64_t fail_rank = -1;      ///< this rank exits after setup (the others must raise)
};
CLI::App* add_ep_check_command(CLI::App& app, EpCheckOptions& options);
int run_ep_check(const EpCheckOptions& options);

}  // namespace tileops::cli
