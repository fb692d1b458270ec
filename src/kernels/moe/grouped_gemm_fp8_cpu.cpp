// The FP8 block-scaled grouped GEMM on the CPU: each row of a and each weight row is dequantized
// once (e4m3 value times its block's float32 scale, in float32), then multiplied in float32 as
// the bf16 op does (OpenBLAS for groups of many rows, row by row for a few). The error this adds
// to the double-precision reference is bounded in tests/ops/test_moe_grouped_gemm_fp8.cpp.
#include "kernels/moe/grouped_gemm_fp8_impls.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/e4m3_codes.h"
#include "kernels/cpu/elements.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/moe/grouped_gemm_activation_cpu.h"
#include "tileops/core/half.h"

namespace tileops {
namespace {

/// Groups of fewer rows than this go row by row: dequantizing a whole expert's weights for
/// OpenBLAS would cost more than the few rows' arithmetic (as in grouped_gemm_cpu.cpp).
constexpr std::int64_t kBlasMinRows = 16;

/// out[k] = e4m3(q[k]) * scales[k / block_k]: one row, its scales the row's K / block_k ones;
/// the codes decoded by a loop the compiler vectorizes (cpu::e4m3_value).
TILEOPS_CPU_CLONES void dequantize_row(const std::uint8_t* q, const float* scales, std::int64_t k,
                                       std::int64_t block_k, float* out) {
  for (std::int64_t kb = 0; kb < k / block_k; ++kb) {
    const float s = scales[kb];
    const std::uint8_t* codes = q + kb * block_k;
    float* block = out + kb * block_k;
    for (std::int64_t i = 0; i < block_k; ++i) block[i] = cpu::e4m3_value(codes[i]) * s;
  }
}

/// Eight partial sums so that the compiler may vectorize (the error bound holds for any order).
float dot(const float* x, const float* y, std::int64_t k) {
  float part[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    for (int l = 0; l < 8; ++l) part[l] += x[i + l] * y[i + l];
  }
  float sum = 0.0f;
  for (; i < k; ++i) sum += x[i] * y[i];
  for (const float p : part) sum += p;
  return sum;
}

struct Operands {
  const std::uint8_t* a;
  const float* a_scales;
  const std::uint8_t* b;
  const float* b_scales;
};

class ExpertGemm {
 public:
  ExpertGemm(const GroupedGemmFP8Call& call, const Operands& in) : call_(call), in_(in) {}

  /// acc[m, n] for the rows [first, first + m) of expert e.
  void run(std::int64_t e, std::int64_t first, std::int64_t m, std::vector<float>& acc) {
    const std::int64_t n = call_.n;
    const std::int64_t k = call_.k;
    const std::int64_t kblocks = k / call_.block_k;
    acc.resize(static_cast<std::size_t>(m * n));
    a_rows_.resize(static_cast<std::size_t>(m * k));
    for (std::int64_t r = 0; r < m; ++r) {
      dequantize_row(in_.a + (first + r) * k, in_.a_scales + (first + r) * kblocks, k,
                     call_.block_k, a_rows_.data() + r * k);
    }
    const std::int64_t nblocks = (n + call_.block_n - 1) / call_.block_n;
    const std::uint8_t* be = in_.b + e * n * k;
    const float* bs = in_.b_scales + e * nblocks * kblocks;
    const auto weight_row = [&](std::int64_t j, float* out) {
      dequantize_row(be + j * k, bs + (j / call_.block_n) * kblocks, k, call_.block_k, out);
    };
    if (k == 0) {
      std::fill(acc.begin(), acc.end(), 0.0f);
    } else if (m < kBlasMinRows) {
      const float* ar = a_rows_.data();
      cpu::parallel_for(n, m * n * k, [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> brow(static_cast<std::size_t>(k));
        for (std::int64_t j = begin; j < end; ++j) {
          weight_row(j, brow.data());
          for (std::int64_t r = 0; r < m; ++r) acc[r * n + j] = dot(ar + r * k, brow.data(), k);
        }
      });
    } else {
      const auto weight_rows = [&](std::int64_t row0, std::int64_t count, float* out) {
        cpu::parallel_for(count, count * k, [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t j = begin; j < end; ++j) weight_row(row0 + j, out + j * k);
        });
      };
      cpu::gemm_abt_panels(m, n, k, a_rows_.data(), k, weight_rows, weight_panel_, acc.data(), n);
    }
  }

