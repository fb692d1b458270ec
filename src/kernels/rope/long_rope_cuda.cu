// CUDA kernel of LongRoPE (see long_rope_cuda.h for the semantics).
//
// One persistent kernel (grid-stride over groups of tokens_per_block tokens, grid sized from the
// SM count and the occupancy). A work item is a 16-byte vector of the first half of one head's
// row and the matching vector of the second half (VEC elements each; VEC == 1 is the scalar path).
// Per group: each thread issues the loads of its first items_per_thread items, then the block
// computes the group's cos/sin (tokens_per_block x half_dim, double-precision angle and range
// reduction, fp32 sincos) into shared memory (double-buffered across groups, so one barrier per
// group), then each thread rotates its items with the table and stores them. cos/sin are computed
// once per (token, i) and reused by all heads.
#include "kernels/rope/long_rope_cuda.h"

#include "kernels/common/vectors.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>

#include "tileops/core/cuda.h"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {
namespace {

// Device helpers (vector loads and conversions: kernels/common/vectors.cuh).
using vec::load_nc;
using vec::load_once;
using vec::pack;
using vec::Raw;
using vec::unpack;

// A 16-byte vector is stored by one st.global.v4 (written out: the compiler may otherwise split
// the struct store into four 4-byte stores); the "memory" clobber keeps it ordered with the
// thread's other memory accesses.
template <typename T, int N>
__device__ __forceinline__ void store(T* p, const Raw<T, N>& v) {
  if constexpr (sizeof(Raw<T, N>) == 16) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
                 "r"(v.w)
                 : "memory");
  } else {
    *reinterpret_cast<Raw<T, N>*>(p) = v;
  }
}

constexpr double kTwoPi = 6.283185307179586476925286766559;
constexpr double kInvTwoPi = 0.15915494309189533576888376337251;
constexpr int kMaxSharedBytes = 48 * 1024;

struct RoPEParams {
  const void* x;
  void* y;
  const void* positions;
  const double* inv_freq;
  int64_t tokens;
  int64_t seq;
  int heads;
  int half;             // half_dim
  int dim;              // 2 * half_dim
  int vecs_per_half;    // items per head: half / VEC
  int items_per_token;  // heads * vecs_per_half
  int tokens_per_block;
  int pos_kind;  // 0: none (s), 1: int32, 2: int64
  float scale;
};

// 64 registers a thread (1024 threads) up to 4 items in flight; 128 (512 threads) for 8.
constexpr int rope_max_threads(int k) {
  return k >= 8 ? 512 : 1024;
}

