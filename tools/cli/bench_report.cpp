// `tileops bench`: the report of a run — the terminal table (within 160 columns: the kernel
// configuration summarized, the case ids' dtypes abbreviated and a target shared by every case
// named above the table; all of it whole with --wide), and the JSON and CSV that keep every
// field.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>
#include <utility>

#include "bench.h"

namespace tileops::cli {
namespace {

// The impl cell of the narrow table: at most this many characters.
constexpr std::size_t kImplWidth = 20;

double gbps(const CaseResult& r) {
  return r.timed ? r.roofline.bytes / r.timing.median_s / 1e9 : kNaN;
}
double tflops(const CaseResult& r) {
  return r.timed ? r.roofline.flops / r.timing.median_s / 1e12 : kNaN;
}

/// The first implementation key without its sub-op path and how many more
/// ("moe_routing_cpu +3"), shortened.
std::string short_impl(const std::string& impl) {
  const auto comma = impl.find(',');
  std::string first = impl.substr(0, comma);
  if (const auto slash = first.rfind('/'); slash != std::string::npos) first.erase(0, slash + 1);
  if (comma != std::string::npos) {
    const auto more = std::count(impl.begin(), impl.end(), ',');
    first += fmt::format(" +{}", more);
  }
  if (first.size() > kImplWidth) first = first.substr(0, kImplWidth - 2) + "..";
  return first;
}

/// The dtype names of case ids as the narrow table spells them.
constexpr std::pair<std::string_view, std::string_view> kShortDTypes[] = {
    {"bfloat16", "bf16"},      {"float16", "f16"},      {"float32", "f32"}, {"float64", "f64"},
    {"float8_e4m3fn", "e4m3"}, {"float8_e5m2", "e5m2"}, {"int32", "i32"},   {"int64", "i64"}};

/// A case id with its dtypes abbreviated ("dsv3-fp8-512t-f32-bf16-e4m3"): the id is the label,
/// then one dtype per DType index, joined with '-', so every '-'-separated dtype name is one.
std::string short_case(const std::string& id) {
  std::string out;
  std::size_t start = 0;
  while (start <= id.size()) {
    const std::size_t end = std::min(id.find('-', start), id.size());
    std::string_view part(id.data() + start, end - start);
    for (const auto& [name, brief] : kShortDTypes) {
      if (part == name) part = brief;
    }
    if (start > 0) out += '-';
    out += part;
    start = end + 1;
  }
  return out;
}

/// The one target every case that ran ran on, or nullopt when they differ (or none ran).
std::optional<std::string> shared_target(const std::vector<CaseResult>& results) {
  std::optional<std::string> shared;
  for (const auto& r : results) {
    if (r.target == "-") continue;  // skipped, or failed before selecting one
    if (shared && *shared != r.target) return std::nullopt;
    shared = r.target;
  }
  return shared;
}

/// An estimate to 3 significant digits ("29.2 s", "307 ms", "4.68 us"; "2077 s").
std::string short_duration(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  const auto sig = [](double v, const char* unit) {
    return v >= 100 ? fmt::format("{:.0f} {}", v, unit) : fmt::format("{:.3g} {}", v, unit);
  };
  if (seconds < 1e-3) return sig(seconds * 1e6, "us");
  if (seconds < 1.0) return sig(seconds * 1e3, "ms");
  return sig(seconds, "s");
}

}  // namespace

BenchCounts count_results(const std::vector<CaseResult>& results) {
  BenchCounts c;
  for (const auto& r : results) {
    if (r.result == "PASS") {
      ++c.pass;
    } else if (r.result == "FAIL") {
      ++c.fail;
    } else if (r.result == "ERROR") {
      ++c.error;
    } else if (r.result == "SKIPPED") {
      ++c.skipped;
    } else {
      ++c.other;
    }
  }
  return c;
}

std::string summary_line(const std::vector<CaseResult>& results, const BenchCounts& c) {
  return fmt::format("{} cases: {} passed, {} failed, {} errors, {} unchecked, {} skipped",
                     results.size(), c.pass, c.fail, c.error, c.other, c.skipped);
}

std::string profile_summary(const perf::HardwareProfile& p) {
  std::vector<std::string> peaks;
  for (const auto& [key, rate] : p.flops_per_s) {
    peaks.push_back(fmt::format("{} {} TFLOP/s", key, format_rate(rate / 1e12)));
  }
  return fmt::format("{}: {} GB/s, {} [{}]", p.name, format_rate(p.mem_bandwidth_bytes_per_s / 1e9),
                     join(peaks, ", "), p.source);
}

Table full_table(const std::vector<CaseResult>& results) {
  Table t;
  t.columns = {"op",           "case",      "device",    "target",     "impl",       "config",
               "entries",      "median_s",  "min_s",     "p90_s",      "iterations", "timing",
               "flops",        "bytes",     "roof_key",  "estimate_s", "gb_per_s",   "tflop_per_s",
               "sol_fraction", "max_error", "tolerance", "check",      "result",     "message"};
  for (const auto& r : results) {
    auto num = [](double v) { return Cell::num(v, format_sig(v)); };
    t.rows.push_back({
        Cell::string(r.op),
        Cell::string(r.case_id),
        Cell::string(r.device),
        Cell::string(r.target),
        Cell::string(r.impl),
        r.config.empty() ? Cell::null() : Cell::string(r.config),
        Cell::string(join(r.entries, " ")),
        num(r.timed ? r.timing.median_s : kNaN),
        num(r.timed ? r.timing.min_s : kNaN),
        num(r.timed ? r.timing.p90_s : kNaN),
        Cell::integer_(r.timed ? r.timing.iterations : 0),
        Cell::string(r.timed ? r.timing.method : ""),
        num(r.roofline.flops),
        num(r.roofline.bytes),
        Cell::string(r.roof_key),
        num(r.estimate_s),
        num(gbps(r)),
        num(tflops(r)),
        num(r.sol),
        num(r.max_err),
        num(r.tolerance),
        Cell::string(r.check),
        Cell::string(r.result),
        Cell::string(r.message),
    });
  }
  return t;
}

std::vector<std::string> display_notes(const std::vector<CaseResult>& results, bool wide) {
  if (wide) return {};
  std::vector<std::string> notes{
      "case ids with their dtypes abbreviated (bf16 bfloat16, f16 float16, f32 float32, e4m3 "
      "float8_e4m3fn; --wide: whole)"};
  if (const auto target = shared_target(results)) {
    notes.push_back(fmt::format("target {} for every case", *target));
  }
  return notes;
}

Table display_table(const std::vector<CaseResult>& results, bool wide) {
  // The narrow table names a target shared by every case above it (display_notes).
  const bool target_column = wide || !shared_target(results);
  Table t;
  t.columns = {"op", "case"};
  if (target_column) t.columns.emplace_back("target");
  for (const char* c :
       {"impl", "median", "est.", "GB/s", "TFLOP/s", "SOL", "max err", "check", "result"}) {
    t.columns.emplace_back(c);
  }
  for (const auto& r : results) {
    const std::string impl = !wide              ? short_impl(r.impl)
                             : r.config.empty() ? r.impl
                                                : r.impl + " (" + r.config + ")";
    const double median = r.timed ? r.timing.median_s : kNaN;
    std::vector<Cell> row{Cell::string(r.op),
                          Cell::string(wide ? r.case_id : short_case(r.case_id))};
    if (target_column) row.push_back(Cell::string(r.target));
    row.insert(
        row.end(),
        {
            Cell::string(impl),
            Cell::num(median, format_duration(median)),
            Cell::num(r.estimate_s, short_duration(r.estimate_s)),
            Cell::num(gbps(r), format_rate(gbps(r))),
            Cell::num(tflops(r), format_rate(tflops(r))),
            Cell::num(r.sol, std::isfinite(r.sol) ? fmt::format("{:.1f}%", 100 * r.sol) : "-"),
            Cell::num(r.max_err, format_sig(r.max_err, 2)),
            Cell::string(r.check),
            Cell::string(r.result),
        });
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string json_document(const BenchOptions& options, Device device,
                          const perf::HardwareProfile& profile,
                          const std::vector<CaseResult>& results, const BenchCounts& c) {
  std::string peaks;
  for (const auto& [key, rate] : profile.flops_per_s) {
    if (!peaks.empty()) peaks += ", ";
    peaks += json_string(key) + ": " + json_number(rate);
  }
  std::string out = fmt::format("{{\n  \"tileops_version\": {},\n  \"device\": {},\n",
                                json_string(TILEOPS_VERSION_STRING), json_string(device.str()));
  out += fmt::format(
      "  \"profile\": {{\"name\": {}, \"source\": {}, \"mem_bandwidth_bytes_per_s\": {}, "
      "\"flops_per_s\": {{{}}}}},\n",
      json_string(profile.name), json_string(profile.source),
      json_number(profile.mem_bandwidth_bytes_per_s), peaks);
  out += fmt::format(
      "  \"seed\": {},\n  \"budget_ms\": {},\n  \"tune\": {},\n  \"flush\": {},\n  "
      "\"all_cases\": {},\n  \"results\": {},\n",
      options.seed, json_number(options.budget_ms), options.tune ? "true" : "false",
      json_string(options.flush), options.all_cases ? "true" : "false",
      render_json_rows(full_table(results), 2));
  out += fmt::format(
      "  \"summary\": {{\"cases\": {}, \"passed\": {}, \"failed\": {}, \"errors\": {}, "
      "\"unchecked\": {}, \"skipped\": {}}}\n}}\n",
      results.size(), c.pass, c.fail, c.error, c.other, c.skipped);
  return out;
}

}  // namespace tileops::cli
