// The interface between the copy engine (tensor_copy.cpp) and its CUDA kernels
// (tensor_cuda.cu): a plain description of one strided, converting copy or fill.
#pragma once

#include <cstdint>

#include "tileops/core/dtype.h"

namespace tileops::detail {

/// Most dimensions a CUDA copy handles after coalescing (dimensions that are contiguous in both
/// tensors merge; size-1 dimensions drop).
inline constexpr int kCudaCopyMaxDims = 12;

struct CudaCopyPlan {
  int ndim = 0;  // outermost first
  std::int64_t numel = 0;
  std::int64_t sizes[kCudaCopyMaxDims] = {};
  std::int64_t dst_strides[kCudaCopyMaxDims] = {};  // elements
  std::int64_t src_strides[kCudaCopyMaxDims] = {};  // elements; unused for fills
  void* dst = nullptr;
  const void* src = nullptr;    // nullptr for a fill
  std::uint64_t fill_bits = 0;  // the element's bit pattern, for a fill
  DType dst_dtype = DType::float32;
  DType src_dtype = DType::float32;
};

#if TILEOPS_WITH_CUDA
/// Enqueues the copy (or fill when plan.src is nullptr) on `stream` (a cudaStream_t) of the
/// current device. The dtypes must be allowed by copy_.
void launch_cuda_copy(const CudaCopyPlan& plan, void* stream);
#endif

}  // namespace tileops::detail
