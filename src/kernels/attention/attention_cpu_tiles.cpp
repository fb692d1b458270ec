#include "kernels/attention/attention_cpu_tiles.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/elements.h"
#include "kernels/cpu/half_rows.h"

namespace tileops::cpu {

namespace {

// Eight floats in a vector register (GCC's vector extension: AVX in the x86-64-v3 clone, two SSE
// registers in the baseline one).
using Floats8 = float __attribute__((vector_size(32)));

// Loads and stores through memcpy (unaligned), as macros: a function taking or returning a vector
// type would have an ABI that differs between the clones.
#define TILEOPS_LOAD8(dst, src) std::memcpy(&(dst), (src), sizeof(Floats8))
#define TILEOPS_STORE8(dst, src) std::memcpy((dst), &(src), sizeof(Floats8))

// Columns [j0, n) of gemm_rows' product, one by one (head dims that are not a multiple of 32).
[[gnu::noinline]] void gemm_columns(const float* a, std::int64_t lda, const float* b,
                                    std::int64_t ldb, float* c, std::int64_t ldc, std::int64_t m,
                                    std::int64_t k, std::int64_t j0, std::int64_t n,
                                    bool accumulate) {
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t j = j0; j < n; ++j) {
      float sum = accumulate ? c[r * ldc + j] : 0.0f;
      for (std::int64_t kk = 0; kk < k; ++kk) sum += a[r * lda + kk] * b[kk * ldb + j];
      c[r * ldc + j] = sum;
    }
  }
}

// c[m][n] = (accumulate ? c : 0) + a[m][k] . b[k][n], row-major with leading dimensions lda, ldb,
// ldc. Two rows by 32 columns at a time: eight accumulators stay in registers over k, and each
// row of b's panel is loaded once for both rows. Columns past the last multiple of 32 go one by
// one.
inline void gemm_rows(const float* __restrict a, std::int64_t lda, const float* __restrict b,
                      std::int64_t ldb, float* __restrict c, std::int64_t ldc, std::int64_t m,
                      std::int64_t k, std::int64_t n, bool accumulate) {
  std::int64_t j0 = 0;
  for (; j0 + 32 <= n; j0 += 32) {
    for (std::int64_t r = 0; r < m; r += 2) {
      const bool pair = r + 1 < m;
      const float* a0 = a + r * lda;
      const float* a1 = pair ? a0 + lda : a0;
      float* c0 = c + r * ldc + j0;
      float* c1 = pair ? c0 + ldc : c0;
      Floats8 x[2][4] = {};
      if (accumulate) {
        for (int q = 0; q < 4; ++q) {
          TILEOPS_LOAD8(x[0][q], c0 + 8 * q);
          TILEOPS_LOAD8(x[1][q], c1 + 8 * q);
        }
      }
      for (std::int64_t kk = 0; kk < k; ++kk) {
        const float* bk = b + kk * ldb + j0;
        Floats8 b0;
        Floats8 b1;
        Floats8 b2;
        Floats8 b3;
        TILEOPS_LOAD8(b0, bk);
        TILEOPS_LOAD8(b1, bk + 8);
        TILEOPS_LOAD8(b2, bk + 16);
        TILEOPS_LOAD8(b3, bk + 24);
        const float s0 = a0[kk];
        const float s1 = a1[kk];
        x[0][0] += s0 * b0;
        x[0][1] += s0 * b1;
        x[0][2] += s0 * b2;
        x[0][3] += s0 * b3;
        x[1][0] += s1 * b0;
        x[1][1] += s1 * b1;
        x[1][2] += s1 * b2;
        x[1][3] += s1 * b3;
      }
      for (int q = 0; q < 4; ++q) TILEOPS_STORE8(c0 + 8 * q, x[0][q]);
      if (pair) {
        for (int q = 0; q < 4; ++q) TILEOPS_STORE8(c1 + 8 * q, x[1][q]);
      }
    }
  }
  if (j0 < n) gemm_columns(a, lda, b, ldb, c, ldc, m, k, j0, n, accumulate);
}

#undef TILEOPS_LOAD8
#undef TILEOPS_STORE8

// The AVX-512 variant of gemm_rows, chosen at run time where the CPU has x86-64-v4's features
// (target_clones has no way to give a clone wider vector types): four rows by 64 columns, sixteen
// 512-bit accumulators, each row of b's panel loaded once for the four rows. GCC on x86-64 only,
// not under the sanitizers (as TILEOPS_CPU_CLONES).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TILEOPS_ATTENTION_AVX512 1

using Floats16 = float __attribute__((vector_size(64)));

