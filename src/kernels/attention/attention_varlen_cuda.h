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
  /// Optional: 4 bytes of device memory, only for this launch (not shared with a launch that
  /// may run concurrently), which the launch zeroes on its stream and the kernel uses to hand
  /// out tiles to its blocks as they free up (balanced for causal and varlen work). nullptr:
  /// a fixed order, a few percent slower on uneven tiles.
  std::int32_t* workspace = nullptr;
};

/// How one launch of the varlen attention kernel is shaped (each value an instantiated kernel;
/// launch_attention_varlen raises SignatureError for one that is not).
struct AttentionVarlenConfig {
  /// Keys per K/V tile: 128 for head dims 64 and 128; 80 or 64 for head dim 256.
  int block_n = 128;
  /// K/V stages in shared memory: 2, or 3 at head dim 64. (The Q tile has two stages at head
  /// dims 64 and 128, one at 256.)
  int stages = 2;
  /// true: the two consumer warpgroups take turns issuing their MMAs (ping-pong), so the softmax
  /// of one overlaps the other's; false: each issues as soon as its data is there.
  bool pingpong = true;
  /// Persistent blocks; 0: one per multiprocessor (never more than there are tiles).
  int blocks = 0;

  std::string str() const;
  friend bool operator==(const AttentionVarlenConfig&, const AttentionVarlenConfig&) = default;
};

/// The default configuration for the call (head dim, dtype, mask kind) on `device`.
AttentionVarlenConfig attention_varlen_default_config(const AttentionVarlenCall& call, int device);

/// Candidates for tuning; each serves every call of the head dim. The default is first.
std::vector<AttentionVarlenConfig> attention_varlen_tuning_space(const AttentionVarlenCall& call,
                                                                 int device);

/// Enqueues the varlen attention forward on `stream` (a cudaStream_t; nullptr: the legacy default
/// stream) on the current device, which must be a Hopper GPU (compute capability 9.0). Nothing is
/// launched when total_q or batch is 0. The cu_seqlens contents are never read on the host; a
/// sequence whose bounds fall outside the tensors reads zeros there and writes nothing outside
/// out and lse. A key block past a sequence's end reads the next sequence's rows and weighs them
/// by exactly 0: a NaN / Inf in another sequence's v would propagate (finite inputs never). Raises
/// SignatureError for arguments or a configuration the kernel cannot take (dtype not float16 /
/// bfloat16, head dim not 64 / 128 / 256, heads_q not a multiple of heads_kv, q / k / v / out not
/// 16-byte aligned), UsageError for another device or a CUDA error.
void launch_attention_varlen(const AttentionVarlenArgs& args, const AttentionVarlenConfig& config,
                             void* stream);

}  // namespace tileops::cuda_kernels