template <typename T, int VEC, int K>
__global__ void __launch_bounds__(rope_max_threads(K)) long_rope_kernel(const RoPEParams p) {
  using V = Raw<T, VEC>;
  extern __shared__ float4 smem_raw[];
  float2* const table = reinterpret_cast<float2*>(smem_raw);  // [2][tokens_per_block * half]

  const int nthreads = static_cast<int>(blockDim.x);
  const int tid = static_cast<int>(threadIdx.x);
  const int table_size = p.tokens_per_block * p.half;

  int buf = 0;
  for (int64_t tok0 = static_cast<int64_t>(blockIdx.x) * p.tokens_per_block; tok0 < p.tokens;
       tok0 += static_cast<int64_t>(gridDim.x) * p.tokens_per_block, buf ^= 1) {
    const int ntok =
        static_cast<int>(min(static_cast<int64_t>(p.tokens_per_block), p.tokens - tok0));
    const int items = ntok * p.items_per_token;
    const int64_t base = tok0 * p.heads * p.dim;
    const T* xg = static_cast<const T*>(p.x) + base;
    T* yg = static_cast<T*>(p.y) + base;
    float2* tab = table + buf * table_size;

    V a[K];
    V b[K];
    const auto load_batch = [&](int q0) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int q = q0 + tid + k * nthreads;
        if (q < items) {
          const int row = q / p.vecs_per_half;  // token_local * heads + head
          const int64_t off = static_cast<int64_t>(row) * p.dim + (q - row * p.vecs_per_half) * VEC;
          a[k] = load_once<T, VEC>(xg + off);
          b[k] = load_once<T, VEC>(xg + off + p.half);
        }
      }
    };
    load_batch(0);

    // cos/sin of the group's tokens, once per (token, i).
    for (int e = tid; e < ntok * p.half; e += nthreads) {
      const int tl = e / p.half;
      const int i = e - tl * p.half;
      const int64_t tok = tok0 + tl;
      int64_t pos;
      if (p.pos_kind == 1) {
        pos = __ldg(static_cast<const int*>(p.positions) + tok);
      } else if (p.pos_kind == 2) {
        pos = __ldg(static_cast<const long long*>(p.positions) + tok);
      } else {
        pos = tok % p.seq;
      }
      const double theta = static_cast<double>(pos) * __ldg(p.inv_freq + i);
      const double reduced = theta - kTwoPi * rint(theta * kInvTwoPi);
      float s;
      float c;
      sincosf(static_cast<float>(reduced), &s, &c);
      tab[e] = make_float2(c, s);
    }
    __syncthreads();

    for (int q0 = 0; q0 < items; q0 += K * nthreads) {
      if (q0 > 0) load_batch(q0);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int q = q0 + tid + k * nthreads;
        if (q < items) {
          const int row = q / p.vecs_per_half;
          const int col = (q - row * p.vecs_per_half) * VEC;  // i of the item's first element
          const int tl = q / p.items_per_token;
          const int64_t off = static_cast<int64_t>(row) * p.dim + col;
          const float2* t = tab + tl * p.half + col;
          float cs[2 * VEC];  // cos, sin interleaved
          if constexpr (VEC % 2 == 0) {
            // half % VEC == 0, so the entry index is even: 16-byte aligned.
#pragma unroll
            for (int e = 0; e < VEC; e += 2) {
              const float4 v = *reinterpret_cast<const float4*>(t + e);
              cs[2 * e] = v.x;
              cs[2 * e + 1] = v.y;
              cs[2 * e + 2] = v.z;
              cs[2 * e + 3] = v.w;
            }
          } else {
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
              const float2 v = t[e];
              cs[2 * e] = v.x;
              cs[2 * e + 1] = v.y;
            }
          }
          float x1[VEC];
          float x2[VEC];
          unpack<T, VEC>(a[k], x1);
          unpack<T, VEC>(b[k], x2);
          float y1[VEC];
          float y2[VEC];
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const float c = cs[2 * e];
            const float s = cs[2 * e + 1];
            y1[e] = (x1[e] * c - x2[e] * s) * p.scale;
            y2[e] = (x2[e] * c + x1[e] * s) * p.scale;
          }
          store<T, VEC>(yg + off, pack<T, VEC>(y1));
          store<T, VEC>(yg + off + p.half, pack<T, VEC>(y2));
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

using KernelFn = void (*)(RoPEParams);

template <typename T, int VEC>
KernelFn pick_kernel(int k) {
  switch (k) {
    case 1:
      return long_rope_kernel<T, VEC, 1>;
    case 2:
      return long_rope_kernel<T, VEC, 2>;
    case 4:
      return long_rope_kernel<T, VEC, 4>;
    case 8:
      return long_rope_kernel<T, VEC, 8>;
    default:
      return nullptr;
  }
}

template <typename T>
KernelFn pick_kernel(bool vector_path, int k) {
  return vector_path ? pick_kernel<T, 16 / sizeof(T)>(k) : pick_kernel<T, 1>(k);
}

KernelFn pick_kernel(DType dtype, bool vector_path, int k) {
  switch (dtype) {
    case DType::float32:
      return pick_kernel<float>(vector_path, k);
    case DType::float16:
      return pick_kernel<__half>(vector_path, k);
    case DType::bfloat16:
      return pick_kernel<__nv_bfloat16>(vector_path, k);
    default:
      return nullptr;
  }
}

[[noreturn]] void throw_cuda(cudaError_t err, const char* what) {
  throw UsageError(std::string("long_rope (CUDA): ") + what + ": " + cudaGetErrorName(err) + ": " +
                   cudaGetErrorString(err));
}

// The multiprocessor count, from the properties read once per device.
int sm_count(int device) {
  return cuda_device_properties(device).sm_count;
}

int max_blocks_per_sm(KernelFn fn, int threads, int smem, int device) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, int, int>, int> cache;
  const auto key = std::make_tuple(reinterpret_cast<const void*>(fn), threads, smem, device);
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  int blocks = 0;
  const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, threads,
                                                                        static_cast<size_t>(smem));
  if (err != cudaSuccess) throw_cuda(err, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  std::lock_guard<std::mutex> lock(mutex);
  cache[key] = blocks;
  return blocks;
}

