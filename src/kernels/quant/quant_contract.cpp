// The call spec of the quantization family: hash and text.
#include <fmt/format.h>

#include "tileops/kernel/quant.h"

namespace tileops {

std::size_t TokenGroupQuantCall::hash() const {
  std::size_t seed = std::hash<Device>{}(device);
  hash_combine(seed, std::hash<std::int64_t>{}(rows));
  hash_combine(seed, std::hash<std::int64_t>{}(cols));
  hash_combine(seed, std::hash<std::int64_t>{}(group_size));
  hash_combine(seed, std::hash<int>{}(static_cast<int>(dtype)));
  return seed;
}

std::string TokenGroupQuantCall::str() const {
  return fmt::format("TokenGroupQuantCall(rows={}, cols={}, group_size={}, dtype={}, device={})",
                     rows, cols, group_size, dtype_name(dtype), device.str());
}

}  // namespace tileops
