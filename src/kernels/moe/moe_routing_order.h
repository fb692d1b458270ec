// Internal: the order in which routing ranks choice scores (manifest/moe.yaml,
// MoETopKRoutingFwdOp): descending, NaN above every number (so a NaN logit is never silently
// skipped), -0 equal to +0. The CUDA kernel's selection keys (moe_routing_cuda.cu) spell the same
// order; the CPU implementation and the double-precision reference compare with this.
#pragma once

#include <cmath>

namespace tileops::moe_routing {

/// Whether score `a` ranks strictly before `b`: a strict weak order in which every NaN is
/// equivalent and first.
template <class F>
constexpr bool ranks_before(F a, F b) {
  if (std::isnan(a)) return !std::isnan(b);
  if (std::isnan(b)) return false;
  return a > b;
}

}  // namespace tileops::moe_routing
