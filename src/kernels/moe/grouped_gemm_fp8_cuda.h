// Internal: the launch API of the CUDA FP8 block-scaled grouped GEMM (Hopper, sm_90a), both
// layouts (no CUDA headers here; the stream is a cudaStream_t passed as void*). The values are the
// manifest's (MoEGroupedGemmFP8FwdOp, MoEGroupedGemmFP8MaskedFwdOp); the offsets are made safe as
// the bf16 kernel's (grouped_gemm_cuda.h): clamped to [0, M], then a running maximum; masked counts
// are clamped to [0, max_m]. No host synchronisation: a launch can be captured in a CUDA graph.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/moe/grouped_gemm_cuda.h"

namespace tileops::cuda_kernels {

struct GroupedGemmFP8Args {
  const void* a = nullptr;           ///< e4m3 [M, K] (masked: [E, max_m, K])
  const float* a_scales = nullptr;   ///< [M, K / 128]
  const int32_t* offsets = nullptr;  ///< contiguous: expert_offsets [E + 1]; masked: counts [E]
  const void* b = nullptr;           ///< e4m3 [E, N, K]
  const float* b_scales = nullptr;   ///< [E, ceil(N / 128), K / 128]
  void* c = nullptr;                 ///< bfloat16 [M, N or N / 2]
  int64_t M = 0, N = 0, K = 0, E = 0;
  int64_t max_m = 0;  ///< > 0: the masked layout (M = E * max_m)
  int64_t block_n = 128, block_k = 128;
  MoEActivation activation = MoEActivation::none;
};

/// One instantiated kernel: tile block_m x block_n (rows of B; gated: block_n / 2 output
/// columns), `stages` K blocks of 128 in flight; blocks_per_sm 0: as many as fit (one).
struct GroupedGemmFP8CudaConfig {
  int block_m = 128;
  int block_n = 128;
  int stages = 6;
  int blocks_per_sm = 0;
  std::string str() const;
  friend bool operator==(const GroupedGemmFP8CudaConfig&,
                         const GroupedGemmFP8CudaConfig&) = default;
};

/// Why the kernel cannot compute this shape (nullopt: it can): block sizes other than 128, a
/// gated activation whose up half does not start on a 64-column boundary, sizes past int32.
std::optional<std::string> grouped_gemm_fp8_refusal(const GroupedGemmFP8Args& args);

/// The measured default for the shape (docs/perf/2026-12-02-h200-fp8-grouped-gemm.md).
GroupedGemmFP8CudaConfig grouped_gemm_fp8_default_config(const GroupedGemmFP8Args& args);

/// The configurations worth timing; the default first.
std::vector<GroupedGemmFP8CudaConfig> grouped_gemm_fp8_tuning_space(const GroupedGemmFP8Args& args);

/// Launches on `stream` (current device, compute capability 9.0). SignatureError for a refused
/// shape, a configuration without a kernel or misaligned pointers; UsageError for CUDA errors.
void launch_grouped_gemm_fp8(const GroupedGemmFP8Args& args, const GroupedGemmFP8CudaConfig& config,
                             void* stream);

}  // namespace tileops::cuda_kernels
