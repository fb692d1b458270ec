// The per-element tolerance of the FP8 block-scaled grouped GEMM (MoEGroupedGemmFP8FwdOp and its
// masked layout) against its double-precision reference, shared by the CPU tests
// (tests/ops/test_moe_grouped_gemm_fp8.cpp) and the GPU tests of the Hopper kernel
// (tests/gpu/test_moe_grouped_gemm_fp8_kernels.cpp).
//
// u = 2^-24 (float32's unit roundoff; bfloat16's is 2^-8). Let t_k = (a_k s_a)(b_k s_b) be the
// exact terms, S = sum_k t_k and A = sum_k |t_k|; E(A) bounds |acc - S| for the accumulator acc.
//
// CPU: each dequantized value (a_k s_a, b_k s_b) and each product is rounded once to float32 and
// the K products are summed in float32 in some order (OpenBLAS's, or eight partial sums): at most
// K + 2 roundings reach any term, so |acc - S| <= gamma_{K+2} A (Higham, Accuracy and Stability,
// Sec. 3.1: the bound holds for any summation order). With gamma_n = n u / (1 - n u) <= 1.01 n u
// while n u <= 0.0099, and the reference's own double-precision error (K + 1) 2^-53 A < u A,
//   E_cpu(A) = 1.01 (K + 3) u A + K 2^-149         (the last term: float32 underflow of a product).
//
// CUDA (Hopper wgmma, DeepSeek-V3's promotion): per K block of 128 the tensor core sums the 128
// exact products (e4m3 x e4m3 fits float32 exactly) in its FP8 accumulator, which keeps at least
// 13 fraction bits (the "FP22" accumulator measured by SageAttention2; DeepSeek-V3's report: about
// 14 bits), truncating: over at most 128 additions that is at most 128 2^-13 A_kb = 2^-6 A_kb, the
// bound that holds for any order of the additions inside the block. The block sum P is then
// promoted, acc = fma(s_a s_b, P, acc): the scale product and the fused multiply-add are two
// float32 roundings per block, K / 128 + 2 in all on any term (the 2^-6 relative error of P
// included in the 1.02), so
//   E_cuda(A) = (2^-6 + 1.02 (K / 128 + 3) u) A + K 2^-149.
//
// The reference is handed over in float32 (r = S (1 + d), |d| <= u) and the output is bf16(acc),
// |bf16(acc) - acc| <= 2^-8 |acc| (+ 2^-134 below bfloat16's normal range), so for 'none'
//   |c - r| <= (2^-8 + 2^-22) |r| + (1 + 2^-7) E(A) + 2^-133.
// Gated: with g, v the gate and up accumulators (errors E_g = E(A_g), E_v = E(A_v)), act(x) =
// silu or the tanh gelu, |act(x)| <= |x| and |act'| <= 1.2 (their maxima are 1.100 and 1.129),
// and float32's evaluation of act(g) * v within 16 u of its value (exp or tanh and four
// operations), the error of the accumulators reaches the output as
//   E_act = 1.2 E_g (A_v + E_v) + (A_g + E_g) E_v + 16 u (A_g + E_g)(A_v + E_v)
// in place of E(A) above. No term depends on the values the op computes.
#pragma once

#include <cmath>
#include <cstdint>

namespace tileops::fp8_gemm_tolerance {

constexpr double kU = 0x1p-24;

/// E_cpu(A): the CPU implementation's accumulation error for K terms of absolute sum `abs`.
inline double cpu_accumulation(std::int64_t k, double abs) {
  return 1.01 * static_cast<double>(k + 3) * kU * abs + static_cast<double>(k) * 0x1p-149;
}

/// E_cuda(A): the Hopper kernel's (tensor-core block sums promoted per K block of 128).
inline double cuda_accumulation(std::int64_t k, double abs) {
  return (0x1p-6 + 1.02 * static_cast<double>(k / 128 + 3) * kU) * abs +
         static_cast<double>(k) * 0x1p-149;
}

/// The bound on |c - r| for activation 'none': reference r, accumulation error e.
inline double bound_none(double r, double e) {
  return (0x1p-8 + 0x1p-22) * std::fabs(r) + (1 + 0x1p-7) * e + 0x1p-133;
}

/// The bound on |c - r| for a gated activation: gate and up absolute sums and their errors.
inline double bound_gated(double r, double abs_gate, double abs_up, double e_gate, double e_up) {
  const double e = 1.2 * e_gate * (abs_up + e_up) + (abs_gate + e_gate) * e_up +
                   16 * kU * (abs_gate + e_gate) * (abs_up + e_up);
  return bound_none(r, e);
}

}  // namespace tileops::fp8_gemm_tolerance
