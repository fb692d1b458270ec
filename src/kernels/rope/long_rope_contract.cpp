// The call spec of the position-encoding family: hash and text.
#include "tileops/kernel/rope.h"

#include <fmt/format.h>

namespace tileops {

std::size_t LongRoPECall::hash() const {
  std::size_t seed = std::hash<Device>{}(device);
  hash_combine(seed, static_cast<std::size_t>(dtype));
  hash_combine(seed, has_positions ? 1 : 0);
  hash_combine(seed, static_cast<std::size_t>(positions_dtype));
  hash_combine(seed, std::hash<std::int64_t>{}(half_dim));
  return seed;
}

// The text is a tuning-database key: it keeps the spelling recorded before the type was renamed.
std::string LongRoPECall::str() const {
  return fmt::format("LongRopeCall(dtype={}, positions={}, half_dim={}, device={})",
                     dtype_name(dtype), has_positions ? dtype_name(positions_dtype) : "none",
                     half_dim, device.str());
}

}  // namespace tileops
