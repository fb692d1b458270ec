// Internal: the CUDA kernels of expert-parallel dispatch and combine
// (docs/design/expert-parallel.md): copying byte rows between the packed wire format and the
// tensors, and summing each token's returned partials. Plain launch API, no CUDA headers; streams
// are cudaStream_t passed as void*.
#pragma once

#include <cstdint>

#include "tileops/core/dtype.h"

namespace tileops::cuda_kernels {

/// For i < rows: dst[i * dst_stride + dst_offset, + bytes) = src[j * src_stride + src_offset, +
/// bytes) with j = index ? index[i] : i (strides and offsets in bytes). Uses the widest word (16,
/// 8, 4 or 1 bytes) that divides the pointers, strides, offsets and the row length. The caller
/// guarantees every index is in range.
struct RowCopyArgs {
  void* dst = nullptr;
  std::int64_t dst_stride = 0, dst_offset = 0;
  const void* src = nullptr;
  std::int64_t src_stride = 0, src_offset = 0;
  std::int64_t bytes = 0;
  const std::int64_t* index = nullptr;  ///< optional [rows], device memory
  std::int64_t rows = 0;
};
void launch_copy_rows(const RowCopyArgs& args, void* stream);

/// y[t][h] = T(sum over j in [token_offsets[t], token_offsets[t + 1]) of float(
/// partials[token_rows[j]][h])), summed in float32 in j order (rank order), one rounding; a token
/// with no rows gets zeros. The combine step of finalize.
struct CombineRowsArgs {
  const void* partials = nullptr;               ///< [rows, hidden] contiguous, dtype
  const std::int64_t* token_offsets = nullptr;  ///< [tokens + 1]
  const std::int64_t* token_rows = nullptr;     ///< [token_offsets[tokens]]
  void* y = nullptr;                            ///< [tokens, hidden] contiguous, dtype
  std::int64_t tokens = 0, hidden = 0;
  DType dtype = DType::bfloat16;  ///< float32, float16 or bfloat16
};
void launch_combine_rows(const CombineRowsArgs& args, void* stream);

}  // namespace tileops::cuda_kernels
