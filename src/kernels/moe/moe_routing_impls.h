// Internal: the implementations of the MoE routing interface that MoETopKRoutingFwdOp lists: the
// CPU one (every machine; moe_routing_cpu.cpp) and, in CUDA builds, the adapter over the CUDA
// launcher (moe_routing_cuda.h; moe_routing_cuda_adapter.cpp).
#pragma once

#include "tileops/kernel/moe.h"

#if TILEOPS_WITH_CUDA
#include <optional>
#include <vector>
#endif

namespace tileops {

class MoERoutingCpu final : public Kernel, public MoERoutingInterface {
 public:
  using Interface = MoERoutingInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit MoERoutingCpu(const MoERoutingCall& call) : call_(call) {}
  void forward(const Tensor& logits, const Tensor* bias, const Tensor& weights, const Tensor& ids,
               double routed_scaling_factor) override;

 private:
  MoERoutingCall call_;
};

#if TILEOPS_WITH_CUDA

class MoERoutingCuda final : public Kernel, public MoERoutingInterface {
 public:
  using Interface = MoERoutingInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  explicit MoERoutingCuda(const MoERoutingCall& call) : call_(call) {}
  void forward(const Tensor& logits, const Tensor* bias, const Tensor& weights, const Tensor& ids,
               double routed_scaling_factor) override;

 private:
  MoERoutingCall call_;
};

#endif  // TILEOPS_WITH_CUDA

}  // namespace tileops
