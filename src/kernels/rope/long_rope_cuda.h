// CUDA kernel of LongRoPE (Phi-3 style rotary embedding, neox halves), with a plain launch API
// (internal header: no CUDA headers here; the stream is passed as void* and is a cudaStream_t).
//
// x is contiguous [batch, seq, heads, 2 * half_dim] (the [seq, dim] layout is batch = heads = 1).
// For token (b, s) the position p is positions[b, s] (int32 or int64, contiguous [batch, seq]) or
// s when positions is null. For i < half_dim: theta = p * inv_freq[i] in double, reduced to
// theta - 2 pi rint(theta / 2 pi) in double, then cos and sin in fp32 of the reduced angle, and
//   y[i]            = T((x[i] cos - x[i + half_dim] sin) * attention_scaling)
//   y[i + half_dim] = T((x[i + half_dim] cos + x[i] sin) * attention_scaling).
// y may be x (in place).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tileops/core/dtype.h"

namespace tileops::cuda_kernels {

/// How one launch of the LongRoPE kernel is shaped. Checked by launch_long_rope; a configuration
/// that cannot serve a shape raises SignatureError.
struct LongRoPEConfig {
  /// Threads per block: a multiple of 32, at most 1024.
  int threads = 0;
  /// Tokens a block handles per step: their cos/sin (tokens_per_block x half_dim) are computed
  /// once into shared memory and reused by all heads.
  int tokens_per_block = 0;
  /// 16: each work item is a 16-byte vector of the first half and the matching one of the second
  /// half (falls back to scalar by itself when half_dim or a pointer does not allow it);
  /// element_size(dtype): one element pair per item.
  int vec_bytes = 16;
  /// Items each thread loads before it computes (1, 2, 4 or 8): 2 x items_per_thread accesses in
  /// flight per thread; the first batch is issued before the cos/sin are computed.
  int items_per_thread = 0;
  /// Blocks per multiprocessor in the persistent grid; 0: as many as fit (occupancy).
  int blocks_per_sm = 0;

  std::string str() const;
  friend bool operator==(const LongRoPEConfig&, const LongRoPEConfig&) = default;
};

struct LongRoPEArgs {
  const void* x = nullptr;
  void* y = nullptr;                     ///< may equal x
  const void* positions = nullptr;       ///< nullptr: position = s
  DType positions_dtype = DType::int64;  ///< int32 or int64
  const double* inv_freq = nullptr;      ///< device array [half_dim]
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t heads = 0;
  int64_t half_dim = 0;
  float attention_scaling = 1.0f;
  DType dtype = DType::bfloat16;  ///< float32, float16 or bfloat16 (x and y)
};

/// A good default for the shape on `device` (its multiprocessor count is read once and cached).
LongRoPEConfig long_rope_default_config(int64_t batch, int64_t seq, int64_t heads, int64_t half_dim,
                                        DType dtype, int device);

/// Candidates for tuning; each one serves the shape correctly. The default is first.
std::vector<LongRoPEConfig> long_rope_tuning_space(int64_t batch, int64_t seq, int64_t heads,
                                                   int64_t half_dim, DType dtype, int device);

/// Launches one kernel on `stream` (a cudaStream_t; nullptr: the legacy default stream) on the
/// current device. An empty tensor launches nothing. Raises SignatureError for arguments or a
/// configuration the kernel cannot take, UsageError when the CUDA runtime reports an error.
void launch_long_rope(const LongRoPEArgs& args, const LongRoPEConfig& config, void* stream);

}  // namespace tileops::cuda_kernels
