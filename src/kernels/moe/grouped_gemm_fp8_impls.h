// Internal: the CPU implementations of the FP8 block-scaled grouped GEMM, contiguous and masked
// layouts (grouped_gemm_fp8_cpu.cpp). No CUDA implementation yet: the ops list only these.
#pragma once

#include "tileops/kernel/moe.h"

namespace tileops {

class GroupedGemmFP8Cpu final : public Kernel, public GroupedGemmFP8Interface {
 public:
  using Interface = GroupedGemmFP8Interface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit GroupedGemmFP8Cpu(const GroupedGemmFP8Call& call) : call_(call) {}
  void forward(const Tensor& a, const Tensor& a_scales, const Tensor& offsets, const Tensor& b,
               const Tensor& b_scales, const Tensor& c) override;

 private:
  GroupedGemmFP8Call call_;
};

class GroupedGemmFP8MaskedCpu final : public Kernel, public GroupedGemmFP8MaskedInterface {
 public:
  using Interface = GroupedGemmFP8MaskedInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit GroupedGemmFP8MaskedCpu(const GroupedGemmFP8Call& call) : call_(call) {}
  void forward(const Tensor& a, const Tensor& a_scales, const Tensor& counts, const Tensor& b,
               const Tensor& b_scales, const Tensor& c) override;

 private:
  GroupedGemmFP8Call call_;
};

}  // namespace tileops
