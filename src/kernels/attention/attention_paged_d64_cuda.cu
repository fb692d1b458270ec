// The paged attention kernels of head dim 64 (attention_paged_instances.cuh).
#include "kernels/attention/attention_paged_launch_one.cuh"

namespace tileops::cuda_kernels::paged_detail {

void launch_paged_d64(const PagedLaunch& l) {
  launch_dim<64>(l);
}

int paged_blocks_per_sm_d64(DType dtype, int rows_per_tile) {
  return blocks_per_sm_dim<64>(dtype, rows_per_tile);
}

}  // namespace tileops::cuda_kernels::paged_detail
