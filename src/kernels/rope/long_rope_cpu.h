// Internal: the CPU implementation of the long_rope interface (the general one).
#pragma once

#include "tileops/kernel/rope.h"

namespace tileops {

class LongRoPECpu final : public Kernel, public LongRoPEInterface {
 public:
  using Interface = LongRoPEInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit LongRoPECpu(const LongRoPECall& call) : call_(call) {}
  void forward(const Tensor& x, const Tensor* positions, const Tensor& inv_freq, const Tensor& y,
               std::int64_t batch, std::int64_t seq, std::int64_t heads,
               double attention_scaling) override;

 private:
  LongRoPECall call_;
};

/// The rotation angle of position p for frequency f, reduced to [-pi, pi] in double precision.
double long_rope_reduced_angle(double position, double inv_freq);

}  // namespace tileops
