// The kernel contract of the MoE family: the call specs and interfaces of routing, pre-permute,
// the grouped GEMM and post-permute. Kernel code includes this header, never the op header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tileops/core/tensor.h"
#include "tileops/kernel/kernel.h"

namespace tileops {

// ---- call specs and kernel interfaces ------------------------------------------------------
// Every tensor handed to a kernel interface is contiguous and on the call's device; outputs are
// allocated by the op (or are the caller's contiguous `out`).

/// Top-k routing of `tokens` rows of `experts` logits.
struct MoERoutingCall : CallSpec {
  std::int64_t tokens = 0;
  std::int64_t experts = 0;
  std::int64_t top_k = 0;
  DType logits_dtype = DType::float32;
  bool sigmoid = false;  ///< scoring: sigmoid (true) or softmax (false)
  bool renormalize = false;
  bool has_bias = false;
  std::int64_t n_group = 1;     ///< expert groups; 1: plain top-k
  std::int64_t topk_group = 1;  ///< groups kept per token
  friend bool operator==(const MoERoutingCall&, const MoERoutingCall&) = default;
  std::size_t hash() const;
  std::string str() const;
};

/// logits [tokens, experts]; bias [experts] float32 or nullptr; weights [tokens, top_k] float32;
/// ids [tokens, top_k] int32.
class MoERoutingInterface {
 public:
  static constexpr std::string_view name = "moe_routing";
  using Request = MoERoutingCall;
  virtual ~MoERoutingInterface() = default;
  virtual void forward(const Tensor& logits, const Tensor* bias, const Tensor& weights,
                       const Tensor& ids, double routed_scaling_factor) = 0;
};

/// Pre-permute (tokens × top_k pairs grouped over num_experts local experts) and post-permute
/// (`rows` expert rows combined back into tokens).
struct MoEPermuteCall : CallSpec {
  std::int64_t tokens = 0;
  std::int64_t hidden = 0;
  std::int64_t top_k = 0;
  std::int64_t num_experts = 0;  ///< pre-permute only (0 for post-permute)
  std::int64_t rows = 0;         ///< post-permute only (0 for pre-permute)
  DType dtype = DType::bfloat16;
  bool has_map = false;
  friend bool operator==(const MoEPermuteCall&, const MoEPermuteCall&) = default;
  std::size_t hash() const;
  std::string str() const;
};

/// x [tokens, hidden]; ids [tokens, top_k]; map [G] int32 or nullptr; permuted [tokens*top_k,
/// hidden]; offsets [num_experts + 1]; inverse [tokens, top_k].
class MoEPrePermuteInterface {
 public:
  static constexpr std::string_view name = "moe_pre_permute";
  using Request = MoEPermuteCall;
  virtual ~MoEPrePermuteInterface() = default;
  virtual void forward(const Tensor& x, const Tensor& ids, const Tensor* map,
                       const Tensor& permuted, const Tensor& offsets, const Tensor& inverse) = 0;
};

/// expert_out [rows, hidden]; weights [tokens, top_k] float32; inverse [tokens, top_k]; y
/// [tokens, hidden].
class MoEPostPermuteInterface {
 public:
  static constexpr std::string_view name = "moe_post_permute";
  using Request = MoEPermuteCall;
  virtual ~MoEPostPermuteInterface() = default;
  virtual void forward(const Tensor& expert_out, const Tensor& weights, const Tensor& inverse,
                       const Tensor& y, double scale) = 0;
};

/// The grouped GEMM's activation, fused in its epilogue.
enum class MoEActivation { none, silu_and_mul, gelu_and_mul };
MoEActivation moe_activation(std::string_view name);  ///< SignatureError for other names

/// rows × n × k over `experts` groups of rows.
struct GroupedGemmCall : CallSpec {
  std::int64_t rows = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t experts = 0;
  DType dtype = DType::bfloat16;
  MoEActivation activation = MoEActivation::none;
  friend bool operator==(const GroupedGemmCall&, const GroupedGemmCall&) = default;
  std::size_t hash() const;
  std::string str() const;
};

/// a [rows, k]; offsets [experts + 1] int32; b [experts, n, k]; c [rows, n or n / 2].
class GroupedGemmInterface {
 public:
  static constexpr std::string_view name = "moe_grouped_gemm";
  using Request = GroupedGemmCall;
  virtual ~GroupedGemmInterface() = default;
  virtual void forward(const Tensor& a, const Tensor& offsets, const Tensor& b,
                       const Tensor& c) = 0;
};

}  // namespace tileops
