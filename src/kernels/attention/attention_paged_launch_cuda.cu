// The host side of the paged attention forward (attention_paged_cuda.h): argument checks, the
// plan on the current device, the parameter block and the dispatch to the per-head-dim instances
// (attention_paged_instances.cuh).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "kernels/attention/attention_paged_cuda.h"
#include "kernels/attention/attention_paged_instances.cuh"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {

namespace paged_detail {

void throw_paged_cuda(cudaError_t err, const char* what) {
  throw UsageError(std::string("attention_paged (CUDA): ") + what + ": " + cudaGetErrorName(err) +
                   ": " + cudaGetErrorString(err));
}

}  // namespace paged_detail

namespace {

using paged_detail::throw_paged_cuda;

const std::string kWho = "attention_paged (CUDA): ";

bool aligned16(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0;
}

int current_device() {
  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess)
    throw_paged_cuda(err, "cudaGetDevice");
  return device;
}

// Compute capability and multiprocessors of `device`, read once.
std::tuple<int, int, int> device_facts(int device) {
  static std::mutex mutex;
  static std::map<int, std::tuple<int, int, int>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = cache.find(device); it != cache.end()) return it->second;
  int major = 0;
  int minor = 0;
  int sms = 0;
  cudaError_t err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) throw_paged_cuda(err, "cudaDeviceGetAttribute");
  return cache[device] = {major, minor, sms};
}

// Blocks of the split kernel per multiprocessor, per (device, head dim, dtype, rows), read once.
int blocks_per_sm(int device, std::int64_t head_dim, DType dtype, int rows) {
  static std::mutex mutex;
  static std::map<std::tuple<int, std::int64_t, DType, int>, int> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(device, head_dim, dtype, rows);
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  const int blocks = head_dim == 64    ? paged_detail::paged_blocks_per_sm_d64(dtype, rows)
                     : head_dim == 128 ? paged_detail::paged_blocks_per_sm_d128(dtype, rows)
                                       : paged_detail::paged_blocks_per_sm_d256(dtype, rows);
  return cache[key] = blocks;
}

}  // namespace

void check_attention_paged_args(const AttentionPagedArgs& a) {
  if (a.dtype != DType::float16 && a.dtype != DType::bfloat16)
    throw SignatureError(kWho + "dtype must be float16 or bfloat16, got " +
                         std::string(dtype_name(a.dtype)));
  if (a.head_dim != 64 && a.head_dim != 128 && a.head_dim != 256)
    throw SignatureError(kWho + "head_dim must be 64, 128 or 256, got " +
                         std::to_string(a.head_dim));
  const bool contiguous = a.cu_seqlens_k != nullptr;
  if (!contiguous && a.page_size != 16 && a.page_size != 32 && a.page_size != 64 &&
      a.page_size != 128)
    throw SignatureError(kWho + "page_size must be 16, 32, 64 or 128, got " +
                         std::to_string(a.page_size));
  if (a.heads_q <= 0 || a.heads_kv <= 0 || a.heads_q % a.heads_kv != 0)
    throw SignatureError(kWho + "heads_q (" + std::to_string(a.heads_q) +
                         ") must be a positive multiple of heads_kv (" +
                         std::to_string(a.heads_kv) + ")");
  if (a.total_q < 0 || a.batch < 0 || a.width < 0 || a.num_blocks < 0)
    throw SignatureError(kWho + "negative total_q, batch, width or num_blocks");
  const std::int64_t group = a.heads_q / a.heads_kv;
  // Contiguous keys are one page of 2^30 rows per sequence: fewer rows than that.
  const std::int64_t most_blocks = contiguous ? (std::int64_t{1} << 30) - 1 : INT_MAX;
  if (a.total_q * group >= INT_MAX / 2 || a.total_q * a.heads_q >= INT_MAX / 2 ||
      a.batch >= INT_MAX / 2 || a.num_blocks > most_blocks ||
      (!contiguous && a.width * a.page_size > INT_MAX) || a.heads_kv > 65535)
    throw SignatureError(kWho +
                         "more than 2^30 query rows or (token, head) pairs, sequences or keys, or "
                         "65535 KV heads");
}

