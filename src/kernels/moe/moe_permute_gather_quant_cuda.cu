// The pre-permute's gather fused with per-token-group FP8 quantization (moe_permute_cuda.h,
// PrePermuteArgs::permuted_q, states the values): the quantization kernel's vector layout
// (token_group_quant_cuda.cu) over the groups of the T*K output rows, each group reading its
// token's row through inverse. Group item i is output group i % (H / group_size) of pair
// i / (H / group_size): a kept pair writes row inverse[pair]; in the contiguous layout a pair at
// or past offsets[E] also writes its own row as the quantized zero row (as the copy kernel
// zero-fills it). The masked layout writes only through inverse.
#include "kernels/moe/moe_permute_gather_quant.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>

#include "kernels/common/fast_divide.h"
#include "kernels/common/vectors.cuh"
#include "kernels/quant/token_group_quant.cuh"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {
namespace {

using fp8_quant::EpsTerms;

constexpr int kThreads = 256;

struct GatherQuantParams {
  const unsigned char* x;
  int64_t x_stride_bytes;
  uint8_t* q;
  float* scales;
  const int32_t* offsets;
  const int32_t* inverse;
  int64_t items;  // pairs * groups_per_row, below 2^32
  // Item -> (pair, group) and pair -> token by multiply and shift: two 64-bit divisions cost a
  // thread more instructions than its 16-byte copy and quantization.
  kernels::FastDivide by_groups;
  kernels::FastDivide by_top_k;
  int64_t hidden;
  int64_t groups_per_row;
  int E;
  int lanes_log2;
  bool zero_tail;  // the contiguous layout: rows past offsets[E] are the quantized zero row
  EpsTerms eps;
};

template <typename T, int kVecs>
__global__ void __launch_bounds__(kThreads) moe_gather_quant_kernel(const GatherQuantParams p) {
  constexpr int kV = 16 / static_cast<int>(sizeof(T));
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int lanes = 1 << p.lanes_log2;
  const int64_t item = tid >> p.lanes_log2;
  const int lane = static_cast<int>(tid & (lanes - 1));
  const bool valid = item < p.items;
  const int64_t group_size = static_cast<int64_t>(lanes) * kVecs * kV;
  int64_t pair = 0;
  int64_t g = 0;
  int32_t dst = -1;
  if (valid) {
    const auto item32 = static_cast<uint32_t>(item);
    const uint32_t pair32 = p.by_groups.quotient(item32);
    pair = pair32;
    g = p.by_groups.remainder(item32, pair32);
    dst = __ldg(p.inverse + pair);
  }
  const bool kept = dst >= 0;
  float f[kVecs][kV];
  float amax = 0.0f;
  if (kept) {
    const T* src =
        reinterpret_cast<const T*>(
            p.x + static_cast<int64_t>(p.by_top_k.quotient(static_cast<uint32_t>(pair))) *
                      p.x_stride_bytes) +
        g * group_size;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      vec::unpack<T, kV>(vec::load_nc<T, kV>(src + (j * lanes + lane) * kV), f[j]);
#pragma unroll
      for (int i = 0; i < kV; ++i) amax = fp8_quant::max_nan(amax, fabsf(f[j][i]));
    }
  }
  // Every lane of the warp takes part (lanes of dropped pairs and past the end hold 0).
  for (int o = lanes >> 1; o > 0; o >>= 1) {
    amax = fp8_quant::max_nan(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  }
  if (!valid) return;
  const auto store = [&](int64_t row, int j, const uint32_t(&words)[kV / 4]) {
    uint8_t* out = p.q + row * p.hidden + g * group_size + (j * lanes + lane) * kV;
    if constexpr (kV == 8) {
      __stcs(reinterpret_cast<uint2*>(out), make_uint2(words[0], words[1]));
    } else {
      __stcs(reinterpret_cast<unsigned int*>(out), words[0]);
    }
  };
  if (kept) {
    const float scale = fp8_quant::group_scale(amax, p.eps);
    if (lane == 0) p.scales[dst * p.groups_per_row + g] = scale;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      uint32_t words[kV / 4];
      fp8_quant::quantize_vector<kV>(f[j], scale, words);
      store(dst, j, words);
    }
  }
  if (p.zero_tail && pair >= __ldg(p.offsets + p.E)) {  // past the kept rows: the zero row
    const float scale = p.eps.eps_scale;                // the scale of amax 0
    if (lane == 0) p.scales[pair * p.groups_per_row + g] = scale;
    const uint32_t code = fp8_quant::quantize_exact(0.0f, scale);
    uint32_t words[kV / 4];
#pragma unroll
    for (int w = 0; w < kV / 4; ++w) words[w] = code * 0x01010101u;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) store(pair, j, words);
  }
}

