// Internal: the single-precision GEMM of the CPU kernels, on OpenBLAS (threaded over the cores
// by OpenBLAS itself).
#pragma once

#include <cstdint>

namespace tileops::cpu {

/// c[m, n] = a[m, k] * b[n, k]^T, all row-major float32 with leading dimensions lda, ldb, ldc
/// (elements between rows). Call it from one thread at a time per operation: it uses every
/// core already.
void gemm_abt(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
              const float* b, std::int64_t ldb, float* c, std::int64_t ldc);

}  // namespace tileops::cpu
