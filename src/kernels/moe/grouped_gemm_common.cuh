// Internal: what the grouped GEMM kernels (simt, mma, wgmma) share: the parameter block, the tile
// scheduler over (expert, m-tile, n-tile), the gated activations, the output stores and the zero
// fill of the rows no expert covers. Include only from the grouped_gemm*.cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda_vectors.cuh"
#include "kernels/moe/moe_cuda.h"
#include "tileops/core/dtype.h"

namespace tileops::cuda_kernels::moe_detail {

enum : int { kActNone = 0, kActSilu = 1, kActGelu = 2 };

struct GemmParams {
  const void* a;
  const int32_t* offsets;  // [E + 1]
  const void* b;
  void* c;
  int64_t M;
  int64_t N;
  int64_t K;
  int64_t n_out;  // N (none) or N / 2 (gated)
  int E;
  int act;
  // Tiles across n_out for one m-tile: ceil(n_out / (block_n or block_n / 2 when gated)).
  int n_tiles;
};

// ---------------------------------------------------------------------------------------------
// Tile scheduler. The linear tile index runs over the experts in order; inside expert e (rows
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

// The contiguous layout: no masked rows.
__device__ __forceinline__ int masked_rows(const GemmParams&) {
  return 0;
}

struct TileCursor {
  int e_base = 0;        // first expert of the current chunk of 32
  long long t_base = 0;  // tiles of the experts before e_base
  int carry = 0;         // max of the clamped offsets before e_base (o_{e_base - 1})

  // Finds tile t (t never decreases between calls). Must be called by all 32 lanes of a warp.
  // P: GemmParams, or another parameter block with the same offsets, M, E and n_tiles whose
  // masked_rows(p) > 0 selects the masked layout (expert e: rows [e max_m, e max_m + count_e),
  // the count clamped to [0, max_m], read from p.offsets[e]).
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

// The covered row range [o_0, o_E) (o_E: the maximum clamped offset). Called by a whole warp.
template <class P>
__device__ __forceinline__ void covered_rows(const P& p, int& lo, int& hi) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  int m = 0;
  for (int e = lane; e <= p.E; e += 32) {
    const int v = clamp_offset(__ldg(p.offsets + e), p.M);
    m = v > m ? v : m;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const int y = __shfl_xor_sync(0xffffffffu, m, o);
    m = y > m ? y : m;
  }
  lo = clamp_offset(__ldg(p.offsets), p.M);
  hi = m;
}

// Zeroes rows [0, lo) and [hi, M) of c. `rank` / `count`: this thread among all the grid's
// threads taking part. Called by whole warps (covered_rows).
template <typename T, class P>
__device__ void zero_uncovered(const P& p, long long rank, long long count) {
  int lo = 0;
  int hi = 0;
  covered_rows(p, lo, hi);
  const long long head = static_cast<long long>(lo) * p.n_out;
  const long long tail_begin = static_cast<long long>(hi) * p.n_out;
  const long long tail = (p.M - hi) * p.n_out;
  T* c = static_cast<T*>(p.c);
  const bool vec = (reinterpret_cast<uintptr_t>(c) & 15u) == 0 && (p.n_out & 7) == 0;
  if (vec) {  // row boundaries (and so both ranges) are multiples of 8 elements
    uint4* cv = reinterpret_cast<uint4*>(c);
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    for (long long i = rank; i < head / 8; i += count) cv[i] = z;
    for (long long i = rank; i < tail / 8; i += count) cv[tail_begin / 8 + i] = z;
  } else {
    const T z = T(0.0f);
    for (long long i = rank; i < head; i += count) c[i] = z;
    for (long long i = rank; i < tail; i += count) c[tail_begin + i] = z;
  }
}

// ---------------------------------------------------------------------------------------------
// Activations and stores.

__device__ __forceinline__ float silu_f(float g) {
  return g / (1.0f + expf(-g));
}

__device__ __forceinline__ float gelu_tanh_f(float g) {
  const float k0 = 0.7978845608028654f;  // sqrt(2 / pi)
  const float k1 = 0.044715f;
  return 0.5f * g * (1.0f + tanhf(k0 * (g + k1 * g * g * g)));
}

__device__ __forceinline__ float gated(int act, float g, float u) {
  return (act == kActSilu ? silu_f(g) : gelu_tanh_f(g)) * u;
}

using vec::round_to;
using vec::to_float;

// Stores (v0, v1) at columns (col, col + 1) of the row starting at `row` (col is even). `pair`:
// one 4-byte store is allowed (n_out even and c 4-byte aligned).
template <typename T>
__device__ __forceinline__ void store_pair(T* row, int64_t col, int64_t n_out, bool pair, float v0,
                                           float v1) {
  if (pair && col + 1 < n_out) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      *reinterpret_cast<__nv_bfloat162*>(row + col) = __floats2bfloat162_rn(v0, v1);
    } else {
      *reinterpret_cast<__half2*>(row + col) = __floats2half2_rn(v0, v1);
    }
  } else {
    if (col < n_out) row[col] = round_to<T>(v0);
    if (col + 1 < n_out) row[col + 1] = round_to<T>(v1);
  }
}

// ---------------------------------------------------------------------------------------------
// Host side of the variants (each in its own .cu). `grid_cap`: the persistent grid's size before
// the limit by the tile count (blocks_per_sm x multiprocessors, computed by the caller from
// `blocks_per_sm`, or 0 for "occupancy").

/// The configurations of a variant that have a kernel.
std::vector<GroupedGemmConfig> simt_configs();
std::vector<GroupedGemmConfig> mma_configs();
std::vector<GroupedGemmConfig> wgmma_configs();

/// Launch the variant's kernel. `max_tiles`: an upper bound of the tile count.
void launch_simt(const GemmParams& p, const GroupedGemmConfig& config, DType dtype, int sms,
                 long long max_tiles, cudaStream_t stream);
void launch_mma(const GemmParams& p, const GroupedGemmConfig& config, DType dtype, int sms,
                long long max_tiles, cudaStream_t stream);
void launch_wgmma(const GemmParams& p, const GroupedGemmConfig& config, DType dtype, int sms,
                  long long max_tiles, cudaStream_t stream);

[[noreturn]] void throw_cuda(cudaError_t err, const char* what);

/// Blocks per multiprocessor for `fn` (occupancy, cached), at least 1.
int occupancy(const void* fn, int threads, int smem_bytes);

/// Sets the kernel's dynamic shared memory limit (once per kernel).
void allow_smem(const void* fn, int smem_bytes);

}  // namespace tileops::cuda_kernels::moe_detail
