// The roofline bound and the fraction of it a measured time reaches.
#include "tileops/perf/roofline.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tileops::perf {

double roofline_seconds(const Roofline& roofline, std::string_view roof_key,
                        const HardwareProfile& profile) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  double memory_s = 0;
  if (roofline.bytes > 0) {
    if (!(profile.mem_bandwidth_bytes_per_s > 0)) return nan;
    memory_s = roofline.bytes / profile.mem_bandwidth_bytes_per_s;
  }
  double compute_s = 0;
  if (roofline.flops > 0) {
    const std::optional<double> peak = profile.peak_flops(roof_key);
    if (!peak || !(*peak > 0)) return nan;
    compute_s = roofline.flops / *peak;
  }
  return std::max(memory_s, compute_s);
}

double roofline_fraction(const Roofline& roofline, std::string_view roof_key,
                         const HardwareProfile& profile, double seconds) {
  if (!(seconds > 0)) return std::numeric_limits<double>::quiet_NaN();
  return roofline_seconds(roofline, roof_key, profile) / seconds;
}

}  // namespace tileops::perf
