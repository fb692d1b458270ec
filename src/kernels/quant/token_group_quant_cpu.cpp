#include "kernels/quant/token_group_quant_impls.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cpu/e4m3_codes.h"
#include "kernels/cpu/elements.h"
#include "kernels/cpu/half_rows.h"
#include "kernels/cpu/parallel.h"
#include "tileops/core/half.h"

namespace tileops {
namespace {

// Lanes of the max reduction (independent partial maxima the compiler keeps in a vector).
constexpr std::int64_t kLanes = 16;
const float kNaNScale = std::bit_cast<float>(std::uint32_t{0x7fc00000});

/// One group: max |x| (NaN when a value is NaN), its scale, the codes. Every loop is free of
/// branches and early exits, so that the compiler vectorizes it; `v` is scratch of n floats.
template <class T>
[[gnu::always_inline]] inline float quantize_group(const T* x, std::int64_t n, double eps, float* v,
                                                   std::uint8_t* q) {
  const float* f = v;
  if constexpr (std::is_same_v<T, float>) {
    f = x;
  } else {
    cpu::row_to_float(x, v, n);
  }
  // max |x| on the bits (non-negative floats order as their bits; NaN's are above infinity's),
  // in kLanes partial maxima: an integer reduction the compiler vectorizes.
  std::uint32_t partial[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (std::int64_t l = 0; l < kLanes; ++l) {
      const std::uint32_t b = std::bit_cast<std::uint32_t>(f[i + l]) & 0x7fffffffu;
      partial[l] = b > partial[l] ? b : partial[l];
    }
  }
  for (; i < n; ++i) {
    const std::uint32_t b = std::bit_cast<std::uint32_t>(f[i]) & 0x7fffffffu;
    partial[0] = b > partial[0] ? b : partial[0];
  }
  std::uint32_t top = 0;
  for (const std::uint32_t b : partial) top = b > top ? b : top;
  // In double and rounded once, as the manifest defines it. NaN is written as the one quiet NaN
  // (scale) and code (q) the manifest names, whatever the platform's NaN sign.
  const float amax = std::bit_cast<float>(top);
  const float scale =
      top > 0x7f800000u ? kNaNScale : static_cast<float>(std::fmax(double{amax}, eps) / 448.0);
  for (std::int64_t j = 0; j < n; ++j) q[j] = cpu::e4m3_code_saturated(f[j] / scale);
  return scale;
}

TILEOPS_CPU_CLONES float group_of(const float* x, std::int64_t n, double eps, float* v,
                                  std::uint8_t* q) {
  return quantize_group(x, n, eps, v, q);
}
TILEOPS_CPU_CLONES float group_of(const Half* x, std::int64_t n, double eps, float* v,
                                  std::uint8_t* q) {
  return quantize_group(x, n, eps, v, q);
}
TILEOPS_CPU_CLONES float group_of(const BFloat16* x, std::int64_t n, double eps, float* v,
                                  std::uint8_t* q) {
  return quantize_group(x, n, eps, v, q);
}

template <class T>
void quantize_rows(const TokenGroupQuantCall& call, const T* x, std::uint8_t* q, float* scales,
                   double eps) {
  const std::int64_t groups = call.cols / call.group_size;
  cpu::parallel_for(call.rows, call.rows * call.cols, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> v(static_cast<std::size_t>(call.group_size));
    for (std::int64_t r = begin; r < end; ++r) {
      for (std::int64_t g = 0; g < groups; ++g) {
        const std::int64_t at = r * call.cols + g * call.group_size;
        scales[r * groups + g] = group_of(x + at, call.group_size, eps, v.data(), q + at);
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
