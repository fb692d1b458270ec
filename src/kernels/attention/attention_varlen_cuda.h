// The CUDA varlen attention forward (Hopper, sm_90a) behind a plain C++ launch API (internal
// header: no CUDA headers here; the stream is passed as void* and is a cudaStream_t). The values
// it computes are the contract's (tileops/kernel/attention.h, AttentionVarlenInterface).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tileops/core/dtype.h"
#include "tileops/kernel/attention.h"

namespace tileops::cuda_kernels {

/// The pointers and sizes of one varlen attention call. q [total_q, heads_q, head_dim], k and v
/// [total_k, heads_kv, head_dim], out like q: contiguous, of `dtype` (float16 or bfloat16);
/// lse [heads_q, total_q] float32; cu_seqlens_q / cu_seqlens_k [batch + 1] int32 on the device,
/// never read on the host.
struct AttentionVarlenArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  const std::int32_t* cu_seqlens_q = nullptr;
  const std::int32_t* cu_seqlens_k = nullptr;
  std::int64_t total_q = 0;
  std::int64_t total_k = 0;
  std::int64_t batch = 0;
  std::int64_t heads_q = 0;
  std::int64_t heads_kv = 0;
  std::int64_t head_dim = 0;
  DType dtype = DType::bfloat16;
  AttentionScores scores;
};

}  // namespace tileops::cuda_kernels
