// MoE pre-permute (dispatch) and post-permute (combine) kernels (see moe_permute_cuda.h for the
// semantics).
//
// Pre-permute:
// 1. rank (moe_rank_cuda.cu): offsets and inverse, ordered by (expert, pair index).
// 2. gather (a warp per pair): a kept pair copies its token's row to permuted[inverse] with the
//    widest vector (16, 8, 4 or 2 bytes) the pointers, the stride and the row length allow; pair
//    p >= offsets[E] also zero-fills row p (rows offsets[E] .. T*K-1). With FP8 quantization,
//    where many pairs share tokens (moe_pre_permute_wants_token_scratch) and the caller gives the
//    scratch, the tokens are quantized once (token_group_quant_cuda.cu) and the gather copies
//    their code rows and scale rows (the tail: the quantized zero row); otherwise
//    moe_gather_quant_cuda.cu's kernel quantizes each pair's row as it gathers it.
//
// Post-permute: a thread per (token, 16-byte vector of the row) (scalar when the pointers or the
// row length do not allow vectors), the k loop in order with up to 4 rows' loads in flight; fp32
// products and sums with explicit rounding (__fmul_rn / __fadd_rn, no contraction), one rounding
// to T at the end.
#include "kernels/moe/moe_permute_cuda.h"
#include "kernels/moe/moe_permute_gather_quant.h"
#include "kernels/moe/moe_permute_launch_errors.h"
#include "kernels/moe/moe_permute_rank.h"

#include "kernels/common/vectors.cuh"
#include "kernels/quant/quant_cuda.h"
#include "kernels/quant/token_group_quant.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdint>
#include <string>

#include "tileops/core/error.h"

