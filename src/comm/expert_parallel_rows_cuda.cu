// Expert-parallel packing and combine kernels (see expert_parallel_rows_cuda.h). Both are copies or
// sums of whole rows: a block per row (or per token), threads over the row's words.
#include "comm/expert_parallel_rows_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/common/vectors.cuh"
#include "tileops/core/cuda.h"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGridY = 65535;

template <typename Word>
__global__ void copy_rows_kernel(RowCopyArgs a) {
  const std::int64_t words = a.bytes / static_cast<std::int64_t>(sizeof(Word));
  for (std::int64_t i = blockIdx.x; i < a.rows; i += gridDim.x) {
    const std::int64_t j = a.index ? a.index[i] : i;
    const auto* src = reinterpret_cast<const Word*>(static_cast<const char*>(a.src) +
                                                    j * a.src_stride + a.src_offset);
    auto* dst =
        reinterpret_cast<Word*>(static_cast<char*>(a.dst) + i * a.dst_stride + a.dst_offset);
    for (std::int64_t w = threadIdx.x; w < words; w += blockDim.x) dst[w] = src[w];
  }
}

template <typename T>
__global__ void combine_rows_kernel(CombineRowsArgs a) {
  const auto* partials = static_cast<const T*>(a.partials);
  auto* y = static_cast<T*>(a.y);
  for (std::int64_t t = blockIdx.y; t < a.tokens; t += gridDim.y) {
    const std::int64_t begin = a.token_offsets[t], end = a.token_offsets[t + 1];
    for (std::int64_t h = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         h < a.hidden; h += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
      float sum = 0.0f;
      for (std::int64_t j = begin; j < end; ++j) {
        sum = __fadd_rn(sum, vec::to_float(partials[a.token_rows[j] * a.hidden + h]));
      }
      y[t * a.hidden + h] = vec::round_to<T>(sum);
    }
  }
}

/// The widest word dividing every address and length the copy touches.
int word_bytes(const RowCopyArgs& a) {
  const auto bits = reinterpret_cast<std::uintptr_t>(a.dst) |
                    reinterpret_cast<std::uintptr_t>(a.src) |
                    static_cast<std::uintptr_t>(a.dst_stride | a.dst_offset | a.src_stride |
                                                a.src_offset | a.bytes);
  for (const int w : {16, 8, 4}) {
    if (bits % static_cast<std::uintptr_t>(w) == 0) return w;
  }
  return 1;
}

}  // namespace

void launch_copy_rows(const RowCopyArgs& args, void* stream) {
  if (args.rows < 0 || args.bytes < 0) throw SignatureError("launch_copy_rows: negative size");
  if (args.rows == 0 || args.bytes == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const int w = word_bytes(args);
  const std::int64_t words = args.bytes / w;
  const int threads = static_cast<int>(std::min<std::int64_t>(kThreads, (words + 31) / 32 * 32));
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(args.rows, 1 << 20));
  switch (w) {
    case 16:
      copy_rows_kernel<uint4><<<blocks, threads, 0, s>>>(args);
      break;
    case 8:
      copy_rows_kernel<uint2><<<blocks, threads, 0, s>>>(args);
      break;
    case 4:
      copy_rows_kernel<unsigned int><<<blocks, threads, 0, s>>>(args);
      break;
    default:
      copy_rows_kernel<unsigned char><<<blocks, threads, 0, s>>>(args);
      break;
  }
  check_cuda(cudaGetLastError(), "launch_copy_rows");
}

void launch_combine_rows(const CombineRowsArgs& args, void* stream) {
  if (args.tokens < 0 || args.hidden < 0)
    throw SignatureError("launch_combine_rows: negative size");
  if (args.tokens == 0 || args.hidden == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>((args.hidden + kThreads - 1) / kThreads),
                  static_cast<unsigned>(std::min<std::int64_t>(args.tokens, kMaxGridY)));
  switch (args.dtype) {
    case DType::float32:
      combine_rows_kernel<float><<<grid, kThreads, 0, s>>>(args);
      break;
    case DType::float16:
      combine_rows_kernel<__half><<<grid, kThreads, 0, s>>>(args);
      break;
    case DType::bfloat16:
      combine_rows_kernel<__nv_bfloat16><<<grid, kThreads, 0, s>>>(args);
      break;
    default:
      throw SignatureError(std::string("launch_combine_rows: dtype ") +
                           std::string(dtype_name(args.dtype)) +
                           " (float32, float16 or bfloat16 only)");
  }
  check_cuda(cudaGetLastError(), "launch_combine_rows");
}

}  // namespace tileops::cuda_kernels