void check_dtype(DType dtype) {
  if (!(dtype == DType::float32 || dtype == DType::float16 || dtype == DType::bfloat16))
    throw SignatureError("long_rope (CUDA): dtype must be float32, float16 or bfloat16, got " +
                         std::string(dtype_name(dtype)));
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

int vec_elems(DType dtype) {
  return 16 / static_cast<int>(element_size(dtype));
}

// Items per token for the vector path when half_dim allows it, else for the scalar path.
int64_t items_per_token(int64_t heads, int64_t half_dim, DType dtype) {
  const int vec = vec_elems(dtype);
  return heads * (half_dim % vec == 0 ? half_dim / vec : half_dim);
}

int64_t table_bytes(int64_t tokens_per_block, int64_t half_dim) {
  return 2 * tokens_per_block * half_dim * static_cast<int64_t>(sizeof(float2));
}

std::string check_config(const LongRoPEConfig& c, int64_t heads, int64_t half_dim, DType dtype) {
  const int es = static_cast<int>(element_size(dtype));
  if (c.threads < 32 || c.threads > 1024 || c.threads % 32 != 0)
    return "threads must be a multiple of 32 in [32, 1024]";
  if (c.tokens_per_block < 1) return "tokens_per_block must be >= 1";
  if (c.vec_bytes != 16 && c.vec_bytes != es) return "vec_bytes must be 16 or the element size";
  const int k = c.items_per_thread;
  if (!(k == 1 || k == 2 || k == 4 || k == 8)) return "items_per_thread must be 1, 2, 4 or 8";
  if (c.threads > rope_max_threads(k))
    return "at most " + std::to_string(rope_max_threads(k)) + " threads with this items_per_thread";
  if (c.blocks_per_sm < 0) return "blocks_per_sm must be >= 0";
  if (table_bytes(c.tokens_per_block, half_dim) > kMaxSharedBytes)
    return "the cos/sin table (2 x tokens_per_block x half_dim x 8 bytes) exceeds 48 KB";
  // Element offsets inside a group and item indices are 32-bit.
  if (c.tokens_per_block * heads * 2 * half_dim >= INT_MAX) return "a group is too large";
  return {};
}

LongRoPEConfig make_config(int threads, int tokens_per_block, int k) {
  LongRoPEConfig c;
  c.threads = threads;
  c.tokens_per_block = tokens_per_block;
  c.vec_bytes = 16;
  c.items_per_thread = k;
  c.blocks_per_sm = 0;
  return c;
}

// Tokens per block so that one step is about one batch (threads x k items), within the table
// limit.
int fit_tokens(int threads, int k, int64_t ipt, int64_t half_dim, int64_t tokens) {
  int64_t tpb =
      std::max<int64_t>(1, (static_cast<int64_t>(threads) * k) / std::max<int64_t>(ipt, 1));
  tpb = std::min<int64_t>(tpb, std::max<int64_t>(tokens, 1));
  while (tpb > 1 && table_bytes(tpb, half_dim) > kMaxSharedBytes) tpb /= 2;
  return static_cast<int>(tpb);
}

bool aligned_to(const void* p, int64_t align) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align) == 0;
}

}  // namespace

std::string LongRoPEConfig::str() const {
  return "threads=" + std::to_string(threads) +
         ",tokens_per_block=" + std::to_string(tokens_per_block) +
         ",vec_bytes=" + std::to_string(vec_bytes) +
         ",items_per_thread=" + std::to_string(items_per_thread) +
         ",blocks_per_sm=" + std::to_string(blocks_per_sm);
}

LongRoPEConfig long_rope_default_config(int64_t batch, int64_t seq, int64_t heads, int64_t half_dim,
                                        DType dtype, int device) {
  check_dtype(dtype);
  const int64_t tokens = std::max<int64_t>(batch * seq, 1);
  const int64_t ipt = std::max<int64_t>(items_per_token(heads, half_dim, dtype), 1);
  const int sms = sm_count(device);
  if (tokens * ipt >= static_cast<int64_t>(sms) * 2048) {
    // Throughput: 128 threads, 4 items (128 bytes of loads) in flight per thread. Measured on the
    // H200 (2026-11-29, fp16 [1, 8192, 32, 128], cold clean L2): 44.5 us against 47.6 us with
    // 256 threads (smaller groups of tokens per block: a shorter table phase per group).
    return make_config(128, fit_tokens(128, 4, ipt, half_dim, tokens), 4);
  }
  // Latency (decode): spread the tokens over as many blocks as possible, one item per thread.
  const int threads = static_cast<int>(std::clamp<int64_t>((ipt + 31) / 32 * 32, 64, 256));
  int64_t tpb = std::max<int64_t>(1, threads / ipt);
  tpb = std::min<int64_t>(tpb, std::max<int64_t>(1, ceil_div(tokens, sms)));
  return make_config(threads, fit_tokens(threads, 1, ipt, half_dim, tpb), 1);
}

