#include "kernels/rope/long_rope_impls.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "kernels/cpu/elements.h"
#include "kernels/cpu/parallel.h"

namespace tileops {

double long_rope_reduced_angle(double position, double inv_freq) {
  const double theta = position * inv_freq;
  constexpr double kTwoPi = 2.0 * std::numbers::pi;
  return theta - kTwoPi * std::nearbyint(theta / kTwoPi);
}

namespace {

std::int64_t position_at(const Tensor* positions, std::int64_t index, std::int64_t fallback) {
  if (positions == nullptr) return fallback;
  if (positions->dtype() == DType::int32) return positions->data<std::int32_t>()[index];
  return positions->data<std::int64_t>()[index];
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
      for (std::int64_t i = 0; i < half; ++i) {
        const float angle =
            static_cast<float>(long_rope_reduced_angle(static_cast<double>(p), inv[i]));
        cos_t[i] = std::cos(angle) * scale;
        sin_t[i] = std::sin(angle) * scale;
      }
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t base = (token * heads + h) * 2 * half;
        for (std::int64_t i = 0; i < half; ++i) {
          const float a = cpu::to_float(xp[base + i]);
          const float b = cpu::to_float(xp[base + i + half]);
          yp[base + i] = cpu::from_float<T>(a * cos_t[i] - b * sin_t[i]);
          yp[base + i + half] = cpu::from_float<T>(b * cos_t[i] + a * sin_t[i]);
        }
      }
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
