#include "kernels/attention/attention_cpu_amx.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TILEOPS_AMX_BUILD 1
#else
#define TILEOPS_AMX_BUILD 0
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>

#if TILEOPS_AMX_BUILD
// GCC 12's AVX-512 intrinsics start their "undefined" vectors from themselves, which its
// -W(maybe-)uninitialized reports (at the header's lines) wherever they inline: off for the
// header and for this file's AMX code, where they inline (popped before the no-AMX stubs).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tileops::cpu {

#if TILEOPS_AMX_BUILD

namespace {

#define TILEOPS_AMX [[gnu::target("amx-tile,amx-bf16,avx512f,avx512bw,avx512bf16")]]

// Linux hands a process the tile registers' state only on request (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); without it the first tile instruction faults.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

bool amx_granted() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("amx-bf16") || !__builtin_cpu_supports("avx512bf16") ||
      !__builtin_cpu_supports("avx512bw")) {
    return false;
  }
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

std::atomic<bool> amx_enabled{true};

// Every tile register used is 16 rows of 64 bytes: 16 x 32 bfloat16 or 16 x 16 float32.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
// A constant, not a local filled in a loop: GCC 12 may drop stores to a local that only
// ldtilecfg reads (it did once configure_tiles was not inlined).
constexpr TileConfig kTileConfig{};

// The configuration is the calling thread's and may have been changed by other code on it (torch's
// own AMX kernels): loaded at the start of each product, released at its end.
TILEOPS_AMX void configure_tiles() {
  _tile_loadconfig(&kTileConfig);
}

std::int64_t padded_rows(std::int64_t rows) {
  return (rows + kAmxRows - 1) / kAmxRows * kAmxRows;
}

