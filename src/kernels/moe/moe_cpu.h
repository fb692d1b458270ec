// Internal: the CPU implementations of the MoE kernel interfaces (the general ones). Each one
// checks the values it depends on (ids, offsets, indices) and raises SignatureError for bad ones.
#pragma once

#include "tileops/kernel/moe.h"

namespace tileops {

class MoeRoutingCpu final : public Kernel, public MoeRoutingInterface {
 public:
  using Interface = MoeRoutingInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit MoeRoutingCpu(const MoeRoutingCall& call) : call_(call) {}
  void forward(const Tensor& logits, const Tensor* bias, const Tensor& weights, const Tensor& ids,
               double routed_scaling_factor) override;

 private:
  MoeRoutingCall call_;
};

class MoePrePermuteCpu final : public Kernel, public MoePrePermuteInterface {
 public:
  using Interface = MoePrePermuteInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit MoePrePermuteCpu(const MoePermuteCall& call) : call_(call) {}
  void forward(const Tensor& x, const Tensor& ids, const Tensor* map, const Tensor& permuted,
               const Tensor& offsets, const Tensor& inverse) override;

 private:
  MoePermuteCall call_;
};

class MoePostPermuteCpu final : public Kernel, public MoePostPermuteInterface {
 public:
  using Interface = MoePostPermuteInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit MoePostPermuteCpu(const MoePermuteCall& call) : call_(call) {}
  void forward(const Tensor& expert_out, const Tensor& weights, const Tensor& inverse,
               const Tensor& y, double scale) override;

 private:
  MoePermuteCall call_;
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
