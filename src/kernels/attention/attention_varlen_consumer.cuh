// Internal: the consumer warpgroups' arithmetic of the varlen attention kernel
// (attention_varlen_kernel.cuh): S = Q K^T and O += P V issued as wgmma, the online softmax of one
// key block (transform, mask, exp2), P's conversion, O's rescale and the epilogue's stores of out
// and lse.
#pragma once

#include "kernels/attention/attention_varlen_schedule.cuh"
#include "kernels/attention/attention_wgmma.cuh"
#include "kernels/common/vectors.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tileops::cuda_kernels::attention_detail {
namespace {

constexpr float kLn2 = 0.693147180559945309f;

#if TILEOPS_SM90A_BODY

using hopper::smem_desc;
using vec::pack2;

// S[64 x BN] = Q[64 x D] K[BN x D]^T: D / 16 k-steps, K-major operands in D / 64 chunks.
template <typename T, int D, int BN>
__device__ __forceinline__ void issue_qk(float (&s)[BN / 2], uint32_t q, uint32_t k) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const uint32_t qa = q + static_cast<uint32_t>((ks / 4) * kBlockM * 128 + 32 * (ks % 4));
    const uint32_t ka = k + static_cast<uint32_t>((ks / 4) * BN * 128 + 32 * (ks % 4));
    if (ks == 0) {
      WgmmaSS<T, BN>::template run<0>(s, smem_desc(qa), smem_desc(ka));
    } else {
      WgmmaSS<T, BN>::template run<1>(s, smem_desc(qa), smem_desc(ka));
    }
  }
}

// Where key `key` of a V stage starts in chunk 0, and the bytes from a chunk to the next: a stage
// of D / 64 chunks of BN rows (V_ROWS 0), or of BN / V_ROWS page boxes, each D / 64 chunks of
// V_ROWS rows (attention_varlen_kernel.cuh, PAGED with pages of V_ROWS keys).
template <int D, int BN, int V_ROWS>
__host__ __device__ constexpr uint32_t v_row_offset(int key) {
  if constexpr (V_ROWS == 0) {
    return static_cast<uint32_t>(key * 128);
  } else {
    return static_cast<uint32_t>((key / V_ROWS) * (D / 64) * V_ROWS * 128 + (key % V_ROWS) * 128);
  }
}
template <int BN, int V_ROWS>
constexpr uint32_t kVChunkBytes = (V_ROWS == 0 ? BN : V_ROWS) * 128;

// O[64 x D] += P[64 x BN] V[BN x D]: BN / 16 k-steps of 16 keys (2048 bytes of V each per chunk).
template <typename T, int D, int BN, int V_ROWS>
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], const uint32_t (&pf)[BN / 4],
                                         uint32_t v) {
  static_assert(V_ROWS == 0 || V_ROWS % 16 == 0, "a k-step of 16 keys within one page box");
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    const uint32_t a[4] = {pf[4 * kk], pf[4 * kk + 1], pf[4 * kk + 2], pf[4 * kk + 3]};
    WgmmaRS<T, D>::run(
        o, a, smem_desc_mn(v + v_row_offset<D, BN, V_ROWS>(16 * kk), kVChunkBytes<BN, V_ROWS>));
  }
}

// LAZY (D 256): how far (log2 units) a row's scores may exceed the max its exponents use before
// that max moves. P <= 2^8 keeps its relative precision in the dtype and the fp32 sums, and O's
// rescale (D / 2 multiplies per thread) becomes rare. At D 64 and 128 the skip's vote and branch
// cost more than the multiplies (docs/design/attention-kernels.md, "Softmax").
constexpr float kMaxSlackLog2 = 8.0f;

template <int D>
constexpr bool kLazyRescale = D >= 256;

// The per-row state of the online softmax of one thread's two rows (h = 0: row g, 1: row g + 8).
struct RowStats {
  float m[2];  // the max the exponents use (raw units, scaled: m * score_mul); LAZY: within 2^8
               // of the scores seen (kMaxSlackLog2)
  float l[2];  // this thread's partial sum of exp2(score - max) (summed over the quad at the end)
};

