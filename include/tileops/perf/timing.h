// Timing a callable on a device: wall-clock on the CPU, CUDA events with an L2 flush between
// iterations on a GPU (docs/perf/README.md, "How a figure is measured"). Used by `tileops bench`
// and tuning.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tileops/core/device.h"

namespace tileops::perf {

/// How the GPU timer overwrites its flush buffer before each iteration.
enum class L2Flush {
  /// cudaMemsetAsync.
  memset,
  /// A kernel of 16-byte stores, so that the timed call follows a kernel, as an op in a model
  /// follows the previous layer's kernel (bench/peers.py's default flush, torch's fill_, is one).
  kernel,
};

/// "memset" or "kernel".
std::string to_string(L2Flush flush);
/// The L2Flush that to_string names; UsageError for any other text.
L2Flush parse_l2_flush(const std::string& name);

struct TimingOptions {
  /// Time spent running the callable untimed after calibration, milliseconds.
  double warmup_ms = 25;
  /// Time budget of the timed iterations, milliseconds: iterations = budget / per-call cost.
  double budget_ms = 100;
  /// Bounds of the number of timed iterations.
  int min_iters = 10;
  int max_iters = 200;
  /// CUDA: overwrite a buffer of max(2 x L2, 512 MiB) bytes before each iteration, outside the
  /// timed region, so that every iteration starts with a cold L2 and the call is enqueued while
  /// the flush runs. (Each iteration waits for its stop event before the next flush.)
  bool flush_l2 = true;
  /// How that buffer is overwritten.
  L2Flush flush_method = L2Flush::memset;
};

struct TimingResult {
  double median_s = 0;
  double min_s = 0;
  double p90_s = 0;
  double mean_s = 0;
  int iterations = 0;
  /// "cpu wall clock", "cuda events" or "cuda events, L2 flushed (memset|kernel)" (event timing
  /// overstates kernels of a few microseconds by the event overhead).
  std::string method;
  /// Per-iteration times, seconds, in the order they were taken.
  std::vector<double> samples_s;
};

/// Times `fn`, which runs one call on `device` (on a GPU: launches its work on
/// cuda_current_stream(device.index) and need not synchronise). Steps: one untimed call (first
/// build), three timed calibration calls giving the per-call cost, warm-up for warmup_ms, then
/// clamp(budget_ms / cost, min_iters, max_iters) iterations, each timed on its own.
/// UsageError for a CUDA device without CUDA. Exceptions of `fn` propagate.
TimingResult time_op(const std::function<void()>& fn, Device device, TimingOptions options = {});

/// The q-quantile (0 <= q <= 1) of `samples` with linear interpolation between order statistics
/// (numpy's default): q = 0.5 is the median. NaN for an empty sample.
double percentile(std::span<const double> samples, double q);

/// Median, min, p90, mean and the count of `samples_s`.
TimingResult summarize(std::vector<double> samples_s, std::string method);

/// clamp(budget_ms / per_call_s, min_iters, max_iters); max_iters for a zero or negative cost.
int choose_iterations(double per_call_s, const TimingOptions& options);

}  // namespace tileops::perf
