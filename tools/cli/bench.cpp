// `tileops bench`: runs the manifest workloads of ops, times them, checks every result against
// the op's reference, and reports time, bandwidth, flop rate and the fraction of the roofline
// bound (DESIGN.md §8).
//
// Inputs of a case: the op class's workload_inputs(case, seed, device) when it declares one (ops
// whose inputs must hold valid values: MoE ids, offsets, permutations); otherwise float inputs are
// Tensor::randn(seed + position) on the bench device, integer inputs (positions, indices) uniform
// integers in [0, S) where S is the input's last dimension (so positions stay within the
// sequence), bool inputs all false. Construction-time tensors come from the manifest's workload
// instantiation.
//
// Limits: on the CPU a case whose inputs exceed kCpuMaxInputBytes is SKIPPED; a case beyond
// kReferenceMaxFlops roofline FLOPs is timed but UNCHECKED (its double-precision reference would
// take too long), with the reason in the message.
//
// Order per case: build inputs and keep CPU copies; one call (builds kernels, gives the `out`
// buffers the timed calls reuse); timed calls; restore the inputs the op mutates from the copies;
// the checked call, compared with the reference run on the CPU copies.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <set>

#include "cli.h"
#include "tileops/core/cuda.h"
#include "tileops/core/error.h"
#include "tileops/op/op.h"
#include "tileops/op/op_class.h"
#include "tileops/op/reference.h"
#include "tileops/perf/perf.h"
#include "tileops/target/target.h"

namespace tileops::cli {

namespace {

// CLI11 2.1's PositiveNumber is Range(DBL_MIN, DBL_MAX): it rejects 0 with "Value 0 not in range
// 0.000000 to 179769313486231570814527...", which reads as if 0 were allowed, and lets NaN through.
const CLI::Validator kPositive(
    [](std::string& input) -> std::string {
      double value = 0;
      const auto [end, ec] = std::from_chars(input.data(), input.data() + input.size(), value);
      if (ec != std::errc{} || end != input.data() + input.size() || !(value > 0)) {
        return "expected a positive number, got '" + input + "'";
      }
      return {};
    },
    "POSITIVE");

}  // namespace

CLI::App* add_bench_command(CLI::App& app, BenchOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Run the manifest workloads of ops: time each case (median), check it against the "
      "reference, report GB/s, TFLOP/s and the fraction of the roofline bound");
  cmd->add_option("ops", options.ops, "Op names (or --all)");
  cmd->add_flag("--all", options.all, "Every implemented op with a registered class");
  cmd->add_option("--device", options.device, "cpu, cuda or cuda:<n>")->default_str("cpu");
  cmd->add_option("--target", options.target,
                  "Construct ops with this target (BUILTIN = the in-tree kernels); default: the "
                  "process default, then detection");
  cmd->add_option("--workload", options.workloads,
                  "Only cases of this workload label or case id (repeatable)");
  add_format_option(*cmd, options.format);
  cmd->add_option("--seed", options.seed, "Seed of the random inputs")->default_str("0");
  cmd->add_option("--budget-ms", options.budget_ms, "Time budget of the timed calls per case")
      ->check(kPositive)
      ->default_str("100");
  cmd->add_option("--warmup-ms", options.warmup_ms, "Warm-up time per case")
      ->check(CLI::NonNegativeNumber)
      ->default_str("25");
  cmd->add_option("--min-iters", options.min_iters,
                  "Fewest timed calls per case (default 10 on a GPU, 3 on the CPU)")
      ->check(kPositive);
  cmd->add_option("--max-iters", options.max_iters, "Most timed calls per case")
      ->check(kPositive)
      ->default_str("200");
  cmd->add_option("--json", options.json_path,
                  "Also write the results as JSON to this file (whatever --format is)");
  cmd->add_flag("--tune", options.tune,
                "Tuned mode: each op gets request_tune() before its first (untimed) call, so "
                "kernels with a tuning space time their candidates on the case's inputs and keep "
                "the fastest (remembered in the tuning database); the config column then ends in "
                "\"(tuned)\". Only the CUDA kernels have tuning spaces.");
  cmd->add_option("--flush", options.flush,
                  "How the GPU timer overwrites its L2 flush buffer before each timed call: "
                  "memset (cudaMemsetAsync) or kernel (a kernel of 16-byte stores)")
      ->check(CLI::IsMember({"memset", "kernel"}))
      ->default_str("memset");
  cmd->add_flag("--no-check", options.no_check, "Do not compare with the reference");
  cmd->add_flag("-q,--quiet", options.quiet, "No progress lines on stderr");
  return cmd;
}