bool has_avx512() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512cd");
  }();
  return yes;
}

[[gnu::target("arch=x86-64-v4")]] void gemm_rows_avx512(const float* __restrict a, std::int64_t lda,
                                                        const float* __restrict b, std::int64_t ldb,
                                                        float* __restrict c, std::int64_t ldc,
                                                        std::int64_t m, std::int64_t k,
                                                        std::int64_t n, bool accumulate) {
  constexpr std::int64_t kRows = 4;
  std::int64_t j0 = 0;
  for (; j0 + 64 <= n; j0 += 64) {
    for (std::int64_t r = 0; r < m; r += kRows) {
      const std::int64_t valid = std::min(kRows, m - r);
      const float* ar[kRows];
      float* cr[kRows];
      for (std::int64_t i = 0; i < kRows; ++i) {  // rows past m repeat the last (not stored)
        const std::int64_t row = r + std::min(i, valid - 1);
        ar[i] = a + row * lda;
        cr[i] = c + row * ldc + j0;
      }
      Floats16 x[kRows][4] = {};
      if (accumulate) {
        for (std::int64_t i = 0; i < kRows; ++i) {
          for (int q = 0; q < 4; ++q) std::memcpy(&x[i][q], cr[i] + 16 * q, sizeof(Floats16));
        }
      }
      for (std::int64_t kk = 0; kk < k; ++kk) {
        const float* bk = b + kk * ldb + j0;
        Floats16 bq[4];
        for (int q = 0; q < 4; ++q) std::memcpy(&bq[q], bk + 16 * q, sizeof(Floats16));
        for (std::int64_t i = 0; i < kRows; ++i) {
          const float s = ar[i][kk];
          for (int q = 0; q < 4; ++q) x[i][q] += s * bq[q];
        }
      }
      for (std::int64_t i = 0; i < valid; ++i) {
        for (int q = 0; q < 4; ++q) std::memcpy(cr[i] + 16 * q, &x[i][q], sizeof(Floats16));
      }
    }
  }
  if (j0 < n) gemm_rows(a, lda, b + j0, ldb, c + j0, ldc, m, k, n - j0, accumulate);
}
#endif

// gemm_rows, or its AVX-512 variant where the CPU has it.
inline void product(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* c,
                    std::int64_t ldc, std::int64_t m, std::int64_t k, std::int64_t n,
                    bool accumulate) {
#ifdef TILEOPS_ATTENTION_AVX512
  if (has_avx512()) {
    gemm_rows_avx512(a, lda, b, ldb, c, ldc, m, k, n, accumulate);
    return;
  }
#endif
  gemm_rows(a, lda, b, ldb, c, ldc, m, k, n, accumulate);
}

}  // namespace

TILEOPS_CPU_CLONES void score_tile(const float* q, std::int64_t rows, std::int64_t dim,
                                   const float* k_t, float* s) {
  product(q, dim, k_t, kTileKeys, s, kTileKeys, rows, dim, kTileKeys, false);
}

TILEOPS_CPU_CLONES void accumulate_values(const float* p, std::int64_t rows, const float* v,
                                          std::int64_t keys, std::int64_t dim, float* o) {
  product(p, kTileKeys, v, dim, o, dim, rows, keys, dim, true);
}

TILEOPS_CPU_CLONES void accumulate_visible_values(const float* p, std::int64_t rows, const float* v,
                                                  std::int64_t keys, std::int64_t dim, float* o) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < keys; ++j) {
      const float w = p[r * kTileKeys + j];
      if (w == 0.0f) continue;  // masked (or underflowed): the key's row is not read
      const float* vj = v + j * dim;
      float* orow = o + r * dim;
      for (std::int64_t d = 0; d < dim; ++d) orow[d] += w * vj[d];
    }
  }
}

TILEOPS_CPU_CLONES bool all_finite(const float* v, std::int64_t count) {
  // 0 * x is 0 for every finite x and NaN for an infinity or a NaN.
  float lane[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    for (std::int64_t l = 0; l < 8; ++l) lane[l] += 0.0f * v[i + l];
  }
  float tail = 0.0f;
  for (; i < count; ++i) tail += 0.0f * v[i];
  float sum = tail;
  for (std::int64_t l = 0; l < 8; ++l) sum += lane[l];
  return sum == 0.0f;
}

