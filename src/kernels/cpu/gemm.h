// Internal: the single-precision GEMM of the CPU kernels, on OpenBLAS (threaded over the cores
// by OpenBLAS itself).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace tileops::cpu {

/// c[m, n] = a[m, k] * b[n, k]^T, all row-major float32 with leading dimensions lda, ldb, ldc
/// (elements between rows). Call it from one thread at a time per operation: it uses every
/// core already.
void gemm_abt(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
              const float* b, std::int64_t ldb, float* c, std::int64_t ldc);

/// Makes rows [first, first + count) of a GEMM's b operand in float32, row r at out + (r - first)
/// * k (a dequantization or a conversion from 16 bits).
using FloatRows = std::function<void(std::int64_t first, std::int64_t count, float* out)>;

/// c[m, n] = a[m, k] * b[n, k]^T as gemm_abt, with b's rows made by b_rows a panel of rows at a
/// time into panel (resized here; keep it between calls): the float32 copy of b stays in the
/// caches between its making and the GEMM and takes about 16 MB, never 4 bytes per element of b.
void gemm_abt_panels(std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                     std::int64_t lda, const FloatRows& b_rows, std::vector<float>& panel, float* c,
                     std::int64_t ldc);

}  // namespace tileops::cpu
