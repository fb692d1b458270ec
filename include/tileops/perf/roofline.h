// Speed of light: the time a call needs at least on a device, from its roofline (flops, bytes)
// and a hardware profile, and the fraction of that bound a measured time reaches.
#pragma once

#include <string_view>

#include "tileops/base/schema.h"
#include "tileops/perf/hardware.h"

namespace tileops::perf {

/// max(bytes / bandwidth, flops / peak(roof_key)) in seconds. A missing peak for `roof_key` with
/// flops > 0, or a profile without bandwidth with bytes > 0, gives NaN.
double roofline_seconds(const Roofline& roofline, std::string_view roof_key,
                        const HardwareProfile& profile);

/// roofline_seconds(...) / seconds: 1.0 means the call ran at the speed of light. NaN when the
/// bound is NaN or seconds <= 0.
double roofline_fraction(const Roofline& roofline, std::string_view roof_key,
                         const HardwareProfile& profile, double seconds);

}  // namespace tileops::perf
