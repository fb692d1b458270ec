// Internal: the CPU implementation of the rms_norm interface (the general one).
#pragma once

#include "tileops/kernel/norm.h"

namespace tileops {

class RmsNormCpu final : public Kernel, public RmsNormInterface {
 public:
  using Interface = RmsNormInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit RmsNormCpu(const RmsNormCall& call) : call_(call) {}
  void forward(const Tensor& x, const Tensor* residual, const Tensor& weight, const Tensor& y,
               double eps) override;

 private:
  RmsNormCall call_;
};

}  // namespace tileops
