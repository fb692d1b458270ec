// Internal: the work of the varlen attention kernel (attention_varlen_kernel.cuh): its parameter
// block, the tiles (sequence, query head, 128-query block) in the order the persistent grid walks
// them, and the key blocks each tile visits. Read on the device from cu_seqlens only (and, for
// paged keys, seqused_k).
//
// Order: sequences in batch order; within a sequence the query blocks from the last (the longest
// causal work) to the first, and within a block the query heads, fastest, so the heads that share
// a KV head run side by side and read the same K/V tiles from L2. With a tile counter (the
// launch's workspace, zeroed before the kernel) block b takes tile b first and then the next
// unclaimed one (atomicAdd): a block that finishes early takes more, so uneven tile costs
// (causal, varlen) balance out. Without one, block c of G takes, in round r, tile r G + c (r even)
// or r G + G - 1 - c (r odd).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tileops::cuda_kernels::attention_detail {

constexpr int kBlockM = 128;  // queries per tile: 64 per consumer warpgroup

struct VarlenParams {
  const int32_t* cu_q;
  const int32_t* cu_k;
  void* out;
  float* lse;
  int batch;
  int heads_q;
  int group;  // heads_q / heads_kv
  int total_q;
  float score_mul;  // log2-units per raw score: softmax_scale * log2(e); 1 for TRANSFORM kernels
  float pre_mul;    // TRANSFORM: raw score multiplier (scale / softcap, or scale * log2(e))
  float cap_mul;    // TRANSFORM with softcap: softcap * log2(e)
  int softcap_on;   // TRANSFORM: 1 applies cap_mul * tanh(pre_mul * s)
  int causal;
  int window_left;    // < 0: no window (clamped to 2^30 on the host)
  int pingpong;       // 1: the consumer warpgroups take turns issuing their wgmma
  int* tile_counter;  // zeroed before the launch; nullptr: the static order
  // Paged keys (the PAGED kernel; unused otherwise): sequence b holds seqused_k[b] keys, key j
  // being row j % page_size of page block_table[b * table_width + j / page_size] of the caches
  // viewed as [num_blocks * page_size, heads_kv, head_dim]; cu_k is unused.
  const int32_t* seqused_k;
  const int32_t* block_table;
  int table_width;
  int num_blocks;
  int page_size;   // 16, 32, 64 or 128
  int page_shift;  // log2(page_size)
  int box_rows;    // rows of one TMA box: min(page_size, BN)
  int cache_rows;  // num_blocks * page_size: a row there is past the cache (TMA fills zeros)
  // GQA packing: log2(group) when a tile's rows are (token, query head) pairs of one KV head's
  // group, token major (row r of a sequence: token r >> pack_shift, query head
  // (Tile::head << pack_shift) + r % group, Tile::head being the KV head), so that the group's
  // query heads share each K / V block; 0 otherwise (row r: token r, Tile::head the query head).
  int pack_shift;
};

struct Tile {
  int b;
  int head;
  int m_block;
  int q0;  // first token of the sequence in q / out
  int sq;
  int rows;  // the sequence's query rows in tiles: sq << pack_shift
  int k0;    // first token of the sequence in k / v (0 for paged keys: its own pages)
  int sk;
  int n_begin;  // key blocks [n_begin, n_end) are visited, last first
  int n_end;
};

// GQA packing's shift: a constant 0 for contiguous keys (the varlen op never packs), so that its
// instances keep the unpacked code.
template <bool PAGED>
__device__ __forceinline__ int tile_pack_shift(const VarlenParams& p) {
  return PAGED ? p.pack_shift : 0;
}

// The first query head of a tile of KV head `head` (packed: its group's heads share the tile).
template <bool PAGED>
__device__ __forceinline__ int tile_first_head(const VarlenParams& p, int head) {
  return head << tile_pack_shift<PAGED>(p);
}

// The token (index in its sequence) of query row r of a sequence's tiles.
template <bool PAGED>
__device__ __forceinline__ long long row_token(const VarlenParams& p, long long r) {
  return r >> tile_pack_shift<PAGED>(p);
}