namespace {

struct CaseResult {
  std::string op;
  std::string case_id;
  std::string device;
  std::string target = "-";
  std::vector<std::string> entries;  ///< "key[identity]" of every built entry
  std::string impl = "-";            ///< the implementation keys, short
  std::string config;
  perf::TimingResult timing;
  bool timed = false;
  Roofline roofline{std::numeric_limits<double>::quiet_NaN(),
                    std::numeric_limits<double>::quiet_NaN()};
  std::string roof_key;
  double sol = std::numeric_limits<double>::quiet_NaN();
  double max_err = std::numeric_limits<double>::quiet_NaN();
  double tolerance = std::numeric_limits<double>::quiet_NaN();
  std::string result = "ERROR";  ///< PASS, FAIL, ERROR, NOREF, UNCHECKED, SKIPPED
  std::string message;
};

// Cases whose inputs exceed this are skipped on the CPU (a 2-core machine would take minutes).
constexpr double kCpuMaxInputBytes = 1.5e9;
// Beyond this many FLOPs (the roofline's) the double-precision reference, a plain CPU loop,
// would take minutes: such cases are timed but not checked.
constexpr double kReferenceMaxFlops = 2e10;

Tensor make_input(const InstantiatedCase::InputSpec& spec, std::uint64_t seed, Device device) {
  switch (dtype_category(spec.dtype)) {
    case DTypeCategory::float_:
      return Tensor::randn(spec.shape, spec.dtype, seed, device);
    case DTypeCategory::int_: {
      std::int64_t hi = spec.shape.empty() ? 1 : std::max<std::int64_t>(1, spec.shape.back());
      const std::int64_t dtype_max = spec.dtype == DType::int8    ? 128
                                     : spec.dtype == DType::uint8 ? 256
                                     : spec.dtype == DType::int16 ? 32768
                                                                  : hi;
      hi = std::min(hi, dtype_max);
      return Tensor::rand(spec.shape, spec.dtype, seed, device, 0.0, static_cast<double>(hi));
    }
    case DTypeCategory::bool_:
      return Tensor::zeros(spec.shape, spec.dtype, device);
  }
  return {};
}

Tensor cpu_copy(const Tensor& t) {
  if (!t.defined()) return t;
  return t.device().is_cpu() ? t.clone() : t.to(Device::cpu());
}

/// "key[identity]" entries of the op and (prefixed with the sub-op's name) its held sub-ops.
void collect_entries(const Op& op, const std::string& prefix, std::vector<std::string>& out,
                     int depth) {
  const std::optional<std::string> serving = op.serving_target();
  if (serving && *serving != kBuiltinTargetName) {
    for (auto& e : op.built_entries("")) out.push_back(prefix + *serving + ":" + e);
  } else {
    for (const auto& iface : op.op_class().interfaces) {
      for (auto& e : op.built_entries(iface.name)) out.push_back(prefix + e);
    }
  }
  if (depth < 8) {
    for (const Op* sub : op.held_delegates()) {
      collect_entries(*sub, prefix + std::string(sub->name()) + "/", out, depth + 1);
    }
  }
}

std::string short_impl(const std::vector<std::string>& entries) {
  std::vector<std::string> keys;
  for (const auto& e : entries) {
    std::string key = e.substr(0, e.find('['));
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(std::move(key));
  }
  return keys.empty() ? "-" : join(keys, ",");
}

void run_case(const OpSchema& schema, const WorkloadCase& wc, const BenchOptions& options,
              Device device, const perf::HardwareProfile& profile, CaseResult& r) {
  const InstantiatedCase inst = schema.instantiate(*wc.row, wc.dtype_case);
  Target target;
  if (!options.target.empty()) target = Target(options.target);
  double input_bytes = 0;
  for (const auto& in : inst.inputs) {
    if (!in) continue;
    double n = 1;
    for (const auto d : in->shape) n *= static_cast<double>(d);
    input_bytes += n * static_cast<double>(element_size(in->dtype));
  }
  if (device.is_cpu() && input_bytes > kCpuMaxInputBytes) {
    r.result = "SKIPPED";
    r.message =
        fmt::format("inputs of {} GB: too large for a CPU bench", format_sig(input_bytes / 1e9, 3));
    return;
  }
  std::unique_ptr<Op> op = make_op(schema.name, inst.params, target);
  if (options.tune) op->request_tune();

  std::vector<Tensor> inputs;
  const OpClass* op_class = find_op_class(schema.name);
  if (op_class != nullptr && op_class->workload_inputs) {
    inputs = op_class->workload_inputs(inst, options.seed, device);
  } else {
    for (std::size_t i = 0; i < inst.inputs.size(); ++i) {
      inputs.push_back(inst.inputs[i] ? make_input(*inst.inputs[i], options.seed + i, device)
                                      : Tensor());
    }
  }
  // CPU copies for the reference: the inputs the op mutates now, the others after timing.
  const auto mutated = [&](std::size_t i) {
    return i < schema.inputs.size() && schema.inputs[i].mutated;
  };
  std::vector<Tensor> pristine(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (mutated(i)) pristine[i] = cpu_copy(inputs[i]);
  }

  // First call: builds kernels and yields the `out` buffers the timed calls reuse.
  const std::vector<Tensor> first = op->call(inputs);
  std::vector<Tensor> outs;
  for (std::size_t o = 0; o < schema.outputs.size() && o < first.size(); ++o) {
    if (schema.outputs[o].buffer_out) outs.push_back(first[o]);
  }
  r.target = op->serving_target().value_or("-");

  perf::TimingOptions timing;
  timing.budget_ms = options.budget_ms;
  timing.warmup_ms = options.warmup_ms;
  timing.min_iters = options.min_iters.value_or(device.is_cpu() ? 3 : 10);
  timing.max_iters = std::max(options.max_iters, timing.min_iters);
  timing.flush_method = perf::parse_l2_flush(options.flush);
  r.timing = perf::time_op([&] { op->call(inputs, outs); }, device, timing);
  r.timed = true;

  // The checked call, on restored inputs, with fresh outputs.
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (mutated(i) && inputs[i].defined()) inputs[i].copy_(pristine[i]);
  }
  const std::vector<Tensor> got_outputs = op->call(inputs);
  if (device.is_cuda()) cuda_synchronize(device.index);

