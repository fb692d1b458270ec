// Grouped GEMM (see grouped_gemm_cuda.h for the semantics): the argument checks, the
// configurations, the choice of variant, and the simt fallback kernel. The tensor-core variants
// live in grouped_gemm_mma_cuda.cu (mma.sync) and grouped_gemm_wgmma_cuda.cu (wgmma + TMA).
//
// simt: 64 x 64 tiles of B rows (gated: 32 gate + the 32 matching up rows, 32 output columns),
// k steps of 16 through shared memory (fp32), 256 threads each computing 4 x 4 accumulators with
// fmaf in k order; scalar loads with bounds checks (any K, any alignment). Persistent grid over
// the same tile scheduler as the fast variants; afterwards every block zeroes its share of the
// rows no expert covers.
#include "kernels/moe/grouped_gemm_cuda.h"

#include "kernels/moe/grouped_gemm_common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tileops/core/cuda.h"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {
namespace moe_detail {

// ---------------------------------------------------------------------------------------------
// simt kernel

constexpr int kSimtBM = 64;
constexpr int kSimtBN = 64;  // rows of B per tile
constexpr int kSimtBK = 16;
constexpr int kSimtThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kSimtThreads) grouped_gemm_simt_kernel(const GemmParams p) {
  __shared__ float As[kSimtBK][kSimtBM + 1];
  __shared__ float Bs[kSimtBK][kSimtBN + 1];
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid & 15;
  const int ty = tid >> 4;
  const T* A = static_cast<const T*>(p.a);
  const T* B = static_cast<const T*>(p.b);
  T* C = static_cast<T*>(p.c);
  const bool is_gated = p.act != MoEActivation::none;
  const int64_t K = p.K;
  const int64_t half_n = p.N / 2;

  TileCursor cursor;
  TileInfo ti;
  for (long long t = blockIdx.x; cursor.find(p, kSimtBM, t, ti); t += gridDim.x) {
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
    const T* a_tile = A + static_cast<int64_t>(ti.row0) * K;
    const T* b_expert = B + static_cast<int64_t>(ti.expert) * p.N * K;
    for (int64_t k0 = 0; k0 < K; k0 += kSimtBK) {
#pragma unroll
      for (int i = 0; i < (kSimtBM * kSimtBK) / kSimtThreads; ++i) {
        const int idx = tid + i * kSimtThreads;
        const int r = idx / kSimtBK;
        const int kk = idx % kSimtBK;
        float v = 0.f;
        if (r < ti.rows && k0 + kk < K)
          v = to_float<T>(a_tile[static_cast<int64_t>(r) * K + k0 + kk]);
        As[kk][r] = v;
      }
#pragma unroll
      for (int i = 0; i < (kSimtBN * kSimtBK) / kSimtThreads; ++i) {
        const int idx = tid + i * kSimtThreads;
        const int r = idx / kSimtBK;
        const int kk = idx % kSimtBK;
        int64_t n;
        bool ok;
        if (is_gated) {
          const int64_t j = static_cast<int64_t>(ti.n_tile) * (kSimtBN / 2) + (r & 31);
          ok = j < half_n;
          n = (r < 32 ? 0 : half_n) + j;
        } else {
          n = static_cast<int64_t>(ti.n_tile) * kSimtBN + r;
          ok = n < p.N;
        }
        float v = 0.f;
        if (ok && k0 + kk < K) v = to_float<T>(b_expert[n * K + k0 + kk]);
        Bs[kk][r] = v;
      }
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kSimtBK; ++kk) {
        float av[4];
        float bv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) av[i] = As[kk][ty + 16 * i];
#pragma unroll
        for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx + 16 * j];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = ty + 16 * i;
      if (r >= ti.rows) continue;
      T* crow = C + static_cast<int64_t>(ti.row0 + r) * p.n_out;
      if (is_gated) {
        // Thread columns tx, tx + 16 of the 32 gate rows; the up rows are 32 further.
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int64_t col = static_cast<int64_t>(ti.n_tile) * (kSimtBN / 2) + tx + 16 * j;
          if (col < p.n_out) crow[col] = round_to<T>(gated(p.act, acc[i][j], acc[i][j + 2]));
        }
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t col = static_cast<int64_t>(ti.n_tile) * kSimtBN + tx + 16 * j;
          if (col < p.n_out) crow[col] = round_to<T>(acc[i][j]);
        }
      }
    }
  }
  zero_uncovered<T>(p, static_cast<long long>(blockIdx.x) * kSimtThreads + tid,
                    static_cast<long long>(gridDim.x) * kSimtThreads);
}

