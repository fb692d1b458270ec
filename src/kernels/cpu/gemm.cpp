#include "kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>

namespace tileops::cpu {

void gemm_abt(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
              const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  if (m <= 0 || n <= 0) return;
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer cannot see OpenBLAS's own synchronization (the library is not instrumented),
  // so under it the GEMM runs on the calling thread.
  static const bool one_thread = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)one_thread;
#endif
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(lda),
              b, static_cast<blasint>(ldb), 0.0f, c, static_cast<blasint>(ldc));
}

namespace {

/// b rows per OpenBLAS call: a float32 panel of about kPanelBytes (the size chosen in
/// docs/perf/2026-12-06-cpu-token-group-quant.md), at least 64 rows so that repacking a on each
/// call stays small.
constexpr std::int64_t kPanelBytes = std::int64_t{16} << 20;

std::int64_t panel_rows(std::int64_t n, std::int64_t k) {
  const std::int64_t fit =
      kPanelBytes / (std::max<std::int64_t>(k, 1) * std::int64_t{sizeof(float)});
  return std::min(n, std::max<std::int64_t>(fit / 16 * 16, 64));
}

}  // namespace

void gemm_abt_panels(std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                     std::int64_t lda, const FloatRows& b_rows, std::vector<float>& panel, float* c,
                     std::int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  const std::int64_t rows = panel_rows(n, k);
  panel.resize(static_cast<std::size_t>(rows * k));
  for (std::int64_t first = 0; first < n; first += rows) {
    const std::int64_t count = std::min(rows, n - first);
    b_rows(first, count, panel.data());
    gemm_abt(m, count, k, a, lda, panel.data(), k, c + first, ldc);
  }
}

}  // namespace tileops::cpu
