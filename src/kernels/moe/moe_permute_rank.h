// Internal: the pre-permute's ranking (moe_rank_cuda.cu), which launch_moe_pre_permute runs
// before its gather. Pair p has global id ids[p] and local id e = map ? (0 <= g < map_size ?
// map[g] : -1) : g, kept iff 0 <= e < E; kept pairs are ranked by (e, p): offsets[e] = kept pairs
// with a local id below e (offsets[E] all of them), inverse[p] = the rank (-1 when dropped).
// The masked layout (max_m > 0) writes counts[e] (never clamped) and inverse[p] =
// e * max_m + (rank - offsets[e]), or -1 at or past max_m.
#pragma once

#include <cstdint>

namespace tileops::cuda_kernels {

struct RankArgs {
  const int32_t* ids = nullptr;
  const int32_t* map = nullptr;  ///< optional [map_size]
  int64_t map_size = 0;
  int32_t* offsets = nullptr;  ///< [E + 1]
  int32_t* inverse = nullptr;  ///< [pairs]
  int64_t pairs = 0;
  int E = 0;
  int max_m = 0;
  int32_t* counts = nullptr;  ///< [E] with max_m
  /// Optional [moe_rank_scratch_ints(pairs, E)]: blocks rank segments of the pairs in parallel
  /// (three kernels) instead of one block ranking them all.
  int32_t* scratch = nullptr;
};

/// The scratch the multi-block ranking takes for `pairs` pairs over E experts; 0 where one block
/// ranks them (up to 8192 pairs, or too many experts for a block's counters).
int64_t moe_rank_scratch_ints(int64_t pairs, int64_t E);

/// Launches on `stream` (a cudaStream_t). SignatureError when E's counters exceed shared memory.
void launch_moe_rank(const RankArgs& args, void* stream);

}  // namespace tileops::cuda_kernels