namespace tileops::cuda_kernels {
namespace {

using moe_launch::check_launch;
using vec::load_nc;
using vec::pack;
using vec::Raw;
using vec::unpack;

// ---------------------------------------------------------------------------------------------
// Pre-permute: row gather.

constexpr int kGatherThreads = 256;
constexpr int kGatherUnroll = 4;

struct GatherParams {
  const unsigned char* x;
  int64_t x_stride_bytes;
  unsigned char* permuted;
  int64_t row_bytes;
  const int32_t* offsets;
  const int32_t* inverse;
  int64_t pairs;
  int64_t top_k;
  int E;
  bool fill_tail = true;   // rows offsets[E] .. pairs - 1 (the contiguous layout)
  uint32_t tail_word = 0;  // their 32-bit pattern (0 unless V has at least 4 bytes)
};

template <typename V>
__global__ void __launch_bounds__(kGatherThreads) moe_gather_kernel(const GatherParams p) {
  const int64_t pair =
      static_cast<int64_t>(blockIdx.x) * (kGatherThreads / 32) + (threadIdx.x >> 5);
  if (pair >= p.pairs) return;
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int64_t nv = p.row_bytes / static_cast<int64_t>(sizeof(V));
  const int32_t kept = p.offsets[p.E];
  const int32_t dst = p.inverse[pair];
  if (dst >= 0) {
    const V* src = reinterpret_cast<const V*>(p.x + (pair / p.top_k) * p.x_stride_bytes);
    V* out = reinterpret_cast<V*>(p.permuted + static_cast<int64_t>(dst) * p.row_bytes);
    for (int64_t i = lane; i < nv; i += 32 * kGatherUnroll) {
      V v[kGatherUnroll];
#pragma unroll
      for (int u = 0; u < kGatherUnroll; ++u)
        if (i + 32 * u < nv) v[u] = __ldg(src + i + 32 * u);
#pragma unroll
      for (int u = 0; u < kGatherUnroll; ++u)
        if (i + 32 * u < nv) out[i + 32 * u] = v[u];
    }
  }
  if (p.fill_tail && pair >= kept) {
    V* out = reinterpret_cast<V*>(p.permuted + pair * p.row_bytes);
    V z;
    __builtin_memset(&z, 0, sizeof(V));
    if constexpr (sizeof(V) >= 4) {
      auto* words = reinterpret_cast<uint32_t*>(&z);
#pragma unroll
      for (int w = 0; w < static_cast<int>(sizeof(V) / 4); ++w) words[w] = p.tail_word;
    }
    for (int64_t i = lane; i < nv; i += 32) out[i] = z;
  }
}

// ---------------------------------------------------------------------------------------------
// Post-permute.

constexpr int kCombineThreads = 256;
constexpr int kCombineUnroll = 4;

struct CombineParams {
  const void* expert_out;
  int64_t rows;
  const float* weights;
  const int32_t* inverse;
  void* out;
  int64_t hidden;
  int64_t top_k;
  int64_t nvec;   // vectors per row
  int64_t items;  // tokens * nvec
  float scale;
};

template <typename T, int VEC>
__global__ void __launch_bounds__(kCombineThreads) moe_combine_kernel(const CombineParams p) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kCombineThreads + threadIdx.x;
  if (item >= p.items) return;
  const int64_t t = item / p.nvec;
  const int64_t col = (item - t * p.nvec) * VEC;
  const T* src = static_cast<const T*>(p.expert_out) + col;
  const int32_t* inv = p.inverse + t * p.top_k;
  const float* w = p.weights + t * p.top_k;
  float acc[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) acc[e] = 0.f;
  for (int64_t k0 = 0; k0 < p.top_k; k0 += kCombineUnroll) {
    Raw<T, VEC> v[kCombineUnroll];
    float wk[kCombineUnroll];
    bool ok[kCombineUnroll];
#pragma unroll
    for (int u = 0; u < kCombineUnroll; ++u) {
      ok[u] = false;
      wk[u] = 0.f;
      if (k0 + u < p.top_k) {
        const int32_t r = __ldg(inv + k0 + u);
        if (r >= 0 && r < p.rows) {
          ok[u] = true;
          wk[u] = __ldg(w + k0 + u);
          v[u] = load_nc<T, VEC>(src + static_cast<int64_t>(r) * p.hidden);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kCombineUnroll; ++u) {
      if (!ok[u]) continue;
      float f[VEC];
      unpack<T, VEC>(v[u], f);
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[e] = __fadd_rn(acc[e], __fmul_rn(wk[u], f[e]));
    }
  }
#pragma unroll
  for (int e = 0; e < VEC; ++e) acc[e] = __fmul_rn(p.scale, acc[e]);
  T* dst = static_cast<T*>(p.out) + t * p.hidden + col;
  *reinterpret_cast<Raw<T, VEC>*>(dst) = pack<T, VEC>(acc);
}

// ---------------------------------------------------------------------------------------------
// Host side.

void check_dtype(const char* op, DType dtype) {
  if (dtype != DType::float32 && dtype != DType::float16 && dtype != DType::bfloat16)
    throw SignatureError(std::string(op) +
                         " (CUDA): dtype must be float32, float16 or bfloat16, got " +
                         std::string(dtype_name(dtype)));
}

bool aligned_to(const void* p, int64_t align) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align) == 0;
}

template <typename V>
void launch_gather(const GatherParams& g, cudaStream_t stream) {
  const int64_t blocks = (g.pairs + kGatherThreads / 32 - 1) / (kGatherThreads / 32);
  moe_gather_kernel<V><<<static_cast<unsigned>(blocks), kGatherThreads, 0, stream>>>(g);
}

// The gather with the widest vector the pointers, the row length and the stride allow.
void launch_gather_rows(const GatherParams& g, int64_t tokens, cudaStream_t stream) {
  const auto fits = [&](int64_t v) {
    return aligned_to(g.x, v) && aligned_to(g.permuted, v) && g.row_bytes % v == 0 &&
           (tokens <= 1 || g.x_stride_bytes % v == 0);
  };
  if (g.tail_word != 0 && !fits(4))
    throw SignatureError("moe_pre_permute (CUDA): a filled tail needs 4-byte rows");
  if (fits(16)) {
    launch_gather<uint4>(g, stream);
  } else if (fits(8)) {
    launch_gather<uint2>(g, stream);
  } else if (fits(4)) {
    launch_gather<unsigned int>(g, stream);
  } else {
    launch_gather<unsigned short>(g, stream);
  }
}

template <typename T>
void launch_combine(const CombineParams& c, bool vector_path, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((c.items + kCombineThreads - 1) / kCombineThreads);
  if (vector_path) {
    moe_combine_kernel<T, 16 / sizeof(T)><<<blocks, kCombineThreads, 0, stream>>>(c);
  } else {
    moe_combine_kernel<T, 1><<<blocks, kCombineThreads, 0, stream>>>(c);
  }
}

}  // namespace

