// The CUDA paged attention forward (Hopper, sm_90a) behind a plain C++ launch API (internal
// header: no CUDA headers here; the stream is passed as void* and is a cudaStream_t). The values
// it computes are the contract's (tileops/kernel/attention.h, AttentionPagedInterface).
//
// Two kernels. The split-KV (flash-decoding) kernel, in two shapes, serves every call: its block
// takes (a tile of query rows of one sequence, one KV head, one split of the sequence's keys),
// the query rows being (query, head) pairs of the KV head's group, so the heads that share a KV
// head share each K/V tile (GQA packing). Decode-shaped calls take tiles of 16 rows (the four
// warps split each tile's keys); prefill-shaped ones tiles of 64 rows (the warps split the rows).
// With several splits a second kernel merges the splits' states through their lse. The plan (the
// tile shape and the splits) comes from static shapes only, never from device values, so a
// captured CUDA graph replays correctly when seqused_k, cu_seqlens_q or block_table change.
// The varlen kernel's TMA pipeline reading K/V pages through the block table
// (launch_attention_paged_tma, attention_varlen_kernel.cuh with PAGED) serves prefill-shaped
// calls (the op selects it through AttentionPagedTmaCuda's refusal and preferred_over).
// With AttentionPagedArgs::cu_seqlens_k the split kernel reads contiguous K / V rows instead of
// pages: the varlen op's decode-shaped calls (AttentionVarlenSplitCuda).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "tileops/core/dtype.h"
#include "tileops/kernel/attention.h"

