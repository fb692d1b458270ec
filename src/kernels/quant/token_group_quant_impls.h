// Internal: the CPU implementation of per-token-group FP8 quantization.
#pragma once

#include "tileops/kernel/quant.h"

namespace tileops {

class TokenGroupQuantCpu final : public Kernel, public TokenGroupQuantInterface {
 public:
  using Interface = TokenGroupQuantInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit TokenGroupQuantCpu(const TokenGroupQuantCall& call) : call_(call) {}
  void forward(const Tensor& x, const Tensor& q, const Tensor& scales, double eps) override;

 private:
  TokenGroupQuantCall call_;
};

}  // namespace tileops
