// Internal: the inner loops of the CPU attention (attention_cpu.h): a tile of query rows against
// a tile of kTileKeys keys, in float32, compiled also for AVX2 / FMA (TILEOPS_CPU_CLONES).
#pragma once

#include <cstdint>

#include "tileops/core/half.h"

namespace tileops::cpu {

/// Keys per tile: the width of a score tile.
inline constexpr std::int64_t kTileKeys = 64;

/// Keys [begin, end) of a sequence.
struct KeySpan {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

/// s[r][j] = q[r] . k_t[.][j] for r < rows and every j < kTileKeys: q is [rows][dim], k_t the
/// tile's keys transposed, [dim][kTileKeys], s [rows][kTileKeys].
void score_tile(const float* q, std::int64_t rows, std::int64_t dim, const float* k_t, float* s);

/// o[r][d] += sum over j < keys of p[r][j] * v[j][d]: p [rows][kTileKeys], v [keys][dim],
/// o [rows][dim].
void accumulate_values(const float* p, std::int64_t rows, const float* v, std::int64_t keys,
                       std::int64_t dim, float* o);

/// o[r][d] += sum over j < keys with p[r][j] != 0 of p[r][j] * v[j][d]: accumulate_values for a
/// tile with a non-finite value, which a row that does not see its key must not read (0 * NaN).
void accumulate_visible_values(const float* p, std::int64_t rows, const float* v, std::int64_t keys,
                               std::int64_t dim, float* o);

/// Whether every one of the count values at v is finite.
bool all_finite(const float* v, std::int64_t count);

/// The largest of s[0 .. kTileKeys), NaN skipped (-inf when every value is -inf or NaN).
float tile_max(const float* s);

/// k_t[d][j] = rows[j][d] as float32, for j < n and d < dim: the tile's n key rows transposed
/// into [dim][kTileKeys].
void transpose_keys(const float* const* rows, std::int64_t n, std::int64_t dim, float* k_t);
void transpose_keys(const Half* const* rows, std::int64_t n, std::int64_t dim, float* k_t);
void transpose_keys(const BFloat16* const* rows, std::int64_t n, std::int64_t dim, float* k_t);

/// v[j][d] = rows[j][d] as float32, for j < n and d < dim: the tile's n value rows, [n][dim].
void gather_values(const float* const* rows, std::int64_t n, std::int64_t dim, float* v);
void gather_values(const Half* const* rows, std::int64_t n, std::int64_t dim, float* v);
void gather_values(const BFloat16* const* rows, std::int64_t n, std::int64_t dim, float* v);

/// The constants of exp_shifted (Cephes' expf: exp(t) = 2^k exp(r), k = round(t / ln 2),
/// r = t - k ln 2 with ln 2 in two parts, exp(r) by a degree-6 polynomial), shared with the AMX
/// path's softmax (attention_cpu_amx.cpp) so that both compute the same function.
struct ExpConstants {
  static constexpr float kLog2e = 1.44269504088896341f;
  static constexpr float kLn2Hi = 0.693359375f;
  static constexpr float kLn2Lo = -2.12194440e-4f;
  static constexpr float kUnderflow = -87.0f;  // below: exp(t) < 2^-125, returned as 0
  // y = p0; y = y r + p1 ... p5; exp(r) = y r^2 + r + 1
  static constexpr float kPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                     4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
};

/// x[i] = exp(x[i] - shift) for i < n, where every x[i] - shift <= 0 (scores less their row's
/// maximum), within 2 units in the last place; -inf gives 0 and NaN stays NaN. Returns the sum.
float exp_shifted(float* x, std::int64_t n, float shift);

}  // namespace tileops::cpu