// r[c] becomes column c of the 16 x 16 matrix of 32-bit words whose row i was r[i]: words
// interleaved within 128-bit lanes, then the lanes exchanged across groups of four rows.
TILEOPS_AMX void transpose16(__m512i (&r)[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  __m512i u[4][4];  // u[k][g]: lane L holds column 4 L + k of rows 4 g .. 4 g + 3
  for (int g = 0; g < 4; ++g) {
    u[0][g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[1][g] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[2][g] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[3][g] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int k = 0; k < 4; ++k) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[k][0], u[k][1], 0x44);
    const __m512i v1 = _mm512_shuffle_i32x4(u[k][0], u[k][1], 0xEE);
    const __m512i v2 = _mm512_shuffle_i32x4(u[k][2], u[k][3], 0x44);
    const __m512i v3 = _mm512_shuffle_i32x4(u[k][2], u[k][3], 0xEE);
    r[k] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    r[4 + k] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    r[8 + k] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    r[12 + k] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
}

TILEOPS_AMX void pack_keys(const BFloat16* const* rows, std::int64_t n, std::int64_t dim,
                           BFloat16* packed) {
  // A pair of adjacent dims of a key is one 32-bit word: the layout is the [dim / 2][kTileKeys]
  // transpose of the keys' words.
  auto* out = reinterpret_cast<std::uint32_t*>(packed);
  for (std::int64_t j0 = 0; j0 < kTileKeys; j0 += 16) {
    for (std::int64_t p0 = 0; p0 < dim / 2; p0 += 16) {
      __m512i r[16];
      for (std::int64_t i = 0; i < 16; ++i) {
        r[i] = j0 + i < n ? _mm512_loadu_si512(rows[j0 + i] + 2 * p0) : _mm512_setzero_si512();
      }
      transpose16(r);
      for (std::int64_t c = 0; c < 16; ++c) {
        _mm512_storeu_si512(out + (p0 + c) * kTileKeys + j0, r[c]);
      }
    }
  }
}

alignas(64) constexpr std::uint16_t kInterleaveLow[32] = {
    0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
    8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
alignas(64) constexpr std::uint16_t kInterleaveHigh[32] = {
    16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
    24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};

TILEOPS_AMX bool pack_values(const BFloat16* const* rows, std::int64_t n, std::int64_t dim,
                             BFloat16* packed) {
  const __m512i low = _mm512_load_si512(kInterleaveLow);
  const __m512i high = _mm512_load_si512(kInterleaveHigh);
  const __m512i exponent = _mm512_set1_epi16(0x7f80);
  __mmask32 non_finite = 0;
  for (std::int64_t j = 0; j < kTileKeys; j += 2) {
    BFloat16* out = packed + j * dim;  // pair j / 2: dim x 2 values
    for (std::int64_t d = 0; d < dim; d += 32) {
      const __m512i a = j < n ? _mm512_loadu_si512(rows[j] + d) : _mm512_setzero_si512();
      const __m512i b = j + 1 < n ? _mm512_loadu_si512(rows[j + 1] + d) : _mm512_setzero_si512();
      non_finite |= _mm512_cmpeq_epi16_mask(_mm512_and_si512(a, exponent), exponent);
      non_finite |= _mm512_cmpeq_epi16_mask(_mm512_and_si512(b, exponent), exponent);
      _mm512_storeu_si512(out + 2 * d, _mm512_permutex2var_epi16(a, low, b));
      _mm512_storeu_si512(out + 2 * d + 32, _mm512_permutex2var_epi16(a, high, b));
    }
  }
  return non_finite == 0;
}

TILEOPS_AMX void score_tile(const BFloat16* q, std::int64_t rows, std::int64_t dim,
                            const BFloat16* keys, float scale, float* s) {
  configure_tiles();
  const std::int64_t q_stride = dim * 2;
  constexpr std::int64_t kKeysStride = kTileKeys * 4;  // bytes per pair row of the packed keys
  constexpr std::int64_t kScoreStride = kTileKeys * 4;
  const std::int64_t padded = padded_rows(rows);
  for (std::int64_t r0 = 0; r0 < padded; r0 += kAmxRows) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (std::int64_t d0 = 0; d0 < dim; d0 += 32) {
      const BFloat16* k = keys + d0 * kTileKeys;  // pair row d0 / 2
      _tile_loadd(4, q + r0 * dim + d0, q_stride);
      _tile_loadd(5, k, kKeysStride);
      _tile_dpbf16ps(0, 4, 5);
      _tile_loadd(6, k + 32, kKeysStride);
      _tile_dpbf16ps(1, 4, 6);
      _tile_loadd(7, k + 64, kKeysStride);
      _tile_dpbf16ps(2, 4, 7);
      _tile_loadd(5, k + 96, kKeysStride);
      _tile_dpbf16ps(3, 4, 5);
    }
    float* row = s + r0 * kTileKeys;
    _tile_stored(0, row, kScoreStride);
    _tile_stored(1, row + 16, kScoreStride);
    _tile_stored(2, row + 32, kScoreStride);
    _tile_stored(3, row + 48, kScoreStride);
  }
  _tile_release();
  if (scale == 1.0f) return;
  const __m512 factor = _mm512_set1_ps(scale);
  for (std::int64_t i = 0; i < padded * kTileKeys; i += 16) {
    _mm512_storeu_ps(s + i, _mm512_mul_ps(_mm512_loadu_ps(s + i), factor));
  }
}

TILEOPS_AMX void round_weights(const float* p, std::int64_t rows, BFloat16* p16) {
  const std::int64_t padded = padded_rows(rows);
  for (std::int64_t i = 0; i < padded * kTileKeys; i += 32) {
    const __m512bh pair = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + i + 16), _mm512_loadu_ps(p + i));
    _mm512_storeu_si512(p16 + i, (__m512i)pair);
  }
}

