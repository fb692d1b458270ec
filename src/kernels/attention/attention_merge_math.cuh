// Internal: the arithmetic of merging attention states through their lse, shared by the merge of
// two states (attention_merge_cuda.cu) and the merge of the paged kernel's splits
// (attention_paged_merge_kernel.cuh). With m the largest lse of the states merged (finite: some
// state saw a key), each state's term is exp(lse_i - m), the merged lse is m + log(sum of the
// terms) and state i weighs term_i / sum; when every lse is -inf the merged state is out 0, lse
// -inf.
#pragma once

#include <cuda_runtime.h>

namespace tileops::cuda_kernels {

/// exp(lse - m): a state's unnormalized weight, m the largest lse of the merge (finite).
__device__ __forceinline__ float merge_term(float lse, float m) {
  return expf(lse - m);
}

/// The merged lse of states whose largest lse is m and whose terms add up to sum.
__device__ __forceinline__ float merged_lse(float m, float sum) {
  return m == -INFINITY ? -INFINITY : m + logf(sum);
}

}  // namespace tileops::cuda_kernels
