// Internal: the CPU and CUDA implementations of per-token-group FP8 quantization.
#pragma once

#include <optional>
#include <vector>

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

#if TILEOPS_WITH_CUDA

/// The CUDA kernel (token_group_quant_cuda.cu): the same codes and scales as the CPU, bit for bit.
class TokenGroupQuantCuda final : public Kernel, public TokenGroupQuantInterface {
 public:
  using Interface = TokenGroupQuantInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  explicit TokenGroupQuantCuda(const TokenGroupQuantCall& call) : call_(call) {}
  void forward(const Tensor& x, const Tensor& q, const Tensor& scales, double eps) override;

 private:
  TokenGroupQuantCall call_;
};

#endif

}  // namespace tileops