// exp(t) for t <= 0 (scores less their row's maximum): exp_shifted's function (ExpConstants) on
// 16 lanes; below the underflow bound (and -inf) 0, NaN kept.
TILEOPS_AMX __m512 exp_nonpositive(__m512 t) {
  using C = ExpConstants;
  const __m512 floor = _mm512_set1_ps(C::kUnderflow);
  const __mmask16 nan = _mm512_cmp_ps_mask(t, t, _CMP_UNORD_Q);
  const __mmask16 under = _mm512_cmp_ps_mask(t, floor, _CMP_LT_OQ);
  const __m512 c = _mm512_max_ps(t, floor);  // NaN: the floor (the second operand)
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(c, _mm512_set1_ps(C::kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(C::kLn2Hi), c);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(C::kLn2Lo), r);
  __m512 y = _mm512_set1_ps(C::kPoly[0]);
  for (int p = 1; p < 6; ++p) y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(C::kPoly[p]));
  y = _mm512_fmadd_ps(_mm512_mul_ps(y, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512 e = _mm512_scalef_ps(y, k);
  return _mm512_mask_mov_ps(_mm512_mask_mov_ps(e, under, _mm512_setzero_ps()), nan, t);
}

TILEOPS_AMX void softmax_tile(float* s, std::int64_t rows, std::int64_t k0, std::int64_t n,
                              const KeySpan* spans, float scale, float* m, float* l, float* o,
                              std::int64_t dim, BFloat16* p16) {
  constexpr int kVectors = kTileKeys / 16;
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512 factor = _mm512_set1_ps(scale);
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = s + r * kTileKeys;
    BFloat16* weights = p16 + r * kTileKeys;
    const std::int64_t jb = std::max<std::int64_t>(spans[r].begin - k0, 0);
    const std::int64_t je = std::min<std::int64_t>(spans[r].end - k0, n);
    if (jb >= je) {  // no key of this tile
      std::fill_n(row, kTileKeys, 0.0f);
      std::fill_n(weights, kTileKeys, BFloat16::from_float(0.0f));
      continue;
    }
    const __m512i begin = _mm512_set1_epi32(static_cast<int>(jb));
    const __m512i end = _mm512_set1_epi32(static_cast<int>(je));
    __m512 x[kVectors];
    __m512 big = neg_inf;
    for (int c = 0; c < kVectors; ++c) {
      const __m512i j = _mm512_add_epi32(lane, _mm512_set1_epi32(16 * c));
      const __mmask16 seen = _mm512_cmpge_epi32_mask(j, begin) & _mm512_cmplt_epi32_mask(j, end);
      x[c] = _mm512_mask_mul_ps(neg_inf, seen, _mm512_loadu_ps(row + 16 * c), factor);
      big = _mm512_max_ps(x[c], big);  // a NaN in x[c] leaves big (the second operand)
    }
    const float m_new = std::max(m[r], _mm512_reduce_max_ps(big));
    // No finite score yet: every weight is exp(-inf) = 0 against 0, never NaN from -inf - -inf.
    const float shift = m_new == -std::numeric_limits<float>::infinity() ? 0.0f : m_new;
    const float alpha = std::exp(m[r] - shift);
    if (alpha != 1.0f) {
      l[r] *= alpha;
      float* orow = o + r * dim;
      const __m512 a = _mm512_set1_ps(alpha);
      for (std::int64_t d = 0; d < dim; d += 16) {
        _mm512_storeu_ps(orow + d, _mm512_mul_ps(_mm512_loadu_ps(orow + d), a));
      }
    }
    const __m512 sub = _mm512_set1_ps(shift);
    __m512 sum = _mm512_setzero_ps();
    for (int c = 0; c < kVectors; c += 2) {
      const __m512 e0 = exp_nonpositive(_mm512_sub_ps(x[c], sub));
      const __m512 e1 = exp_nonpositive(_mm512_sub_ps(x[c + 1], sub));
      sum = _mm512_add_ps(sum, _mm512_add_ps(e0, e1));
      _mm512_storeu_ps(row + 16 * c, e0);
      _mm512_storeu_ps(row + 16 * c + 16, e1);
      _mm512_storeu_si512(weights + 16 * c, (__m512i)_mm512_cvtne2ps_pbh(e1, e0));
    }
    l[r] += _mm512_reduce_add_ps(sum);
    m[r] = m_new;
  }
  std::fill(p16 + rows * kTileKeys, p16 + padded_rows(rows) * kTileKeys,
            BFloat16::from_float(0.0f));
}

