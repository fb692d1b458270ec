// The merge of two attention states on the CPU, in parallel over the tokens: the weights of the
// two sides from their lse in float32 (as the CUDA kernel computes them), out rounded once;
// float16 rows converted whole (F16C, half_rows.h), the others element by element in one loop.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/attention/attention_impls.h"
#include "kernels/cpu/elements.h"
#include "kernels/cpu/half_rows.h"
#include "kernels/cpu/parallel.h"

namespace tileops {
namespace {

template <class T>
void merge_rows(const Tensor& out_a, const Tensor& lse_a, const Tensor& out_b, const Tensor& lse_b,
                const Tensor& out, const Tensor& lse, std::int64_t heads, std::int64_t dim) {
  const std::int64_t tokens = out_a.size(0);
  const T* a = out_a.data<T>();
  const T* b = out_b.data<T>();
  const float* la = lse_a.data<float>();
  const float* lb = lse_b.data<float>();
  T* o = out.data<T>();
  float* lo = lse.data<float>();
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  cpu::parallel_for(tokens, tokens * heads * dim * 3, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> rows(static_cast<std::size_t>(3 * dim));
    float* ra = rows.data();
    float* rb = ra + dim;
    float* ro = rb + dim;
    for (std::int64_t t = begin; t < end; ++t) {
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t at = h * tokens + t;
        const std::int64_t row = (t * heads + h) * dim;
        const float m = std::max(la[at], lb[at]);
        if (m == kNegInf) {  // neither side saw a key
          lo[at] = kNegInf;
          std::fill_n(o + row, dim, cpu::from_float<T>(0.0f));
          continue;
        }
        const float wa = std::exp(la[at] - m);
        const float wb = std::exp(lb[at] - m);
        const float sum = wa + wb;
        lo[at] = m + std::log(sum);
        const float fa = wa / sum;
        const float fb = wb / sum;
        if constexpr (std::is_same_v<T, Half>) {
          cpu::half_row_to_float(a + row, ra, dim);
          cpu::half_row_to_float(b + row, rb, dim);
          for (std::int64_t d = 0; d < dim; ++d) ro[d] = ra[d] * fa + rb[d] * fb;
          cpu::float_row_to_half(ro, o + row, dim);
        } else {
          for (std::int64_t d = 0; d < dim; ++d) {
            o[row + d] =
                cpu::from_float<T>(cpu::to_float(a[row + d]) * fa + cpu::to_float(b[row + d]) * fb);
          }
        }
      }
    }
  });
}

}  // namespace

void AttentionMergeStatesCpu::forward(const Tensor& out_a, const Tensor& lse_a, const Tensor& out_b,
                                      const Tensor& lse_b, const Tensor& out, const Tensor& lse) {
  cpu::dispatch_float(call_.dtype, "attention_merge_states_cpu", [&](auto tag) {
    merge_rows<decltype(tag)>(out_a, lse_a, out_b, lse_b, out, lse, call_.heads, call_.head_dim);
  });
}

}  // namespace tileops
