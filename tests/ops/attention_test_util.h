// Helpers of the attention tests (CPU and GPU): offsets, slot mappings and the visibility rule
// of the contract written out independently of the implementations.
#pragma once

#include <cstdint>
#include <vector>

#include "tileops/core/tensor.h"

namespace tileops::attention_test {

/// An int32 tensor of the given values (cu_seqlens).
inline Tensor int32_values(const std::vector<std::int32_t>& values, Device device = Device::cpu()) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(values.size())}, DType::int32);
  for (std::size_t i = 0; i < values.size(); ++i) t.data<std::int32_t>()[i] = values[i];
  return t.to(device);
}

/// An int64 tensor of the given values (slot mappings).
inline Tensor int64_values(const std::vector<std::int64_t>& values, Device device = Device::cpu()) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(values.size())}, DType::int64);
  for (std::size_t i = 0; i < values.size(); ++i) t.data<std::int64_t>()[i] = values[i];
  return t.to(device);
}

/// The contract's rule, as issue 28 states it: query i of sq sees key j of sk.
inline bool sees(std::int64_t i, std::int64_t j, std::int64_t sq, std::int64_t sk, bool causal,
                 std::int64_t window_left) {
  return (!causal || j <= i + sk - sq) && (window_left < 0 || j >= i + sk - sq - window_left);
}

/// Offsets [0, l0, l0 + l1, ...] of the given lengths.
inline std::vector<std::int32_t> offsets_of(const std::vector<std::int32_t>& lengths) {
  std::vector<std::int32_t> cu{0};
  for (const std::int32_t l : lengths) cu.push_back(cu.back() + l);
  return cu;
}

}  // namespace tileops::attention_test
