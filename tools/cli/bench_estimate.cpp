// `tileops bench`: the estimate of a case's call time before anything is allocated. The call
// record the roofline needs is assembled from the workload: its values and construction
// parameters fill the indices by name, its dtype case the dtype indices, its input specs the
// tensors. The outputs are not known before the call; the estimate counts one output as large as
// the largest input (a norm's y, a GEMM's weights: never less than the true bytes by more than
// the outputs' excess over that).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench.h"
#include "tileops/base/signature_call.h"
#include "tileops/core/error.h"

namespace tileops::cli {
namespace {

/// Fraction of the roofline bound the in-tree kernels are assumed to reach: a guess on the low
/// side, so that the estimate errs towards skipping (the table shows measured fractions). The
/// CPU's tensor-core work (the MoE GEMMs) runs on OpenBLAS, which reaches the calibrated fp32
/// rate (a plain loop's) or more; the CPU's other kernels a quarter of their bound.
double assumed_efficiency(Device device, std::string_view roof_key) {
  if (!device.is_cpu()) return 0.5;
  return roof_key.starts_with("tensor_core.") ? 1.0 : 0.25;
}

std::optional<Value> workload_value(const WorkloadCase& wc, const InstantiatedCase& inst,
                                    std::string_view name) {
  for (const auto& [key, value] : wc.row->values) {
    if (key == name) return value;
  }
  if (const auto it = inst.params.find(name); it != inst.params.end()) return it->second;
  for (const auto& [key, dtype] : wc.row->dtype_cases.at(wc.dtype_case)) {
    if (key == name) return Value(dtype);
  }
  return std::nullopt;
}

std::optional<Roofline> roofline_before_call(const OpSchema& schema, const WorkloadCase& wc,
                                             const InstantiatedCase& inst) {
  if (schema.eval_roofline == nullptr) return std::nullopt;
  SignatureCall call(&schema);
  for (const auto& index : schema.indices) {
    std::optional<Value> v = workload_value(wc, inst, index.name);
    call.indices.push_back(v ? std::move(*v) : Value());
  }
  double largest = 0;
  for (std::size_t i = 0; i < inst.inputs.size(); ++i) {
    const auto& in = inst.inputs[i];
    call.present.push_back(in.has_value());
    if (!in) continue;
    TensorRecord t{.name = i < schema.inputs.size() ? schema.inputs[i].name : "input",
                   .shape = in->shape,
                   .dtype = in->dtype,
                   .reads = 1};
    largest = std::max(largest, t.bytes());
    call.tensors.push_back(std::move(t));
  }
  try {
    Roofline r = schema.eval_roofline(call);
    if (schema.roofline_bytes.empty()) r.bytes += largest;
    return r;
  } catch (const Error&) {
    return std::nullopt;  // an index the workload does not name (a let, a shape-derived one)
  }
}

}  // namespace

CallEstimate estimate_call(const OpSchema& schema, const WorkloadCase& wc,
                           const InstantiatedCase& inst, const std::string& roof_key,
                           const perf::HardwareProfile& profile, Device device,
                           const BenchOptions& options) {
  CallEstimate e;
  e.roof_key = roof_key;
  const std::optional<Roofline> roofline = roofline_before_call(schema, wc, inst);
  if (!roofline) return e;
  e.roofline = *roofline;
  const double bound = perf::roofline_seconds(e.roofline, roof_key, profile);
  if (!std::isfinite(bound)) return e;
  e.call_s = bound / assumed_efficiency(device, roof_key);
  // The first call, the timer's calibration call, the warm-up and timed calls, the checked call.
  const int min_iters = options.min_iters.value_or(device.is_cpu() ? 3 : 10);
  const double timed_s =
      std::max((options.budget_ms + options.warmup_ms) / 1e3, (min_iters + 1) * e.call_s);
  e.case_s = 3 * e.call_s + timed_s;
  return e;
}

std::string describe_estimate(const CallEstimate& e, Device device) {
  if (!std::isfinite(e.call_s)) return "no estimate";
  const double efficiency = assumed_efficiency(device, e.roof_key);
  return fmt::format("estimated {} a call ({} roofline bound at {:.0f}% efficiency)",
                     format_duration(e.call_s), format_duration(e.call_s * efficiency),
                     100 * efficiency);
}

}  // namespace tileops::cli