std::vector<GroupedGemmConfig> simt_configs() {
  GroupedGemmConfig c;
  c.variant = GroupedGemmVariant::simt;
  c.block_m = kSimtBM;
  c.block_n = kSimtBN;
  c.block_k = kSimtBK;
  c.warps_m = 1;
  c.warps_n = 1;
  c.stages = 1;
  return {c};
}

void launch_simt(const GemmParams& p, const GroupedGemmConfig& config, DType dtype, int sms,
                 long long max_tiles, cudaStream_t stream) {
  const void* fn = dtype == DType::bfloat16
                       ? reinterpret_cast<const void*>(grouped_gemm_simt_kernel<__nv_bfloat16>)
                       : reinterpret_cast<const void*>(grouped_gemm_simt_kernel<__half>);
  const long long grid = persistent_grid(fn, kSimtThreads, 0, config.blocks_per_sm, sms, max_tiles);
  if (dtype == DType::bfloat16) {
    grouped_gemm_simt_kernel<__nv_bfloat16>
        <<<static_cast<unsigned>(grid), kSimtThreads, 0, stream>>>(p);
  } else {
    grouped_gemm_simt_kernel<__half><<<static_cast<unsigned>(grid), kSimtThreads, 0, stream>>>(p);
  }
}

// ---------------------------------------------------------------------------------------------
// Host helpers shared by the variants.

void throw_cuda(cudaError_t err, const char* what) {
  throw UsageError(std::string("grouped_gemm (CUDA): ") + what + ": " + cudaGetErrorName(err) +
                   ": " + cudaGetErrorString(err));
}

int current_device() {
  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess)
    throw_cuda(err, "cudaGetDevice");
  return device;
}

int occupancy(const void* fn, int threads, int smem_bytes) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, int, int>, int> cache;
  const int device = current_device();
  const auto key = std::make_tuple(fn, threads, smem_bytes, device);
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  int blocks = 0;
  const cudaError_t err =
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, threads, smem_bytes);
  if (err != cudaSuccess) throw_cuda(err, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  blocks = std::max(blocks, 1);
  std::lock_guard<std::mutex> lock(mutex);
  cache[key] = blocks;
  return blocks;
}

long long persistent_grid(const void* fn, int threads, int smem_bytes, int blocks_per_sm, int sms,
                          long long max_tiles) {
  const int per_sm = blocks_per_sm > 0 ? blocks_per_sm : occupancy(fn, threads, smem_bytes);
  return std::max<long long>(
      1, std::min<long long>(static_cast<long long>(sms) * per_sm, std::max(max_tiles, 1LL)));
}

void allow_smem(const void* fn, int smem_bytes) {
  static std::mutex mutex;
  static std::set<std::tuple<const void*, int>> done;
  const int device = current_device();
  const auto key = std::make_tuple(fn, device);
  std::lock_guard<std::mutex> lock(mutex);
  if (done.count(key) != 0) return;
  const cudaError_t err =
      cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (err != cudaSuccess) throw_cuda(err, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  done.insert(key);
}

}  // namespace moe_detail