namespace tileops::cuda_kernels {

/// The pointers and sizes of one paged attention call. q and out [total_q, heads_q, head_dim];
/// k_cache, v_cache [num_blocks, page_size, heads_kv, head_dim]: contiguous, of `dtype` (float16
/// or bfloat16). lse [heads_q, total_q] float32; cu_seqlens_q [batch + 1], seqused_k [batch],
/// block_table [batch, width] int32 on the device, never read on the host.
struct AttentionPagedArgs {
  const void* q = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  const std::int32_t* cu_seqlens_q = nullptr;
  const std::int32_t* seqused_k = nullptr;
  const std::int32_t* block_table = nullptr;
  /// Contiguous keys instead of pages when set (the varlen op's K / V): [batch + 1] int32 on the
  /// device; key j of sequence b is row cu_seqlens_k[b] + j of k_cache / v_cache taken as
  /// [num_blocks rows, heads_kv, head_dim], the offsets clipped to those rows on the device.
  /// seqused_k, block_table, width and page_size are then unused (the split kernel only).
  const std::int32_t* cu_seqlens_k = nullptr;
  std::int64_t total_q = 0;
  std::int64_t batch = 0;
  std::int64_t width = 0;  ///< block table entries per sequence (max_blocks_per_seq)
  std::int64_t num_blocks = 0;
  std::int64_t page_size = 0;
  std::int64_t heads_q = 0;
  std::int64_t heads_kv = 0;
  std::int64_t head_dim = 0;
  DType dtype = DType::bfloat16;
  AttentionScores scores;
  /// The splits' partial states when the plan has more than one split: at least
  /// attention_paged_workspace_floats(...) floats of device memory, used by this launch only.
  float* workspace = nullptr;
};

/// How a launch is shaped: query rows per tile (16: decode-shaped, the warps split the keys; 64:
/// prefill-shaped, the warps split the rows) and the splits of each sequence's keys.
struct AttentionPagedPlan {
  int rows_per_tile = 16;
  int splits = 1;
  friend bool operator==(const AttentionPagedPlan&, const AttentionPagedPlan&) = default;
  std::string str() const {
    return "rows_per_tile=" + std::to_string(rows_per_tile) + ",splits=" + std::to_string(splits);
  }
};

/// Query rows (queries x the heads of a KV head's group) per sequence up to which a call is
/// decode-shaped: the split kernel's 16-row tiles hold them, and the TMA kernel's 128-query tiles
/// would compute mostly padding.
inline constexpr std::int64_t kAttentionPagedDecodeRows = 16;

/// The query rows of an average sequence, ceil(total_q / batch) * (heads_q / heads_kv), from
/// static shapes (0 without sequences or queries).
inline std::int64_t attention_paged_rows_per_sequence(std::int64_t total_q, std::int64_t batch,
                                                      std::int64_t heads_q, std::int64_t heads_kv) {
  if (batch <= 0 || heads_kv <= 0 || total_q <= 0) return 0;
  return (total_q + batch - 1) / batch * std::max<std::int64_t>(1, heads_q / heads_kv);
}

/// Keys per K/V tile (one pipeline stage) and the splits' unit.
inline constexpr std::int64_t kAttentionPagedKeysPerTile = 64;
/// The most splits of a sequence's keys.
inline constexpr int kAttentionPagedMaxSplits = 128;

/// The plan from static shapes alone: the token count, the batch, the heads, the block table's
/// width and page size (the longest sequence it can hold), the multiprocessors and the blocks
/// one of them holds at once. Rows per tile: 16 when a sequence holds at most 16 rows (queries x
/// the heads of a KV head's group) on average, else 64. Splits: the count whose blocks (row tiles
/// of equal sequences x KV heads x splits) fill the multiprocessors' slots best, waves /
/// ceil(waves), the fewest of those equally good; at most kAttentionPagedMaxSplits, at most one
/// per 64 keys of the longest sequence, and at most 2 * ceil(2 * slots / blocks of one split),
/// so that a batch that fills the GPU keeps one split unless its last wave runs nearly empty.
/// Only counts whose every split gets keys of the longest sequence: the kernel gives each split
/// ceil(units / splits) whole 64-key units, so 33 splits of 64 units leave the last one empty (a
/// block and a merged state that hold nothing).
inline AttentionPagedPlan attention_paged_plan(std::int64_t total_q, std::int64_t batch,
                                               std::int64_t heads_q, std::int64_t heads_kv,
                                               std::int64_t width, std::int64_t page_size,
                                               std::int64_t sms, std::int64_t blocks_per_sm) {
  AttentionPagedPlan plan;
  if (batch <= 0 || heads_kv <= 0 || total_q <= 0) return plan;
  const std::int64_t rows_per_seq =
      attention_paged_rows_per_sequence(total_q, batch, heads_q, heads_kv);
  plan.rows_per_tile = rows_per_seq > kAttentionPagedDecodeRows ? 64 : 16;
  const std::int64_t tiles = batch * ((rows_per_seq + plan.rows_per_tile - 1) / plan.rows_per_tile);
  const std::int64_t base = tiles * heads_kv;
  const std::int64_t slots = std::max<std::int64_t>(1, sms * blocks_per_sm);
  const std::int64_t units = std::max<std::int64_t>(
      1, (width * page_size + kAttentionPagedKeysPerTile - 1) / kAttentionPagedKeysPerTile);
  const std::int64_t most = std::min<std::int64_t>(
      {kAttentionPagedMaxSplits, units, 2 * ((2 * slots + base - 1) / base)});
  double best = 0.0;
  for (std::int64_t s = 1; s <= most; ++s) {
    const std::int64_t per = (units + s - 1) / s;
    if ((units + per - 1) / per != s) continue;  // the last split would get no unit
    const double waves = static_cast<double>(base * s) / static_cast<double>(slots);
    const double filled = waves / std::ceil(waves);
    if (filled > best + 1e-9) {
      best = filled;
      plan.splits = static_cast<int>(s);
    }
  }
  return plan;
}

/// Floats of workspace a launch with `splits` splits needs (0 for one split): the splits'
/// normalized outputs [splits, total_q, heads_q, head_dim] and lse [splits, heads_q, total_q].
inline std::int64_t attention_paged_workspace_floats(int splits, std::int64_t total_q,
                                                     std::int64_t heads_q, std::int64_t head_dim) {
  return splits > 1 ? splits * total_q * heads_q * (head_dim + 1) : 0;
}

/// Raises SignatureError for arguments the paged kernels cannot take (dtype not float16 /
/// bfloat16, head dim not 64 / 128 / 256, page size not 16 / 32 / 64 / 128 (unless the keys are
/// contiguous), heads_q not a multiple of heads_kv, negative sizes, more than 2^30 query rows,
/// (token, head) pairs, sequences or keys).
void check_attention_paged_args(const AttentionPagedArgs& args);

/// Raises SignatureError for a null tensor pointer (the block table may be null when `width` is
/// 0; with contiguous keys seqused_k and the table are unused and K / V may be null without rows)
/// or q, the caches or out not 16-byte aligned, lse not 4-byte aligned.
void check_attention_paged_pointers(const AttentionPagedArgs& args);

/// The plan for `args` on the current device (its multiprocessors and the kernel's occupancy).
/// Raises what launch_attention_paged raises for arguments it cannot take.
AttentionPagedPlan attention_paged_plan_for(const AttentionPagedArgs& args);

/// Enqueues the paged attention forward on `stream` (a cudaStream_t) on the current device, a
/// Hopper GPU (compute capability 9.0), with `plan` (attention_paged_plan_for). Nothing is
/// launched when total_q is 0. The contents of cu_seqlens_q, seqused_k and block_table are never
/// read on the host; table entries past a sequence's ceil(seqused_k / page_size) pages are never
/// read on the device, and cache rows past seqused_k are loaded as zeros, never read. Raises
/// SignatureError for arguments the kernel cannot take (dtype not float16 / bfloat16, head dim
/// not 64 / 128 / 256, page size not 16 / 32 / 64 / 128, heads_q not a multiple of heads_kv,
/// pointers not 16-byte aligned, a missing workspace, more than 2^31 - 1 blocks of (row tile slot,
/// KV head, split)), UsageError for another device or a CUDA error. With cu_seqlens_k set the
/// keys are contiguous rows (AttentionPagedArgs::cu_seqlens_k), never read on the host.
void launch_attention_paged(const AttentionPagedArgs& args, const AttentionPagedPlan& plan,
                            void* stream);

/// Enqueues the paged attention forward with the varlen kernel's pipeline (a TMA producer warp,
/// two wgmma consumer warpgroups, 128 queries of one head per tile, a persistent grid) reading
/// each K/V block of 128 keys (64 at head dim 256) as one TMA box per page (a V page of 16 keys
/// at head dim 128 in one load of both 64-column chunks, in a page-major stage): the same values as
/// launch_attention_paged, faster for prefill-shaped calls, slower for decode-shaped ones (a tile
/// of 128 queries of one head). `tile_counter`: 4 bytes of device memory for this launch only
/// (zeroed on the stream here; the blocks claim tiles from it), or nullptr for a fixed order.
/// Device values are never read on the host; table entries past a sequence's pages are never
/// read; cache rows past seqused_k reach neither out nor lse. Raises what
/// check_attention_paged_args raises, SignatureError for null or misaligned pointers, contiguous
/// keys (cu_seqlens_k: the varlen launch serves those) or a cache of more than 2^31 - 129 rows,
/// UsageError for another device or a CUDA error.
void launch_attention_paged_tma(const AttentionPagedArgs& args, std::int32_t* tile_counter,
                                void* stream);

}  // namespace tileops::cuda_kernels