template <typename T>
void launch_typed(const GatherQuantParams& p, int vecs, cudaStream_t stream) {
  const int64_t blocks = ((p.items << p.lanes_log2) + kThreads - 1) / kThreads;
  if (blocks > INT_MAX) throw SignatureError("moe_pre_permute (CUDA): too many groups to quantize");
  const auto grid = static_cast<unsigned>(blocks);
  switch (vecs) {
    case 1:
      moe_gather_quant_kernel<T, 1><<<grid, kThreads, 0, stream>>>(p);
      break;
    case 2:
      moe_gather_quant_kernel<T, 2><<<grid, kThreads, 0, stream>>>(p);
      break;
    default:
      moe_gather_quant_kernel<T, 4><<<grid, kThreads, 0, stream>>>(p);
      break;
  }
}

bool aligned(const void* p, int64_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

}  // namespace

std::optional<std::string> moe_gather_quant_fp8_refusal(DType dtype, int64_t group_size) {
  const int vec = static_cast<int>(16 / static_cast<int64_t>(element_size(dtype)));
  int lanes_log2 = 0;
  int vecs = 0;
  if (group_size >= 1 && fp8_quant::vector_layout(group_size, vec, lanes_log2, vecs))
    return std::nullopt;
  return "the fused FP8 quantization needs group_size / " + std::to_string(vec) +
         " to be a power of two up to 128, got group_size " + std::to_string(group_size);
}

void check_moe_gather_quant_fp8(const PrePermuteArgs& a) {
  const auto es = static_cast<int64_t>(element_size(a.dtype));
  const int vec = static_cast<int>(16 / es);
  int lanes_log2 = 0;
  int vecs = 0;
  const auto refuse = [](const std::string& why) {
    throw SignatureError("moe_pre_permute (CUDA): fused FP8 quantization " + why);
  };
  if (a.quant_group_size < 1 || a.hidden % a.quant_group_size != 0)
    refuse("needs quant_group_size >= 1 dividing hidden, got " +
           std::to_string(a.quant_group_size) + " with hidden " + std::to_string(a.hidden));
  if (!fp8_quant::vector_layout(a.quant_group_size, vec, lanes_log2, vecs))
    refuse("needs quant_group_size / " + std::to_string(vec) +
           " to be a power of two up to 128, got " + std::to_string(a.quant_group_size));
  if (!(a.quant_eps > 0.0)) refuse("needs quant_eps > 0");
  if (a.permuted_scales == nullptr) refuse("needs permuted_scales");
  if (!aligned(a.x, 16) || (a.tokens > 1 && (a.x_row_stride * es) % 16 != 0))
    refuse("needs x 16-byte aligned with a row stride of whole 16-byte vectors");
  if (!aligned(a.permuted_q, vec) || !aligned(a.permuted_scales, 4))
    refuse("needs permuted_q aligned to " + std::to_string(vec) + " bytes and aligned scales");
}

void launch_moe_gather_quant_fp8(const PrePermuteArgs& a, void* stream) {
  const auto es = static_cast<int64_t>(element_size(a.dtype));
  int lanes_log2 = 0;
  int vecs = 0;
  fp8_quant::vector_layout(a.quant_group_size, static_cast<int>(16 / es), lanes_log2, vecs);
  GatherQuantParams p;
  p.x = static_cast<const unsigned char*>(a.x);
  p.x_stride_bytes = a.x_row_stride * es;
  p.q = static_cast<uint8_t*>(a.permuted_q);
  p.scales = a.permuted_scales;
  p.offsets = a.expert_offsets;
  p.inverse = a.inverse;
  p.groups_per_row = a.hidden / a.quant_group_size;
  p.items = a.tokens * a.top_k * p.groups_per_row;
  if (p.items > static_cast<int64_t>(UINT32_MAX))
    throw SignatureError("moe_pre_permute (CUDA): " + std::to_string(p.items) +
                         " groups to quantize, more than the fused kernel's 2^32 - 1");
  p.hidden = a.hidden;
  p.E = static_cast<int>(a.num_experts);
  p.lanes_log2 = lanes_log2;
  p.zero_tail = a.masked_max_m == 0;  // the masked layout leaves rows past the counts unwritten
  p.eps = fp8_quant::eps_terms(a.quant_eps);
  if (p.items == 0) return;
  p.by_groups = kernels::FastDivide(static_cast<uint32_t>(p.groups_per_row));
  p.by_top_k = kernels::FastDivide(static_cast<uint32_t>(a.top_k));
  const auto st = static_cast<cudaStream_t>(stream);
  switch (a.dtype) {
    case DType::float32:
      launch_typed<float>(p, vecs, st);
      break;
    case DType::float16:
      launch_typed<__half>(p, vecs, st);
      break;
    default:
      launch_typed<__nv_bfloat16>(p, vecs, st);
      break;
  }
}

}  // namespace tileops::cuda_kernels
