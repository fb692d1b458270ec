// Internal: the merge of the paged split kernel's splits (attention_paged_kernel.cuh): one block
// per (token, head) merges the splits' partial states through their lse. Included by the
// per-head-dim files (attention_paged_d{64,128,256}_cuda.cu) through
// attention_paged_instances.cuh only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/attention/attention_merge_math.cuh"
#include "kernels/attention/attention_mma.cuh"
#include "kernels/attention/attention_paged_kernel.cuh"

namespace tileops::cuda_kernels::paged_detail {

/// Rows (token, head) of one merge block, and the groups of D / 4 threads that share one row's
/// splits (each thread of a group takes 4 columns of every split s = group (mod kGroups)).
template <int D>
constexpr int kMergeGroups = kThreads / (D / 4);

/// Splits whose columns a merge thread loads before the weights are known, all in flight at
/// once: with kMergeGroups groups, the first 64 splits at D 64 and 32 at D 128 and 256.
template <int D>
constexpr int kMergeAhead = D == 256 ? 16 : 8;

/// The splits' partial states of one (token, head) per block merged into out and lse with the
/// merge math of the two-state merge (attention_merge_math.cuh). Thread t takes split t's lse
/// (splits <= kThreads) and its share of the splits' outputs at once (a decoding call is latency
/// bound here: one round trip for both instead of one per split), the block reduces the lse's
/// max and the sum of the terms, the weights go to shared memory, and the groups' weighted sums
/// are added through shared memory.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) attention_paged_merge_kernel(const PagedParams p) {
  constexpr int kVecs = D / 4;
  constexpr int kGroups = kMergeGroups<D>;
  constexpr int kAhead = kMergeAhead<D>;
  __shared__ float weight[kThreads];
  __shared__ float reduce[kWarps];
  __shared__ float4 partial[kGroups - 1][kVecs];
  wait_for_dependency();             // the split kernel's partial states are complete and visible
  const long long row = blockIdx.x;  // token * heads_q + head (below 2^31)
  const uint32_t token_index = p.by_heads_q.quotient(blockIdx.x);
  const int token = static_cast<int>(token_index);
  const int head = static_cast<int>(p.by_heads_q.remainder(blockIdx.x, token_index));
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const long long lse_stride = static_cast<long long>(p.heads_q) * p.total_q;
  const float mine =
      tid < p.splits
          ? p.part_lse[tid * lse_stride + static_cast<long long>(head) * p.total_q + token]
          : -INFINITY;
  const int group = tid / kVecs;
  const int c = (tid % kVecs) * 4;
  const long long out_stride = static_cast<long long>(p.total_q) * p.heads_q * D;
  const float* part = p.part_out + row * D + c;
  float4 ahead[kAhead];
#pragma unroll
  for (int i = 0; i < kAhead; ++i) {
    const int s = group + i * kGroups;
    ahead[i] = s < p.splits ? *reinterpret_cast<const float4*>(part + s * out_stride)
                            : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }

  float big = mine;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) big = fmaxf(big, __shfl_xor_sync(0xffffffffu, big, o));
  if ((tid & 31) == 0) reduce[warp] = big;
  __syncthreads();
  big = fmaxf(fmaxf(reduce[0], reduce[1]), fmaxf(reduce[2], reduce[3]));
  const float term = big != -INFINITY && tid < p.splits ? merge_term(mine, big) : 0.0f;
  float sum = term;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  __syncthreads();  // every thread has read reduce[] (the max)
  if ((tid & 31) == 0) reduce[warp] = sum;
  __syncthreads();
  sum = (reduce[0] + reduce[1]) + (reduce[2] + reduce[3]);
  weight[tid] = sum > 0.0f ? term / sum : 0.0f;
  __syncthreads();

  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  // A split of weight 0 (no key, or a term below the float range) adds nothing, whatever its
  // output holds.
  const auto add = [&](int s, const float4& v) {
    const float w = weight[s];
    if (w == 0.0f) return;
    acc.x += w * v.x;
    acc.y += w * v.y;
    acc.z += w * v.z;
    acc.w += w * v.w;
  };
#pragma unroll
  for (int i = 0; i < kAhead; ++i) {
    const int s = group + i * kGroups;
    if (s < p.splits) add(s, ahead[i]);
  }
#pragma unroll 4
  for (int s = group + kAhead * kGroups; s < p.splits; s += kGroups) {
    add(s, *reinterpret_cast<const float4*>(part + s * out_stride));
  }
  if (group > 0) partial[group - 1][tid % kVecs] = acc;
  __syncthreads();
  if (group != 0) return;
#pragma unroll
  for (int g = 0; g < kGroups - 1; ++g) {
    const float4 v = partial[g][tid];
    acc.x += v.x;
    acc.y += v.y;
    acc.z += v.z;
    acc.w += v.w;
  }
  uint2 packed;
  packed.x = pack2<T>(acc.x, acc.y);
  packed.y = pack2<T>(acc.z, acc.w);
  *reinterpret_cast<uint2*>(static_cast<T*>(p.out) + row * D + c) = packed;
  if (tid == 0) p.lse[static_cast<long long>(head) * p.total_q + token] = merged_lse(big, sum);
}

}  // namespace tileops::cuda_kernels::paged_detail
