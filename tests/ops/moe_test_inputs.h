// Inputs of the MoE tests (CPU and GPU): distinct ids per token, offsets from per-expert row
// counts, and expert weights scaled by 1/sqrt(fan-in).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "tileops/core/tensor.h"

namespace tileops::moe_test {

/// [tokens, top_k] int32 ids, distinct per token, in [0, experts).
inline Tensor distinct_ids(std::int64_t tokens, std::int64_t top_k, std::int64_t experts,
                           std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor ids = Tensor::empty({tokens, top_k}, DType::int32);
  std::vector<std::int32_t> pool(static_cast<std::size_t>(experts));
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    for (std::int64_t k = 0; k < top_k; ++k) ids.set_at({t, k}, pool[k]);
  }
  return ids;
}

/// A 1-d int32 tensor holding `v`.
inline Tensor int_tensor(const std::vector<std::int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(v.size())}, DType::int32);
  std::copy(v.begin(), v.end(), t.data<std::int32_t>());
  return t;
}

/// Offsets [E + 1] from per-expert row counts.
inline Tensor offsets_of(const std::vector<std::int32_t>& counts) {
  std::vector<std::int32_t> off(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), off.begin() + 1);
  return int_tensor(off);
}

/// Expert weights: randn / sqrt(last dim).
inline Tensor weight(Sizes sizes, DType dtype, std::uint64_t seed) {
  const double fan_in = static_cast<double>(sizes.back());
  return Tensor::randn(std::move(sizes), dtype, seed, Device::cpu(), 0.0, 1.0 / std::sqrt(fan_in));
}

}  // namespace tileops::moe_test
