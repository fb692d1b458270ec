// Internal: the implementations of the FP8 block-scaled grouped GEMM, contiguous and masked
// layouts, and of the dense FP8 GEMM (FP8BlockScaledGemmFwdOp, one group of every row): the CPU
// ones (grouped_gemm_fp8_cpu.cpp) and, in CUDA builds, the adapters over the Hopper kernel
// (grouped_gemm_fp8_cuda_adapter.cpp), which refuse what the kernel cannot compute.
#pragma once

#include "tileops/kernel/gemm.h"
#include "tileops/kernel/moe.h"

#if TILEOPS_WITH_CUDA
#include <optional>
#include <string>

#include "kernels/common/tuned_launch.h"
#include "kernels/moe/grouped_gemm_fp8_cuda.h"
#endif

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

/// The dense GEMM: the grouped one's CPU implementation over one group of every row.
class FP8BlockScaledGemmCpu final : public Kernel, public FP8BlockScaledGemmInterface {
 public:
  using Interface = FP8BlockScaledGemmInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit FP8BlockScaledGemmCpu(const GroupedGemmFP8Call& call) : call_(call) {}
  void forward(const Tensor& a, const Tensor& a_scales, const Tensor& b, const Tensor& b_scales,
               const Tensor& c) override;

 private:
  GroupedGemmFP8Call call_;
};

#if TILEOPS_WITH_CUDA

/// Both layouts over launch_grouped_gemm_fp8 (the call's max_m selects the layout).
class GroupedGemmFP8CudaLaunch {
 public:
  explicit GroupedGemmFP8CudaLaunch(const GroupedGemmFP8Call& call);
  /// Why the kernel cannot compute `call` (block sizes, gated N), or nullopt.
  static std::optional<std::string> refusal(const GroupedGemmFP8Call& call);
  void run(const Tensor& a, const Tensor& a_scales, const Tensor& offsets, const Tensor& b,
           const Tensor& b_scales, const Tensor& c, bool tune);
  std::string config() const { return configs_.describe(); }
  std::vector<std::string> tuning_space() const;

 private:
  GroupedGemmFP8Call call_;
  TunedConfigs<int, cuda_kernels::GroupedGemmFP8CudaConfig> configs_;
};

class GroupedGemmFP8Cuda final : public Kernel, public GroupedGemmFP8Interface {
 public:
  using Interface = GroupedGemmFP8Interface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  static std::optional<std::string> refusal(const GroupedGemmFP8Call& call) {
    return GroupedGemmFP8CudaLaunch::refusal(call);
  }
  explicit GroupedGemmFP8Cuda(const GroupedGemmFP8Call& call) : launch_(call) {}
  void forward(const Tensor& a, const Tensor& a_scales, const Tensor& offsets, const Tensor& b,
               const Tensor& b_scales, const Tensor& c) override {
    launch_.run(a, a_scales, offsets, b, b_scales, c, tune_requested());
  }
  std::string config() const override { return launch_.config(); }
  std::vector<std::string> tuning_space() const override { return launch_.tuning_space(); }

 private:
  GroupedGemmFP8CudaLaunch launch_;
};

class GroupedGemmFP8MaskedCuda final : public Kernel, public GroupedGemmFP8MaskedInterface {
 public:
  using Interface = GroupedGemmFP8MaskedInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  static std::optional<std::string> refusal(const GroupedGemmFP8Call& call) {
    return GroupedGemmFP8CudaLaunch::refusal(call);
  }
  explicit GroupedGemmFP8MaskedCuda(const GroupedGemmFP8Call& call) : launch_(call) {}
  void forward(const Tensor& a, const Tensor& a_scales, const Tensor& counts, const Tensor& b,
               const Tensor& b_scales, const Tensor& c) override {
    launch_.run(a, a_scales, counts, b, b_scales, c, tune_requested());
  }
  std::string config() const override { return launch_.config(); }
  std::vector<std::string> tuning_space() const override { return launch_.tuning_space(); }

 private:
  GroupedGemmFP8CudaLaunch launch_;
};

/// The dense GEMM on the contiguous layout's kernel: one expert whose offsets {0, rows} live on
/// the device from construction (no copy per call, so a call can be captured in a CUDA graph).
class FP8BlockScaledGemmCuda final : public Kernel, public FP8BlockScaledGemmInterface {
 public:
  using Interface = FP8BlockScaledGemmInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  static std::optional<std::string> refusal(const GroupedGemmFP8Call& call) {
    return GroupedGemmFP8CudaLaunch::refusal(call);
  }
  explicit FP8BlockScaledGemmCuda(const GroupedGemmFP8Call& call);
  void forward(const Tensor& a, const Tensor& a_scales, const Tensor& b, const Tensor& b_scales,
               const Tensor& c) override {
    launch_.run(a, a_scales, offsets_, b, b_scales, c, tune_requested());
  }
  std::string config() const override { return launch_.config(); }
  std::vector<std::string> tuning_space() const override { return launch_.tuning_space(); }

 private:
  GroupedGemmFP8CudaLaunch launch_;
  Tensor offsets_;  // int32 {0, rows} on the call's device
};

#endif  // TILEOPS_WITH_CUDA

}  // namespace tileops