bool moe_pre_permute_wants_token_scratch(const PrePermuteArgs& a) {
  // Only where every pair is kept (no expert map: a rank keeps about 1 / EP of them) and the
  // pairs are many: 512 pairs take 18 us this way against 14 us fused, 4096 pairs 37.5 us
  // against 43.8 us (H200, docs/perf/2026-12-02-h200-pre-permute.md). Rows of whole aligned
  // words (the tail's fill) from a contiguous x (the token quantization's layout).
  return a.permuted_q != nullptr && a.expert_map == nullptr && a.top_k > 1 &&
         a.tokens * a.top_k >= 4096 && (a.tokens <= 1 || a.x_row_stride == a.hidden) &&
         a.hidden % 4 == 0 && aligned_to(a.permuted_q, 4);
}

void launch_moe_pre_permute(const PrePermuteArgs& a, void* stream) {
  const char* op = "moe_pre_permute";
  check_dtype(op, a.dtype);
  if (a.tokens < 0 || a.hidden < 0 || a.top_k < 0 || a.num_experts < 0 || a.map_size < 0)
    throw SignatureError("moe_pre_permute (CUDA): negative size");
  const int64_t pairs = a.tokens * a.top_k;
  if (pairs > INT_MAX || a.num_experts > INT_MAX - 1)
    throw SignatureError("moe_pre_permute (CUDA): too many pairs or experts (" +
                         std::to_string(pairs) + " pairs, " + std::to_string(a.num_experts) +
                         " experts)");
  if (a.expert_offsets == nullptr)
    throw SignatureError("moe_pre_permute (CUDA): expert_offsets must not be null");
  if (pairs > 0 && (a.topk_ids == nullptr || a.inverse == nullptr))
    throw SignatureError("moe_pre_permute (CUDA): topk_ids and inverse must not be null");
  const bool quantize = a.permuted_q != nullptr;
  if (pairs > 0 && a.hidden > 0 && (a.x == nullptr || (a.permuted == nullptr && !quantize)))
    throw SignatureError("moe_pre_permute (CUDA): x and permuted must not be null");
  if (quantize) check_moe_gather_quant_fp8(a);
  if (a.masked_max_m < 0) throw SignatureError("moe_pre_permute (CUDA): negative masked_max_m");
  if (a.masked_max_m > 0) {
    if (!quantize || a.masked_counts == nullptr)
      throw SignatureError(
          "moe_pre_permute (CUDA): the masked layout needs permuted_q and masked_counts");
    if (a.num_experts * a.masked_max_m > INT_MAX)
      throw SignatureError("moe_pre_permute (CUDA): num_experts * masked_max_m must be below 2^31");
  }
  if (a.tokens > 1 && a.x_row_stride < a.hidden)
    throw SignatureError("moe_pre_permute (CUDA): x_row_stride is smaller than hidden");
  if (a.expert_map != nullptr && a.map_size == 0)
    throw SignatureError("moe_pre_permute (CUDA): expert_map given with map_size 0");
  const auto es = static_cast<int64_t>(element_size(a.dtype));
  if (!aligned_to(a.x, es) || !aligned_to(a.permuted, es))
    throw SignatureError(
        "moe_pre_permute (CUDA): x or permuted is not aligned to its element size");
  const auto st = static_cast<cudaStream_t>(stream);
  const int E = static_cast<int>(a.num_experts);

  RankArgs r;
  r.ids = a.topk_ids;
  r.map = a.expert_map;
  r.map_size = a.expert_map != nullptr ? a.map_size : 0;
  r.offsets = a.expert_offsets;
  r.inverse = a.inverse;
  r.pairs = pairs;
  r.E = E;
  r.max_m = static_cast<int>(a.masked_max_m);
  r.counts = a.masked_counts;
  r.scratch = a.rank_scratch;
  launch_moe_rank(r, stream);

  // Gather and zero fill (or their quantized rows).
  const int64_t row_bytes = a.hidden * es;
  if (pairs == 0 || row_bytes == 0) return;
  GatherParams g;
  g.x = static_cast<const unsigned char*>(a.x);
  g.x_stride_bytes = a.x_row_stride * es;
  g.permuted = static_cast<unsigned char*>(a.permuted);
  g.row_bytes = row_bytes;
  g.offsets = a.expert_offsets;
  g.inverse = a.inverse;
  g.pairs = pairs;
  g.top_k = a.top_k;
  g.E = E;
  const bool tokens_first = quantize && a.token_q != nullptr && a.token_scales != nullptr &&
                            moe_pre_permute_wants_token_scratch(a);
  if (quantize && !tokens_first) {
    launch_moe_gather_quant_fp8(a, stream);
    check_launch(op);
    return;
  }
  if (quantize) {
    // Each token once, then its codes and scales to the rows of its pairs: the fused kernel's
    // bits (a group's codes and scale depend on the group's values only).
    TokenGroupQuantArgs tq;
    tq.x = a.x;
    tq.q = a.token_q;
    tq.scales = a.token_scales;
    tq.rows = a.tokens;
    tq.cols = a.hidden;
    tq.group_size = a.quant_group_size;
    tq.eps = a.quant_eps;
    tq.dtype = a.dtype;
    launch_token_group_quant_fp8(tq, stream);
    g.fill_tail = a.masked_max_m == 0;  // the masked layout writes only through inverse
    g.x = static_cast<const unsigned char*>(a.token_q);
    g.x_stride_bytes = g.row_bytes = a.hidden;
    g.permuted = static_cast<unsigned char*>(a.permuted_q);
    // The tail is the quantized zero row: 0 / float(eps / 448), NaN (its code) where that is 0.
    const fp8_quant::EpsTerms eps = fp8_quant::eps_terms(a.quant_eps);
    g.tail_word = (eps.eps_scale == 0.0f ? uint32_t{fp8_quant::kNaNCode} : 0u) * 0x01010101u;
    launch_gather_rows(g, a.tokens, st);
    check_launch(op);
    g.x = reinterpret_cast<const unsigned char*>(a.token_scales);
    g.x_stride_bytes = g.row_bytes = a.hidden / a.quant_group_size * 4;
    g.permuted = reinterpret_cast<unsigned char*>(a.permuted_scales);
    g.tail_word = std::bit_cast<uint32_t>(eps.eps_scale);
    launch_gather_rows(g, a.tokens, st);
    check_launch(op);
    return;
  }
  launch_gather_rows(g, a.tokens, st);
  check_launch(op);
}

