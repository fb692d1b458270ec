// Internal: the CUDA implementations of the paged attention interface
// (tileops/kernel/attention.h) that the op class lists in its kernel_types(): the adapters over
// launch_attention_paged and launch_attention_paged_tma (attention_paged_cuda.h, Hopper only),
// defined in attention_paged_cuda_adapter.cpp and attention_paged_tma_cuda_adapter.cpp.
#pragma once

#include "tileops/kernel/attention.h"

#if TILEOPS_WITH_CUDA
#include <optional>
#include <string>
#include <vector>

#include "kernels/attention/attention_paged_cuda.h"

namespace tileops {

namespace detail {
/// The launch arguments of a paged attention call on these tensors (both CUDA adapters).
cuda_kernels::AttentionPagedArgs attention_paged_args(
    const AttentionPagedCall& call, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
    const Tensor& cu_seqlens_q, const Tensor& seqused_k, const Tensor& block_table,
    const Tensor& out, const Tensor& lse, const AttentionScores& scores);
/// Plans and enqueues the split-KV kernel on `device`'s current stream, with the splits'
/// workspace this call's own (the paged and the varlen split adapters).
void launch_attention_split(cuda_kernels::AttentionPagedArgs args, int device);
}  // namespace detail

/// The split-KV paged attention kernels: float16 / bfloat16, head dims 64, 128 and 256, page
/// sizes 16, 32, 64 and 128, causal (bottom-right), window and softcap, GQA. Serves every call,
/// decoding, prefill or mixed (AttentionPagedTmaCuda wins the prefill-shaped ones); its tile shape
/// and splits come from the call's static shapes (attention_paged_plan), never from device
/// values. Refuses other dtypes, head dims and page sizes.
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

/// The varlen kernel's TMA pipeline reading K/V pages through the block table
/// (launch_attention_paged_tma): the same dtypes, head dims, page sizes and masks as
/// AttentionPagedCuda, preferred over it where both serve. Refuses, besides what that one refuses,
/// decode-shaped calls (at most kAttentionPagedDecodeRows query rows per sequence, from the call
/// spec's queries_per_sequence): a tile of 128 queries of one head would compute mostly padding
/// there, where the split kernel packs a KV head's query heads and splits the keys.
class AttentionPagedTmaCuda final : public Kernel, public AttentionPagedInterface {
 public:
  using Interface = AttentionPagedInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  static std::optional<std::string> refusal(const AttentionPagedCall& call);
  static std::vector<std::string> preferred_over() { return {"attention_paged_cuda"}; }
  explicit AttentionPagedTmaCuda(const AttentionPagedCall& call) : call_(call) {}

  void forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const Tensor& cu_seqlens_q, const Tensor& seqused_k, const Tensor& block_table,
               const Tensor& out, const Tensor& lse, const AttentionScores& scores) override;
  std::string config() const override;

 private:
  AttentionPagedCall call_;
};

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
