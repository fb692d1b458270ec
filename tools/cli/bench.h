// `tileops bench`, internal: the result of one case, the estimate made before running it, the
// check against the reference, the progress line and the report (table, JSON, CSV).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli.h"
#include "tileops/base/op.h"
#include "tileops/core/tensor.h"
#include "tileops/perf/perf.h"

namespace tileops::cli {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The time a case's call is expected to take, known before anything is allocated: the
/// manifest roofline of the case (from the workload's values and input specs) over the hardware
/// profile, divided by an assumed efficiency of the device's kernels (25% on the CPU, 100% for
/// its GEMMs; 50% on a GPU).
struct CallEstimate {
  Roofline roofline{kNaN, kNaN};  ///< NaN when the roofline cannot be evaluated before the call
  std::string roof_key;
  double call_s = kNaN;  ///< estimated seconds a call; NaN when unknown
  /// Estimated seconds of the whole case: its calls (first, calibration, warm-up, timed, checked).
  double case_s = kNaN;
};

/// The estimate of one call of `wc` on `device`. `roof_key` is the op's (Op::roof_key()).
CallEstimate estimate_call(const OpSchema& schema, const WorkloadCase& wc,
                           const InstantiatedCase& inst, const std::string& roof_key,
                           const perf::HardwareProfile& profile, Device device,
                           const BenchOptions& options);

/// "2.1 s a call (roofline 0.52 s at 25% efficiency)".
std::string describe_estimate(const CallEstimate& e, Device device);

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
  Roofline roofline{kNaN, kNaN};
  std::string roof_key;
  double sol = kNaN;
  double estimate_s = kNaN;  ///< estimated seconds a call, before running it
  double max_err = kNaN;
  double tolerance = kNaN;
  std::string check = "-";       ///< "full", "64 rows" (sampled) or "-"
  std::string result = "ERROR";  ///< PASS, FAIL, ERROR, NOREF, UNCHECKED, SKIPPED
  std::string message;
};

/// How a case's result is compared with the reference.
struct CheckPlan {
  /// Rows of dimension 0 checked; 0: the whole result (the full reference).
  std::int64_t sample_rows = 0;
  std::uint64_t seed = 0;
};

/// The plan for a call of `roofline` whose inputs hold `input_bytes`: the whole reference when it
/// is cheap, else sampled rows (forced by --sample-rows N > 0) when the op has a sampled
/// reference; nullopt when the result is too large to check and there is no sampled reference.
std::optional<CheckPlan> plan_check(const OpSchema& schema, const Roofline& roofline,
                                    double input_bytes, std::int64_t result_rows,
                                    const BenchOptions& options);

/// Compares what the checked call wrote (`written`: outputs, then mutated inputs, by name) with
/// the reference over `inputs` (manifest order; mutated inputs as they were before the call).
/// Sets r.result (PASS, FAIL, NOREF, ERROR), r.message, r.max_err, r.tolerance and r.check.
void check_case(const OpSchema& schema, const ParamMap& params, std::span<const Tensor> inputs,
                const std::vector<std::pair<std::string, Tensor>>& written, const CheckPlan& plan,
                CaseResult& r);

/// The progress of a bench on stderr: on a terminal one line rewritten in place ('\r') every
/// second while a case runs, then the case's line; otherwise one plain line per finished case.
class Progress {
 public:
  Progress(std::size_t cases, bool quiet, std::FILE* stream);
  /// Case `k` (0-based) starts; `estimate_s` is its estimated time (NaN: unknown).
  void start(std::size_t k, const CaseResult& r, double estimate_s);
  /// Case `k` ended after `seconds`.
  void finish(std::size_t k, const CaseResult& r, double seconds);

  /// Estimates of every case, for the remaining time (NaN entries count as the mean).
  std::vector<double> estimates;

 private:
  /// "elapsed 12 s, ~40 s left" with `done` cases finished and the next running for
  /// `running_for` seconds.
  std::string timing_text(std::size_t done, double running_for = 0) const;
  void stop_ticker();
  std::size_t cases_;
  bool quiet_;
  bool tty_;
  std::FILE* stream_;
  double started_;
  double estimated_done_ = 0;    ///< estimated seconds of the finished cases
  double finished_elapsed_ = 0;  ///< seconds from the start to the last finished case
  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::jthread ticker_;  ///< rewrites the running case's line; last member: joined first
};

// ---- report ----------------------------------------------------------------------------------

struct BenchCounts {
  std::size_t pass = 0, fail = 0, error = 0, other = 0, skipped = 0;
};
BenchCounts count_results(const std::vector<CaseResult>& results);
std::string summary_line(const std::vector<CaseResult>& results, const BenchCounts& c);

/// Everything, for JSON and CSV.
Table full_table(const std::vector<CaseResult>& results);
/// The terminal table: the kernel configuration summarized unless `wide`.
Table display_table(const std::vector<CaseResult>& results, bool wide);
/// The header comments the narrow table needs (how it abbreviates case ids; the target when every
/// case shares it, which then has no column); none with `wide`.
std::vector<std::string> display_notes(const std::vector<CaseResult>& results, bool wide);
std::string json_document(const BenchOptions& options, Device device,
                          const perf::HardwareProfile& profile,
                          const std::vector<CaseResult>& results, const BenchCounts& c);
std::string profile_summary(const perf::HardwareProfile& p);

}  // namespace tileops::cli
