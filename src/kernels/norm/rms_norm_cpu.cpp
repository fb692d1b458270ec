#include "kernels/norm/rms_norm_impls.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/elements.h"
#include "kernels/cpu/half_rows.h"
#include "kernels/cpu/parallel.h"

namespace tileops {
namespace {

// Lanes of the blocked loops: fixed-size inner loops the compiler turns into vector
// instructions, and as many independent fp32 partial sums (less rounding drift on long rows).
constexpr std::int64_t kLanes = 16;

/// row = float(x) (x + residual rounded to T when fused, written back to the residual); returns
/// the sum of squares of row.
template <class T>
[[gnu::always_inline]] inline float load_row(const T* xr, T* rr, std::int64_t cols, float* row) {
  float partial[kLanes] = {};
  std::int64_t c = 0;
  const auto one = [&](std::int64_t i, float& acc) {
    float v = cpu::to_float(xr[i]);
    if (rr != nullptr) {
      const T sum = cpu::from_float<T>(v + cpu::to_float(rr[i]));
      rr[i] = sum;
      v = cpu::to_float(sum);
    }
    row[i] = v;
    acc += v * v;
  };
  for (; c + kLanes <= cols; c += kLanes) {
    for (std::int64_t l = 0; l < kLanes; ++l) one(c + l, partial[l]);
  }
  for (; c < cols; ++c) one(c, partial[0]);
  float sum = 0;
  for (const float p : partial) sum += p;
  return sum;
}

/// One row: y = x (+ residual) normalized and scaled by w; `row` is scratch of `cols` floats.
template <class T>
[[gnu::always_inline]] inline void norm_row(const T* xr, T* rr, const float* w, T* yr,
                                            std::int64_t cols, float eps, float* row) {
  const float sum = load_row(xr, rr, cols, row);
  const float inv = 1.0f / std::sqrt(sum / static_cast<float>(cols) + eps);
  for (std::int64_t c = 0; c < cols; ++c) yr[c] = cpu::from_float<T>(row[c] * inv * w[c]);
}

TILEOPS_CPU_CLONES void row_of(const float* xr, float* rr, const float* w, float* yr,
                               std::int64_t cols, float eps, float* row) {
  norm_row(xr, rr, w, yr, cols, eps, row);
}
TILEOPS_CPU_CLONES void row_of(const Half* xr, Half* rr, const float* w, Half* yr,
                               std::int64_t cols, float eps, float* row) {
  if (rr != nullptr) {
    norm_row(xr, rr, w, yr, cols, eps, row);
    return;
  }
  // Unfused float16: the row decoded and encoded whole (F16C where the CPU has it: the scalar
  // conversions do not vectorize), the same sums and products as norm_row in between.
  cpu::half_row_to_float(xr, row, cols);
  const float sum = load_row(row, static_cast<float*>(nullptr), cols, row);
  const float inv = 1.0f / std::sqrt(sum / static_cast<float>(cols) + eps);
  for (std::int64_t c = 0; c < cols; ++c) row[c] = row[c] * inv * w[c];
  cpu::float_row_to_half(row, yr, cols);
}
TILEOPS_CPU_CLONES void row_of(const BFloat16* xr, BFloat16* rr, const float* w, BFloat16* yr,
                               std::int64_t cols, float eps, float* row) {
  norm_row(xr, rr, w, yr, cols, eps, row);
}

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
  std::vector<float> w(static_cast<std::size_t>(cols));
  for (std::int64_t c = 0; c < cols; ++c) w[c] = cpu::to_float(wp[c]);
  cpu::parallel_for(rows, rows * cols, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (std::int64_t r = begin; r < end; ++r) {
      row_of(xp + r * xs, rp != nullptr ? rp + r * rs : nullptr, w.data(), yp + r * ys, cols, eps,
             row.data());
    }
  });
}

}  // namespace

void RMSNormCpu::forward(const Tensor& x, const Tensor* residual, const Tensor& weight,
                         const Tensor& y, double eps) {
  cpu::dispatch_float(call_.dtype, "rms_norm_cpu", [&](auto tag) {
    rms_norm_rows<decltype(tag)>(x, residual, weight, y, static_cast<float>(eps));
  });
}

}  // namespace tileops
