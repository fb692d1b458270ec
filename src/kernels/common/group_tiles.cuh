// Internal: the tile scheduler of the persistent kernels over groups of rows (the experts of a
// grouped GEMM; any row groups given by offsets, such as variable-length sequences). Groups come
// from int32 offsets, made safe on the fly (clamped to [0, M], then a running maximum), or from
// the masked layout (group e at rows [e max_m, e max_m + count_e)). Device code only; include
// from .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tileops::cuda_kernels::group_tiles {

// The linear tile index runs over the groups (experts) in order; inside expert e (rows
// [o_e, o_{e+1})), m-tiles vary fastest: local = n_tile * m_tiles_e + m_tile. A persistent block
// visits the tiles blockIdx.x, blockIdx.x + gridDim.x, ... in increasing order, so a cursor that
// only moves forward finds each tile's expert. A whole warp runs the cursor (32 experts per step:
// prefix max of the clamped offsets, prefix sum of the tile counts, ballot); every lane gets the
// same answer, so warps run it independently without block barriers.
struct TileInfo {
  int expert;
  int row0;    // first row of the tile
  int rows;    // valid rows of the tile (1 .. block_m)
  int n_tile;  // tile index across the output columns
};

__device__ __forceinline__ int clamp_offset(int32_t v, int64_t M) {
  const int64_t c = v < 0 ? 0 : (static_cast<int64_t>(v) > M ? M : static_cast<int64_t>(v));
  return static_cast<int>(c);
}

struct TileCursor {
  int e_base = 0;        // first expert of the current chunk of 32
  long long t_base = 0;  // tiles of the experts before e_base
  int carry = 0;         // max of the clamped offsets before e_base (o_{e_base - 1})

  // Finds tile t (t never decreases between calls). Must be called by all 32 lanes of a warp.
  // P: a parameter block with offsets (int32: [E + 1] offsets, or [E] counts), M, E and n_tiles
  // (tiles across the columns per m-tile), and a masked_rows(p) found in P's namespace (by
  // argument-dependent lookup): 0 for offsets; > 0 selects the masked layout (expert e: rows
  // [e max_m, e max_m + count_e), the count clamped to [0, max_m], read from p.offsets[e]).
  template <class P>
  __device__ __forceinline__ bool find(const P& p, int block_m, long long t, TileInfo& out) {
    const int lane = static_cast<int>(threadIdx.x & 31u);
    const int max_m = masked_rows(p);
    while (e_base < p.E) {
      const int e = e_base + lane;
      int start;
      int end;
      if (max_m > 0) {
        start = (e < p.E ? e : p.E) * max_m;
        end = e < p.E ? start + clamp_offset(__ldg(p.offsets + e), max_m) : start;
      } else {
        int v = 0;
        int vnext = 0;
        if (e < p.E) {
          v = clamp_offset(__ldg(p.offsets + e), p.M);
          vnext = clamp_offset(__ldg(p.offsets + e + 1), p.M);
        }
        // o_e: running max (inclusive) with the carry; o_{e+1} = max(o_e, clamp(off[e+1])).
        start = v > carry ? v : carry;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const int y = __shfl_up_sync(0xffffffffu, start, o);
          if (lane >= o && y > start) start = y;
        }
        end = e < p.E ? (vnext > start ? vnext : start) : start;
      }
      const int rows = end - start;
      const int m_tiles = (rows + block_m - 1) / block_m;
      const long long tiles = static_cast<long long>(m_tiles) * p.n_tiles;
      long long incl = tiles;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const long long y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
      }
      const long long total = __shfl_sync(0xffffffffu, incl, 31);
      if (t < t_base + total) {
        const unsigned mask = __ballot_sync(0xffffffffu, t < t_base + incl);
        const int f = __ffs(static_cast<int>(mask)) - 1;
        const int f_start = __shfl_sync(0xffffffffu, start, f);
        const int f_end = __shfl_sync(0xffffffffu, end, f);
        const int f_mt = __shfl_sync(0xffffffffu, m_tiles, f);
        const long long f_excl = __shfl_sync(0xffffffffu, incl - tiles, f);
        const long long local = t - t_base - f_excl;
        const int m_tile = static_cast<int>(local % f_mt);
        out.expert = e_base + f;
        out.n_tile = static_cast<int>(local / f_mt);
        out.row0 = f_start + m_tile * block_m;
        const int left = f_end - out.row0;
        out.rows = left < block_m ? left : block_m;
        return true;
      }
      t_base += total;
      carry = __shfl_sync(0xffffffffu, start, 31);
      e_base += 32;
    }
    return false;
  }
};

}  // namespace tileops::cuda_kernels::group_tiles
