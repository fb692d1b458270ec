// The CUDA merge of two attention states behind a plain launch API (internal header: no CUDA
// headers here; the stream is passed as void* and is a cudaStream_t). The values are the
// contract's (tileops/kernel/attention.h, AttentionMergeInterface), computed in float32 as the
// CPU implementation computes them: m = max(lse_a, lse_b); both -inf gives out 0 and lse -inf;
// else wa = exp(lse_a - m), wb = exp(lse_b - m), lse = m + log(wa + wb) and
// out = out_a * (wa / (wa + wb)) + out_b * (wb / (wa + wb)), rounded once.
#pragma once

#include <cstdint>
#include <string>

#include "tileops/core/dtype.h"

namespace tileops::cuda_kernels {

struct AttentionMergeArgs {
  const void* out_a = nullptr;   ///< [tokens, heads, head_dim], contiguous, of dtype
  const float* lse_a = nullptr;  ///< [heads, tokens]
  const void* out_b = nullptr;
  const float* lse_b = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  std::int64_t tokens = 0;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  DType dtype = DType::bfloat16;  ///< float32, float16 or bfloat16
};

/// The launch shape for rows of head_dim elements of dtype: "threads=256 vec_bytes=16 ..."
/// (vec_bytes narrower at launch when a pointer is not aligned to it).
std::string attention_merge_config(std::int64_t head_dim, DType dtype);

/// Launches the merge on `stream` on the current device; nothing for an empty state. Raises
/// SignatureError for arguments the kernel cannot take, UsageError for CUDA runtime errors.
void launch_attention_merge(const AttentionMergeArgs& args, void* stream);

}  // namespace tileops::cuda_kernels