 private:
  const GroupedGemmFP8Call& call_;
  Operands in_;
  std::vector<float> a_rows_;
  std::vector<float> weight_panel_;
};

/// c rows (bfloat16) = the activation of the accumulators acc[m, n].
void finish_rows(const std::vector<float>& acc, std::int64_t m, std::int64_t n,
                 MoEActivation activation, BFloat16* c) {
  const bool gated = activation != MoEActivation::none;
  const std::int64_t n_out = gated ? n / 2 : n;
  for (std::int64_t r = 0; r < m; ++r) {
    const float* ar = acc.data() + r * n;
    BFloat16* cr = c + r * n_out;
    for (std::int64_t j = 0; j < n_out; ++j) {
      float v = ar[j];
      if (activation == MoEActivation::silu_and_mul) {
        v = grouped_gemm_cpu::silu(ar[j]) * ar[j + n_out];
      } else if (activation == MoEActivation::gelu_and_mul) {
        v = grouped_gemm_cpu::gelu_tanh(ar[j]) * ar[j + n_out];
      }
      cr[j] = cpu::from_float<BFloat16>(v);
    }
  }
}

/// c = the GEMM of expert e's rows [first[e], first[e] + count[e]) of a, for every e; the other
/// rows of c (outside every group) are 0.
void grouped_gemm(const GroupedGemmFP8Call& call, const Tensor& a, const Tensor& a_scales,
                  const Tensor& b, const Tensor& b_scales, const std::vector<std::int64_t>& first,
                  const std::vector<std::int64_t>& count, const Tensor& c) {
  const std::int64_t n_out = call.activation != MoEActivation::none ? call.n / 2 : call.n;
  auto* cp = c.data<BFloat16>();
  std::vector<bool> computed(static_cast<std::size_t>(call.rows), false);
  const Operands in{static_cast<const std::uint8_t*>(a.data_ptr()), a_scales.data<float>(),
                    static_cast<const std::uint8_t*>(b.data_ptr()), b_scales.data<float>()};
  ExpertGemm gemm(call, in);
  std::vector<float> acc;
  for (std::int64_t e = 0; e < call.experts; ++e) {
    if (count[e] == 0) continue;
    gemm.run(e, first[e], count[e], acc);
    finish_rows(acc, count[e], call.n, call.activation, cp + first[e] * n_out);
    std::fill_n(computed.begin() + first[e], count[e], true);
  }
  const BFloat16 zero = cpu::from_float<BFloat16>(0.0f);
  for (std::int64_t r = 0; r < call.rows; ++r) {
    if (!computed[r]) std::fill_n(cp + r * n_out, n_out, zero);
  }
}

}  // namespace

void GroupedGemmFP8Cpu::forward(const Tensor& a, const Tensor& a_scales, const Tensor& offsets,
                                const Tensor& b, const Tensor& b_scales, const Tensor& c) {
  const std::int32_t* op = offsets.data<std::int32_t>();
  const std::int64_t experts = call_.experts;
  for (std::int64_t e = 0; e <= experts; ++e) {
    if (op[e] < 0 || op[e] > call_.rows || (e > 0 && op[e] < op[e - 1])) {
      throw SignatureError(fmt::format(
          "MoEGroupedGemmFP8FwdOp: expert_offsets[{}] = {} breaks 0 <= offsets[0] <= ... <= "
          "offsets[{}] <= {} (rows of a)",
          e, op[e], experts, call_.rows));
    }
  }
  std::vector<std::int64_t> first(op, op + experts);
  std::vector<std::int64_t> count(static_cast<std::size_t>(experts));
  for (std::int64_t e = 0; e < experts; ++e) count[e] = op[e + 1] - op[e];
  grouped_gemm(call_, a, a_scales, b, b_scales, first, count, c);
}

void GroupedGemmFP8MaskedCpu::forward(const Tensor& a, const Tensor& a_scales, const Tensor& counts,
                                      const Tensor& b, const Tensor& b_scales, const Tensor& c) {
  const std::int32_t* cnt = counts.data<std::int32_t>();
  const std::int64_t experts = call_.experts;
  std::vector<std::int64_t> first(static_cast<std::size_t>(experts));
  std::vector<std::int64_t> count(static_cast<std::size_t>(experts));
  for (std::int64_t e = 0; e < experts; ++e) {
    if (cnt[e] < 0 || cnt[e] > call_.max_m) {
      throw SignatureError(
          fmt::format("MoEGroupedGemmFP8MaskedFwdOp: counts[{}] = {} is outside [0, max_m = {}]", e,
                      cnt[e], call_.max_m));
    }
    first[e] = e * call_.max_m;
    count[e] = cnt[e];
  }
  grouped_gemm(call_, a, a_scales, b, b_scales, first, count, c);
}

void FP8BlockScaledGemmCpu::forward(const Tensor& a, const Tensor& a_scales, const Tensor& b,
                                    const Tensor& b_scales, const Tensor& c) {
  grouped_gemm(call_, a, a_scales, b, b_scales, {0}, {call_.rows}, c);
}

}  // namespace tileops
