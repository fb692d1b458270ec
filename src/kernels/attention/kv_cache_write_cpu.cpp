// The paged KV-cache write on the CPU: every slot checked first (nothing is written when one is
// outside the cache), then each token's key and value rows copied to their cache rows, in
// parallel over the tokens. Rows are copied as bytes: no dtype dispatch.
#include <fmt/format.h>

#include <cstdint>
#include <cstring>

#include "kernels/attention/attention_impls.h"
#include "kernels/cpu/parallel.h"
#include "tileops/core/error.h"

namespace tileops {

void KVCacheWriteCpu::forward(const Tensor& key, const Tensor& value, const Tensor& k_cache,
                              const Tensor& v_cache, const Tensor& slot_mapping) {
  const std::int64_t tokens = key.size(0);
  const std::int64_t slots = k_cache.size(0) * k_cache.size(1);
  const auto* slot = slot_mapping.data<std::int64_t>();
  for (std::int64_t t = 0; t < tokens; ++t) {
    if (slot[t] >= slots) {
      throw SignatureError(
          fmt::format("KVCacheWriteFwdOp: slot_mapping[{}] = {} is outside the cache's {} slots "
                      "(num_blocks {} x page_size {}; a negative slot is skipped)",
                      t, slot[t], slots, k_cache.size(0), k_cache.size(1)));
    }
  }
  const auto row_bytes =
      static_cast<std::size_t>(call_.heads_kv * call_.head_dim) * element_size(call_.dtype);
  const auto* kp = static_cast<const std::byte*>(key.data_ptr());
  const auto* vp = static_cast<const std::byte*>(value.data_ptr());
  auto* kc = static_cast<std::byte*>(k_cache.data_ptr());
  auto* vc = static_cast<std::byte*>(v_cache.data_ptr());
  const auto work = tokens * static_cast<std::int64_t>(row_bytes);
  cpu::parallel_for(tokens, work, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) {
      if (slot[t] < 0) continue;
      const auto src = static_cast<std::size_t>(t) * row_bytes;
      const auto dst = static_cast<std::size_t>(slot[t]) * row_bytes;
      std::memcpy(kc + dst, kp + src, row_bytes);
      std::memcpy(vc + dst, vp + src, row_bytes);
    }
  });
}

}  // namespace tileops
