// `tileops bench`: the check of a case's result against the op's double-precision reference,
// on the whole result or, for a case too large for the whole reference, on rows of dimension 0
// drawn from the case's seed and recomputed by the op's sampled reference for those rows alone.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench.h"
#include "tileops/base/reference.h"

namespace tileops::cli {
namespace {

// Beyond this many roofline FLOPs, or inputs of more bytes, the whole double-precision
// reference (a plain loop over doubles) takes tens of seconds on a small machine or memory
// several times the inputs': such results are checked on sampled rows.
constexpr double kWholeReferenceMaxFlops = 2e9;
constexpr double kWholeReferenceMaxBytes = 256e6;
// Rows of a sampled check: up to 64, fewer when a row costs more than this share of FLOPs.
constexpr std::int64_t kSampleRows = 64;
constexpr std::int64_t kMinSampleRows = 8;
constexpr double kSampledMaxFlops = 2e9;

/// max_relative_error and its tolerance of each written tensor; the worst ratio is reported.
void compare(const std::vector<std::pair<std::string, Tensor>>& got,
             const std::vector<Tensor>& expected, CaseResult& r) {
  bool pass = true;
  double worst_ratio = -1;
  std::vector<std::string> failures;
  for (std::size_t k = 0; k < got.size(); ++k) {
    const double err = max_relative_error(got[k].second, expected[k]);
    const double tol = tolerance_for(got[k].second.dtype());
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
      failures.push_back(fmt::format("{}: max error {} > tolerance {}", got[k].first,
                                     format_sig(err), format_sig(tol)));
    }
  }
  r.result = pass ? "PASS" : "FAIL";
  r.message = join(failures, "; ");
}

}  // namespace

std::optional<CheckPlan> plan_check(const OpSchema& schema, const Roofline& roofline,
                                    double input_bytes, std::int64_t result_rows,
                                    const BenchOptions& options) {
  const bool sampled = find_sampled_reference(schema.name) != nullptr && result_rows > 0;
  CheckPlan plan;
  plan.seed = options.seed;
  if (sampled && options.sample_rows > 0) {
    plan.sample_rows = std::min(options.sample_rows, result_rows);
    return plan;
  }
  const bool whole_is_cheap =
      !(roofline.flops > kWholeReferenceMaxFlops) && !(input_bytes > kWholeReferenceMaxBytes);
  if (whole_is_cheap) return plan;
  if (!sampled) return std::nullopt;
  const double row_flops = roofline.flops / static_cast<double>(result_rows);
  const auto affordable =
      row_flops > 0 ? static_cast<std::int64_t>(kSampledMaxFlops / row_flops) : kSampleRows;
  plan.sample_rows = std::min(result_rows, std::clamp(affordable, kMinSampleRows, kSampleRows));
  return plan;
}

void check_case(const OpSchema& schema, const ParamMap& params, std::span<const Tensor> inputs,
                const std::vector<std::pair<std::string, Tensor>>& written, const CheckPlan& plan,
                CaseResult& r) {
  std::vector<Tensor> expected;
  std::vector<std::pair<std::string, Tensor>> got;
  if (plan.sample_rows == 0) {
    const ReferenceFn* reference = find_reference(schema.name);
    if (reference == nullptr) {
      r.result = "NOREF";
      r.message = "no reference registered";
      return;
    }
    expected = (*reference)(inputs, params);
    got = written;
    r.check = "full";
  } else {
    const SampledReferenceFn* reference = find_sampled_reference(schema.name);
    const std::vector<std::int64_t> rows =
        sample_rows(written.front().second.size(0), plan.sample_rows, plan.seed);
    expected = (*reference)(inputs, params, rows);
    for (std::size_t k = 0; k < written.size(); ++k) {
      got.emplace_back(written[k].first, gather_rows(written[k].second, rows,
                                                     sampled_reference_row_dim(schema.name, k)));
    }
    r.check = fmt::format("{} rows", rows.size());
  }
  if (expected.size() != got.size()) {
    r.result = "ERROR";
    r.message = fmt::format("the reference returned {} tensors, the call wrote {}", expected.size(),
                            got.size());
    return;
  }
  compare(got, expected, r);
  if (plan.sample_rows > 0 && r.result == "FAIL") {
    r.message += fmt::format(" (on {} rows sampled with seed {})", plan.sample_rows, plan.seed);
  }
}

}  // namespace tileops::cli
