// Internal: the CUDA implementation of the rms_norm interface (Hopper, sm_90a). Wraps the
// launcher of rms_norm_launch_cuda.cu; exposes its configuration and tunes among its candidates.
#pragma once

#if TILEOPS_WITH_CUDA

#include <mutex>
#include <optional>
#include <string>

#include "kernels/norm/rms_norm_cuda.h"
#include "kernels/tuned_launch.h"
#include "tileops/kernel/norm.h"

namespace tileops {

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

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