  r.roofline = op->eval_roofline();
  r.roof_key = op->roof_key();
  r.sol = perf::roofline_fraction(r.roofline, r.roof_key, profile, r.timing.median_s);
  collect_entries(*op, "", r.entries, 0);
  r.impl = short_impl(r.entries);
  r.config = op->kernel_config().value_or("");

  if (options.no_check) {
    r.result = "UNCHECKED";
    return;
  }
  if (r.roofline.flops > kReferenceMaxFlops) {
    r.result = "UNCHECKED";
    r.message = fmt::format(
        "{} GFLOP is too much for the double-precision CPU reference (the GPU tests check this op "
        "on smaller shapes)",
        format_sig(r.roofline.flops / 1e9, 3));
    return;
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!mutated(i)) pristine[i] = cpu_copy(inputs[i]);
  }
  const ReferenceFn* reference = find_reference(schema.name);
  if (reference == nullptr) {
    r.result = "NOREF";
    r.message = "no reference registered";
    return;
  }
  std::vector<std::pair<std::string, Tensor>> written;
  for (std::size_t o = 0; o < got_outputs.size(); ++o) {
    written.emplace_back(o < schema.outputs.size() ? std::string(schema.outputs[o].name) : "out",
                         got_outputs[o]);
  }
  for (std::size_t i = 0; i < inputs.size() && i < schema.inputs.size(); ++i) {
    if (schema.inputs[i].mutated && inputs[i].defined()) {
      written.emplace_back(std::string(schema.inputs[i].name), inputs[i]);
    }
  }
  const std::vector<Tensor> expected = (*reference)(pristine, op->param_values());
  if (expected.size() != written.size()) {
    r.result = "ERROR";
    r.message = fmt::format("the reference returned {} tensors, the call wrote {}", expected.size(),
                            written.size());
    return;
  }
  bool pass = true;
  double worst_ratio = -1;
  std::vector<std::string> failures;
  for (std::size_t k = 0; k < written.size(); ++k) {
    const double err = max_relative_error(written[k].second, expected[k]);
    const double tol = tolerance_for(written[k].second.dtype());
    const bool ok = err <= tol;  // false for NaN
    const double ratio = !std::isfinite(err) ? std::numeric_limits<double>::infinity()
                         : tol > 0           ? err / tol
                         : err > 0           ? std::numeric_limits<double>::infinity()
                                             : 0.0;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      r.max_err = err;
      r.tolerance = tol;
    }
    if (!ok) {
      pass = false;
      failures.push_back(fmt::format("{}: max error {} > tolerance {}", written[k].first,
                                     format_sig(err), format_sig(tol)));
    }
  }
  r.result = pass ? "PASS" : "FAIL";
  r.message = join(failures, "; ");
}

