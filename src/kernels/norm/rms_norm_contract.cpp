// The call spec of the normalization family: hash and text.
#include "tileops/kernel/norm.h"

#include <fmt/format.h>

namespace tileops {

std::size_t RMSNormCall::hash() const {
  std::size_t seed = std::hash<Device>{}(device);
  hash_combine(seed, std::hash<std::int64_t>{}(rows));
  hash_combine(seed, std::hash<std::int64_t>{}(cols));
  hash_combine(seed, static_cast<std::size_t>(dtype));
  hash_combine(seed, fused_add ? 1 : 0);
  return seed;
}

// The text is a tuning-database key: it keeps the spelling recorded before the type was renamed.
std::string RMSNormCall::str() const {
  return fmt::format("RmsNormCall(rows={}, cols={}, dtype={}, fused_add={}, device={})", rows, cols,
                     dtype_name(dtype), fused_add, device.str());
}

}  // namespace tileops