std::vector<LongRoPEConfig> long_rope_tuning_space(int64_t batch, int64_t seq, int64_t heads,
                                                   int64_t half_dim, DType dtype, int device) {
  std::vector<LongRoPEConfig> out;
  const auto add = [&](const LongRoPEConfig& c) {
    if (check_config(c, heads, half_dim, dtype).empty() &&
        std::find(out.begin(), out.end(), c) == out.end())
      out.push_back(c);
  };
  add(long_rope_default_config(batch, seq, heads, half_dim, dtype, device));
  const int64_t tokens = std::max<int64_t>(batch * seq, 1);
  const int64_t ipt = std::max<int64_t>(items_per_token(heads, half_dim, dtype), 1);
  for (const int threads : {128, 256, 512}) {
    for (const int k : {1, 2, 4, 8}) {
      const int tpb = fit_tokens(threads, k, ipt, half_dim, tokens);
      add(make_config(threads, tpb, k));
      if (tpb * 2 <= tokens)
        add(make_config(threads, fit_tokens(threads, 2 * k, ipt, half_dim, tokens), k));
    }
  }
  return out;
}

void launch_long_rope(const LongRoPEArgs& a, const LongRoPEConfig& config, void* stream) {
  check_dtype(a.dtype);
  if (a.batch < 0 || a.seq < 0 || a.heads < 0 || a.half_dim < 0)
    throw SignatureError("long_rope (CUDA): negative shape");
  if (const std::string why = check_config(config, a.heads, a.half_dim, a.dtype); !why.empty())
    throw SignatureError("long_rope (CUDA): config {" + config.str() +
                         "} cannot serve heads = " + std::to_string(a.heads) +
                         ", half_dim = " + std::to_string(a.half_dim) + ": " + why);
  const int64_t tokens = a.batch * a.seq;
  if (tokens == 0 || a.heads == 0 || a.half_dim == 0) return;
  if (a.x == nullptr || a.y == nullptr || a.inv_freq == nullptr)
    throw SignatureError("long_rope (CUDA): x, y and inv_freq must not be null");
  int pos_kind = 0;
  if (a.positions != nullptr) {
    if (a.positions_dtype == DType::int32) {
      pos_kind = 1;
    } else if (a.positions_dtype == DType::int64) {
      pos_kind = 2;
    } else {
      throw SignatureError("long_rope (CUDA): positions must be int32 or int64, got " +
                           std::string(dtype_name(a.positions_dtype)));
    }
    if (!aligned_to(a.positions, pos_kind == 1 ? 4 : 8))
      throw SignatureError("long_rope (CUDA): positions is not aligned to its element size");
  }
  const auto es = static_cast<int64_t>(element_size(a.dtype));
  if (!aligned_to(a.x, es) || !aligned_to(a.y, es) || !aligned_to(a.inv_freq, 8))
    throw SignatureError("long_rope (CUDA): a pointer is not aligned to its element size");

  const int vec = vec_elems(a.dtype);
  const bool vector_path =
      config.vec_bytes == 16 && a.half_dim % vec == 0 && aligned_to(a.x, 16) && aligned_to(a.y, 16);
  const KernelFn fn = pick_kernel(a.dtype, vector_path, config.items_per_thread);
  if (fn == nullptr) throw SignatureError("long_rope (CUDA): no kernel for {" + config.str() + "}");

  RoPEParams p;
  p.x = a.x;
  p.y = a.y;
  p.positions = a.positions;
  p.inv_freq = a.inv_freq;
  p.tokens = tokens;
  p.seq = a.seq;
  p.heads = static_cast<int>(a.heads);
  p.half = static_cast<int>(a.half_dim);
  p.dim = static_cast<int>(2 * a.half_dim);
  p.vecs_per_half = vector_path ? p.half / vec : p.half;
  p.items_per_token = p.heads * p.vecs_per_half;
  p.tokens_per_block = config.tokens_per_block;
  p.pos_kind = pos_kind;
  p.scale = a.attention_scaling;

  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess)
    throw_cuda(err, "cudaGetDevice");
  const int smem = static_cast<int>(table_bytes(config.tokens_per_block, a.half_dim));
  const int sms = sm_count(device);
  int per_sm = config.blocks_per_sm;
  if (per_sm == 0) per_sm = std::max(1, max_blocks_per_sm(fn, config.threads, smem, device));
  const int64_t groups = ceil_div(tokens, config.tokens_per_block);
  const int grid = static_cast<int>(std::min<int64_t>(groups, static_cast<int64_t>(sms) * per_sm));
  fn<<<grid, config.threads, static_cast<size_t>(smem), static_cast<cudaStream_t>(stream)>>>(p);
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    throw_cuda(err, "kernel launch");
}

}  // namespace tileops::cuda_kernels
