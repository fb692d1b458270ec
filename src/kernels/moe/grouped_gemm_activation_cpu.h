// Internal: the gated activations of the grouped GEMMs' CPU epilogues, in float32 as
// manifest/moe.yaml defines them (shared by grouped_gemm_cpu.cpp and grouped_gemm_fp8_cpu.cpp).
#pragma once

#include <cmath>

namespace tileops::grouped_gemm_cpu {

inline float silu(float g) {
  return g / (1.0f + std::exp(-g));
}

inline float gelu_tanh(float g) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g)));
}

}  // namespace tileops::grouped_gemm_cpu
