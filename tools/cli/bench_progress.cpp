// `tileops bench`: the progress of a run on stderr (case n of N, elapsed, estimated remaining).
// The remaining time is the estimates of the cases still to run, scaled by how the finished
// cases' actual times compared with their estimates.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "bench.h"

namespace tileops::cli {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string seconds_text(double s) {
  if (!std::isfinite(s)) return "?";
  if (s < 60) return fmt::format("{:.0f} s", s);
  return fmt::format("{}m{:02.0f}s", static_cast<long>(s / 60), std::fmod(s, 60.0));
}

}  // namespace

Progress::Progress(std::size_t cases, bool quiet, std::FILE* stream)
    : estimates(cases, kNaN),
      cases_(cases),
      quiet_(quiet),
      tty_(isatty(fileno(stream)) != 0),
      stream_(stream),
      started_(now_s()) {}

std::string Progress::timing_text(std::size_t done, double running_for) const {
  const double elapsed = now_s() - started_;
  double known = 0;
  std::size_t n_known = 0;
  for (const double e : estimates) {
    if (std::isfinite(e)) {
      known += e;
      ++n_known;
    }
  }
  const double mean = n_known > 0 ? known / static_cast<double>(n_known) : kNaN;
  // Calibrate the estimates by the finished cases once they amount to something measurable.
  const double scale =
      estimated_done_ > 0.5 && finished_elapsed_ > 0.5 ? finished_elapsed_ / estimated_done_ : 1.0;
  double left = 0;
  for (std::size_t k = done; k < estimates.size(); ++k) {
    const double e = (std::isfinite(estimates[k]) ? estimates[k] : mean) * scale;
    left += k == done ? std::max(0.0, e - running_for) : e;  // the running case: what remains
  }
  return fmt::format("elapsed {}, ~{} left", seconds_text(elapsed),
                     done >= estimates.size() ? "0 s" : seconds_text(left));
}

void Progress::start(std::size_t k, const CaseResult& r, double estimate_s) {
  if (quiet_ || !tty_) return;
  const std::string est =
      std::isfinite(estimate_s) ? fmt::format(" (~{})", seconds_text(estimate_s)) : "";
  const std::string running =
      fmt::format("tileops bench: [{}/{}] {} {}{} running; ", k + 1, cases_, r.op, r.case_id, est);
  const double case_started = now_s();
  ticker_ = std::jthread([this, k, running, case_started](const std::stop_token& stop) {
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested()) {
      // \r and erase-to-end-of-line: the line is rewritten in place.
      fmt::print(stream_, "\r\x1b[K{}{}", running, timing_text(k, now_s() - case_started));
      std::fflush(stream_);
      wake_.wait_for(lock, stop, std::chrono::seconds(1), [] { return false; });
    }
  });
}

void Progress::stop_ticker() {
  if (ticker_.joinable()) {
    ticker_.request_stop();
    ticker_.join();
  }
}

void Progress::finish(std::size_t k, const CaseResult& r, double seconds) {
  stop_ticker();
  if (std::isfinite(estimates[k])) {
    estimated_done_ += estimates[k];
  } else {
    estimated_done_ += seconds;  // an unknown estimate is taken as exact
  }
  finished_elapsed_ = now_s() - started_;
  if (quiet_) return;
  fmt::print(stream_, "{}tileops bench: [{}/{}] {} {} on {}: {} {}{}; {}\n", tty_ ? "\r\x1b[K" : "",
             k + 1, cases_, r.op, r.case_id, r.device,
             r.timed ? format_duration(r.timing.median_s) : std::string("-"), r.result,
             r.message.empty() ? "" : " (" + r.message + ")", timing_text(k + 1));
  std::fflush(stream_);
}

}  // namespace tileops::cli
