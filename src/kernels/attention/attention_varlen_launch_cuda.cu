// The host side of the varlen attention forward (attention_varlen_cuda.h): argument checks, the
// 3D tensor maps of q / k / v, the score path, the persistent grid and the dispatch to the
// per-head-dim instances (attention_varlen_instances.cuh); and the same kernel over paged keys
// (launch_attention_paged_tma, attention_paged_cuda.h).
#include "kernels/attention/attention_varlen_cuda.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/attention/attention_paged_cuda.h"
#include "kernels/attention/attention_varlen_instances.cuh"
#include "kernels/common/tma_map.h"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {

namespace attention_detail {

void throw_varlen_cuda(cudaError_t err, const char* what) {
  throw UsageError(std::string("attention_varlen (CUDA): ") + what + ": " + cudaGetErrorName(err) +
                   ": " + cudaGetErrorString(err));
}

}  // namespace attention_detail

namespace {

using attention_detail::kBlockM;
using attention_detail::throw_varlen_cuda;
using attention_detail::VarlenLaunch;

constexpr float kLog2e = 1.4426950408889634f;

// A map over the [tokens, heads, head_dim] tensor at `base` in boxes of 64 columns x 1 head x
// `rows` tokens, 128-byte swizzle, zeros past the bounds (tokens 0 maps one token, never read).
CUtensorMap make_map_3d(const void* base, DType dtype, int64_t tokens, int64_t heads,
                        int64_t head_dim, int rows, int box_heads = 1) {
  return hopper::make_tma_map_3d(
      base,
      dtype == DType::bfloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      2, std::max<int64_t>(tokens, 1), heads, head_dim, 64, box_heads, rows);
}

struct DeviceFacts {
  int major = 0;
  int minor = 0;
  int sms = 0;
};

DeviceFacts device_facts(int device) {
  static std::mutex mutex;
  static std::map<int, DeviceFacts> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = cache.find(device); it != cache.end()) return it->second;
  DeviceFacts f;
  cudaError_t err = cudaDeviceGetAttribute(&f.major, cudaDevAttrComputeCapabilityMajor, device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&f.minor, cudaDevAttrComputeCapabilityMinor, device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&f.sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) throw_varlen_cuda(err, "cudaDeviceGetAttribute");
  cache[device] = f;
  return f;
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// The (block_n, stages) pairs instantiated for a head dim, the default first.
std::vector<std::pair<int, int>> instances(int64_t head_dim) {
  switch (head_dim) {
    case 64:
      return {{128, 2}, {128, 3}};
    case 128:
      return {{128, 2}};
    case 256:
      return {{80, 2}, {64, 2}};
    default:
      return {};
  }
}

// The facts of the current device, which must be a Hopper GPU (UsageError naming `who`).
DeviceFacts hopper_device(const std::string& who) {
  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess)
    throw_varlen_cuda(err, "cudaGetDevice");
  const DeviceFacts facts = device_facts(device);
  if (facts.major != 9 || facts.minor != 0)
    throw UsageError(who + "needs a compute capability 9.0 (Hopper) device, device " +
                     std::to_string(device) + " is " + std::to_string(facts.major) + "." +
                     std::to_string(facts.minor));
  return facts;
}

// The score path and mask of `s` into p; true for the TRANSFORM kernels (softcap, or a scale
// whose sign or finiteness the plain path's raw-score max cannot take).
bool set_scores(attention_detail::VarlenParams& p, const AttentionScores& s) {
  p.causal = s.causal ? 1 : 0;
  p.window_left =
      s.window_left < 0 ? -1 : static_cast<int>(std::min<int64_t>(s.window_left, int64_t{1} << 30));
  const float scale = s.softmax_scale;
  const bool capped = s.softcap > 0.0f;
  // The plain path keeps the row max of the raw scores, which is the max of the scaled ones only
  // for a positive scale; anything else (and the softcap) transforms each score first.
  const bool transform = capped || !(scale > 0.0f) || !std::isfinite(scale);
  if (transform) {
    p.score_mul = 1.0f;
    p.softcap_on = capped ? 1 : 0;
    p.pre_mul = capped ? scale / s.softcap : scale * kLog2e;
    p.cap_mul = capped ? s.softcap * kLog2e : 0.0f;
  } else {
    p.score_mul = scale * kLog2e;
    p.softcap_on = 0;
    p.pre_mul = 1.0f;
    p.cap_mul = 0.0f;
  }
  return transform;
}

