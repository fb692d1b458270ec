#include "kernels/rope/long_rope_impls.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "kernels/cpu/elements.h"
#include "kernels/cpu/half_rows.h"
#include "kernels/cpu/parallel.h"

namespace tileops {

namespace {

std::int64_t position_at(const Tensor* positions, std::int64_t index, std::int64_t fallback) {
  if (positions == nullptr) return fallback;
  if (positions->dtype() == DType::int32) return positions->data<std::int32_t>()[index];
  return positions->data<std::int64_t>()[index];
}

// cos and sin of position * inv[i] for i < half, times scale. The angle and its reduction to r in
// [-pi/4, pi/4] plus a quadrant run in double (precise far past 2^20 positions), the
// polynomials in float (Cephes' minimax coefficients for sinf and cosf on that interval, within
// 1e-7 there). Branch-free, so that the loop vectorizes: std::sin and std::cos per frequency
// took most of a call's time.
TILEOPS_CPU_CLONES void cos_sin_row(double position, const double* inv, std::int64_t half,
                                    float scale, float* cos_t, float* sin_t) {
  constexpr double kTwoOverPi = 2.0 / std::numbers::pi;
  constexpr double kHalfPi = std::numbers::pi / 2.0;
  for (std::int64_t i = 0; i < half; ++i) {
    const double theta = position * inv[i];
    const double k = std::nearbyint(theta * kTwoOverPi);
    const double quadrant = k - 4.0 * std::floor(k * 0.25);  // 0, 1, 2 or 3
    const float r = static_cast<float>(theta - k * kHalfPi);
    const float r2 = r * r;
    const float s =
        r + r * r2 * (-1.6666654611e-1f + r2 * (8.3321608736e-3f + r2 * -1.9515295891e-4f));
    const float c =
        1.0f - 0.5f * r2 +
        r2 * r2 *
            (4.166664568298827e-2f + r2 * (-1.388731625493765e-3f + r2 * 2.443315711809948e-5f));
    const bool odd = quadrant == 1.0 || quadrant == 3.0;
    const float sin_scale = quadrant >= 2.0 ? -scale : scale;
    const float cos_scale = quadrant == 1.0 || quadrant == 2.0 ? -scale : scale;
    sin_t[i] = (odd ? c : s) * sin_scale;
    cos_t[i] = (odd ? s : c) * cos_scale;
  }
}

template <class T>
inline void rotate_heads_of(const T* x, T* y, std::int64_t heads, std::int64_t half,
                            const float* cos_t, const float* sin_t) {
  for (std::int64_t h = 0; h < heads; ++h) {
    const std::int64_t base = h * 2 * half;
    for (std::int64_t i = 0; i < half; ++i) {
      const float a = cpu::to_float(x[base + i]);
      const float b = cpu::to_float(x[base + i + half]);
      y[base + i] = cpu::from_float<T>(a * cos_t[i] - b * sin_t[i]);
      y[base + i + half] = cpu::from_float<T>(b * cos_t[i] + a * sin_t[i]);
    }
  }
}

// One token's heads rotated, per dtype (multiversioned functions cannot be templates), so that
// the x86-64-v3 clone also vectorizes the 16-bit conversions.
TILEOPS_CPU_CLONES void rotate_heads(const float* x, float* y, std::int64_t heads,
                                     std::int64_t half, const float* cos_t, const float* sin_t) {
  rotate_heads_of(x, y, heads, half, cos_t, sin_t);
}
TILEOPS_CPU_CLONES void rotate_heads(const Half* x, Half* y, std::int64_t heads, std::int64_t half,
                                     const float* cos_t, const float* sin_t) {
  // The token's row decoded and encoded whole (F16C where the CPU has it: the scalar float16
  // conversions do not vectorize), the same products in float in between (x may be y).
  thread_local std::vector<float> row;
  const std::int64_t n = heads * 2 * half;
  row.resize(static_cast<std::size_t>(n));
  cpu::half_row_to_float(x, row.data(), n);
  rotate_heads_of(row.data(), row.data(), heads, half, cos_t, sin_t);
  cpu::float_row_to_half(row.data(), y, n);
}
TILEOPS_CPU_CLONES void rotate_heads(const BFloat16* x, BFloat16* y, std::int64_t heads,
                                     std::int64_t half, const float* cos_t, const float* sin_t) {
  rotate_heads_of(x, y, heads, half, cos_t, sin_t);
}

template <class T>
void long_rope_rows(const Tensor& x, const Tensor* positions, const Tensor& inv_freq,
                    const Tensor& y, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                    float scale) {
  const std::int64_t half = inv_freq.numel();
  const auto* inv = inv_freq.data<double>();
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  const std::int64_t tokens = batch * seq;
  cpu::parallel_for(tokens, tokens * heads * 2 * half, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> cos_t(static_cast<std::size_t>(half));
    std::vector<float> sin_t(static_cast<std::size_t>(half));
    for (std::int64_t token = begin; token < end; ++token) {
      const std::int64_t p = position_at(positions, token, token % seq);
      cos_sin_row(static_cast<double>(p), inv, half, scale, cos_t.data(), sin_t.data());
      const std::int64_t base = token * heads * 2 * half;
      rotate_heads(xp + base, yp + base, heads, half, cos_t.data(), sin_t.data());
    }
  });
}

}  // namespace

void LongRoPECpu::forward(const Tensor& x, const Tensor* positions, const Tensor& inv_freq,
                          const Tensor& y, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                          double attention_scaling) {
  cpu::dispatch_float(call_.dtype, "long_rope_cpu", [&](auto tag) {
    long_rope_rows<decltype(tag)>(x, positions, inv_freq, y, batch, seq, heads,
                                  static_cast<float>(attention_scaling));
  });
}

}  // namespace tileops
