// The pre-permute's ranking (moe_permute_rank.h states what it writes). A block's W warps each own
// a contiguous segment of the block's pairs, with W x E counters in shared memory:
// - count: per warp, the pairs of each expert (32 pairs at a time; __match_any_sync groups the
//   lanes of equal expert, the highest lane of each group adds the group's size);
// - prefix: per expert, the counters become the exclusive prefix over the warps plus the
//   block's base for the expert;
// - assign: each warp walks its segment again in order: the rank of a pair is its counter plus
//   the lanes below it in its group; the group's highest lane advances the counter.
// Ranks are therefore ordered by (expert, pair index): stable and deterministic.
//
// One block ranks all the pairs (its base of expert e: offsets[e], from a block scan over the
// experts), or, with the scratch, blocks of kBlockPairs pairs in three kernels: count (each
// block's count per expert to scratch[b][e]), scan (one block: per expert the exclusive prefix
// over the blocks, a scan over the experts for offsets, scratch[b][e] becomes the block's base)
// and assign (each block counts again, then assigns), where the pairs are many: a single block is
// latency bound (docs/perf/2026-12-02-h200-pre-permute.md).
#include "kernels/moe/moe_permute_rank.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/moe/moe_permute_launch_errors.h"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {
namespace {

using moe_launch::check_launch;
using moe_launch::throw_cuda;

constexpr int kRankMaxWarps = 32;
constexpr int kRankUnroll = 4;  // groups of 32 pairs whose ids are loaded together
constexpr int kBlockWarps = 8;  // warps of a multi-block ranking's block
constexpr int64_t kBlockPairs = 2048;
// Fewer pairs rank faster on one block than through three launches (H200: 4096 pairs 15 us on
// one block, 27 us on many; 32768 pairs 79 us against 27 us).
constexpr int64_t kMinPairsForBlocks = 4 * kBlockPairs + 1;
// The dynamic shared memory a block's counters may take without the opt-in; its static shared
// memory (warp_sums) counts against the same 48 KB: keep 1 KB.
constexpr int64_t kDynamicBudget = 47 * 1024;

struct RankParams {
  const int32_t* ids;
  const int32_t* map;  // nullptr: identity
  int64_t map_size;
  int32_t* offsets;
  int32_t* inverse;
  int64_t pairs;
  int64_t block_pairs;  // pairs per block (all of them with one block)
  int64_t segment;      // pairs per warp (a multiple of 32)
  int E;
  int max_m;             // > 0: the masked layout (inverse = e * max_m + rank within e, or -1)
  int32_t* counts;       // [E] with max_m
  int32_t* block_bases;  // [blocks][E]: the multi-block ranking's scratch
  int blocks;
};

__device__ __forceinline__ int local_expert(const RankParams& p, int64_t i) {
  const int32_t g = __ldg(p.ids + i);
  int e = g;
  if (p.map != nullptr) e = (g >= 0 && g < p.map_size) ? __ldg(p.map + g) : -1;
  return (e >= 0 && e < p.E) ? e : -1;
}

// Exclusive scan of v over the block; `total` gets the block's sum. Every thread must call it.
__device__ int block_exclusive_scan(int v, int& total, int* warp_sums) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int warps = static_cast<int>(blockDim.x >> 5);
  int incl = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += y;
  }
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int w = lane < warps ? warp_sums[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += y;
    }
    if (lane < warps) warp_sums[lane] = w;
  }
  __syncthreads();
  const int base = warp > 0 ? warp_sums[warp - 1] : 0;
  total = warp_sums[warps - 1];
  __syncthreads();  // warp_sums is reused by the next call
  return base + incl - v;
}

/// This warp's segment of this block's pairs: [begin, end).
struct Segment {
  int64_t begin, end;
};

__device__ Segment warp_segment(const RankParams& p) {
  const int64_t block_begin = static_cast<int64_t>(blockIdx.x) * p.block_pairs;
  const int64_t block_end = min(p.pairs, block_begin + p.block_pairs);
  const int64_t begin = block_begin + static_cast<int64_t>(threadIdx.x >> 5) * p.segment;
  return {begin, min(block_end, begin + p.segment)};
}

/// Zeroes the block's counters, then each warp counts its segment into its row `mine`.
__device__ void count_segment(const RankParams& p, int* counters, int* mine, Segment s) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int64_t total_counters = static_cast<int64_t>(blockDim.x >> 5) * p.E;
  for (int64_t i = threadIdx.x; i < total_counters; i += blockDim.x) counters[i] = 0;
  __syncthreads();
  for (int64_t base = s.begin; base < s.end; base += 32 * kRankUnroll) {
    int e[kRankUnroll];
#pragma unroll
    for (int u = 0; u < kRankUnroll; ++u) {
      const int64_t i = base + u * 32 + lane;
      e[u] = i < s.end ? local_expert(p, i) : -1;
    }
#pragma unroll
    for (int u = 0; u < kRankUnroll; ++u) {
      const unsigned peers = __match_any_sync(0xffffffffu, e[u]);
      if (e[u] >= 0 && lane == 31 - __clz(static_cast<int>(peers))) mine[e[u]] += __popc(peers);
      __syncwarp();
    }
  }
  __syncthreads();
}