void launch_moe_post_permute(const PostPermuteArgs& a, void* stream) {
  const char* op = "moe_post_permute";
  check_dtype(op, a.dtype);
  if (a.tokens < 0 || a.hidden < 0 || a.top_k < 0 || a.rows < 0)
    throw SignatureError("moe_post_permute (CUDA): negative size");
  if (a.tokens == 0 || a.hidden == 0) return;
  if (a.out == nullptr) throw SignatureError("moe_post_permute (CUDA): out must not be null");
  if (a.top_k > 0 && (a.topk_weights == nullptr || a.inverse == nullptr))
    throw SignatureError("moe_post_permute (CUDA): topk_weights and inverse must not be null");
  if (a.rows > 0 && a.top_k > 0 && a.expert_out == nullptr)
    throw SignatureError("moe_post_permute (CUDA): expert_out must not be null");
  const auto es = static_cast<int64_t>(element_size(a.dtype));
  if (!aligned_to(a.expert_out, es) || !aligned_to(a.out, es))
    throw SignatureError("moe_post_permute (CUDA): a pointer is not aligned to its element size");
  const bool vector_path =
      (a.hidden * es) % 16 == 0 && aligned_to(a.expert_out, 16) && aligned_to(a.out, 16);
  CombineParams c;
  c.expert_out = a.expert_out;
  c.rows = a.rows;
  c.weights = a.topk_weights;
  c.inverse = a.inverse;
  c.out = a.out;
  c.hidden = a.hidden;
  c.top_k = a.top_k;
  c.nvec = vector_path ? a.hidden * es / 16 : a.hidden;
  c.items = a.tokens * c.nvec;
  c.scale = a.scale;
  if ((c.items + kCombineThreads - 1) / kCombineThreads > INT_MAX)
    throw SignatureError("moe_post_permute (CUDA): problem too large");
  const auto st = static_cast<cudaStream_t>(stream);
  switch (a.dtype) {
    case DType::float32:
      launch_combine<float>(c, vector_path, st);
      break;
    case DType::float16:
      launch_combine<__half>(c, vector_path, st);
      break;
    default:
      launch_combine<__nv_bfloat16>(c, vector_path, st);
      break;
  }
  check_launch(op);
}

}  // namespace tileops::cuda_kernels
