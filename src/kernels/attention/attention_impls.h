// Internal: the implementations of the attention kernel interfaces that the op classes list: the
// CPU ones (every machine) and, in CUDA builds, the adapters over the CUDA launchers of the
// KV-cache write and the state merge (Hopper). attention_varlen_cpu.cpp, attention_paged_cpu.cpp,
// kv_cache_write_cpu.cpp, attention_merge_cpu.cpp and the *_cuda_adapter.cpp files define them.
// The Hopper attention kernels' adapters have their own headers (attention_varlen_cuda_impls.h,
// attention_paged_cuda_impls.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tileops/kernel/attention.h"

namespace tileops {

class AttentionVarlenCpu final : public Kernel, public AttentionVarlenInterface {
 public:
  using Interface = AttentionVarlenInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit AttentionVarlenCpu(const AttentionVarlenCall& call) : call_(call) {}
  /// Checks the cu_seqlens contents first (SignatureError naming the entry).
  void forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens_q,
               const Tensor& cu_seqlens_k, const Tensor& out, const Tensor& lse,
               const AttentionScores& scores) override;

 private:
  AttentionVarlenCall call_;
};

class AttentionPagedCpu final : public Kernel, public AttentionPagedInterface {
 public:
  using Interface = AttentionPagedInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit AttentionPagedCpu(const AttentionPagedCall& call) : call_(call) {}
  /// Checks cu_seqlens_q, seqused_k and the used block table entries first (SignatureError
  /// naming the entry).
  void forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const Tensor& cu_seqlens_q, const Tensor& seqused_k, const Tensor& block_table,
               const Tensor& out, const Tensor& lse, const AttentionScores& scores) override;

 private:
  AttentionPagedCall call_;
};

class KVCacheWriteCpu final : public Kernel, public KVCacheWriteInterface {
 public:
  using Interface = KVCacheWriteInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit KVCacheWriteCpu(const KVCacheWriteCall& call) : call_(call) {}
  /// Checks every slot before writing any (SignatureError naming the first outside the cache).
  void forward(const Tensor& key, const Tensor& value, const Tensor& k_cache, const Tensor& v_cache,
               const Tensor& slot_mapping) override;

 private:
  KVCacheWriteCall call_;
};

class AttentionMergeStatesCpu final : public Kernel, public AttentionMergeInterface {
 public:
  using Interface = AttentionMergeInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static constexpr bool general = true;
  explicit AttentionMergeStatesCpu(const AttentionMergeCall& call) : call_(call) {}
  void forward(const Tensor& out_a, const Tensor& lse_a, const Tensor& out_b, const Tensor& lse_b,
               const Tensor& out, const Tensor& lse) override;

 private:
  AttentionMergeCall call_;
};

#if TILEOPS_WITH_CUDA

/// The KV-cache write on CUDA: 16-byte copies where the rows and pointers allow; slots outside
/// the cache are skipped (the contents of slot_mapping are never read on the host).
class KVCacheWriteCuda final : public Kernel, public KVCacheWriteInterface {
 public:
  using Interface = KVCacheWriteInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  explicit KVCacheWriteCuda(const KVCacheWriteCall& call);
  void forward(const Tensor& key, const Tensor& value, const Tensor& k_cache, const Tensor& v_cache,
               const Tensor& slot_mapping) override;
  std::string config() const override { return config_; }

 private:
  KVCacheWriteCall call_;
  std::string config_;  // from the call spec alone (set at construction)
};

class AttentionMergeStatesCuda final : public Kernel, public AttentionMergeInterface {
 public:
  using Interface = AttentionMergeInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cuda}; }
  static std::optional<std::vector<int>> supported_archs() { return std::vector<int>{90}; }
  explicit AttentionMergeStatesCuda(const AttentionMergeCall& call);
  void forward(const Tensor& out_a, const Tensor& lse_a, const Tensor& out_b, const Tensor& lse_b,
               const Tensor& out, const Tensor& lse) override;
  std::string config() const override { return config_; }

 private:
  AttentionMergeCall call_;
  std::string config_;  // from the call spec alone (set at construction)
};

#endif  // TILEOPS_WITH_CUDA

}  // namespace tileops