void check_attention_paged_pointers(const AttentionPagedArgs& a) {
  const bool contiguous = a.cu_seqlens_k != nullptr;
  const bool no_keys = a.k_cache == nullptr || a.v_cache == nullptr;
  if (a.q == nullptr || a.out == nullptr || a.lse == nullptr || a.cu_seqlens_q == nullptr ||
      (no_keys && !(contiguous && a.num_blocks == 0)) ||
      (!contiguous && (a.seqused_k == nullptr || (a.width > 0 && a.block_table == nullptr))))
    throw SignatureError(kWho + "a tensor pointer is null");
  if (!aligned16(a.q) || !aligned16(a.k_cache) || !aligned16(a.v_cache) || !aligned16(a.out) ||
      (reinterpret_cast<std::uintptr_t>(a.lse) & 3u) != 0)
    throw SignatureError(kWho + "q, k_cache, v_cache and out must be 16-byte aligned, lse 4-byte");
}

AttentionPagedPlan attention_paged_plan_for(const AttentionPagedArgs& a) {
  check_attention_paged_args(a);
  const int device = current_device();
  const auto [major, minor, sms] = device_facts(device);
  // Contiguous keys: the longest sequence is bounded by the rows, one "page" of them.
  const bool contiguous = a.cu_seqlens_k != nullptr;
  const std::int64_t width = contiguous ? 1 : a.width;
  const std::int64_t page = contiguous ? a.num_blocks : a.page_size;
  AttentionPagedPlan plan =
      attention_paged_plan(a.total_q, a.batch, a.heads_q, a.heads_kv, width, page, sms, 1);
  // The same with the occupancy of the tile shape chosen (which the shape alone decides).
  if (a.total_q > 0 && a.batch > 0 && major == 9) {
    const int per_sm = blocks_per_sm(device, a.head_dim, a.dtype, plan.rows_per_tile);
    plan =
        attention_paged_plan(a.total_q, a.batch, a.heads_q, a.heads_kv, width, page, sms, per_sm);
  }
  return plan;
}