// Transforms (TRANSFORM), masks (MASK) and exponentiates the scores of one key block in place,
// updating the row stats; `scale` gets the factor the previous O rows are multiplied by (LAZY: 1
// unless a row's max moved by over kMaxSlackLog2).
// Key j (column c of the block: j = n0 + c) is visible to row h iff lo[h] <= j < hi[h].
template <int BN, bool TRANSFORM, bool MASK, bool LAZY>
__device__ __forceinline__ void softmax_block(float (&s)[BN / 2], const VarlenParams& p, int n0,
                                              const int (&lo)[2], const int (&hi)[2], int qc,
                                              RowStats& st, float (&scale)[2]) {
  if constexpr (TRANSFORM) {
    if (p.softcap_on) {
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) s[i] = p.cap_mul * tanh_abs_accurate(s[i] * p.pre_mul);
    } else {
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) s[i] *= p.pre_mul;
    }
  }
  if constexpr (MASK) {
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int key = n0 + 8 * i + qc + j;
          if (key < lo[h] || key >= hi[h]) s[4 * i + 2 * h + j] = -INFINITY;
        }
      }
    }
  }
  const float k = TRANSFORM ? 1.0f : p.score_mul;
  float mx[2] = {st.m[0], st.m[1]};
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) mx[h] = fmaxf(mx[h], fmaxf(s[4 * i + 2 * h], s[4 * i + 2 * h + 1]));
  }
  float m_use[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    // LAZY: the max moves only when the block's exceeds it by more than kMaxSlackLog2 (false
    // while both are -inf), and a rescale by 1 is skipped.
    const bool grow = !LAZY || mx[h] * k > st.m[h] * k + kMaxSlackLog2;
    const float old = st.m[h];
    if (grow) st.m[h] = mx[h];
    // A row that has seen no key yet keeps max -inf; exponents then use 0 (all terms are 0).
    m_use[h] = st.m[h] == -INFINITY ? 0.0f : st.m[h] * k;
    scale[h] = grow ? fast_exp2(old * k - m_use[h]) : 1.0f;  // old -inf (first keys) gives 0
  }
  float sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        float& x = s[4 * i + 2 * h + j];
        x = fast_exp2(fmaf(x, k, -m_use[h]));
        sum[h] += x;
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) st.l[h] = st.l[h] * scale[h] + sum[h];
}

template <int BN, bool TRANSFORM, bool LAZY>
__device__ __forceinline__ void softmax_any(float (&s)[BN / 2], const VarlenParams& p, int n0,
                                            bool mask, const int (&lo)[2], const int (&hi)[2],
                                            int qc, RowStats& st, float (&scale)[2]) {
  if (mask) {
    softmax_block<BN, TRANSFORM, true, LAZY>(s, p, n0, lo, hi, qc, st, scale);
  } else {
    softmax_block<BN, TRANSFORM, false, LAZY>(s, p, n0, lo, hi, qc, st, scale);
  }
}

template <typename T, int BN>
__device__ __forceinline__ void to_p(const float (&s)[BN / 2], uint32_t (&pf)[BN / 4]) {
#pragma unroll
  for (int q = 0; q < BN / 4; ++q) pf[q] = pack2<T>(s[2 * q], s[2 * q + 1]);
}

// O's rows times `scale`; LAZY: skipped (a warp-uniform branch) when every row of the warp keeps
// its max.
template <int D>
__device__ __forceinline__ void rescale_o(float (&o)[D / 2], const float (&scale)[2]) {
  if constexpr (kLazyRescale<D>) {
    if (!__any_sync(0xffffffffu, scale[0] != 1.0f || scale[1] != 1.0f)) return;
  }
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      o[4 * i + 2 * h] *= scale[h];
      o[4 * i + 2 * h + 1] *= scale[h];
    }
  }
}

// Writes this thread's two rows of out (O / l) and, from the quad's first lane, their lse.
// Rows at or past the sequence's end (and tokens outside [0, total_q)) are not written.
template <typename T, int D, bool PAGED>
__device__ __forceinline__ void store_rows(const VarlenParams& p, const Tile& t, int row0,
                                           const float (&o)[D / 2], const RowStats& st, int qc) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = row0 + 8 * h;
    if (i >= t.rows) continue;
    const long long token = static_cast<long long>(t.q0) + row_token<PAGED>(p, i);
    if (token < 0 || token >= p.total_q) continue;
    const int head =
        tile_first_head<PAGED>(p, t.head) + (i & ((1 << tile_pack_shift<PAGED>(p)) - 1));
    const float l = st.l[h];
    const bool seen = l > 0.0f;
    const float inv = seen ? 1.0f / l : 0.0f;
    T* row = static_cast<T*>(p.out) + (token * p.heads_q + head) * D + qc;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      *reinterpret_cast<uint32_t*>(row + 8 * j) =
          pack2<T>(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
    }
    if (qc == 0) {
      const float m_log2 = st.m[h] * p.score_mul;
      p.lse[static_cast<long long>(head) * p.total_q + token] =
          seen ? (m_log2 + __log2f(l)) * kLn2 : -INFINITY;
    }
  }
}

#endif  // TILEOPS_SM90A_BODY

}  // namespace
}  // namespace tileops::cuda_kernels::attention_detail
