// CUDA kernel of the merge of two attention states (see attention_merge_cuda.h for the values).
//
// A flat grid over (token, head, vector): a vector is 16 bytes of a row where head_dim and the
// pointers allow (one element otherwise). Each thread reads the two lse of its row (shared by the
// row's threads through L1), computes the two weights and writes its vector; the row's first
// thread writes the merged lse.
#include "kernels/attention/attention_merge_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/attention/attention_merge_math.cuh"
#include "kernels/common/fast_divide.h"
#include "kernels/common/vectors.cuh"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {
namespace {

using vec::load_once;
using vec::pack;
using vec::Raw;
using vec::unpack;

constexpr int kThreads = 256;
// Items (token x head x vector) of one launch stay below 2^30: indices in a launch are 32-bit.
constexpr std::int64_t kMaxItemsPerLaunch = std::int64_t{1} << 30;

struct MergeParams {
  const void* out_a;
  const void* out_b;
  void* out;
  const float* lse_a;  // at (head 0, the launch's first token); row stride `tokens`
  const float* lse_b;
  float* lse;
  long long tokens;  // of the whole state: the lse row stride
  std::uint32_t items;
  kernels::FastDivide vectors;  // per row (token, head)
  kernels::FastDivide heads;
};

template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads) attention_merge_kernel(const MergeParams p) {
  const std::uint32_t q = blockIdx.x * kThreads + threadIdx.x;
  if (q >= p.items) return;
  const std::uint32_t row = p.vectors.quotient(q);  // token * heads + head, in the launch
  const std::uint32_t v = p.vectors.remainder(q, row);
  const std::uint32_t token = p.heads.quotient(row);
  const std::uint32_t head = p.heads.remainder(row, token);
  const long long at = static_cast<long long>(head) * p.tokens + token;
  const float la = __ldg(p.lse_a + at);
  const float lb = __ldg(p.lse_b + at);
  const float m = fmaxf(la, lb);
  const long long offset = static_cast<long long>(q) * VEC;
  T* out = static_cast<T*>(p.out) + offset;
  float merged[VEC];
  if (m == -INFINITY) {  // neither side saw a key
#pragma unroll
    for (int e = 0; e < VEC; ++e) merged[e] = 0.0f;
    if (v == 0) p.lse[at] = -INFINITY;
  } else {
    const float wa = merge_term(la, m);
    const float wb = merge_term(lb, m);
    const float sum = wa + wb;
    const float fa = wa / sum;
    const float fb = wb / sum;
    if (v == 0) p.lse[at] = merged_lse(m, sum);
    float a[VEC];
    float b[VEC];
    unpack<T, VEC>(load_once<T, VEC>(static_cast<const T*>(p.out_a) + offset), a);
    unpack<T, VEC>(load_once<T, VEC>(static_cast<const T*>(p.out_b) + offset), b);
#pragma unroll
    for (int e = 0; e < VEC; ++e) merged[e] = a[e] * fa + b[e] * fb;
  }
  *reinterpret_cast<Raw<T, VEC>*>(out) = pack<T, VEC>(merged);
}

[[noreturn]] void throw_cuda(cudaError_t err, const char* what) {
  throw UsageError(std::string("attention_merge_states (CUDA): ") + what + ": " +
                   cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

bool aligned_to(const void* p, std::uintptr_t align) {
  return reinterpret_cast<std::uintptr_t>(p) % align == 0;
}

template <typename T, int VEC>
void launch_rows(const AttentionMergeArgs& a, cudaStream_t stream) {
  const std::int64_t vectors = a.head_dim / VEC;
  const std::int64_t per_token = a.heads * vectors;
  const std::int64_t tokens_per_launch = std::max<std::int64_t>(1, kMaxItemsPerLaunch / per_token);
  for (std::int64_t t0 = 0; t0 < a.tokens; t0 += tokens_per_launch) {
    const std::int64_t tokens = std::min(tokens_per_launch, a.tokens - t0);
    const std::int64_t first = t0 * a.heads * a.head_dim;
    MergeParams p;
    p.out_a = static_cast<const T*>(a.out_a) + first;
    p.out_b = static_cast<const T*>(a.out_b) + first;
    p.out = static_cast<T*>(a.out) + first;
    p.lse_a = a.lse_a + t0;
    p.lse_b = a.lse_b + t0;
    p.lse = a.lse + t0;
    p.tokens = a.tokens;
    p.items = static_cast<std::uint32_t>(tokens * per_token);
    p.vectors = kernels::FastDivide(static_cast<std::uint32_t>(vectors));
    p.heads = kernels::FastDivide(static_cast<std::uint32_t>(a.heads));
    const auto blocks = static_cast<unsigned>((tokens * per_token + kThreads - 1) / kThreads);
    attention_merge_kernel<T, VEC><<<blocks, kThreads, 0, stream>>>(p);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) throw_cuda(err, "launch");
  }
}

template <typename T>
void launch_typed(const AttentionMergeArgs& a, cudaStream_t stream) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  const bool vector = a.head_dim % kVec == 0 && aligned_to(a.out_a, 16) &&
                      aligned_to(a.out_b, 16) && aligned_to(a.out, 16);
  if (vector) {
    launch_rows<T, kVec>(a, stream);
  } else {
    launch_rows<T, 1>(a, stream);
  }
}

int vec_bytes(std::int64_t head_dim, DType dtype) {
  const auto es = static_cast<std::int64_t>(element_size(dtype));
  return (head_dim * es) % 16 == 0 ? 16 : static_cast<int>(es);
}

}  // namespace

std::string attention_merge_config(std::int64_t head_dim, DType dtype) {
  return "threads=" + std::to_string(kThreads) +
         " vec_bytes=" + std::to_string(vec_bytes(head_dim, dtype));
}

void launch_attention_merge(const AttentionMergeArgs& a, void* stream) {
  if (a.tokens < 0 || a.heads < 0 || a.head_dim < 0)
    throw SignatureError("attention_merge_states (CUDA): negative shape");
  if (a.tokens == 0 || a.heads == 0) return;
  if (a.lse_a == nullptr || a.lse_b == nullptr || a.lse == nullptr || a.out_a == nullptr ||
      a.out_b == nullptr || a.out == nullptr)
    throw SignatureError("attention_merge_states (CUDA): a tensor's data pointer is null");
  if (a.head_dim < 1)
    throw SignatureError("attention_merge_states (CUDA): head_dim must be at least 1");
  if (a.heads * a.head_dim > kMaxItemsPerLaunch)
    throw SignatureError("attention_merge_states (CUDA): a token's rows are too long");
  const auto st = static_cast<cudaStream_t>(stream);
  switch (a.dtype) {
    case DType::float32:
      return launch_typed<float>(a, st);
    case DType::float16:
      return launch_typed<__half>(a, st);
    case DType::bfloat16:
      return launch_typed<__nv_bfloat16>(a, st);
    default:
      throw SignatureError(
          "attention_merge_states (CUDA): dtype must be float32, float16 or "
          "bfloat16, got " +
          std::string(dtype_name(a.dtype)));
  }
}

}  // namespace tileops::cuda_kernels