TILEOPS_CPU_CLONES float tile_max(const float* s) {
  // Eight running maxima; a NaN never compares greater, so it never enters one.
  float lane[8];
  for (std::int64_t l = 0; l < 8; ++l) lane[l] = -std::numeric_limits<float>::infinity();
  for (std::int64_t j = 0; j < kTileKeys; j += 8) {
    for (std::int64_t l = 0; l < 8; ++l) lane[l] = s[j + l] > lane[l] ? s[j + l] : lane[l];
  }
  float best = lane[0];
  for (std::int64_t l = 1; l < 8; ++l) best = lane[l] > best ? lane[l] : best;
  return best;
}

namespace {

template <class T>
inline void transpose_rows(const T* const* rows, std::int64_t n, std::int64_t dim, float* k_t) {
  // Eight keys at a time, so that each column's eight stores are contiguous.
  std::int64_t j0 = 0;
  for (; j0 + 8 <= n; j0 += 8) {
    for (std::int64_t d = 0; d < dim; ++d) {
      for (std::int64_t l = 0; l < 8; ++l) k_t[d * kTileKeys + j0 + l] = to_float(rows[j0 + l][d]);
    }
  }
  for (; j0 < n; ++j0) {
    for (std::int64_t d = 0; d < dim; ++d) k_t[d * kTileKeys + j0] = to_float(rows[j0][d]);
  }
}

template <class T>
inline void copy_rows(const T* const* rows, std::int64_t n, std::int64_t dim, float* v) {
  for (std::int64_t j = 0; j < n; ++j) {
    const T* __restrict src = rows[j];
    float* __restrict dst = v + j * dim;
    for (std::int64_t d = 0; d < dim; ++d) dst[d] = to_float(src[d]);
  }
}

}  // namespace

TILEOPS_CPU_CLONES void transpose_keys(const float* const* rows, std::int64_t n, std::int64_t dim,
                                       float* k_t) {
  transpose_rows(rows, n, dim, k_t);
}
TILEOPS_CPU_CLONES void transpose_keys(const Half* const* rows, std::int64_t n, std::int64_t dim,
                                       float* k_t) {
  // The rows in float first (F16C where the CPU has it: the decode table does not vectorize),
  // then the float transpose.
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<std::size_t>(n * dim));
  std::array<const float*, kTileKeys> converted{};
  for (std::int64_t j = 0; j < n; ++j) {
    half_row_to_float(rows[j], scratch.data() + j * dim, dim);
    converted[static_cast<std::size_t>(j)] = scratch.data() + j * dim;
  }
  transpose_rows(converted.data(), n, dim, k_t);
}
TILEOPS_CPU_CLONES void transpose_keys(const BFloat16* const* rows, std::int64_t n,
                                       std::int64_t dim, float* k_t) {
  transpose_rows(rows, n, dim, k_t);
}

TILEOPS_CPU_CLONES void gather_values(const float* const* rows, std::int64_t n, std::int64_t dim,
                                      float* v) {
  copy_rows(rows, n, dim, v);
}
TILEOPS_CPU_CLONES void gather_values(const Half* const* rows, std::int64_t n, std::int64_t dim,
                                      float* v) {
  for (std::int64_t j = 0; j < n; ++j) half_row_to_float(rows[j], v + j * dim, dim);
}
TILEOPS_CPU_CLONES void gather_values(const BFloat16* const* rows, std::int64_t n, std::int64_t dim,
                                      float* v) {
  copy_rows(rows, n, dim, v);
}

TILEOPS_CPU_CLONES float exp_shifted(float* __restrict x, std::int64_t n, float shift) {
  // ExpConstants' function, branch-free so that it vectorizes.
  using C = ExpConstants;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds
  for (std::int64_t i = 0; i < n; ++i) {
    // Every operation runs unconditionally and the selects pick values (if-converted, vectorized).
    const float t = x[i] - shift;
    const bool nan = t != t;  // kept as NaN; its exponent is computed from 0 (no UB cast)
    const bool under = t < C::kUnderflow;
    const float c = nan ? 0.0f : (under ? C::kUnderflow : t);
    const float k = (c * C::kLog2e + kRound) - kRound;
    const float r = (c - k * C::kLn2Hi) - k * C::kLn2Lo;
    float y = C::kPoly[0];
    for (int p = 1; p < 6; ++p) y = y * r + C::kPoly[p];
    y = y * r * r + r + 1.0f;
    const auto bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(k) + 127) << 23;
    const float e = y * std::bit_cast<float>(bits);
    x[i] = nan ? t : (under ? 0.0f : e);
  }
  float partial[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (std::int64_t l = 0; l < 8; ++l) partial[l] += x[i + l];
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += x[i];
  return ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
         ((partial[4] + partial[5]) + (partial[6] + partial[7])) + tail;
}

}  // namespace tileops::cpu