std::string profile_summary(const perf::HardwareProfile& p) {
  std::vector<std::string> peaks;
  for (const auto& [key, rate] : p.flops_per_s) {
    peaks.push_back(fmt::format("{} {} TFLOP/s", key, format_rate(rate / 1e12)));
  }
  return fmt::format("{}: {} GB/s, {} [{}]", p.name, format_rate(p.mem_bandwidth_bytes_per_s / 1e9),
                     join(peaks, ", "), p.source);
}

double gbps(const CaseResult& r) {
  return r.timed ? r.roofline.bytes / r.timing.median_s / 1e9
                 : std::numeric_limits<double>::quiet_NaN();
}
double tflops(const CaseResult& r) {
  return r.timed ? r.roofline.flops / r.timing.median_s / 1e12
                 : std::numeric_limits<double>::quiet_NaN();
}

Table full_table(const std::vector<CaseResult>& results) {
  Table t;
  t.columns = {"op",        "case",      "device",   "target",   "impl",        "config",
               "entries",   "median_s",  "min_s",    "p90_s",    "iterations",  "timing",
               "flops",     "bytes",     "roof_key", "gb_per_s", "tflop_per_s", "sol_fraction",
               "max_error", "tolerance", "result",   "message"};
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
        num(r.timed ? r.timing.median_s : NAN),
        num(r.timed ? r.timing.min_s : NAN),
        num(r.timed ? r.timing.p90_s : NAN),
        Cell::integer_(r.timed ? r.timing.iterations : 0),
        Cell::string(r.timed ? r.timing.method : ""),
        num(r.roofline.flops),
        num(r.roofline.bytes),
        Cell::string(r.roof_key),
        num(gbps(r)),
        num(tflops(r)),
        num(r.sol),
        num(r.max_err),
        num(r.tolerance),
        Cell::string(r.result),
        Cell::string(r.message),
    });
  }
  return t;
}

Table display_table(const std::vector<CaseResult>& results) {
  Table t;
  t.columns = {"op",   "case",    "device", "target",  "impl",  "median",
               "GB/s", "TFLOP/s", "SOL",    "max err", "result"};
  for (const auto& r : results) {
    const std::string impl = r.config.empty() ? r.impl : r.impl + " (" + r.config + ")";
    const double median = r.timed ? r.timing.median_s : NAN;
    t.rows.push_back({
        Cell::string(r.op),
        Cell::string(r.case_id),
        Cell::string(r.device),
        Cell::string(r.target),
        Cell::string(impl),
        Cell::num(median, format_duration(median)),
        Cell::num(gbps(r), format_rate(gbps(r))),
        Cell::num(tflops(r), format_rate(tflops(r))),
        Cell::num(r.sol, std::isfinite(r.sol) ? fmt::format("{:.1f}%", 100 * r.sol) : "-"),
        Cell::num(r.max_err, format_sig(r.max_err, 2)),
        Cell::string(r.result),
    });
  }
  return t;
}

