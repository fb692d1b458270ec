#include "kernels/cpu/gemm.h"

#include <cblas.h>

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

}  // namespace tileops::cpu
