// Internal: the implementations of the RMSNorm kernel interfaces that the op classes list: the
// CPU one (every machine) and, in CUDA builds, the adapter over the CUDA launcher (Hopper).
// rms_norm_cpu.cpp and rms_norm_cuda_adapter.cpp define them.
#pragma once

#include "tileops/kernel/norm.h"

#if TILEOPS_WITH_CUDA
#include <mutex>
#include <optional>
#include <string>
#include "kernels/common/tuned_launch.h"
#include "kernels/norm/rms_norm_cuda.h"
#endif

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

#if TILEOPS_WITH_CUDA

class RMSNormCuda final : public Kernel, public RMSNormInterface {
 public:
  using Interface = RMSNormInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  static std::optional<std::string> refusal(const RMSNormCall& call);
  explicit RMSNormCuda(const RMSNormCall& call);

  void forward(const Tensor& x, const Tensor* residual, const Tensor& weight, const Tensor& y,
               double eps) override;
  std::string config() const override;
  std::vector<std::string> tuning_space() const override;

 private:
  cuda_kernels::RMSNormConfig default_config() const;
  cuda_kernels::RMSNormConfig tune(const cuda_kernels::RMSNormArgs& args, void* stream) const;

  RMSNormCall call_;
  // One key: an entry serves one call spec (rows, cols, dtype, fused).
  TunedConfigs<int, cuda_kernels::RMSNormConfig> configs_;
  const cuda_kernels::RMSNormConfig fallback_;  ///< for arguments a staged config cannot serve
  mutable std::mutex mutex_;                    ///< guards the two fields below
  bool last_call_fallback_ = false;             ///< the last call ran fallback_, for last_refusal_
  std::string last_refusal_;
};

#endif  // TILEOPS_WITH_CUDA

}  // namespace tileops
