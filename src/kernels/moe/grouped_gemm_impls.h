// Internal: the implementations of the bf16 / fp16 grouped GEMM interface that
// MoEGroupedGemmFwdOp lists: the CPU one (grouped_gemm_cpu.cpp; it checks the offsets) and, in CUDA
// builds, the tuned adapter over the CUDA launcher (grouped_gemm_cuda.h;
// grouped_gemm_cuda_adapter.cpp).
#pragma once

#include "tileops/kernel/moe.h"

#if TILEOPS_WITH_CUDA
#include <optional>
#include <string>
#include <vector>

#include "kernels/common/tuned_launch.h"
#include "kernels/moe/grouped_gemm_cuda.h"
#endif

namespace tileops {

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

#if TILEOPS_WITH_CUDA

class GroupedGemmCuda final : public Kernel, public GroupedGemmInterface {
 public:
  using Interface = GroupedGemmInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  explicit GroupedGemmCuda(const GroupedGemmCall& call);
  void forward(const Tensor& a, const Tensor& offsets, const Tensor& b, const Tensor& c) override;
  std::string config() const override;
  std::vector<std::string> tuning_space() const override;

 private:
  cuda_kernels::GroupedGemmArgs shape_args() const;

  GroupedGemmCall call_;
  // One key: an entry serves one call spec, whose shape the configuration depends on.
  TunedConfigs<int, cuda_kernels::GroupedGemmConfig> configs_;
};

#endif  // TILEOPS_WITH_CUDA

}  // namespace tileops
