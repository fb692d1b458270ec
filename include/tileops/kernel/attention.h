// The kernel contract of the attention family: the call specs and interfaces of the varlen
// (packed, variable-length) and the paged grouped-query attention forwards, the paged KV-cache
// write and the merge of two partial attention states. Kernel code includes this header, never the
// op header.
//
// Conventions (FlashAttention / vLLM): NHD heads ([tokens, heads, head_dim]), sequences packed
// along the token axis and delimited by int32 cu_seqlens ([batch + 1], cu_seqlens[0] = 0), GQA by
// integer head groups (query head h reads KV head h / (heads_q / heads_kv)), lse [heads, tokens]
// float32, the natural-log sum-exp of the scaled (and capped) scores of a query row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tileops/core/tensor.h"
#include "tileops/dispatch/kernel.h"

namespace tileops {

/// How scores are formed and masked; the op resolves the manifest's parameters into it
/// (softmax_scale omitted = 1 / sqrt(head_dim)). Per sequence of sq queries over sk keys, query i
/// sees key j iff (!causal || j <= i + sk - sq) && (window_left < 0 || j >= i + sk - sq -
/// window_left) (causal aligned bottom-right). score = softmax_scale * q.k, then, when softcap >
/// 0, softcap * tanh(score / softcap). A query that sees no key gets out = 0 and lse = -inf.
struct AttentionScores {
  float softmax_scale = 1.0f;
  bool causal = true;
  std::int64_t window_left = -1;  ///< < 0: no window
  float softcap = 0.0f;           ///< <= 0: off
  friend bool operator==(const AttentionScores&, const AttentionScores&) = default;
};

/// The call spec of the varlen attention kernels. Shapes that vary per call (tokens, batch) are
/// not part of it: one entry serves every packing of the same heads, head dim and mask kind.
struct AttentionVarlenCall : CallSpec {
  DType dtype = DType::bfloat16;
  std::int64_t heads_q = 0;
  std::int64_t heads_kv = 0;
  std::int64_t head_dim = 0;
  bool causal = true;
  bool windowed = false;    ///< window_left >= 0
  bool softcapped = false;  ///< softcap > 0
  /// ceil(Tq / batch), from the static shapes (0 without sequences): 1 for a decoding batch.
  std::int64_t queries_per_sequence = 0;
  friend bool operator==(const AttentionVarlenCall&, const AttentionVarlenCall&) = default;
  std::size_t hash() const {
    return hash_fields(device, dtype, heads_q, heads_kv, head_dim, causal, windowed, softcapped,
                       queries_per_sequence);
  }
  std::string str() const {
    return spec_text("AttentionVarlenCall", device,
                     {{"dtype", spec_field(dtype_name(dtype))},
                      {"heads_q", spec_field(heads_q)},
                      {"heads_kv", spec_field(heads_kv)},
                      {"head_dim", spec_field(head_dim)},
                      {"causal", spec_field(causal)},
                      {"windowed", spec_field(windowed)},
                      {"softcapped", spec_field(softcapped)},
                      {"queries_per_sequence", spec_field(queries_per_sequence)}});
  }
};

/// Varlen attention forward. q [Tq, heads_q, head_dim], k and v [Tk, heads_kv, head_dim], out
/// [Tq, heads_q, head_dim], all contiguous of `dtype`; cu_seqlens_q / cu_seqlens_k [batch + 1]
/// int32 (contiguous); lse [heads_q, Tq] float32. On the CPU the cu_seqlens contents are checked
/// (SignatureError); on CUDA they are the caller's and never read on the host.
class AttentionVarlenInterface {
 public:
  static constexpr std::string_view name = "attention_varlen";
  using Request = AttentionVarlenCall;
  virtual ~AttentionVarlenInterface() = default;
  virtual void forward(const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& cu_seqlens_q, const Tensor& cu_seqlens_k, const Tensor& out,
                       const Tensor& lse, const AttentionScores& scores) = 0;
};

/// The call spec of the paged attention kernels (the varlen attention over a paged KV cache).
/// The page size is part of it (the CUDA kernels take 16, 32, 64 and 128), and of the shapes that
/// vary per call only the queries per sequence (which tell decode-shaped calls from
/// prefill-shaped ones); tokens, batch, cache blocks and the block table's width are not.
struct AttentionPagedCall : CallSpec {
  DType dtype = DType::bfloat16;
  std::int64_t heads_q = 0;
  std::int64_t heads_kv = 0;
  std::int64_t head_dim = 0;
  std::int64_t page_size = 0;
  bool causal = true;
  bool windowed = false;    ///< window_left >= 0
  bool softcapped = false;  ///< softcap > 0
  /// ceil(Tq / batch), from the static shapes (0 without sequences): 1 for a decoding batch.
  std::int64_t queries_per_sequence = 0;
  friend bool operator==(const AttentionPagedCall&, const AttentionPagedCall&) = default;
  std::size_t hash() const {
    return hash_fields(device, dtype, heads_q, heads_kv, head_dim, page_size, causal, windowed,
                       softcapped, queries_per_sequence);
  }
  std::string str() const {
    return spec_text("AttentionPagedCall", device,
                     {{"dtype", spec_field(dtype_name(dtype))},
                      {"heads_q", spec_field(heads_q)},
                      {"heads_kv", spec_field(heads_kv)},
                      {"head_dim", spec_field(head_dim)},
                      {"page_size", spec_field(page_size)},
                      {"causal", spec_field(causal)},
                      {"windowed", spec_field(windowed)},
                      {"softcapped", spec_field(softcapped)},
                      {"queries_per_sequence", spec_field(queries_per_sequence)}});
  }
};

/// Paged attention forward: the varlen interface's computation over each sequence's first
/// seqused_k[b] cached keys, key j of sequence b being row j % page_size of page
/// block_table[b][j / page_size]. q and out [Tq, heads_q, head_dim], k_cache and v_cache
/// [num_blocks, page_size, heads_kv, head_dim], all contiguous of `dtype`; cu_seqlens_q
/// [batch + 1], seqused_k [batch] and block_table [batch, max_blocks_per_seq] int32
/// (contiguous); lse [heads_q, Tq] float32. Block table entries past a sequence's
/// ceil(seqused_k / page_size) pages are never read. On the CPU the contents of cu_seqlens_q,
/// seqused_k and the used block table entries are checked (SignatureError); on CUDA they are the
/// caller's and never read on the host.
class AttentionPagedInterface {
 public:
  static constexpr std::string_view name = "attention_paged";
  using Request = AttentionPagedCall;
  virtual ~AttentionPagedInterface() = default;
  virtual void forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                       const Tensor& cu_seqlens_q, const Tensor& seqused_k,
                       const Tensor& block_table, const Tensor& out, const Tensor& lse,
                       const AttentionScores& scores) = 0;
};

