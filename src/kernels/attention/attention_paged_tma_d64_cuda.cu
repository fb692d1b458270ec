// The paged varlen attention kernel instances of head dim 64 (attention_varlen_instances.cuh).
#include "kernels/attention/attention_varlen_launch_one.cuh"

namespace tileops::cuda_kernels::attention_detail {

bool launch_paged_tma_d64(const VarlenLaunch& l) {
  return launch_if<64, 128, 2, 2, true>(l);
}

}  // namespace tileops::cuda_kernels::attention_detail
