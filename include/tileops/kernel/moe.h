// The kernel contract of the MoE family: the call specs and interfaces of routing, pre-permute
// (plain and quantizing), the grouped GEMM and post-permute. Kernel code includes this header,
// never the op header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tileops/core/error.h"
#include "tileops/core/tensor.h"
#include "tileops/dispatch/kernel.h"

namespace tileops {

// ---- call specs and kernel interfaces ------------------------------------------------------
// Every tensor handed to a kernel interface is contiguous and on the call's device; outputs are
// allocated by the op (or are the caller's contiguous `out`).

/// How routing turns a token's logits into expert scores (the manifest's `scoring`).
enum class MoEScoring { softmax, sigmoid };

/// The scoring's manifest name.
inline std::string_view moe_scoring_name(MoEScoring s) noexcept {
  return s == MoEScoring::sigmoid ? "sigmoid" : "softmax";
}

/// The scoring of a manifest name; SignatureError for other names.
inline MoEScoring moe_scoring(std::string_view name) {
  for (const auto s : {MoEScoring::softmax, MoEScoring::sigmoid}) {
    if (name == moe_scoring_name(s)) return s;
  }
  throw SignatureError("unknown MoE scoring '" + std::string(name) +
                       "' (expected softmax or sigmoid)");
}

/// Top-k routing of `tokens` rows of `experts` logits.
struct MoERoutingCall : CallSpec {
  std::int64_t tokens = 0;
  std::int64_t experts = 0;
  std::int64_t top_k = 0;
  DType logits_dtype = DType::float32;
  MoEScoring scoring = MoEScoring::softmax;
  bool renormalize = false;
  bool has_bias = false;
  std::int64_t n_group = 1;     ///< expert groups; 1: plain top-k
  std::int64_t topk_group = 1;  ///< groups kept per token
  friend bool operator==(const MoERoutingCall&, const MoERoutingCall&) = default;
  std::size_t hash() const {
    return hash_fields(device, tokens, experts, top_k, logits_dtype, scoring, renormalize, has_bias,
                       n_group, topk_group);
  }
  /// A tuning-database key: it keeps the spelling recorded before the type was renamed, and
  /// names the groups only when there are several (plain routing keeps its recorded keys).
  std::string str() const {
    std::vector<std::pair<std::string_view, std::string>> fields{
        {"tokens", spec_field(tokens)},
        {"experts", spec_field(experts)},
        {"top_k", spec_field(top_k)},
        {"logits", spec_field(dtype_name(logits_dtype))},
        {"scoring", spec_field(moe_scoring_name(scoring))},
        {"renormalize", spec_field(renormalize)},
        {"bias", spec_field(has_bias)}};
    if (n_group != 1) {
      fields.emplace_back("n_group", spec_field(n_group));
      fields.emplace_back("topk_group", spec_field(topk_group));
    }
    return spec_text("MoeRoutingCall", device, fields);
  }
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
  std::size_t hash() const {
    return hash_fields(device, tokens, hidden, top_k, num_experts, rows, dtype, has_map);
  }
  /// A tuning-database key: it keeps the spelling recorded before the type was renamed.
  std::string str() const {
    return spec_text("MoePermuteCall", device,
                     {{"tokens", spec_field(tokens)},
                      {"hidden", spec_field(hidden)},
                      {"top_k", spec_field(top_k)},
                      {"num_experts", spec_field(num_experts)},
                      {"rows", spec_field(rows)},
                      {"dtype", spec_field(dtype_name(dtype))},
                      {"map", spec_field(has_map)}});
  }
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

/// Pre-permute fused with per-token-group FP8 quantization: tokens x top_k pairs grouped over
/// num_experts local experts, the gathered rows quantized in groups of group_size columns.
struct MoEPrePermuteQuantCall : CallSpec {
  std::int64_t tokens = 0;
  std::int64_t hidden = 0;
  std::int64_t top_k = 0;
  std::int64_t num_experts = 0;
  std::int64_t group_size = 128;
  DType dtype = DType::bfloat16;
  bool has_map = false;
  friend bool operator==(const MoEPrePermuteQuantCall&, const MoEPrePermuteQuantCall&) = default;
  std::size_t hash() const {
    return hash_fields(device, tokens, hidden, top_k, num_experts, group_size, dtype, has_map);
  }
  std::string str() const {
    return spec_text("MoEPrePermuteQuantCall", device,
                     {{"tokens", spec_field(tokens)},
                      {"hidden", spec_field(hidden)},
                      {"top_k", spec_field(top_k)},
                      {"num_experts", spec_field(num_experts)},
                      {"group_size", spec_field(group_size)},
                      {"dtype", spec_field(dtype_name(dtype))},
                      {"map", spec_field(has_map)}});
  }
};

/// x [tokens, hidden]; ids [tokens, top_k]; map [G] int32 or nullptr; q [tokens*top_k, hidden]
/// float8_e4m3fn; scales [tokens*top_k, hidden / group_size] float32; offsets [num_experts + 1];
/// inverse [tokens, top_k] (manifest/moe.yaml, MoEPrePermuteQuantFP8FwdOp, defines the values).
class MoEPrePermuteQuantInterface {
 public:
  static constexpr std::string_view name = "moe_pre_permute_quant_fp8";
  using Request = MoEPrePermuteQuantCall;
  virtual ~MoEPrePermuteQuantInterface() = default;
  virtual void forward(const Tensor& x, const Tensor& ids, const Tensor* map, const Tensor& q,
                       const Tensor& scales, const Tensor& offsets, const Tensor& inverse,
                       double eps) = 0;
};

/// The quantizing pre-permute into the masked layout: the pairs as MoEPrePermuteQuantCall's, the
/// rows of local expert e at rows [e * max_m, (e + 1) * max_m) of the output.
struct MoEPrePermuteQuantMaskedCall : CallSpec {
  std::int64_t tokens = 0;
  std::int64_t hidden = 0;
  std::int64_t top_k = 0;
  std::int64_t num_experts = 0;
  std::int64_t max_m = 0;
  std::int64_t group_size = 128;
  DType dtype = DType::bfloat16;
  bool has_map = false;
  friend bool operator==(const MoEPrePermuteQuantMaskedCall&,
                         const MoEPrePermuteQuantMaskedCall&) = default;
  std::size_t hash() const {
    return hash_fields(device, tokens, hidden, top_k, num_experts, max_m, group_size, dtype,
                       has_map);
  }
  std::string str() const {
    return spec_text("MoEPrePermuteQuantMaskedCall", device,
                     {{"tokens", spec_field(tokens)},
                      {"hidden", spec_field(hidden)},
                      {"top_k", spec_field(top_k)},
                      {"num_experts", spec_field(num_experts)},
                      {"max_m", spec_field(max_m)},
                      {"group_size", spec_field(group_size)},
                      {"dtype", spec_field(dtype_name(dtype))},
                      {"map", spec_field(has_map)}});
  }
};

/// x [tokens, hidden]; ids [tokens, top_k]; map [G] int32 or nullptr; a [num_experts, max_m,
/// hidden] float8_e4m3fn; a_scales [num_experts, max_m, hidden / group_size] float32; counts
/// [num_experts] int32; inverse [tokens, top_k] (manifest/moe.yaml,
/// MoEPrePermuteQuantFP8MaskedFwdOp, defines the values; rows past the counts are not written).
class MoEPrePermuteQuantMaskedInterface {
 public:
  static constexpr std::string_view name = "moe_pre_permute_quant_fp8_masked";
  using Request = MoEPrePermuteQuantMaskedCall;
  virtual ~MoEPrePermuteQuantMaskedInterface() = default;
  virtual void forward(const Tensor& x, const Tensor& ids, const Tensor* map, const Tensor& a,
                       const Tensor& a_scales, const Tensor& counts, const Tensor& inverse,
                       double eps) = 0;
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

/// The activation's manifest name.
inline std::string_view moe_activation_name(MoEActivation a) noexcept {
  switch (a) {
    case MoEActivation::silu_and_mul:
      return "silu_and_mul";
    case MoEActivation::gelu_and_mul:
      return "gelu_and_mul";
    case MoEActivation::none:
      break;
  }
  return "none";
}

/// The activation of a manifest name; SignatureError for other names.
inline MoEActivation moe_activation(std::string_view name) {
  for (const auto a :
       {MoEActivation::none, MoEActivation::silu_and_mul, MoEActivation::gelu_and_mul}) {
    if (name == moe_activation_name(a)) return a;
  }
  throw SignatureError("unknown MoE activation '" + std::string(name) +
                       "' (expected none, silu_and_mul or gelu_and_mul)");
}

/// rows × n × k over `experts` groups of rows.
struct GroupedGemmCall : CallSpec {
  std::int64_t rows = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t experts = 0;
  DType dtype = DType::bfloat16;
  MoEActivation activation = MoEActivation::none;
  friend bool operator==(const GroupedGemmCall&, const GroupedGemmCall&) = default;
  std::size_t hash() const { return hash_fields(device, rows, n, k, experts, dtype, activation); }
  std::string str() const {
    return spec_text("GroupedGemmCall", device,
                     {{"rows", spec_field(rows)},
                      {"n", spec_field(n)},
                      {"k", spec_field(k)},
                      {"experts", spec_field(experts)},
                      {"dtype", spec_field(dtype_name(dtype))},
                      {"activation", spec_field(moe_activation_name(activation))}});
  }
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

/// rows × n × k of e4m3 over `experts` groups of rows, one float32 scale per 1 × block_k of a and
/// per block_n × block_k of b; bfloat16 out. `max_m` > 0: the masked layout, `rows` = experts ×
/// max_m.
struct GroupedGemmFP8Call : CallSpec {
  std::int64_t rows = 0;
  std::int64_t max_m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t experts = 0;
  std::int64_t block_n = 128;
  std::int64_t block_k = 128;
  MoEActivation activation = MoEActivation::none;
  friend bool operator==(const GroupedGemmFP8Call&, const GroupedGemmFP8Call&) = default;
  std::size_t hash() const {
    return hash_fields(device, rows, max_m, n, k, experts, block_n, block_k, activation);
  }
  std::string str() const {
    return spec_text("GroupedGemmFP8Call", device,
                     {{"rows", spec_field(rows)},
                      {"max_m", spec_field(max_m)},
                      {"n", spec_field(n)},
                      {"k", spec_field(k)},
                      {"experts", spec_field(experts)},
                      {"block_n", spec_field(block_n)},
                      {"block_k", spec_field(block_k)},
                      {"activation", spec_field(moe_activation_name(activation))}});
  }
};

/// a [rows, k] e4m3; a_scales [rows, k / block_k] float32; offsets [experts + 1] int32;
/// b [experts, n, k] e4m3; b_scales [experts, ceil(n / block_n), k / block_k] float32;
/// c [rows, n or n / 2] bfloat16 (manifest/moe.yaml, MoEGroupedGemmFP8FwdOp, defines the values).
class GroupedGemmFP8Interface {
 public:
  static constexpr std::string_view name = "moe_grouped_gemm_fp8";
  using Request = GroupedGemmFP8Call;
  virtual ~GroupedGemmFP8Interface() = default;
  virtual void forward(const Tensor& a, const Tensor& a_scales, const Tensor& offsets,
                       const Tensor& b, const Tensor& b_scales, const Tensor& c) = 0;
};

/// The masked layout: a [experts, max_m, k] e4m3; a_scales [experts, max_m, k / block_k];
/// counts [experts] int32; b and b_scales as above; c [experts, max_m, n or n / 2] bfloat16
/// (manifest/moe.yaml, MoEGroupedGemmFP8MaskedFwdOp).
class GroupedGemmFP8MaskedInterface {
 public:
  static constexpr std::string_view name = "moe_grouped_gemm_fp8_masked";
  using Request = GroupedGemmFP8Call;
  virtual ~GroupedGemmFP8MaskedInterface() = default;
  virtual void forward(const Tensor& a, const Tensor& a_scales, const Tensor& counts,
                       const Tensor& b, const Tensor& b_scales, const Tensor& c) = 0;
};

}  // namespace tileops
