// The performance layer: hardware profiles, timers and the roofline bound.
#pragma once

#include "tileops/perf/hardware.h"  // IWYU pragma: export
#include "tileops/perf/roofline.h"  // IWYU pragma: export
#include "tileops/perf/timing.h"    // IWYU pragma: export