TILEOPS_AMX void accumulate_values(const BFloat16* p16, std::int64_t rows, const BFloat16* values,
                                   std::int64_t dim, float* o) {
  const std::int64_t padded = padded_rows(rows);
  configure_tiles();
  const std::int64_t o_stride = dim * 4;
  const std::int64_t values_stride = dim * 4;  // bytes per pair row of the packed values
  constexpr std::int64_t kP16Stride = kTileKeys * 2;
  for (std::int64_t r0 = 0; r0 < padded; r0 += kAmxRows) {
    for (std::int64_t d0 = 0; d0 < dim; d0 += 32) {
      float* out = o + r0 * dim + d0;
      _tile_loadd(0, out, o_stride);
      _tile_loadd(1, out + 16, o_stride);
      for (std::int64_t j0 = 0; j0 < kTileKeys; j0 += 32) {
        const BFloat16* v = values + j0 * dim + 2 * d0;  // pair row j0 / 2, column d0
        _tile_loadd(4, p16 + r0 * kTileKeys + j0, kP16Stride);
        _tile_loadd(5, v, values_stride);
        _tile_dpbf16ps(0, 4, 5);
        _tile_loadd(6, v + 32, values_stride);
        _tile_dpbf16ps(1, 4, 6);
      }
      _tile_stored(0, out, o_stride);
      _tile_stored(1, out + 16, o_stride);
    }
  }
  _tile_release();
}

}  // namespace

bool attention_amx_available() {
  static const bool granted = amx_granted();
  return granted && amx_enabled.load(std::memory_order_relaxed);
}

void use_attention_amx(bool enabled) {
  amx_enabled.store(enabled);
}

void pack_keys_amx(const BFloat16* const* rows, std::int64_t n, std::int64_t dim,
                   BFloat16* packed) {
  pack_keys(rows, n, dim, packed);
}

bool pack_values_amx(const BFloat16* const* rows, std::int64_t n, std::int64_t dim,
                     BFloat16* packed) {
  return pack_values(rows, n, dim, packed);
}

void score_tile_amx(const BFloat16* q, std::int64_t rows, std::int64_t dim, const BFloat16* keys,
                    float scale, float* s) {
  score_tile(q, rows, dim, keys, scale, s);
}

void softmax_tile_amx(float* s, std::int64_t rows, std::int64_t k0, std::int64_t n,
                      const KeySpan* spans, float scale, float* m, float* l, float* o,
                      std::int64_t dim, BFloat16* p16) {
  softmax_tile(s, rows, k0, n, spans, scale, m, l, o, dim, p16);
}

void round_weights_amx(const float* p, std::int64_t rows, BFloat16* p16) {
  round_weights(p, rows, p16);
}

void accumulate_values_amx(const BFloat16* p16, std::int64_t rows, const BFloat16* values,
                           std::int64_t dim, float* o) {
  accumulate_values(p16, rows, values, dim, o);
}

#pragma GCC diagnostic pop
#else  // no AMX build: never available, never called

bool attention_amx_available() {
  return false;
}
void use_attention_amx(bool) {}
void pack_keys_amx(const BFloat16* const*, std::int64_t, std::int64_t, BFloat16*) {}
bool pack_values_amx(const BFloat16* const*, std::int64_t, std::int64_t, BFloat16*) {
  return false;
}
void score_tile_amx(const BFloat16*, std::int64_t, std::int64_t, const BFloat16*, float, float*) {}
void softmax_tile_amx(float*, std::int64_t, std::int64_t, std::int64_t, const KeySpan*, float,
                      float*, float*, float*, std::int64_t, BFloat16*) {}
void round_weights_amx(const float*, std::int64_t, BFloat16*) {}
void accumulate_values_amx(const BFloat16*, std::int64_t, const BFloat16*, std::int64_t, float*) {}

#endif

}  // namespace tileops::cpu
