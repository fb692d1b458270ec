// The CPU implementation of the bf16 / fp16 / fp32 grouped GEMM (grouped_gemm_impls.h): expert by
// expert through OpenBLAS (or row by row for a few rows), then the fused gated activation; it
// checks the offsets it reads (manifest/moe.yaml, MoEGroupedGemmFwdOp, defines the values).
#include "kernels/moe/grouped_gemm_impls.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cpu/elements.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/half_rows.h"
#include "kernels/cpu/parallel.h"
#include "kernels/moe/grouped_gemm_activation_cpu.h"

namespace tileops {

namespace {

using grouped_gemm_cpu::gelu_tanh;
using grouped_gemm_cpu::silu;

/// Groups of fewer rows than this multiply their expert's weights row by row, converting each
/// weight row once into a small buffer: a converted copy of the weights for OpenBLAS would move
/// several times the weights' bytes for little arithmetic.
constexpr std::int64_t kBlasMinRows = 16;

/// dst[i] = float(src[i]) for rows [0, rows) of `cols` elements (leading dimension ld_src),
/// threaded over rows.
template <class T>
void to_float_rows(const T* src, std::int64_t ld_src, std::int64_t rows, std::int64_t cols,
                   float* dst) {
  cpu::parallel_for(rows, rows * cols, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* s = src + r * ld_src;
      float* d = dst + r * cols;
      cpu::row_to_float(s, d, cols);
    }
  });
}

[[gnu::always_inline]] inline float dot(const float* a, const float* b, std::int64_t k) {
  // Eight independent sums, which the compiler keeps in vector registers.
  float acc[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (; i < k; ++i) acc[0] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// acc[r * n] = a[r] . float(bj) for the m rows of a; brow is scratch of k floats.
template <class T>
[[gnu::always_inline]] inline void weight_row_dots(const float* a, std::int64_t m, const T* bj,
                                                   std::int64_t k, float* brow, float* acc,
                                                   std::int64_t n) {
  cpu::row_to_float(bj, brow, k);
  for (std::int64_t r = 0; r < m; ++r) acc[r * n] = dot(a + r * k, brow, k);
}

TILEOPS_CPU_CLONES void dots_of(const float* a, std::int64_t m, const Half* bj, std::int64_t k,
                                float* brow, float* acc, std::int64_t n) {
  weight_row_dots(a, m, bj, k, brow, acc, n);
}
TILEOPS_CPU_CLONES void dots_of(const float* a, std::int64_t m, const BFloat16* bj, std::int64_t k,
                                float* brow, float* acc, std::int64_t n) {
  weight_row_dots(a, m, bj, k, brow, acc, n);
}
TILEOPS_CPU_CLONES void dots_of(const float* a, std::int64_t m, const float* bj, std::int64_t k,
                                float* brow, float* acc, std::int64_t n) {
  weight_row_dots(a, m, bj, k, brow, acc, n);
}

/// acc[m, n] = a[m, k] * b[n, k]^T for a few rows: threaded over the weight rows, each converted
/// to float once.
template <class T>
void few_rows_gemm(const float* a, std::int64_t m, const T* b, std::int64_t n, std::int64_t k,
                   float* acc) {
  cpu::parallel_for(n, m * n * k, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> brow(static_cast<std::size_t>(k));
    for (std::int64_t j = begin; j < end; ++j) dots_of(a, m, b + j * k, k, brow.data(), acc + j, n);
  });
}

/// c rows = the activation of the accumulators acc[m, n], in T.
template <class T>
void finish_rows(const float* acc, std::int64_t m, std::int64_t n, MoEActivation activation, T* c) {
  const bool gated = activation != MoEActivation::none;
  const std::int64_t n_out = gated ? n / 2 : n;
  cpu::parallel_for(m, m * n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* ar = acc + r * n;
      T* cr = c + r * n_out;
      for (std::int64_t j = 0; j < n_out; ++j) {
        float v = ar[j];
        if (activation == MoEActivation::silu_and_mul) {
          v = silu(ar[j]) * ar[j + n_out];
        } else if (activation == MoEActivation::gelu_and_mul) {
          v = gelu_tanh(ar[j]) * ar[j + n_out];
        }
        cr[j] = cpu::from_float<T>(v);
      }
    }
  });
}

/// Expert by expert: the group's rows times the expert's weights, by OpenBLAS's sgemm (inputs
/// converted to float first when they are 16-bit, the weights a panel at a time) or, for a group of
/// a few rows, by few_rows_gemm; then the activation. Rows outside every group are zero.
template <class T>
void grouped_gemm_rows(const Tensor& a, const std::int32_t* offsets, const Tensor& b,
                       const Tensor& c, const GroupedGemmCall& call) {
  const std::int64_t n = call.n;
  const std::int64_t k = call.k;
  const std::int64_t n_out = call.activation != MoEActivation::none ? n / 2 : n;
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  T* cp = c.data<T>();
  std::fill_n(cp, offsets[0] * n_out, cpu::from_float<T>(0.0f));
  std::fill_n(cp + offsets[call.experts] * n_out, (call.rows - offsets[call.experts]) * n_out,
              cpu::from_float<T>(0.0f));
  std::vector<float> a_float;
  std::vector<float> weight_panel;
  std::vector<float> acc;
  for (std::int64_t e = 0; e < call.experts; ++e) {
    const std::int64_t first = offsets[e];
    const std::int64_t m = offsets[e + 1] - first;
    if (m == 0) continue;
    acc.resize(static_cast<std::size_t>(m * n));
    const float* a_rows = nullptr;
    if constexpr (std::is_same_v<T, float>) {
      a_rows = ap + first * k;
    } else {
      a_float.resize(static_cast<std::size_t>(m * k));
      to_float_rows(ap + first * k, k, m, k, a_float.data());
      a_rows = a_float.data();
    }
    const T* be = bp + e * n * k;
    if (k == 0) {
      std::fill(acc.begin(), acc.end(), 0.0f);
    } else if (m < kBlasMinRows) {
      few_rows_gemm(a_rows, m, be, n, k, acc.data());
    } else {
      if constexpr (std::is_same_v<T, float>) {
        cpu::gemm_abt(m, n, k, a_rows, k, be, k, acc.data(), n);
      } else {
        const auto weight_rows = [&](std::int64_t row0, std::int64_t count, float* out) {
          to_float_rows(be + row0 * k, k, count, k, out);
        };
        cpu::gemm_abt_panels(m, n, k, a_rows, k, weight_rows, weight_panel, acc.data(), n);
      }
    }
    finish_rows(acc.data(), m, n, call.activation, cp + first * n_out);
  }
}

}  // namespace

void GroupedGemmCpu::forward(const Tensor& a, const Tensor& offsets, const Tensor& b,
                             const Tensor& c) {
  const std::int32_t* op = offsets.data<std::int32_t>();
  const std::int64_t experts = call_.experts;
  for (std::int64_t e = 0; e <= experts; ++e) {
    const bool bad = op[e] < 0 || op[e] > call_.rows || (e > 0 && op[e] < op[e - 1]);
    if (bad) {
      throw SignatureError(fmt::format(
          "MoEGroupedGemmFwdOp: expert_offsets[{}] = {} breaks 0 <= offsets[0] <= ... <= "
          "offsets[{}] <= {} (rows of a)",
          e, op[e], experts, call_.rows));
    }
  }
  cpu::dispatch_float(call_.dtype, "moe_grouped_gemm_cpu",
                      [&](auto tag) { grouped_gemm_rows<decltype(tag)>(a, op, b, c, call_); });
}

}  // namespace tileops
