// `tileops bench`: runs the manifest workloads of ops, times them, checks every result against
// the op's reference, and reports time, bandwidth, flop rate and the fraction of the roofline
// bound (DESIGN.md §8).
//
// Inputs of a case: the op's registered workload inputs (case, seed, device) when it has them
// (ops whose inputs must hold valid values: MoE ids, offsets, permutations); otherwise float inputs
// are Tensor::randn(seed + position) on the bench device, integer inputs (positions, indices)
// uniform integers in [0, S) where S is the input's last dimension (so positions stay within the
// sequence), bool inputs all false. Construction-time tensors come from the manifest's workload
// instantiation.
//
// Before a case runs, its call time is estimated from the manifest roofline and the hardware
// profile (bench_estimate.cpp); a case estimated over --max-case-s a call is SKIPPED with its
// estimate unless --all-cases is given, but every op keeps its cheapest case. On the CPU a case
// whose inputs exceed kCpuMaxInputBytes is SKIPPED whatever the options (memory).
//
// Order per case: build inputs and keep CPU copies; one call (builds kernels, gives the `out`
// buffers the timed calls reuse); timed calls; restore the inputs the op mutates from the copies;
// the checked call, compared with the reference run on the CPU copies, on the whole result or on
// rows sampled by the case's seed when the whole reference would be too costly (bench_check.cpp).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include "bench.h"
#include "cli.h"
#include "tileops/base/op.h"
#include "tileops/base/op_class.h"
#include "tileops/base/reference.h"
#include "tileops/core/cuda.h"
#include "tileops/core/error.h"
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
  cmd->add_flag(
      "--tune", options.tune,
      "Tuned mode: each op gets request_tune() before its first (untimed) call, so "
      "kernels with a tuning space time their candidates on the case's inputs and keep "
      "the fastest (remembered in the tuning database); the kernel configuration (JSON/CSV, "
      "--wide) then ends in \"(tuned)\". Only the CUDA kernels have tuning spaces.");
  cmd->add_option("--flush", options.flush,
                  "How the GPU timer overwrites its L2 flush buffer before each timed call: "
                  "memset (cudaMemsetAsync) or kernel (a kernel of 16-byte stores)")
      ->check(CLI::IsMember({"memset", "kernel"}))
      ->default_str("memset");
  cmd->add_option("--max-case-s", options.max_case_s,
                  "Skip cases whose estimated call time (roofline bound over the hardware profile "
                  "at an assumed efficiency) exceeds this many seconds; each op keeps its "
                  "cheapest case (default 1 on the CPU, 2 on a GPU)")
      ->check(kPositive);
  cmd->add_flag("--all-cases", options.all_cases,
                "Run every case whatever its estimate (on the CPU, cases whose inputs exceed "
                "1.5 GB stay skipped)");
  cmd->add_flag("--wide", options.wide,
                "The table shows every implementation key and the kernel configuration whole");
  cmd->add_option("--sample-rows", options.sample_rows,
                  "Check the cases whose op has a sampled reference on this many rows drawn by "
                  "--seed (default: the whole result when the reference is cheap, else up to 64 "
                  "rows)")
      ->check(kPositive);
  cmd->add_flag("--no-check", options.no_check, "Do not compare with the reference");
  cmd->add_flag("-q,--quiet", options.quiet, "No progress lines on stderr");
  return cmd;
}

namespace {

// Cases whose inputs exceed this are skipped on the CPU (memory of a small machine).
constexpr double kCpuMaxInputBytes = 1.5e9;

double input_bytes_of(const InstantiatedCase& inst) {
  double bytes = 0;
  for (const auto& in : inst.inputs) {
    if (!in) continue;
    double n = 1;
    for (const auto d : in->shape) n *= static_cast<double>(d);
    bytes += n * static_cast<double>(element_size(in->dtype));
  }
  return bytes;
}

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

void run_case(const OpSchema& schema, const InstantiatedCase& inst, const BenchOptions& options,
              Device device, const perf::HardwareProfile& profile, CaseResult& r) {
  Target target;
  if (!options.target.empty()) target = Target(options.target);
  const double input_bytes = input_bytes_of(inst);
  std::unique_ptr<Op> op = make_op(schema.name, inst.params, target);
  if (options.tune) op->request_tune();

  std::vector<Tensor> inputs;
  if (const WorkloadInputsFn* workload_inputs = find_workload_inputs(schema.name)) {
    inputs = (*workload_inputs)(inst, options.seed, device);
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
  const std::int64_t result_rows =
      !written.empty() && written.front().second.dim() > 0 ? written.front().second.size(0) : 0;
  const std::optional<CheckPlan> plan =
      plan_check(schema, r.roofline, input_bytes, result_rows, options);
  if (!plan) {
    r.result = "UNCHECKED";
    r.message = fmt::format(
        "{} GFLOP is too much for the double-precision CPU reference and the op has no sampled "
        "reference",
        format_sig(r.roofline.flops / 1e9, 3));
    return;
  }
  // A sampled reference reads the rows it needs from the inputs where they are; the whole
  // reference gets CPU copies.
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!mutated(i)) pristine[i] = plan->sample_rows > 0 ? inputs[i] : cpu_copy(inputs[i]);
  }
  check_case(schema, op->param_values(), pristine, written, *plan, r);
}

/// What is known of a case before it runs: its instantiation, its estimate, and why it is
/// skipped (empty: it runs).
struct CasePlan {
  std::optional<InstantiatedCase> inst;
  CallEstimate estimate;
  std::string skip_reason;
  std::string error;  ///< why the case cannot run (an ERROR)
};

