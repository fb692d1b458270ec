// Internal: the CPU implementation of the rms_norm interface (the general one).
#pragma once

#include "tileops/kernel/norm.h"

namespace tileops {

class RMSNormCpu final : public Kernel, public RMSNormInterface {
 public:
  using Interface = RMSNormInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit RMSNormCpu(const RMSNormCall& call) : call_(call) {}
  void forward(const Tensor& x, const Tensor* residual, const Tensor& weight, const Tensor& y,
               double eps) override;

 private:
  RMSNormCall call_;
};

}  // namespace tileops
