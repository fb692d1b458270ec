// The paged attention kernels of head dim 128 (attention_paged_instances.cuh).
#include "kernels/attention/attention_paged_launch_one.cuh"

namespace tileops::cuda_kernels::paged_detail {

void launch_paged_d128(const PagedLaunch& l) {
  launch_dim<128>(l);
}

int paged_blocks_per_sm_d128(DType dtype, int rows_per_tile) {
  return blocks_per_sm_dim<128>(dtype, rows_per_tile);
}

}  // namespace tileops::cuda_kernels::paged_detail