// Zeroes the launch's tile counter on its stream (nothing without one).
void zero_tile_counter(int32_t* counter, cudaStream_t stream) {
  if (counter == nullptr) return;
  if (const cudaError_t err = cudaMemsetAsync(counter, 0, sizeof(int32_t), stream);
      err != cudaSuccess)
    throw_varlen_cuda(err, "cudaMemsetAsync (tile counter)");
}

std::string dtype_text(DType d) {
  return d == DType::bfloat16 ? "bfloat16" : d == DType::float16 ? "float16" : "another dtype";
}

}  // namespace

std::string AttentionVarlenConfig::str() const {
  return "block_n=" + std::to_string(block_n) + ",stages=" + std::to_string(stages) +
         ",pingpong=" + (pingpong ? "1" : "0") + ",blocks=" + std::to_string(blocks);
}

AttentionVarlenConfig attention_varlen_default_config(const AttentionVarlenCall& call,
                                                      int /*device*/) {
  AttentionVarlenConfig c;
  const auto inst = instances(call.head_dim);
  if (!inst.empty()) {
    c.block_n = inst.front().first;
    c.stages = inst.front().second;
  }
  return c;
}

std::vector<AttentionVarlenConfig> attention_varlen_tuning_space(const AttentionVarlenCall& call,
                                                                 int device) {
  std::vector<AttentionVarlenConfig> out = {attention_varlen_default_config(call, device)};
  for (const auto& [bn, stages] : instances(call.head_dim)) {
    for (const bool pp : {true, false}) {
      AttentionVarlenConfig c;
      c.block_n = bn;
      c.stages = stages;
      c.pingpong = pp;
      if (!(c == out.front())) out.push_back(c);
    }
  }
  return out;
}

