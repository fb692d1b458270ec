// The paged varlen attention kernel instances of head dim 256 (attention_varlen_instances.cuh).
#include "kernels/attention/attention_varlen_launch_one.cuh"

namespace tileops::cuda_kernels::attention_detail {

bool launch_paged_tma_d256(const VarlenLaunch& l) {
  // Pages of 16 keys: V in page-major stages, one load per page (attention_varlen_kernel.cuh).
  return l.v_rows == 16 ? launch_if<256, 64, 2, 1, true, 16>(l) : launch_if<256, 64, 2, 1, true>(l);
}

}  // namespace tileops::cuda_kernels::attention_detail