void launch_attention_paged(const AttentionPagedArgs& a, const AttentionPagedPlan& plan,
                            void* stream) {
  check_attention_paged_args(a);
  if (plan.rows_per_tile != 16 && plan.rows_per_tile != 64)
    throw SignatureError(kWho + "rows_per_tile must be 16 or 64, got " +
                         std::to_string(plan.rows_per_tile));
  // Contiguous keys come from decode-shaped calls, whose kernel instances take 16-row tiles.
  if (a.cu_seqlens_k != nullptr && plan.rows_per_tile != 16)
    throw SignatureError(kWho + "contiguous keys (cu_seqlens_k) take 16-row tiles, got " +
                         std::to_string(plan.rows_per_tile));
  if (plan.splits < 1 || plan.splits > kAttentionPagedMaxSplits)
    throw SignatureError(kWho + "splits must be in [1, " +
                         std::to_string(kAttentionPagedMaxSplits) + "], got " +
                         std::to_string(plan.splits));
  if (a.total_q == 0) return;
  if (a.batch == 0) throw SignatureError(kWho + "queries without sequences (batch 0)");
  check_attention_paged_pointers(a);
  if (plan.splits > 1 && (a.workspace == nullptr || !aligned16(a.workspace)))
    throw SignatureError(kWho + "a plan of " + std::to_string(plan.splits) +
                         " splits needs a 16-byte aligned workspace");
  // One block per (row tile slot, KV head, split). The slots bound the row tiles of any packing
  // of total_q queries into batch sequences: ceil(total_q * group / rows) plus one partial tile
  // per sequence that has queries.
  const std::int64_t slots =
      (a.total_q * (a.heads_q / a.heads_kv) + plan.rows_per_tile - 1) / plan.rows_per_tile +
      std::min(a.batch, a.total_q);
  const std::int64_t blocks = slots * a.heads_kv * plan.splits;
  if (blocks > INT_MAX)
    throw SignatureError(kWho + "too many row tiles x KV heads x splits (" + std::to_string(slots) +
                         " x " + std::to_string(a.heads_kv) + " x " + std::to_string(plan.splits) +
                         "), at most 2^31 - 1 blocks");
  const int device = current_device();
  const auto [major, minor, sms] = device_facts(device);
  if (major != 9 || minor != 0)
    throw UsageError(kWho + "needs a compute capability 9.0 (Hopper) device, device " +
                     std::to_string(device) + " is " + std::to_string(major) + "." +
                     std::to_string(minor));

  paged_detail::PagedLaunch l{};
  paged_detail::PagedParams& p = l.params;
  p.q = a.q;
  p.k_cache = a.k_cache;
  p.v_cache = a.v_cache;
  p.out = a.out;
  p.lse = a.lse;
  p.part_out = plan.splits > 1 ? a.workspace : nullptr;
  p.part_lse =
      plan.splits > 1 ? a.workspace + plan.splits * a.total_q * a.heads_q * a.head_dim : nullptr;
  const bool contiguous = a.cu_seqlens_k != nullptr;
  p.cu_q = a.cu_seqlens_q;
  p.seqused = contiguous ? nullptr : a.seqused_k;
  p.table = contiguous ? nullptr : a.block_table;
  p.cu_k = a.cu_seqlens_k;
  p.batch = static_cast<int>(a.batch);
  p.heads_q = static_cast<int>(a.heads_q);
  p.heads_kv = static_cast<int>(a.heads_kv);
  p.group = static_cast<int>(a.heads_q / a.heads_kv);
  p.total_q = static_cast<int>(a.total_q);
  p.width = contiguous ? 1 : static_cast<int>(a.width);
  p.num_blocks = static_cast<int>(a.num_blocks);
  p.page_shift = contiguous          ? 30
                 : a.page_size == 16 ? 4
                 : a.page_size == 32 ? 5
                 : a.page_size == 64 ? 6
                                     : 7;
  p.splits = plan.splits;
  p.by_splits = kernels::FastDivide(static_cast<std::uint32_t>(plan.splits));
  p.by_heads_kv = kernels::FastDivide(static_cast<std::uint32_t>(a.heads_kv));
  p.by_group = kernels::FastDivide(static_cast<std::uint32_t>(p.group));
  p.by_heads_q = kernels::FastDivide(static_cast<std::uint32_t>(a.heads_q));
  p.scale = a.scores.softmax_scale;
  p.scale_log2 = a.scores.softmax_scale * paged_detail::kLog2e;
  p.softcap = a.scores.softcap > 0.0f ? a.scores.softcap : 0.0f;
  p.inv_softcap = a.scores.softcap > 0.0f ? 1.0f / a.scores.softcap : 0.0f;
  p.causal = a.scores.causal ? 1 : 0;
  p.window_left =
      a.scores.window_left < 0
          ? -1
          : static_cast<int>(std::min<std::int64_t>(a.scores.window_left, std::int64_t{1} << 30));
  l.dtype = a.dtype;
  l.rows_per_tile = plan.rows_per_tile;
  l.blocks = static_cast<unsigned>(blocks);
  l.stream = static_cast<cudaStream_t>(stream);
  switch (a.head_dim) {
    case 64:
      paged_detail::launch_paged_d64(l);
      break;
    case 128:
      paged_detail::launch_paged_d128(l);
      break;
    default:
      paged_detail::launch_paged_d256(l);
      break;
  }
}

}  // namespace tileops::cuda_kernels
