// Internal: the CPU implementations of the MoE kernel interfaces (the general ones). Each one
// checks the values it depends on (ids, offsets, indices) and raises SignatureError for bad ones.
#pragma once

#include "tileops/kernel/moe.h"

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

class MoEPrePermuteCpu final : public Kernel, public MoEPrePermuteInterface {
 public:
  using Interface = MoEPrePermuteInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit MoEPrePermuteCpu(const MoEPermuteCall& call) : call_(call) {}
  void forward(const Tensor& x, const Tensor& ids, const Tensor* map, const Tensor& permuted,
               const Tensor& offsets, const Tensor& inverse) override;

 private:
  MoEPermuteCall call_;
};

class MoEPostPermuteCpu final : public Kernel, public MoEPostPermuteInterface {
 public:
  using Interface = MoEPostPermuteInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit MoEPostPermuteCpu(const MoEPermuteCall& call) : call_(call) {}
  void forward(const Tensor& expert_out, const Tensor& weights, const Tensor& inverse,
               const Tensor& y, double scale) override;

 private:
  MoEPermuteCall call_;
};

class GroupedGemmCpu final : public Kernel, public GroupedGemmInterface {
 public:
  using Interface = GroupedGemmInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit GroupedGemmCpu(const GroupedGemmCall& call) : call_(call) {}
  void forward(const Tensor& a, const Tensor& offsets, const Tensor& b, const Tensor& c) override;

 private:
  GroupedGemmCall call_;
};

}  // namespace tileops