std::string json_document(const BenchOptions& options, Device device,
                          const perf::HardwareProfile& profile,
                          const std::vector<CaseResult>& results, std::size_t pass,
                          std::size_t fail, std::size_t error, std::size_t other,
                          std::size_t skipped) {
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
      "  \"seed\": {},\n  \"budget_ms\": {},\n  \"tune\": {},\n  \"flush\": {},\n  \"results\": "
      "{},\n",
      options.seed, json_number(options.budget_ms), options.tune ? "true" : "false",
      json_string(options.flush), render_json_rows(full_table(results), 2));
  out += fmt::format(
      "  \"summary\": {{\"cases\": {}, \"passed\": {}, \"failed\": {}, \"errors\": {}, "
      "\"unchecked\": {}, \"skipped\": {}}}\n}}\n",
      results.size(), pass, fail, error, other, skipped);
  return out;
}

}  // namespace

int run_bench(const BenchOptions& options) {
  if (options.all && !options.ops.empty()) {
    throw UsageFailure("give op names or --all, not both");
  }
  if (!options.all && options.ops.empty()) {
    throw UsageFailure("name the ops to benchmark, or pass --all (see `tileops bench --help`)");
  }
  Device device;
  try {
    device = Device::parse(options.device);
  } catch (const Error& e) {
    throw UsageFailure(
        fmt::format("--device '{}': expected cpu, cuda or cuda:<n>", options.device));
  }
  if (device.is_cuda()) {
    if (!cuda_available()) {
#if TILEOPS_WITH_CUDA
      throw UsageFailure(
          fmt::format("--device {}: no CUDA device is available on this machine", options.device));
#else
      throw UsageFailure(fmt::format(
          "--device {}: this tileops was built without CUDA (configure with -DTILEOPS_CUDA=ON)",
          options.device));
#endif
    }
    if (device.index >= cuda_device_count()) {
      throw UsageFailure(fmt::format("--device {}: there are {} CUDA devices", options.device,
                                     cuda_device_count()));
    }
  }
  if (!options.target.empty() && options.target != kBuiltinTargetName) {
    const auto targets = registered_targets();
    if (std::find(targets.begin(), targets.end(), options.target) == targets.end()) {
      throw UsageFailure(fmt::format("--target {}: no such target is registered (registered: {})",
                                     options.target,
                                     targets.empty() ? "none" : join(targets, ", ")));
    }
  }

  // The ops and their cases.
  std::vector<const OpSchema*> schemas;
  std::vector<CaseResult> results;
  if (options.all) {
    for (const OpSchema* s : all_schemas()) {
      if (s->status != "implemented") continue;
      if (find_op_class(s->name) == nullptr) {
        if (!options.quiet) {
          fmt::print(stderr, "tileops bench: skipping {}: no op class is registered\n", s->name);
        }
        continue;
      }
      schemas.push_back(s);
    }
  } else {
    for (const auto& name : options.ops) schemas.push_back(&schema_or_fail(name));
  }
  const std::set<std::string, std::less<>> filter(options.workloads.begin(),
                                                  options.workloads.end());
  std::vector<std::pair<const OpSchema*, WorkloadCase>> cases;
  for (const OpSchema* s : schemas) {
    std::size_t n = 0;
    for (const auto& c : s->workload_cases()) {
      if (!filter.empty() && !filter.contains(c.id) && !filter.contains(c.row->label)) continue;
      cases.emplace_back(s, c);
      ++n;
    }
    if (n == 0 && filter.empty()) {
      CaseResult r;
      r.op = std::string(s->name);
      r.case_id = "-";
      r.device = device.str();
      r.message = "the manifest entry has no workloads";
      results.push_back(std::move(r));
    }
  }
  if (!filter.empty() && cases.empty()) {
    throw UsageFailure(fmt::format("--workload {}: no case of the selected ops matches",
                                   join(options.workloads, ", ")));
  }

  // The --json file is opened before any case runs, so an unwritable path fails at once rather
  // than after the whole bench.
  const auto close_file = [](std::FILE* f) { std::fclose(f); };
  std::unique_ptr<std::FILE, decltype(close_file)> json_file(nullptr, close_file);
  if (!options.json_path.empty()) {
    json_file.reset(std::fopen(options.json_path.c_str(), "w"));
    if (json_file == nullptr)
      throw UsageFailure(fmt::format("--json {}: cannot be written", options.json_path));
  }

  const perf::HardwareProfile& profile = perf::profile_for(device);
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const auto& [schema, wc] = cases[k];
    CaseResult r;
    r.op = std::string(schema->name);
    r.case_id = wc.id;
    r.device = device.str();
    if (schema->status != "implemented" || find_op_class(schema->name) == nullptr) {
      r.message = schema->status != "implemented"
                      ? fmt::format("the op is {} in the manifest", schema->status)
                      : "no op class is registered";
    } else {
      try {
        run_case(*schema, wc, options, device, profile, r);
      } catch (const std::exception& e) {
        r.result = "ERROR";
        r.message = e.what();
      }
    }
    if (!options.quiet) {
      fmt::print(stderr, "tileops bench: [{}/{}] {} {} on {}: {} {}{}\n", k + 1, cases.size(), r.op,
                 r.case_id, r.device,
                 r.timed ? format_duration(r.timing.median_s) : std::string("-"), r.result,
                 r.message.empty() ? "" : " (" + r.message + ")");
    }
    results.push_back(std::move(r));
  }

  std::size_t pass = 0, fail = 0, error = 0, skipped = 0, other = 0;
  for (const auto& r : results) {
    if (r.result == "PASS") {
      ++pass;
    } else if (r.result == "FAIL") {
      ++fail;
    } else if (r.result == "ERROR") {
      ++error;
    } else if (r.result == "SKIPPED") {
      ++skipped;
    } else {
      ++other;
    }
  }
  const std::string summary =
      fmt::format("{} cases: {} passed, {} failed, {} errors, {} unchecked, {} skipped",
                  results.size(), pass, fail, error, other, skipped);

  switch (options.format) {
    case Format::table: {
      fmt::print("# tileops {} bench on {}\n", TILEOPS_VERSION_STRING, device.str());
      fmt::print("# profile {}\n", profile_summary(profile));
      fmt::print(
          "# median of timed calls ({}); GB/s and TFLOP/s from the manifest roofline; SOL = "
          "roofline bound / median\n",
          device.is_cpu() ? "cpu wall clock"
                          : fmt::format("cuda events, L2 flushed ({})", options.flush));
      if (options.tune) fmt::print("# tuned mode: request_tune() before each op's first call\n");
      fmt::print("{}", render_table(display_table(results)));
      for (const auto& r : results) {
        if (!r.message.empty() && r.result != "PASS") {
          fmt::print("{} {} {}: {}\n", r.result, r.op, r.case_id, r.message);
        }
      }
      fmt::print("{}\n", summary);
      break;
    }
    case Format::json:
      fmt::print("{}", json_document(options, device, profile, results, pass, fail, error, other,
                                     skipped));
      break;
    case Format::csv:
      fmt::print("{}", render_csv(full_table(results)));
      break;
  }
  if (json_file != nullptr) {
    fmt::print(json_file.get(), "{}",
               json_document(options, device, profile, results, pass, fail, error, other, skipped));
  }
  if (!options.quiet && options.format != Format::table) fmt::print(stderr, "{}\n", summary);
  return fail + error > 0 ? kExitFailure : 0;
}

}  // namespace tileops::cli
