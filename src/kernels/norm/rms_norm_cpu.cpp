#include "kernels/norm/rms_norm_cpu.h"

#include <cmath>

#include "kernels/cpu/elements.h"
#include "kernels/cpu/parallel.h"

namespace tileops {
namespace {

template <class T>
void rms_norm_rows(const Tensor& x, const Tensor* residual, const Tensor& weight, const Tensor& y,
                   float eps) {
  const std::int64_t rows = x.size(0);
  const std::int64_t cols = x.size(1);
  const T* xp = x.data<T>();
  const T* wp = weight.data<T>();
  T* yp = y.data<T>();
  T* rp = residual != nullptr ? residual->data<T>() : nullptr;
  const std::int64_t xs = x.stride(0);
  const std::int64_t ys = y.stride(0);
  const std::int64_t rs = residual != nullptr ? residual->stride(0) : 0;
  cpu::parallel_for(rows, rows * cols, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (std::int64_t r = begin; r < end; ++r) {
      const T* xr = xp + r * xs;
      // Eight partial sums: fp32 accumulation with less rounding drift on long rows.
      float partial[8] = {};
      if (rp != nullptr) {
        T* rr = rp + r * rs;
        for (std::int64_t c = 0; c < cols; ++c) {
          const T sum = cpu::from_float<T>(cpu::to_float(xr[c]) + cpu::to_float(rr[c]));
          rr[c] = sum;
          row[c] = cpu::to_float(sum);
        }
      } else {
        for (std::int64_t c = 0; c < cols; ++c) row[c] = cpu::to_float(xr[c]);
      }
      for (std::int64_t c = 0; c < cols; ++c) partial[c & 7] += row[c] * row[c];
      const float sum = ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
                        ((partial[4] + partial[5]) + (partial[6] + partial[7]));
      const float inv = 1.0f / std::sqrt(sum / static_cast<float>(cols) + eps);
      T* yr = yp + r * ys;
      for (std::int64_t c = 0; c < cols; ++c) {
        yr[c] = cpu::from_float<T>(row[c] * inv * cpu::to_float(wp[c]));
      }
    }
  });
}

}  // namespace

void RmsNormCpu::forward(const Tensor& x, const Tensor* residual, const Tensor& weight,
                         const Tensor& y, double eps) {
  cpu::dispatch_float(call_.dtype, "rms_norm_cpu", [&](auto tag) {
    rms_norm_rows<decltype(tag)>(x, residual, weight, y, static_cast<float>(eps));
  });
}

}  // namespace tileops
