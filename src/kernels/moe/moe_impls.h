// Internal: the implementations of the MoE kernel interfaces that the op classes list: the
// CPU one (every machine) and, in CUDA builds, the adapter over the CUDA launcher (Hopper).
// moe_cpu.cpp and moe_cuda_adapter.cpp define them. The CPU ones check the values they depend on
// (ids, offsets, indices) and raise SignatureError for bad ones.
#pragma once

#include <string_view>

#include "tileops/kernel/moe.h"

#if TILEOPS_WITH_CUDA
#include <mutex>
#include <optional>
#include <string>
#include "kernels/moe/moe_cuda.h"
#include "kernels/tuned_launch.h"
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

class MoEPrePermuteCpu final : public Kernel, public MoEPrePermuteInterface {
 public:
  using Interface = MoEPrePermuteInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit MoEPrePermuteCpu(const MoEPermuteCall& call) : call_(call) {}
  /// For another op built on this kernel: its errors name `op_name`.
  MoEPrePermuteCpu(const MoEPermuteCall& call, std::string_view op_name)
      : call_(call), op_name_(op_name) {}
  void forward(const Tensor& x, const Tensor& ids, const Tensor* map, const Tensor& permuted,
               const Tensor& offsets, const Tensor& inverse) override;

 private:
  MoEPermuteCall call_;
  std::string_view op_name_ = "MoEPrePermuteFwdOp";
};

/// The CPU pre-permute, then the CPU per-token-group quantization of its rows
/// (moe_pre_permute_quant_cpu.cpp): the two kernels the op's values are defined by.
class MoEPrePermuteQuantCpu final : public Kernel, public MoEPrePermuteQuantInterface {
 public:
  using Interface = MoEPrePermuteQuantInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit MoEPrePermuteQuantCpu(const MoEPrePermuteQuantCall& call) : call_(call) {}
  /// For another op built on this kernel: its errors name `op_name`.
  MoEPrePermuteQuantCpu(const MoEPrePermuteQuantCall& call, std::string_view op_name)
      : call_(call), op_name_(op_name) {}
  void forward(const Tensor& x, const Tensor& ids, const Tensor* map, const Tensor& q,
               const Tensor& scales, const Tensor& offsets, const Tensor& inverse,
               double eps) override;

 private:
  MoEPrePermuteQuantCall call_;
  std::string_view op_name_ = "MoEPrePermuteQuantFP8FwdOp";
};

/// The contiguous CPU kernel above into scratches, then each expert's rows moved to its block
/// (moe_pre_permute_quant_cpu.cpp): the same rows bit for bit; a count above max_m raises.
class MoEPrePermuteQuantMaskedCpu final : public Kernel, public MoEPrePermuteQuantMaskedInterface {
 public:
  using Interface = MoEPrePermuteQuantMaskedInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit MoEPrePermuteQuantMaskedCpu(const MoEPrePermuteQuantMaskedCall& call) : call_(call) {}
  void forward(const Tensor& x, const Tensor& ids, const Tensor* map, const Tensor& a,
               const Tensor& a_scales, const Tensor& counts, const Tensor& inverse,
               double eps) override;

 private:
  MoEPrePermuteQuantMaskedCall call_;
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

class MoEPrePermuteCuda final : public Kernel, public MoEPrePermuteInterface {
 public:
  using Interface = MoEPrePermuteInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  explicit MoEPrePermuteCuda(const MoEPermuteCall& call) : call_(call) {}
  void forward(const Tensor& x, const Tensor& ids, const Tensor* map, const Tensor& permuted,
               const Tensor& offsets, const Tensor& inverse) override;

 private:
  MoEPermuteCall call_;
};

/// The fused kernel: launch_moe_pre_permute with permuted_q (one pass, no bf16 copy). Refuses
/// what its vector layout cannot take (moe_cuda.h); the unfused one below serves those, and
/// this one wins where both serve.
class MoEPrePermuteQuantCuda final : public Kernel, public MoEPrePermuteQuantInterface {
 public:
  using Interface = MoEPrePermuteQuantInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  static std::optional<std::string> refusal(const MoEPrePermuteQuantCall& call);
  static std::vector<std::string> preferred_over() {
    return {"moe_pre_permute_quant_fp8_unfused_cuda"};
  }
  explicit MoEPrePermuteQuantCuda(const MoEPrePermuteQuantCall& call) : call_(call) {}
  void forward(const Tensor& x, const Tensor& ids, const Tensor* map, const Tensor& q,
               const Tensor& scales, const Tensor& offsets, const Tensor& inverse,
               double eps) override;

 private:
  MoEPrePermuteQuantCall call_;
};

/// The CUDA pre-permute into a scratch of x's dtype, then the CUDA quantization (which takes
/// every group size): the same values as the fused kernel, for the calls it refuses.
class MoEPrePermuteQuantUnfusedCuda final : public Kernel, public MoEPrePermuteQuantInterface {
 public:
  using Interface = MoEPrePermuteQuantInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  explicit MoEPrePermuteQuantUnfusedCuda(const MoEPrePermuteQuantCall& call) : call_(call) {}
  void forward(const Tensor& x, const Tensor& ids, const Tensor* map, const Tensor& q,
               const Tensor& scales, const Tensor& offsets, const Tensor& inverse,
               double eps) override;

 private:
  MoEPrePermuteQuantCall call_;
};

/// The ranking kernel writing the masked layout's counts and inverse, then the fused kernel's
/// quantizing gather into the experts' blocks (launch_moe_pre_permute with masked_max_m). Refuses
/// what the fused kernel refuses; no unfused fallback (those group sizes run on the CPU).
class MoEPrePermuteQuantMaskedCuda final : public Kernel, public MoEPrePermuteQuantMaskedInterface {
 public:
  using Interface = MoEPrePermuteQuantMaskedInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  static std::optional<std::string> refusal(const MoEPrePermuteQuantMaskedCall& call);
  explicit MoEPrePermuteQuantMaskedCuda(const MoEPrePermuteQuantMaskedCall& call) : call_(call) {}
  void forward(const Tensor& x, const Tensor& ids, const Tensor* map, const Tensor& a,
               const Tensor& a_scales, const Tensor& counts, const Tensor& inverse,
               double eps) override;

 private:
  MoEPrePermuteQuantMaskedCall call_;
};

class MoEPostPermuteCuda final : public Kernel, public MoEPostPermuteInterface {
 public:
  using Interface = MoEPostPermuteInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  explicit MoEPostPermuteCuda(const MoEPermuteCall& call) : call_(call) {}
  void forward(const Tensor& expert_out, const Tensor& weights, const Tensor& inverse,
               const Tensor& y, double scale) override;

 private:
  MoEPermuteCall call_;
};

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
