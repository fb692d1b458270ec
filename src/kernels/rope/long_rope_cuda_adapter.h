// Internal: the CUDA implementation of the long_rope interface (Hopper, sm_90a). Wraps the
// launcher of long_rope_cuda.cu; exposes its configuration and tunes among its candidates.
#pragma once

#if TILEOPS_WITH_CUDA

#include <optional>
#include <tuple>

#include "kernels/rope/long_rope_cuda.h"
#include "kernels/tuned_launch.h"
#include "tileops/kernel/rope.h"

namespace tileops {

class LongRoPECuda final : public Kernel, public LongRoPEInterface {
 public:
  using Interface = LongRoPEInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  static std::optional<std::string> refusal(const LongRoPECall& call);
  explicit LongRoPECuda(const LongRoPECall& call) : call_(call) {}

  void forward(const Tensor& x, const Tensor* positions, const Tensor& inv_freq, const Tensor& y,
               std::int64_t batch, std::int64_t seq, std::int64_t heads,
               double attention_scaling) override;
  std::string config() const override;
  std::vector<std::string> tuning_space() const override;

 private:
  using Shape = std::tuple<std::int64_t, std::int64_t, std::int64_t>;  // batch, seq, heads

  LongRoPECall call_;
  TunedConfigs<Shape, cuda_kernels::LongRoPEConfig> configs_;
};

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
