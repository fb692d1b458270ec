// Internal: the implementations of the pre-permute interfaces (plain, quantizing, quantizing into
// the masked layout) and the post-permute interface that the MoE permute ops list: the CPU ones
// (moe_permute_cpu.cpp, moe_permute_quant_cpu.cpp) and, in CUDA builds, the adapters over the CUDA
// launchers (moe_permute_cuda.h; moe_permute_cuda_adapter.cpp). The CPU ones check the values they
// depend on (ids, map, inverse) and raise SignatureError for bad ones.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tileops/kernel/moe.h"

#if TILEOPS_WITH_CUDA
#include <optional>
#include <string>
#endif

namespace tileops {

/// The pre-permute's rows on the CPU (moe_permute_cpu.cpp): checks the ids and the map (errors
/// name `op_name`), writes offsets and inverse, and returns the source token of each of the first
/// offsets[num_experts] rows; the rows after them are zero rows.
std::vector<std::int64_t> pre_permute_rows_cpu(const MoEPermuteCall& call, std::string_view op_name,
                                               const Tensor& ids, const Tensor* map,
                                               const Tensor& offsets, const Tensor& inverse);

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

/// The CPU pre-permute's row order, each token's row quantized once by the CPU per-token-group
/// quantization and the codes and scales gathered in that order (moe_permute_quant_cpu.cpp): the
/// values of the two kernels the op's values are defined by, quantization being per row.
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
/// (moe_permute_quant_cpu.cpp): the same rows bit for bit; a count above max_m raises.
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

#if TILEOPS_WITH_CUDA

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
/// what its vector layout cannot take (moe_permute_cuda.h); the unfused one below serves those, and
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

#endif  // TILEOPS_WITH_CUDA

}  // namespace tileops