/// Expert e's counters become the exclusive prefix over the warps; returns the block's count.
__device__ int prefix_over_warps(int* counters, int E, int e) {
  const int warps = static_cast<int>(blockDim.x >> 5);
  int count = 0;
  for (int w = 0; w < warps; ++w) {
    int* c = counters + static_cast<int64_t>(w) * E + e;
    const int v = *c;
    *c = count;
    count += v;
  }
  return count;
}

__device__ void add_to_warps(int* counters, int E, int e, int base) {
  const int warps = static_cast<int>(blockDim.x >> 5);
  for (int w = 0; w < warps; ++w) counters[static_cast<int64_t>(w) * E + e] += base;
}

/// Expert e's offset from its count (a block scan over the experts in chunks of the block;
/// every thread of the block calls it with the same e - threadIdx.x): offsets[e] and, masked,
/// counts[e]; returns the offset. `carry` holds the chunks before.
__device__ int expert_offset(const RankParams& p, int e, int count, int& carry, int* warp_sums) {
  int chunk_total = 0;
  const int excl = block_exclusive_scan(e < p.E ? count : 0, chunk_total, warp_sums);
  const int off = carry + excl;
  if (e < p.E) {
    p.offsets[e] = off;
    if (p.max_m > 0) p.counts[e] = count;  // the true count, never clamped
  }
  carry += chunk_total;
  return off;
}

/// Each warp's ranks in pair order from its counters (each already its expert's first rank).
__device__ void assign_segment(const RankParams& p, int* mine, Segment s) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const unsigned lanes_below = (1u << lane) - 1u;
  for (int64_t base = s.begin; base < s.end; base += 32 * kRankUnroll) {
    int e[kRankUnroll];
#pragma unroll
    for (int u = 0; u < kRankUnroll; ++u) {
      const int64_t i = base + u * 32 + lane;
      e[u] = i < s.end ? local_expert(p, i) : -1;
    }
#pragma unroll
    for (int u = 0; u < kRankUnroll; ++u) {
      const int64_t i = base + u * 32 + lane;
      const unsigned peers = __match_any_sync(0xffffffffu, e[u]);
      int rank = -1;
      if (e[u] >= 0) rank = mine[e[u]] + __popc(peers & lanes_below);
      __syncwarp();
      if (e[u] >= 0 && lane == 31 - __clz(static_cast<int>(peers))) mine[e[u]] += __popc(peers);
      __syncwarp();
      if (p.max_m > 0 && rank >= 0) {  // offsets are written before (a __syncthreads or a launch)
        const int local = rank - p.offsets[e[u]];
        rank = local < p.max_m ? e[u] * p.max_m + local : -1;
      }
      if (i < s.end) p.inverse[i] = rank;
    }
  }
}

// One block ranks every pair.
__global__ void __launch_bounds__(kRankMaxWarps * 32) moe_rank_kernel(const RankParams p) {
  extern __shared__ int counters[];  // [warps][E]
  __shared__ int warp_sums[32];
  const Segment s = warp_segment(p);
  int* mine = counters + static_cast<int64_t>(threadIdx.x >> 5) * p.E;
  count_segment(p, counters, mine, s);
  int carry = 0;
  for (int base = 0; base < p.E; base += static_cast<int>(blockDim.x)) {
    const int e = base + static_cast<int>(threadIdx.x);
    const int count = e < p.E ? prefix_over_warps(counters, p.E, e) : 0;
    const int off = expert_offset(p, e, count, carry, warp_sums);
    if (e < p.E) add_to_warps(counters, p.E, e, off);
  }
  if (threadIdx.x == 0) p.offsets[p.E] = carry;
  __syncthreads();
  assign_segment(p, mine, s);
}

// Multi-block, 1 of 3: block b's count of each expert to block_bases[b][e].
__global__ void __launch_bounds__(kBlockWarps * 32) moe_rank_count_kernel(const RankParams p) {
  extern __shared__ int counters[];
  const Segment s = warp_segment(p);
  count_segment(p, counters, counters + static_cast<int64_t>(threadIdx.x >> 5) * p.E, s);
  for (int e = static_cast<int>(threadIdx.x); e < p.E; e += static_cast<int>(blockDim.x)) {
    p.block_bases[static_cast<int64_t>(blockIdx.x) * p.E + e] = prefix_over_warps(counters, p.E, e);
  }
}