/// The call spec of the paged KV-cache write.
struct KVCacheWriteCall : CallSpec {
  DType dtype = DType::bfloat16;
  std::int64_t heads_kv = 0;
  std::int64_t head_dim = 0;
  std::int64_t page_size = 0;
  friend bool operator==(const KVCacheWriteCall&, const KVCacheWriteCall&) = default;
  std::size_t hash() const { return hash_fields(device, dtype, heads_kv, head_dim, page_size); }
  std::string str() const {
    return spec_text("KVCacheWriteCall", device,
                     {{"dtype", spec_field(dtype_name(dtype))},
                      {"heads_kv", spec_field(heads_kv)},
                      {"head_dim", spec_field(head_dim)},
                      {"page_size", spec_field(page_size)}});
  }
};

/// key, value [T, heads_kv, head_dim] contiguous; k_cache, v_cache [num_blocks, page_size,
/// heads_kv, head_dim] contiguous, written in place; slot_mapping [T] int64: token t goes to
/// page slot / page_size, row slot % page_size; slot < 0 is skipped. A slot >= num_blocks *
/// page_size is a SignatureError on the CPU and skipped on CUDA (never written outside the cache).
class KVCacheWriteInterface {
 public:
  static constexpr std::string_view name = "kv_cache_write";
  using Request = KVCacheWriteCall;
  virtual ~KVCacheWriteInterface() = default;
  virtual void forward(const Tensor& key, const Tensor& value, const Tensor& k_cache,
                       const Tensor& v_cache, const Tensor& slot_mapping) = 0;
};

/// The call spec of the merge of two partial attention states.
struct AttentionMergeCall : CallSpec {
  DType dtype = DType::bfloat16;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  friend bool operator==(const AttentionMergeCall&, const AttentionMergeCall&) = default;
  std::size_t hash() const { return hash_fields(device, dtype, heads, head_dim); }
  std::string str() const {
    return spec_text("AttentionMergeCall", device,
                     {{"dtype", spec_field(dtype_name(dtype))},
                      {"heads", spec_field(heads)},
                      {"head_dim", spec_field(head_dim)}});
  }
};

/// out_a, out_b, out [T, heads, head_dim] contiguous of `dtype`; lse_a, lse_b, lse [heads, T]
/// float32. With m = max(lse_a, lse_b): lse = m + log(exp(lse_a - m) + exp(lse_b - m)) and out =
/// out_a * exp(lse_a - lse) + out_b * exp(lse_b - lse); both -inf gives out = 0, lse = -inf.
class AttentionMergeInterface {
 public:
  static constexpr std::string_view name = "attention_merge_states";
  using Request = AttentionMergeCall;
  virtual ~AttentionMergeInterface() = default;
  virtual void forward(const Tensor& out_a, const Tensor& lse_a, const Tensor& out_b,
                       const Tensor& lse_b, const Tensor& out, const Tensor& lse) = 0;
};

}  // namespace tileops
