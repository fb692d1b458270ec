#include "kernels/quant/token_group_quant_impls.h"

#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/elements.h"
#include "kernels/cpu/parallel.h"
#include "tileops/core/half.h"

namespace tileops {
namespace {

constexpr float kE4M3Max = 448.0f;
constexpr std::uint8_t kNaNCode = 0x7f;
const float kNaNScale = std::bit_cast<float>(std::uint32_t{0x7fc00000});

/// max |v| over `n` values; NaN as soon as one value is NaN (std::fmax would drop it).
template <class T>
float abs_max(const T* v, std::int64_t n) {
  float m = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(cpu::to_float(v[i]));
    if (std::isnan(a)) return a;
    m = a > m ? a : m;
  }
  return m;
}

template <class T>
void quantize_rows(const TokenGroupQuantCall& call, const T* x, std::uint8_t* q, float* scales,
                   double eps) {
  const std::int64_t groups = call.cols / call.group_size;
  cpu::parallel_for(call.rows, call.rows * call.cols, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      for (std::int64_t g = 0; g < groups; ++g) {
        const std::int64_t at = r * call.cols + g * call.group_size;
        const float amax = abs_max(x + at, call.group_size);
        // In double and rounded once, as the manifest defines it. NaN is written as the one
        // quiet NaN (scale) and code (q) the manifest names, whatever the platform's NaN sign.
        const auto scale =
            std::isnan(amax) ? kNaNScale : static_cast<float>(std::fmax(double{amax}, eps) / 448.0);
        scales[r * groups + g] = scale;
        for (std::int64_t j = 0; j < call.group_size; ++j) {
          const float v = cpu::to_float(x[at + j]) / scale;
          // Comparisons, not fmin/fmax, so that NaN stays NaN.
          const float c = v > kE4M3Max ? kE4M3Max : (v < -kE4M3Max ? -kE4M3Max : v);
          q[at + j] = std::isnan(c) ? kNaNCode : float_to_fp8e4m3(c);
        }
      }
    }
  });
}

}  // namespace

void TokenGroupQuantCpu::forward(const Tensor& x, const Tensor& q, const Tensor& scales,
                                 double eps) {
  cpu::dispatch_float(call_.dtype, "token_group_quant_fp8_cpu", [&](auto tag) {
    using T = decltype(tag);
    quantize_rows<T>(call_, x.data<T>(), static_cast<std::uint8_t*>(q.data_ptr()),
                     scales.data<float>(), eps);
  });
}

}  // namespace tileops