// The key blocks of BN keys a tile visits: every key some valid query row of the tile sees.
template <int BN, bool PAGED>
__device__ __forceinline__ void tile_key_blocks(const VarlenParams& p, Tile& t) {
  const long long m0 = static_cast<long long>(t.m_block) * kBlockM;
  const long long off = static_cast<long long>(t.sk) - t.sq;
  const long long rows_end = t.rows < m0 + kBlockM ? t.rows : m0 + kBlockM;
  const long long first = row_token<PAGED>(p, m0);
  const long long last = row_token<PAGED>(p, rows_end - 1);
  long long hi = t.sk;
  if (p.causal && last + off + 1 < hi) hi = last + off + 1;
  long long lo = 0;
  if (p.window_left >= 0 && first + off - p.window_left > 0) lo = first + off - p.window_left;
  if (hi <= lo) {
    t.n_begin = 0;
    t.n_end = 0;
    return;
  }
  t.n_end = static_cast<int>((hi + BN - 1) / BN);
  t.n_begin = static_cast<int>(lo / BN);
}

// Finds tile `t` of the walk (t never decreases between calls). Run by all 32 lanes of a warp,
// each warp on its own: lane l holds the tile count of sequence base + l of the current chunk of
// 32 sequences and its inclusive prefix sum. PAGED: the keys from seqused_k, starting at 0.
template <bool PAGED>
struct TileCursor {
  int base = 0;          // first sequence of the chunk
  int t_base = 0;        // tiles before it
  int chunk_total = -1;  // tiles of the chunk; -1: not loaded
  int incl = 0;          // this lane's inclusive prefix
  int own = 0;           // this lane's tiles

  __device__ __forceinline__ bool find(const VarlenParams& p, int t, Tile& out) {
    const int lane = static_cast<int>(threadIdx.x & 31u);
    const int heads = p.heads_q >> tile_pack_shift<PAGED>(p);  // the tiles' heads
    while (base < p.batch) {
      if (chunk_total < 0) {
        const int e = base + lane;
        own = 0;
        if (e < p.batch) {
          const int sq = __ldg(p.cu_q + e + 1) - __ldg(p.cu_q + e);
          const int rows = sq << tile_pack_shift<PAGED>(p);
          if (sq > 0) own = heads * ((rows + kBlockM - 1) / kBlockM);
        }
        incl = own;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
          const int v = __shfl_up_sync(0xffffffffu, incl, d);
          if (lane >= d) incl += v;
        }
        chunk_total = __shfl_sync(0xffffffffu, incl, 31);
      }
      const int rel = t - t_base;
      if (rel < chunk_total) {
        const unsigned hit = __ballot_sync(0xffffffffu, incl > rel);
        const int f = __ffs(static_cast<int>(hit)) - 1;
        const int before = __shfl_sync(0xffffffffu, incl - own, f);
        const int local = rel - before;
        out.b = base + f;
        out.q0 = __ldg(p.cu_q + out.b);
        out.sq = __ldg(p.cu_q + out.b + 1) - out.q0;
        if constexpr (PAGED) {
          out.k0 = 0;
          out.sk = __ldg(p.seqused_k + out.b);
        } else {
          out.k0 = __ldg(p.cu_k + out.b);
          out.sk = __ldg(p.cu_k + out.b + 1) - out.k0;
        }
        if (out.sk < 0) out.sk = 0;
        out.rows = out.sq << tile_pack_shift<PAGED>(p);
        const int blocks = (out.rows + kBlockM - 1) / kBlockM;
        out.head = local % heads;
        out.m_block = blocks - 1 - local / heads;
        return true;
      }
      t_base += chunk_total;
      base += 32;
      chunk_total = -1;
    }
    return false;
  }
};

// The index of the k-th tile of block `block` in a grid of `grid` blocks (snake order).
__device__ __forceinline__ int snake_tile(int k, int block, int grid) {
  return k * grid + ((k & 1) ? grid - 1 - block : block);
}

}  // namespace tileops::cuda_kernels::attention_detail
