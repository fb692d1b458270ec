// Per-token-group FP8 quantization kernels (quant_cuda.h states the values; the arithmetic is in
// token_group_quant.cuh).
//
// The groups of a contiguous [rows, cols] tensor are a flat sequence (group i starts at element
// i * group_size, its scale is scales[i]), so the kernels never look at rows.
// - vector kernel: a group is spread over L lanes of a warp (L a power of two, 1..32), each lane
//   loading kVecs 16-byte vectors (vector j of the lane at j * L + lane, so a warp's loads are
//   contiguous); the amax is a shuffle reduction over the L lanes, the quotient and the
//   conversion run on the values still in registers: one read of x, one write of q. Two vectors
//   a lane where the group has them (8 lanes for 128 bfloat16 values): twice the bytes in flight
//   per thread and half the per-lane scale work of one.
// - scalar kernel: a warp per group, element by element, for group sizes and alignments the
//   vector kernel does not take.
#include "kernels/quant/quant_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/common/vectors.cuh"
#include "kernels/quant/token_group_quant.cuh"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {
namespace {

using fp8_quant::EpsTerms;
using fp8_quant::group_scale;
using fp8_quant::max_nan;

constexpr int kThreads = 256;

template <typename T, int kVecs>
__global__ void __launch_bounds__(kThreads)
    token_group_quant_vector_kernel(const T* __restrict__ x, uint8_t* __restrict__ q,
                                    float* __restrict__ scales, int64_t groups, int lanes_log2,
                                    EpsTerms eps) {
  constexpr int kV = 16 / static_cast<int>(sizeof(T));
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int lanes = 1 << lanes_log2;
  const int64_t g = tid >> lanes_log2;
  const int lane = static_cast<int>(tid & (lanes - 1));
  const bool valid = g < groups;
  const int64_t base = g * (static_cast<int64_t>(lanes) * kVecs * kV);

  float f[kVecs][kV];
  float amax = 0.0f;
  if (valid) {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      vec::unpack<T, kV>(vec::load_once<T, kV>(x + base + (j * lanes + lane) * kV), f[j]);
#pragma unroll
      for (int i = 0; i < kV; ++i) amax = max_nan(amax, fabsf(f[j][i]));
    }
  }
  // Every lane of the warp takes part (the lanes past the last group hold 0).
  for (int o = lanes >> 1; o > 0; o >>= 1) {
    amax = max_nan(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  }
  if (!valid) return;
  const float scale = group_scale(amax, eps);
  if (lane == 0) scales[g] = scale;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    uint32_t words[kV / 4];
    fp8_quant::quantize_vector<kV>(f[j], scale, words);
    uint8_t* dst = q + base + (j * lanes + lane) * kV;
    if constexpr (kV == 8) {
      __stcs(reinterpret_cast<uint2*>(dst), make_uint2(words[0], words[1]));
    } else {
      __stcs(reinterpret_cast<unsigned int*>(dst), words[0]);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    token_group_quant_scalar_kernel(const T* __restrict__ x, uint8_t* __restrict__ q,
                                    float* __restrict__ scales, int64_t groups, int64_t group_size,
                                    EpsTerms eps) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  constexpr int kWarps = kThreads / 32;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t g = first; g < groups; g += stride) {  // the same for the whole warp
    const T* xg = x + g * group_size;
    float amax = 0.0f;
    for (int64_t j = lane; j < group_size; j += 32)
      amax = max_nan(amax, fabsf(vec::to_float(xg[j])));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = max_nan(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float scale = group_scale(amax, eps);
    if (lane == 0) scales[g] = scale;
    for (int64_t j = lane; j < group_size; j += 32) {
      q[g * group_size + j] = fp8_quant::quantize_exact(vec::to_float(xg[j]), scale);
    }
  }
}

[[noreturn]] void throw_cuda(cudaError_t err, const char* what) {
  throw UsageError(std::string("token_group_quant_fp8 (CUDA): ") + what + ": " +
                   cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

bool aligned(const void* p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

template <typename T>
void launch_typed(const TokenGroupQuantArgs& a, int64_t groups, EpsTerms eps, cudaStream_t stream) {
  constexpr int kV = 16 / static_cast<int>(sizeof(T));
  const auto* x = static_cast<const T*>(a.x);
  auto* q = static_cast<uint8_t*>(a.q);
  // The vector kernel where the group size and the pointers allow it.
  int lanes_log2 = -1;
  int vecs = 0;
  if (aligned(a.x, 16) && aligned(a.q, kV)) {
    fp8_quant::vector_layout(a.group_size, kV, lanes_log2, vecs);
  }
  if (vecs > 0) {
    const int64_t threads = groups << lanes_log2;
    const int64_t blocks = (threads + kThreads - 1) / kThreads;
    if (blocks > INT_MAX) throw SignatureError("token_group_quant_fp8 (CUDA): too many groups");
    const auto grid = static_cast<unsigned>(blocks);
    switch (vecs) {
      case 1:
        token_group_quant_vector_kernel<T, 1>
            <<<grid, kThreads, 0, stream>>>(x, q, a.scales, groups, lanes_log2, eps);
        break;
      case 2:
        token_group_quant_vector_kernel<T, 2>
            <<<grid, kThreads, 0, stream>>>(x, q, a.scales, groups, lanes_log2, eps);
        break;
      default:
        token_group_quant_vector_kernel<T, 4>
            <<<grid, kThreads, 0, stream>>>(x, q, a.scales, groups, lanes_log2, eps);
        break;
    }
    return;
  }
  constexpr int64_t kWarps = kThreads / 32;
  const int64_t blocks = std::min<int64_t>((groups + kWarps - 1) / kWarps, 1 << 20);
  token_group_quant_scalar_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      x, q, a.scales, groups, a.group_size, eps);
}

}  // namespace

void launch_token_group_quant_fp8(const TokenGroupQuantArgs& a, void* stream) {
  const DType dt = a.dtype;
  if (dt != DType::float32 && dt != DType::float16 && dt != DType::bfloat16)
    throw SignatureError(
        "token_group_quant_fp8 (CUDA): x dtype must be float32, float16 or bfloat16, got " +
        std::string(dtype_name(dt)));
  if (a.rows < 0 || a.cols < 0) throw SignatureError("token_group_quant_fp8 (CUDA): negative size");
  if (a.group_size < 1 || a.cols % a.group_size != 0)
    throw SignatureError(
        "token_group_quant_fp8 (CUDA): group_size must be >= 1 and divide cols, "
        "got group_size " +
        std::to_string(a.group_size) + " with " + std::to_string(a.cols) + " cols");
  if (!(a.eps > 0.0)) throw SignatureError("token_group_quant_fp8 (CUDA): eps must be > 0");
  if (a.rows == 0 || a.cols == 0) return;
  if (a.x == nullptr || a.q == nullptr || a.scales == nullptr)
    throw SignatureError("token_group_quant_fp8 (CUDA): x, q and scales must not be null");
  if (!aligned(a.x, static_cast<int>(element_size(dt))) || !aligned(a.scales, 4))
    throw SignatureError(
        "token_group_quant_fp8 (CUDA): x or scales is not aligned to its element "
        "size");
  const int64_t groups = a.rows * (a.cols / a.group_size);
  const EpsTerms eps = fp8_quant::eps_terms(a.eps);
  const auto st = static_cast<cudaStream_t>(stream);
  switch (dt) {
    case DType::float32:
      launch_typed<float>(a, groups, eps, st);
      break;
    case DType::float16:
      launch_typed<__half>(a, groups, eps, st);
      break;
    default:
      launch_typed<__nv_bfloat16>(a, groups, eps, st);
      break;
  }
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    throw_cuda(err, "kernel launch");
}

}  // namespace tileops::cuda_kernels