void launch_attention_varlen(const AttentionVarlenArgs& a, const AttentionVarlenConfig& config,
                             void* stream) {
  const std::string who = "attention_varlen (CUDA): ";
  if (a.dtype != DType::float16 && a.dtype != DType::bfloat16)
    throw SignatureError(who + "dtype must be float16 or bfloat16, got " + dtype_text(a.dtype));
  if (a.head_dim != 64 && a.head_dim != 128 && a.head_dim != 256)
    throw SignatureError(who + "head_dim must be 64, 128 or 256, got " +
                         std::to_string(a.head_dim));
  if (a.heads_q <= 0 || a.heads_kv <= 0 || a.heads_q % a.heads_kv != 0)
    throw SignatureError(who + "heads_q (" + std::to_string(a.heads_q) +
                         ") must be a positive multiple of heads_kv (" +
                         std::to_string(a.heads_kv) + ")");
  if (a.total_q < 0 || a.total_k < 0 || a.batch < 0)
    throw SignatureError(who + "negative total_q, total_k or batch");
  if (a.total_q > INT_MAX || a.total_k > INT_MAX || a.batch >= INT_MAX)
    throw SignatureError(who + "more than 2^31 - 1 tokens or sequences");
  bool known = false;
  for (const auto& [bn, stages] : instances(a.head_dim))
    known = known || (bn == config.block_n && stages == config.stages);
  if (!known || config.blocks < 0)
    throw SignatureError(who + "no kernel for config {" + config.str() + "} at head_dim " +
                         std::to_string(a.head_dim));
  if (a.total_q == 0 || a.batch == 0) return;
  // Tiles (sequence, head, 128 queries): at most heads_q * (ceil(total_q / 128) + batch).
  const int64_t max_tiles = a.heads_q * ((a.total_q + kBlockM - 1) / kBlockM + a.batch);
  if (max_tiles > INT_MAX / 2)
    throw SignatureError(who + "too many tiles (" + std::to_string(max_tiles) + ")");
  if (a.q == nullptr || a.out == nullptr || a.lse == nullptr || a.cu_seqlens_q == nullptr ||
      a.cu_seqlens_k == nullptr || (a.total_k > 0 && (a.k == nullptr || a.v == nullptr)))
    throw SignatureError(who + "a tensor pointer is null");
  if (!aligned16(a.q) || !aligned16(a.k) || !aligned16(a.v) || !aligned16(a.out) ||
      (reinterpret_cast<uintptr_t>(a.lse) & 3u) != 0)
    throw SignatureError(who + "q, k, v and out must be 16-byte aligned, lse 4-byte aligned");

  const DeviceFacts facts = hopper_device(who);

  VarlenLaunch l{};
  const void* kbase = a.total_k > 0 ? a.k : a.q;  // a map is never empty; never read then
  const void* vbase = a.total_k > 0 ? a.v : a.q;
  const int64_t kheads = a.total_k > 0 ? a.heads_kv : a.heads_q;
  l.map_q = make_map_3d(a.q, a.dtype, a.total_q, a.heads_q, a.head_dim, kBlockM);
  l.map_k = make_map_3d(kbase, a.dtype, a.total_k, kheads, a.head_dim, config.block_n);
  l.map_v = make_map_3d(vbase, a.dtype, a.total_k, kheads, a.head_dim, config.block_n);

  attention_detail::VarlenParams& p = l.params;
  p.cu_q = a.cu_seqlens_q;
  p.cu_k = a.cu_seqlens_k;
  p.out = a.out;
  p.lse = a.lse;
  p.batch = static_cast<int>(a.batch);
  p.heads_q = static_cast<int>(a.heads_q);
  p.group = static_cast<int>(a.heads_q / a.heads_kv);
  p.total_q = static_cast<int>(a.total_q);
  p.pingpong = config.pingpong ? 1 : 0;
  p.tile_counter = a.workspace;
  l.transform = set_scores(p, a.scores);
  l.dtype = a.dtype;
  l.block_n = config.block_n;
  l.stages = config.stages;
  const int64_t want = config.blocks > 0 ? config.blocks : facts.sms;
  l.blocks = static_cast<int>(std::max<int64_t>(1, std::min(want, max_tiles)));
  l.stream = static_cast<cudaStream_t>(stream);

  zero_tile_counter(a.workspace, l.stream);
  bool launched = false;
  switch (a.head_dim) {
    case 64:
      launched = attention_detail::launch_varlen_d64(l);
      break;
    case 128:
      launched = attention_detail::launch_varlen_d128(l);
      break;
    default:
      launched = attention_detail::launch_varlen_d256(l);
      break;
  }
  if (!launched)
    throw SignatureError(who + "no kernel for config {" + config.str() + "} at head_dim " +
                         std::to_string(a.head_dim));
}

