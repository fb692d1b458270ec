// Internal: the implementations of the LongRoPE kernel interfaces that the op classes list: the
// CPU one (every machine) and, in CUDA builds, the adapter over the CUDA launcher (Hopper).
// long_rope_cpu.cpp and long_rope_cuda_adapter.cpp define them.
#pragma once

#include "tileops/kernel/rope.h"

#if TILEOPS_WITH_CUDA
#include <optional>
#include <tuple>
#include "kernels/common/tuned_launch.h"
#include "kernels/rope/long_rope_cuda.h"
#endif

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

#if TILEOPS_WITH_CUDA

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

#endif  // TILEOPS_WITH_CUDA

}  // namespace tileops