double default_max_case_s(Device device) {
  return device.is_cpu() ? 1.0 : 2.0;
}

/// The plans of every case: instantiated and estimated; over --max-case-s a call (unless
/// --all-cases) or over the CPU memory limit, skipped, except that each op's cheapest case
/// within the memory limit runs whatever its estimate.
std::vector<CasePlan> plan_cases(const std::vector<std::pair<const OpSchema*, WorkloadCase>>& cases,
                                 const BenchOptions& options, Device device,
                                 const perf::HardwareProfile& profile) {
  const double max_call_s = options.max_case_s.value_or(default_max_case_s(device));
  std::vector<CasePlan> plans(cases.size());
  std::map<std::string_view, std::size_t> cheapest;  // per op: the case with the least estimate
  std::set<std::string_view> op_runs;                // ops with a case under the budget
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const auto& [schema, wc] = cases[k];
    CasePlan& plan = plans[k];
    if (schema->status != "implemented" || find_op_class(schema->name) == nullptr) {
      plan.error = schema->status != "implemented"
                       ? fmt::format("the op is {} in the manifest", schema->status)
                       : "no op class is registered";
      continue;
    }
    try {
      plan.inst = schema->instantiate(*wc.row, wc.dtype_case);
      const std::unique_ptr<Op> op =
          make_op(schema->name, plan.inst->params,
                  options.target.empty() ? Target() : Target(options.target));
      plan.estimate =
          estimate_call(*schema, wc, *plan.inst, op->roof_key(), profile, device, options);
    } catch (const std::exception& e) {
      plan.error = e.what();
      continue;
    }
    const double input_bytes = input_bytes_of(*plan.inst);
    if (device.is_cpu() && input_bytes > kCpuMaxInputBytes) {
      plan.skip_reason = fmt::format("inputs of {} GB: too large for a CPU bench",
                                     format_sig(input_bytes / 1e9, 3));
      continue;
    }
    const double call_s = plan.estimate.call_s;
    if (!options.all_cases && call_s > max_call_s) {
      plan.skip_reason =
          fmt::format("{} > --max-case-s {}; --all-cases runs it",
                      describe_estimate(plan.estimate, device), format_sig(max_call_s));
      const auto it = cheapest.find(schema->name);
      if (it == cheapest.end() || call_s < plans[it->second].estimate.call_s) {
        cheapest[schema->name] = k;
      }
    } else {
      op_runs.insert(schema->name);
    }
  }
  for (const auto& [op, k] : cheapest) {
    if (!op_runs.contains(op)) plans[k].skip_reason.clear();  // every op keeps one case
  }
  return plans;
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
  const std::vector<CasePlan> plans = plan_cases(cases, options, device, profile);
  Progress progress(cases.size(), options.quiet, stderr);
  for (std::size_t k = 0; k < plans.size(); ++k) {
    const bool runs = plans[k].skip_reason.empty() && plans[k].error.empty();
    progress.estimates[k] = runs ? plans[k].estimate.case_s : 0.0;  // a skipped case takes no time
  }
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const auto& [schema, wc] = cases[k];
    const CasePlan& plan = plans[k];
    CaseResult r;
    r.op = std::string(schema->name);
    r.case_id = wc.id;
    r.device = device.str();
    r.estimate_s = plan.estimate.call_s;
    r.roofline = plan.estimate.roofline;
    r.roof_key = plan.estimate.roof_key;
    const auto started = std::chrono::steady_clock::now();
    progress.start(k, r, plan.estimate.case_s);
    if (!plan.error.empty()) {
      r.result = "ERROR";
      r.message = plan.error;
    } else if (!plan.skip_reason.empty()) {
      r.result = "SKIPPED";
      r.message = plan.skip_reason;
    } else {
      try {
        run_case(*schema, *plan.inst, options, device, profile, r);
      } catch (const std::exception& e) {
        r.result = "ERROR";
        r.message = e.what();
      }
    }
    progress.finish(
        k, r, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    results.push_back(std::move(r));
  }

  const BenchCounts counts = count_results(results);
  const std::string summary = summary_line(results, counts);
  switch (options.format) {
    case Format::table: {
      fmt::print("# tileops {} bench on {}\n", TILEOPS_VERSION_STRING, device.str());
      fmt::print("# profile {}\n", profile_summary(profile));
      fmt::print(
          "# median of timed calls ({}); est. = call time estimated before the run; GB/s, TFLOP/s "
          "from the manifest roofline; SOL = roofline bound / median\n",
          device.is_cpu() ? "cpu wall clock"
                          : fmt::format("cuda events, L2 flushed ({})", options.flush));
      if (options.tune) fmt::print("# tuned mode: request_tune() before each op's first call\n");
      for (const auto& note : display_notes(results, options.wide)) fmt::print("# {}\n", note);
      fmt::print("{}", render_table(display_table(results, options.wide)));
      for (const auto& r : results) {
        if (!r.message.empty() && r.result != "PASS") {
          fmt::print("{} {} {}: {}\n", r.result, r.op, r.case_id, r.message);
        }
      }
      fmt::print("{}\n", summary);
      break;
    }
    case Format::json:
      fmt::print("{}", json_document(options, device, profile, results, counts));
      break;
    case Format::csv:
      fmt::print("{}", render_csv(full_table(results)));
      break;
  }
  if (json_file != nullptr) {
    fmt::print(json_file.get(), "{}", json_document(options, device, profile, results, counts));
  }
  if (!options.quiet && options.format != Format::table) fmt::print(stderr, "{}\n", summary);
  return counts.fail + counts.error > 0 ? kExitFailure : 0;
}

}  // namespace tileops::cli