namespace {

using moe_detail::GemmParams;
using moe_detail::throw_cuda;

// From the properties read once per device.
int sm_count(int device) {
  return cuda_device_properties(device).sm_count;
}

int cc_major(int device) {
  return cuda_device_properties(device).major;
}

const char* variant_name(GroupedGemmVariant v) {
  switch (v) {
    case GroupedGemmVariant::simt:
      return "simt";
    case GroupedGemmVariant::mma:
      return "mma";
    case GroupedGemmVariant::wgmma:
      return "wgmma";
  }
  return "?";
}

void check_dtype(DType dtype) {
  if (dtype != DType::bfloat16 && dtype != DType::float16)
    throw SignatureError("grouped_gemm (CUDA): dtype must be bfloat16 or float16, got " +
                         std::string(dtype_name(dtype)));
}

bool aligned_to(const void* p, uintptr_t align) {
  return reinterpret_cast<uintptr_t>(p) % align == 0;
}

std::vector<GroupedGemmConfig> variant_configs(GroupedGemmVariant v) {
  switch (v) {
    case GroupedGemmVariant::simt:
      return moe_detail::simt_configs();
    case GroupedGemmVariant::mma:
      return moe_detail::mma_configs();
    case GroupedGemmVariant::wgmma:
      return moe_detail::wgmma_configs();
  }
  return {};
}

// The configuration with blocks_per_sm cleared is one of the variant's kernels.
bool has_kernel(const GroupedGemmConfig& c) {
  GroupedGemmConfig base = c;
  base.blocks_per_sm = 0;
  const auto list = variant_configs(c.variant);
  return c.blocks_per_sm >= 0 && std::find(list.begin(), list.end(), base) != list.end();
}

GroupedGemmConfig find_config(GroupedGemmVariant v, int bm, int bn, int stages,
                              bool tma_store = false) {
  for (const GroupedGemmConfig& c : variant_configs(v))
    if (c.block_m == bm && c.block_n == bn && c.stages == stages && c.cluster_m == 1 &&
        c.tma_store == tma_store)
      return c;
  return moe_detail::simt_configs().front();
}

// Shape conditions of the tensor-core variants (the pointer alignment is checked at launch).
bool mma_shape_ok(const GroupedGemmArgs& a) {
  return a.K > 0 && a.K % 8 == 0 && a.K <= (int64_t{1} << 22) && a.N * a.K < (int64_t{1} << 31);
}

bool wgmma_shape_ok(const GroupedGemmArgs& a, int device) {
  return mma_shape_ok(a) && cc_major(device) == 9 && a.E >= 1 && a.E * a.N < (int64_t{1} << 31) &&
         a.M < (int64_t{1} << 31);
}

GroupedGemmConfig mma_default(const GroupedGemmArgs& a) {
  const int64_t per_expert = a.M / std::max<int64_t>(a.E, 1);
  if (per_expert <= 32) return find_config(GroupedGemmVariant::mma, 32, 128, 6);
  if (per_expert <= 64) return find_config(GroupedGemmVariant::mma, 64, 128, 4);
  return find_config(GroupedGemmVariant::mma, 128, 256, 3);
}

// Measured on an H200 (docs/perf/2026-11-29-h200-moe-tma-store.md). 128-row tiles store through
// the TMA epilogue (call 6: 605 -> 684 TFLOP/s on E=256 x 1024 rows, N=4096, K=6144; 425 -> 549
// on the Qwen3-30B down projection); 64-row tiles (at most 64 rows per expert on average, mostly
// partial tiles that store from registers anyway) do not (67.8 without, 67.0 with it at 16 rows
// per expert).
GroupedGemmConfig wgmma_default(const GroupedGemmArgs& a) {
  const int64_t per_expert = a.M / std::max<int64_t>(a.E, 1);
  const int bm = per_expert <= 64 ? 64 : 128;
  const bool tma_store = bm == 128;
  if (a.N <= 128)
    return find_config(GroupedGemmVariant::wgmma, bm, 128, bm == 64 ? 8 : 6, tma_store);
  // Below 256 rows per expert (DeepSeek-V3 at 4096 tokens: 128) 3 stages of 128 x 256 measured
  // faster than 4, uniform and ragged (call 5, gate_up: 466 vs 441 and 357 vs 321 TFLOP/s); at
  // 256 rows (Qwen3-30B at 4096 tokens) 4 stages (574 vs 539).
  const int stages = bm == 64 ? 5 : (per_expert < 256 ? 3 : 4);
  return find_config(GroupedGemmVariant::wgmma, bm, 256, stages, tma_store);
}

}  // namespace

std::string GroupedGemmConfig::str() const {
  return std::string("variant=") + variant_name(variant) + ",block=" + std::to_string(block_m) +
         "x" + std::to_string(block_n) + "x" + std::to_string(block_k) +
         ",warps=" + std::to_string(warps_m) + "x" + std::to_string(warps_n) +
         ",stages=" + std::to_string(stages) + ",blocks_per_sm=" + std::to_string(blocks_per_sm) +
         (cluster_m != 1 ? ",cluster_m=" + std::to_string(cluster_m) : std::string()) +
         (tma_store ? ",tma_store=1" : "");
}

GroupedGemmConfig grouped_gemm_default_config(const GroupedGemmArgs& args, int device) {
  check_dtype(args.dtype);
  if (wgmma_shape_ok(args, device)) return wgmma_default(args);
  if (mma_shape_ok(args)) return mma_default(args);
  return moe_detail::simt_configs().front();
}