void launch_attention_paged_tma(const AttentionPagedArgs& a, int32_t* tile_counter, void* stream) {
  const std::string who = "attention_paged (CUDA, TMA): ";
  check_attention_paged_args(a);
  if (a.cu_seqlens_k != nullptr)
    throw SignatureError(who + "contiguous keys (cu_seqlens_k) are the varlen launch's, not pages");
  // Row coordinates are int32, and a row past the cache (a box's 128 rows included) must be one.
  if (a.total_q > INT_MAX || a.num_blocks * a.page_size > INT_MAX - 128)
    throw SignatureError(who + "more than 2^31 - 1 tokens or 2^31 - 129 cache rows");
  if (a.total_q == 0) return;
  if (a.batch == 0) throw SignatureError(who + "queries without sequences (batch 0)");
  // (an upper bound packed or not: heads_kv * ceil(sq * group / kBlockM) <= heads_q * ...)
  const int64_t max_tiles = a.heads_q * ((a.total_q + kBlockM - 1) / kBlockM + a.batch);
  if (max_tiles > INT_MAX / 2)
    throw SignatureError(who + "too many tiles (" + std::to_string(max_tiles) + ")");
  check_attention_paged_pointers(a);
  const DeviceFacts facts = hopper_device(who);

  VarlenLaunch l{};
  // Every page size divides block_n. Three stages at D 128 (one Q stage): the faster of two and
  // three as measured (docs/perf/2026-12-04-h200-attention-paged-prefill.md).
  l.block_n = a.head_dim == 256 ? 64 : 128;
  l.stages = a.head_dim == 128 ? 3 : 2;
  const int box_rows = static_cast<int>(std::min<int64_t>(a.page_size, l.block_n));
  // An empty cache: the maps cover q instead and every box is past them (zeros).
  const bool empty = a.num_blocks == 0;
  const int64_t cache_rows = empty ? a.total_q : a.num_blocks * a.page_size;
  // GQA packing where the group (then a power of two) divides a tile's rows and the average
  // sequence has fewer queries than a tile (static shapes only): the query heads of a KV head share
  // its K / V blocks, a decoding sequence takes one tile per KV head instead of one per query head.
  // Sequences of a tile's queries or more fill their tiles either way; there packing measured 1-4%
  // slower (docs/perf/2026-12-05-h100-paged-gqa-packing.md).
  const int64_t group = a.heads_q / a.heads_kv;
  const bool short_sequences = (a.total_q + a.batch - 1) / a.batch < kBlockM;
  const bool pack =
      group > 1 && kBlockM % group == 0 && short_sequences && a.total_q * group <= INT_MAX;
  l.map_q = pack ? make_map_3d(a.q, a.dtype, a.total_q, a.heads_q, a.head_dim,
                               static_cast<int>(kBlockM / group), static_cast<int>(group))
                 : make_map_3d(a.q, a.dtype, a.total_q, a.heads_q, a.head_dim, kBlockM);
  l.map_k = make_map_3d(empty ? a.q : a.k_cache, a.dtype, cache_rows,
                        empty ? a.heads_q : a.heads_kv, a.head_dim, box_rows);
  // Pages of 16 keys at D 128 and 256: V in page-major stages, each page's chunks in one load
  // (docs/design/attention-kernels.md, "The TMA pipeline over pages").
  l.v_rows = a.page_size == 16 && a.head_dim >= 128 && !empty ? 16 : 0;
  l.map_v = l.v_rows > 0 ? hopper::make_tma_map_row_chunks(
                               a.v_cache,
                               a.dtype == DType::bfloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                          : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                               2, cache_rows, a.heads_kv, a.head_dim, l.v_rows)
                         : make_map_3d(empty ? a.q : a.v_cache, a.dtype, cache_rows,
                                       empty ? a.heads_q : a.heads_kv, a.head_dim, box_rows);

  attention_detail::VarlenParams& p = l.params;
  p.cu_q = a.cu_seqlens_q;
  p.cu_k = nullptr;
  p.out = a.out;
  p.lse = a.lse;
  p.batch = static_cast<int>(a.batch);
  p.heads_q = static_cast<int>(a.heads_q);
  p.group = static_cast<int>(a.heads_q / a.heads_kv);
  p.total_q = static_cast<int>(a.total_q);
  p.pingpong = 1;
  p.tile_counter = tile_counter;
  p.seqused_k = a.seqused_k;
  p.block_table = a.block_table;
  p.table_width = static_cast<int>(a.width);
  p.num_blocks = static_cast<int>(a.num_blocks);
  p.page_size = static_cast<int>(a.page_size);
  p.page_shift = a.page_size == 16 ? 4 : a.page_size == 32 ? 5 : a.page_size == 64 ? 6 : 7;
  p.box_rows = box_rows;
  p.cache_rows = static_cast<int>(cache_rows);
  p.pack_shift = pack ? std::countr_zero(static_cast<uint64_t>(group)) : 0;
  l.transform = set_scores(p, a.scores);
  l.dtype = a.dtype;
  l.blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(facts.sms, max_tiles)));
  l.stream = static_cast<cudaStream_t>(stream);

  zero_tile_counter(tile_counter, l.stream);
  const bool launched = a.head_dim == 64    ? attention_detail::launch_paged_tma_d64(l)
                        : a.head_dim == 128 ? attention_detail::launch_paged_tma_d128(l)
                                            : attention_detail::launch_paged_tma_d256(l);
  if (!launched) throw SignatureError(who + "no kernel at head_dim " + std::to_string(a.head_dim));
}

}  // namespace tileops::cuda_kernels
