// Internal: the CUDA implementation of the paged attention interface (tileops/kernel/attention.h)
// that the op class lists in its kernel_types(): the adapter over launch_attention_paged
// (attention_paged_cuda.h, Hopper only), defined in attention_paged_cuda_adapter.cpp.
#pragma once

#include "tileops/kernel/attention.h"

#if TILEOPS_WITH_CUDA
#include <optional>
#include <string>
#include <vector>

namespace tileops {

/// The split-KV paged attention kernels: float16 / bfloat16, head dims 64, 128 and 256, page
/// sizes 16, 32, 64 and 128, causal (bottom-right), window and softcap, GQA. Every call, decoding,
/// prefill or mixed, takes the same entry; its tile shape and splits come from the call's static
/// shapes (attention_paged_plan), never from device values. Refuses other dtypes, head dims and
/// page sizes.
class AttentionPagedCuda final : public Kernel, public AttentionPagedInterface {
 public:
  using Interface = AttentionPagedInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  static std::optional<std::string> refusal(const AttentionPagedCall& call);
  explicit AttentionPagedCuda(const AttentionPagedCall& call) : call_(call) {}

  void forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const Tensor& cu_seqlens_q, const Tensor& seqused_k, const Tensor& block_table,
               const Tensor& out, const Tensor& lse, const AttentionScores& scores) override;
  std::string config() const override;

 private:
  AttentionPagedCall call_;
};

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