std::vector<GroupedGemmConfig> grouped_gemm_tuning_space(const GroupedGemmArgs& args, int device) {
  std::vector<GroupedGemmConfig> out;
  out.push_back(grouped_gemm_default_config(args, device));
  const auto add = [&](const GroupedGemmConfig& c) {
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  if (wgmma_shape_ok(args, device)) {
    // Clusters along M pair the m-tiles of an expert: only where the experts average at least
    // one full tile of rows (else most pairs would have an idle half).
    const int64_t per_expert = args.M / std::max<int64_t>(args.E, 1);
    for (const auto& c : moe_detail::wgmma_configs())
      if (c.cluster_m == 1 || per_expert >= c.block_m) add(c);
  }
  if (mma_shape_ok(args)) {
    for (const auto& c : moe_detail::mma_configs()) add(c);
  } else {
    for (const auto& c : moe_detail::simt_configs()) add(c);
  }
  return out;
}

void launch_grouped_gemm(const GroupedGemmArgs& a, const GroupedGemmConfig& config, void* stream) {
  check_dtype(a.dtype);
  if (a.M < 0 || a.N < 0 || a.K < 0 || a.E < 0)
    throw SignatureError("grouped_gemm (CUDA): negative size (M " + std::to_string(a.M) + ", N " +
                         std::to_string(a.N) + ", K " + std::to_string(a.K) + ", E " +
                         std::to_string(a.E) + ")");
  const bool is_gated = a.activation != MoEActivation::none;
  if (is_gated && a.N % 2 != 0)
    throw SignatureError("grouped_gemm (CUDA): a gated activation needs an even N, got " +
                         std::to_string(a.N));
  if (!has_kernel(config))
    throw SignatureError("grouped_gemm (CUDA): no kernel for config {" + config.str() + "}");
  if (a.M > INT_MAX || a.E > INT_MAX - 1 || a.K > INT_MAX || a.N > INT_MAX)
    throw SignatureError("grouped_gemm (CUDA): a size is too large (M " + std::to_string(a.M) +
                         ", N " + std::to_string(a.N) + ", K " + std::to_string(a.K) + ", E " +
                         std::to_string(a.E) + ")");
  const int64_t n_out = is_gated ? a.N / 2 : a.N;
  if (a.M == 0 || n_out == 0) return;
  if (a.c == nullptr || a.expert_offsets == nullptr)
    throw SignatureError("grouped_gemm (CUDA): c and expert_offsets must not be null");
  if (a.K > 0 && (a.a == nullptr || (a.E > 0 && a.b == nullptr)))
    throw SignatureError("grouped_gemm (CUDA): a and b must not be null");
  if (!aligned_to(a.a, 2) || !aligned_to(a.b, 2) || !aligned_to(a.c, 2) ||
      !aligned_to(a.expert_offsets, 4))
    throw SignatureError("grouped_gemm (CUDA): a pointer is not aligned to its element size");

  const int device = moe_detail::current_device();
  const bool fast_ptrs = aligned_to(a.a, 16) && aligned_to(a.b, 16);
  GroupedGemmConfig cfg = config;
  if (cfg.variant == GroupedGemmVariant::wgmma && !(fast_ptrs && wgmma_shape_ok(a, device))) {
    const int per_sm = cfg.blocks_per_sm;
    cfg = mma_default(a);
    cfg.blocks_per_sm = per_sm;
  }
  if (cfg.variant == GroupedGemmVariant::mma && !(fast_ptrs && mma_shape_ok(a))) {
    const int per_sm = cfg.blocks_per_sm;
    cfg = moe_detail::simt_configs().front();
    cfg.blocks_per_sm = per_sm;
  }

  GemmParams p;
  p.a = a.a;
  p.b = a.b;
  const long long max_tiles =
      moe_detail::set_problem(p, a, a.expert_offsets, cfg.block_m, cfg.block_n, "grouped_gemm");
  const int sms = sm_count(device);
  const auto st = static_cast<cudaStream_t>(stream);
  switch (cfg.variant) {
    case GroupedGemmVariant::simt:
      moe_detail::launch_simt(p, cfg, a.dtype, sms, max_tiles, st);
      break;
    case GroupedGemmVariant::mma:
      moe_detail::launch_mma(p, cfg, a.dtype, sms, max_tiles, st);
      break;
    case GroupedGemmVariant::wgmma:
      moe_detail::launch_wgmma(p, cfg, a.dtype, sms, max_tiles, st);
      break;
  }
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    throw_cuda(err, "kernel launch");
}

}  // namespace tileops::cuda_kernels