// 2 of 3 (one block): offsets, counts, and block_bases[b][e] = offsets[e] + the pairs of e in
// the blocks before b.
__global__ void __launch_bounds__(1024) moe_rank_scan_kernel(const RankParams p) {
  __shared__ int warp_sums[32];
  int carry = 0;
  for (int base = 0; base < p.E; base += static_cast<int>(blockDim.x)) {
    const int e = base + static_cast<int>(threadIdx.x);
    int count = 0;
    if (e < p.E) {
      for (int b = 0; b < p.blocks; ++b) {
        int* c = p.block_bases + static_cast<int64_t>(b) * p.E + e;
        const int v = *c;
        *c = count;
        count += v;
      }
    }
    const int off = expert_offset(p, e, count, carry, warp_sums);
    if (e < p.E) {
      for (int b = 0; b < p.blocks; ++b) p.block_bases[static_cast<int64_t>(b) * p.E + e] += off;
    }
  }
  if (threadIdx.x == 0) p.offsets[p.E] = carry;
}

// 3 of 3: block b counts again and assigns from its bases.
__global__ void __launch_bounds__(kBlockWarps * 32) moe_rank_assign_kernel(const RankParams p) {
  extern __shared__ int counters[];
  const Segment s = warp_segment(p);
  int* mine = counters + static_cast<int64_t>(threadIdx.x >> 5) * p.E;
  count_segment(p, counters, mine, s);
  for (int e = static_cast<int>(threadIdx.x); e < p.E; e += static_cast<int>(blockDim.x)) {
    prefix_over_warps(counters, p.E, e);
    add_to_warps(counters, p.E, e, p.block_bases[static_cast<int64_t>(blockIdx.x) * p.E + e]);
  }
  __syncthreads();
  assign_segment(p, mine, s);
}

int max_optin_smem() {
  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess)
    throw_cuda("moe_pre_permute", err, "cudaGetDevice");
  int bytes = 0;
  if (const cudaError_t err =
          cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
      err != cudaSuccess)
    throw_cuda("moe_pre_permute", err, "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
  return bytes;
}

int64_t rank_blocks(int64_t pairs) {
  return (pairs + kBlockPairs - 1) / kBlockPairs;
}

}  // namespace

int64_t moe_rank_scratch_ints(int64_t pairs, int64_t E) {
  if (pairs < kMinPairsForBlocks || E < 1 || 4 * E * kBlockWarps > kDynamicBudget) return 0;
  return rank_blocks(pairs) * E;
}

void launch_moe_rank(const RankArgs& a, void* stream) {
  const char* op = "moe_pre_permute";
  const auto st = static_cast<cudaStream_t>(stream);
  const int E = a.E;
  RankParams p{};
  p.ids = a.ids;
  p.map = a.map;
  p.map_size = a.map != nullptr ? a.map_size : 0;
  p.offsets = a.offsets;
  p.inverse = a.inverse;
  p.pairs = a.pairs;
  p.E = E;
  p.max_m = a.max_m;
  p.counts = a.counts;
  if (a.scratch != nullptr && moe_rank_scratch_ints(a.pairs, E) > 0) {
    p.blocks = static_cast<int>(rank_blocks(a.pairs));
    p.block_pairs = kBlockPairs;
    p.segment = kBlockPairs / kBlockWarps;
    p.block_bases = a.scratch;
    const auto smem = static_cast<size_t>(4 * int64_t{E} * kBlockWarps);
    moe_rank_count_kernel<<<p.blocks, kBlockWarps * 32, smem, st>>>(p);
    check_launch(op);
    moe_rank_scan_kernel<<<1, std::clamp(E, 32, 1024) / 32 * 32, 0, st>>>(p);
    check_launch(op);
    moe_rank_assign_kernel<<<p.blocks, kBlockWarps * 32, smem, st>>>(p);
    check_launch(op);
    return;
  }
  // One block: as many warps (<= 32) as have counters in 47 KB, or one warp with the opt-in
  // shared memory for very many experts.
  int warps = kRankMaxWarps;
  if (E > 0) {
    warps = static_cast<int>(std::min<int64_t>(kRankMaxWarps, kDynamicBudget / (4 * int64_t{E})));
    if (warps < 1) {
      warps = 1;
      if (4 * int64_t{E} > max_optin_smem())
        throw SignatureError("moe_pre_permute (CUDA): too many experts for shared memory: " +
                             std::to_string(E));
    }
  }
  warps = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(warps, (a.pairs + 31) / 32)));
  const int64_t smem = 4 * int64_t{E} * warps;
  if (smem > kDynamicBudget) {
    if (const cudaError_t err = cudaFuncSetAttribute(
            moe_rank_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
        err != cudaSuccess)
      throw_cuda(op, err, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  }
  p.blocks = 1;
  p.block_pairs = a.pairs;
  p.segment = ((a.pairs + warps - 1) / warps + 31) / 32 * 32;
  moe_rank_kernel<<<1, warps * 32, static_cast<size_t>(smem), st>>>(p);
  check_launch(op);
}

}  // namespace tileops::cuda_kernels
