#include "kernels/norm/rms_norm_impls.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/elements.h"
#include "kernels/cpu/half_rows.h"
#include "kernels/cpu/parallel.h"

namespace tileops {
namespace {

// Lanes of the blocked loops: fixed-size inner loops the compiler turns into vector
// instructions, and as many independent fp32 partial sums (less rounding drift on long rows).
constexpr std::int64_t kLanes = 16;

/// row = float(x); returns the sum of squares of row, in kLanes partial sums.
template <class T>
[[gnu::always_inline]] inline float load_row(const T* xr, std::int64_t cols, float* row) {
  float partial[kLanes] = {};
  std::int64_t c = 0;
  for (; c + kLanes <= cols; c += kLanes) {
    for (std::int64_t l = 0; l < kLanes; ++l) {
      const float v = cpu::to_float(xr[c + l]);
      row[c + l] = v;
      partial[l] += v * v;
    }
  }
  for (; c < cols; ++c) {
    const float v = cpu::to_float(xr[c]);
    row[c] = v;
    partial[0] += v * v;
  }
  float sum = 0;
  for (const float p : partial) sum += p;
  return sum;
}

/// row = float(x + residual) rounded to T, the rounded sum written back to the residual; returns
/// the sum of squares of row. A loop of its own before the sums: the compiler vectorizes both
/// (one loop doing both, with the residual's possible aliasing, it vectorized or not by inlining
/// accidents).
template <class T>
[[gnu::always_inline]] inline float add_residual(const T* xr, T* rr, std::int64_t cols,
                                                 float* row) {
  for (std::int64_t c = 0; c < cols; ++c) {
    const T sum = cpu::from_float<T>(cpu::to_float(xr[c]) + cpu::to_float(rr[c]));
    if constexpr (std::is_same_v<T, float>) {
      rr[c] = sum;
    } else {
      rr[c].bits = sum.bits;  // a scalar store: the vectorizer does not take the struct copy
    }
    row[c] = cpu::to_float(sum);
  }
  return load_row(row, cols, row);
}

[[gnu::always_inline]] inline float inverse_rms(float sum_of_squares, std::int64_t cols,
                                                float eps) {
  return 1.0f / std::sqrt(sum_of_squares / static_cast<float>(cols) + eps);
}

/// One row: y = x (+ residual) normalized and scaled by w; `row` is scratch of `cols` floats.
template <class T>
[[gnu::always_inline]] inline void norm_row(const T* xr, T* rr, const float* w, T* yr,
                                            std::int64_t cols, float eps, float* row) {
  const float sum = rr != nullptr ? add_residual(xr, rr, cols, row) : load_row(xr, cols, row);
  const float inv = inverse_rms(sum, cols, eps);
  for (std::int64_t c = 0; c < cols; ++c) yr[c] = cpu::from_float<T>(row[c] * inv * w[c]);
}

TILEOPS_CPU_CLONES void row_of(const float* xr, float* rr, const float* w, float* yr,
                               std::int64_t cols, float eps, float* row) {
  norm_row(xr, rr, w, yr, cols, eps, row);
}
TILEOPS_CPU_CLONES void row_of(const Half* xr, Half* rr, const float* w, Half* yr,
                               std::int64_t cols, float eps, float* row) {
  // float16 rows are decoded and encoded whole (F16C where the CPU has it: the scalar conversions
  // do not vectorize), the same sums and products as norm_row in between. Fused: x + residual
  // rounded to float16 (written back to the residual) in pieces of a stack buffer.
  cpu::half_row_to_float(xr, row, cols);
  if (rr != nullptr) {
    constexpr std::int64_t kPiece = 256;
    float added[kPiece];
    for (std::int64_t c = 0; c < cols; c += kPiece) {
      const std::int64_t n = std::min(kPiece, cols - c);
      cpu::half_row_to_float(rr + c, added, n);
      for (std::int64_t i = 0; i < n; ++i) added[i] += row[c + i];
      cpu::float_row_to_half(added, rr + c, n);
      cpu::half_row_to_float(rr + c, row + c, n);
    }
  }
  const float inv = inverse_rms(load_row(row, cols, row), cols, eps);
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
