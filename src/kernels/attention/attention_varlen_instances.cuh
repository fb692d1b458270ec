// Internal: what the launcher (attention_varlen_launch_cuda.cu) hands the per-head-dim files
// (attention_varlen_d{64,128,256}_cuda.cu), each of which instantiates the kernel for its head
// dim and launches the instance a configuration names. Split by head dim so the instances
// compile in parallel.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "kernels/attention/attention_varlen_schedule.cuh"
#include "tileops/core/dtype.h"

namespace tileops::cuda_kernels::attention_detail {

struct VarlenLaunch {
  CUtensorMap map_q;
  CUtensorMap map_k;
  CUtensorMap map_v;
  VarlenParams params;
  DType dtype;
  int block_n;
  int stages;
  bool transform;  // the softcap / non-positive-scale score path
  int v_rows;      // paged V in page-major stages of v_rows-key pages (16), or 0 (chunk-major)
  int blocks;      // grid size
  cudaStream_t stream;
};

/// An instantiated (block_n, stages) pair of a head dim.
struct VarlenInstance {
  int block_n;
  int stages;
};

/// Launches the instance of head dim 64 / 128 / 256 that `l` names; false when that head dim has
/// no such (block_n, stages). Throws UsageError when the CUDA runtime reports an error.
bool launch_varlen_d64(const VarlenLaunch& l);
bool launch_varlen_d128(const VarlenLaunch& l);
bool launch_varlen_d256(const VarlenLaunch& l);

/// The same over paged keys (l.params' paged fields set, the K / V maps over the caches in boxes
/// of l.params.box_rows rows): one instance per head dim, block_n 128 (64 at head dim 256, which
/// every page size divides), two stages (three and one Q stage at head dim 128); false when `l`
/// names another.
bool launch_paged_tma_d64(const VarlenLaunch& l);
bool launch_paged_tma_d128(const VarlenLaunch& l);
bool launch_paged_tma_d256(const VarlenLaunch& l);

/// [[noreturn]] UsageError naming the CUDA error and what failed.
[[noreturn]] void throw_varlen_cuda(cudaError_t err, const char* what);

}  // namespace tileops::cuda_kernels::attention_detail
