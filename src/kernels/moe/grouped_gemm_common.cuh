// Internal: what the grouped GEMM kernels (simt, mma, wgmma) share: the parameter block, the
// contiguous layout of the tile scheduler over (expert, m-tile, n-tile) (kernels/common/
// group_tiles.cuh), the gated activations, the output stores and the zero fill of the rows no
// expert covers. Include only from the grouped_gemm*.cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/common/group_tiles.cuh"
#include "kernels/common/vectors.cuh"
#include "kernels/moe/grouped_gemm_cuda.h"
#include "tileops/core/dtype.h"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels::moe_detail {

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
  MoEActivation act;
  // Tiles across n_out for one m-tile: ceil(n_out / (block_n or block_n / 2 when gated)).
  int n_tiles;
};

// The tile scheduler (kernels/common/group_tiles.cuh) over the experts' rows.
using group_tiles::clamp_offset;
using group_tiles::TileCursor;
using group_tiles::TileInfo;

// The contiguous layout: no masked rows.
__device__ __forceinline__ int masked_rows(const GemmParams&) {
  return 0;
}

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

__device__ __forceinline__ float gated(MoEActivation act, float g, float u) {
  return (act == MoEActivation::silu_and_mul ? silu_f(g) : gelu_tanh_f(g)) * u;
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
// Host side of the variants (each in its own .cu) and of the FP8 kernel.

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

/// The blocks of a persistent grid of `fn`: blocks_per_sm (0: as many as fit, occupancy) per
/// multiprocessor, at most `max_tiles` (an upper bound of the tile count), at least 1.
long long persistent_grid(const void* fn, int threads, int smem_bytes, int blocks_per_sm, int sms,
                          long long max_tiles);

/// Fills the fields every grouped GEMM kernel's parameter block shares (P: GemmParams or
/// FP8GemmParams) from its launch arguments (A: GroupedGemmArgs or GroupedGemmFP8Args) and the
/// expert offsets (or masked counts): c, the sizes, the expert count, the activation, the output
/// width and the column tiles for tiles of block_n B rows. Returns the tile bound of a persistent
/// grid of block_m-row tiles (every expert may add one partial m-tile). SignatureError (`what`
/// names the kernel) past 2^31 column tiles.
template <class P, class A>
long long set_problem(P& p, const A& a, const int32_t* offsets, int block_m, int block_n,
                      const char* what) {
  const bool gated = a.activation != MoEActivation::none;
  p.offsets = offsets;
  p.c = a.c;
  p.M = a.M;
  p.N = a.N;
  p.K = a.K;
  p.n_out = gated ? a.N / 2 : a.N;
  p.E = static_cast<int>(a.E);
  p.act = a.activation;
  const int64_t tile_cols = gated ? block_n / 2 : block_n;
  const int64_t n_tiles = (p.n_out + tile_cols - 1) / tile_cols;
  if (n_tiles > INT_MAX) {
    throw SignatureError(std::string(what) +
                         " (CUDA): too many column tiles: " + std::to_string(n_tiles));
  }
  p.n_tiles = static_cast<int>(n_tiles);
  return ((a.M + block_m - 1) / block_m + a.E) * n_tiles;
}

/// The configuration of a tensor-core variant's kernel: k steps of 64 elements.
constexpr GroupedGemmConfig tensor_core_config(GroupedGemmVariant variant, int block_m, int block_n,
                                               int warps_m, int warps_n, int stages) {
  GroupedGemmConfig c;
  c.variant = variant;
  c.block_m = block_m;
  c.block_n = block_n;
  c.block_k = 64;
  c.warps_m = warps_m;
  c.warps_n = warps_n;
  c.stages = stages;
  return c;
}

/// One instantiated kernel of a variant: its configuration (blocks_per_sm 0) and its launcher per
/// dtype (Launcher: the variant's launch function type).
template <class Launcher>
struct VariantEntry {
  GroupedGemmConfig config;
  Launcher bf16;
  Launcher f16;
};

/// The configurations of a variant's table of instantiated kernels.
template <class Launcher, std::size_t N>
std::vector<GroupedGemmConfig> configs_of(const VariantEntry<Launcher> (&entries)[N]) {
  std::vector<GroupedGemmConfig> out;
  for (const auto& e : entries) out.push_back(e.config);
  return out;
}

/// The launcher of the entry whose configuration is `config` (any blocks_per_sm) for `dtype`;
/// SignatureError naming the `variant` when there is none.
template <class Launcher, std::size_t N>
Launcher launcher_of(const VariantEntry<Launcher> (&entries)[N], const GroupedGemmConfig& config,
                     DType dtype, const char* variant) {
  for (const auto& e : entries) {
    GroupedGemmConfig c = e.config;
    c.blocks_per_sm = config.blocks_per_sm;
    if (c == config) return dtype == DType::bfloat16 ? e.bf16 : e.f16;
  }
  throw SignatureError(std::string("grouped_gemm (CUDA): no ") + variant + " kernel for config {" +
                       config.str() + "}");
}

}  // namespace tileops::cuda_kernels::moe_detail
