// Internal: the CUDA implementations of the varlen attention interface (tileops/kernel/attention.h)
// that the op class lists in its kernel_types(): the adapters over launch_attention_varlen
// (attention_varlen_cuda.h) and over the paged split kernel with contiguous keys
// (attention_paged_cuda.h), Hopper only, defined in attention_varlen_cuda_adapter.cpp and
// attention_varlen_split_cuda_adapter.cpp.
#pragma once

#include "tileops/kernel/attention.h"

#if TILEOPS_WITH_CUDA
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention/attention_varlen_cuda.h"
#include "kernels/common/tuned_launch.h"

namespace tileops {

/// The FlashAttention-3-style Hopper kernel: float16 / bfloat16, head dims 64, 128 and 256,
/// causal (bottom-right), window and softcap, GQA. Refuses other dtypes and head dims.
class AttentionVarlenCuda final : public Kernel, public AttentionVarlenInterface {
 public:
  using Interface = AttentionVarlenInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  static std::optional<std::string> refusal(const AttentionVarlenCall& call);
  explicit AttentionVarlenCuda(const AttentionVarlenCall& call) : call_(call) {}

  void forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens_q,
               const Tensor& cu_seqlens_k, const Tensor& out, const Tensor& lse,
               const AttentionScores& scores) override;
  std::string config() const override;
  std::vector<std::string> tuning_space() const override;

 private:
  using Shape = std::tuple<std::int64_t, std::int64_t, std::int64_t>;  // total_q, total_k, batch

  AttentionVarlenCall call_;
  TunedConfigs<Shape, cuda_kernels::AttentionVarlenConfig> configs_;
};

/// Decode-shaped calls (at most kAttentionPagedDecodeRows query rows per sequence, from the call
/// spec's queries_per_sequence) on the paged op's split-KV kernel reading the contiguous K / V
/// (AttentionPagedArgs::cu_seqlens_k): a KV head's query heads share each K / V tile and the keys
/// are split over the GPU, where a 128-query tile of one head would compute mostly padding over
/// all of a sequence's keys. The same dtypes, head dims and masks as AttentionVarlenCuda,
/// preferred over it where both serve; its plan comes from static shapes only (CUDA graphs replay
/// when cu_seqlens change). Refuses prefill-shaped calls.
class AttentionVarlenSplitCuda final : public Kernel, public AttentionVarlenInterface {
 public:
  using Interface = AttentionVarlenInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  static std::optional<std::string> refusal(const AttentionVarlenCall& call);
  static std::vector<std::string> preferred_over() { return {"attention_varlen_cuda"}; }
  explicit AttentionVarlenSplitCuda(const AttentionVarlenCall& call) : call_(call) {}

  void forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens_q,
               const Tensor& cu_seqlens_k, const Tensor& out, const Tensor& lse,
               const AttentionScores& scores) override;
  std::string config() const override;

 private:
  AttentionVarlenCall call_;
};

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
