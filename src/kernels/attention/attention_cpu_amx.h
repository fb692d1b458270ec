// Internal: the CPU attention's tile products on AMX for bfloat16 inputs (attention_cpu.h picks
// them per call where the processor has AMX-BF16): bfloat16 products accumulated in float32 by
// the tile unit, the weights P rounded to bfloat16 for P V as the CUDA kernels round them.
#pragma once

#include <cstdint>

#include "kernels/attention/attention_cpu_tiles.h"
#include "tileops/core/half.h"

namespace tileops::cpu {

/// Whether the AMX products run here: the processor has AMX-BF16 and AVX512-BF16, Linux granted
/// this process the tile state (arch_prctl, asked once), and use_attention_amx has not turned
/// them off.
bool attention_amx_available();

/// Turns the AMX products off (false) or back on where available (true); for tests, which check
/// the float32 products of bfloat16 inputs on a processor with AMX too.
void use_attention_amx(bool enabled);

/// Rows of the tile products: the tasks' rows are padded to a multiple of this (the scratch rows
/// past a task's rows are computed and never read).
inline constexpr std::int64_t kAmxRows = 16;

/// The tile's n key rows (n <= kTileKeys, dim a multiple of 32) in the tile unit's pair layout:
/// packed[((d / 2) * kTileKeys + j) * 2 + d % 2] = rows[j][d]; keys past n are zero.
void pack_keys_amx(const BFloat16* const* rows, std::int64_t n, std::int64_t dim, BFloat16* packed);

/// The tile's n value rows in the pair layout: packed[((j / 2) * dim + d) * 2 + j % 2] =
/// rows[j][d], rows past n zero. Returns whether every value is finite.
bool pack_values_amx(const BFloat16* const* rows, std::int64_t n, std::int64_t dim,
                     BFloat16* packed);

/// s[r][j] = scale * (q[r] . k[j]) for r < rows rounded up to kAmxRows and j < kTileKeys: q is
/// [rows][dim] bfloat16 (the query rows as given), `keys` from pack_keys_amx. A scale of 1 skips
/// the multiplication (softmax_tile_amx scales as it reads).
void score_tile_amx(const BFloat16* q, std::int64_t rows, std::int64_t dim, const BFloat16* keys,
                    float scale, float* s);

/// The online softmax step of one tile for every row r < rows (without a softcap), in one pass
/// over each row's scores on AVX-512: s[r][j] (q . k unscaled, key k0 + j, j < n valid) times
/// `scale`, masked to spans[r] (-inf outside), its maximum (NaN skipped) folded into m[r] with
/// o's row and l[r] rescaled; then s[r][j] = exp(s - m[r]) in float32, the same rounded to
/// bfloat16 in p16[r][j], their float32 sum added to l[r]. A row seeing no key of the tile gets
/// weights 0 and keeps m, l and o. p16's rows from rows up to the next multiple of kAmxRows are
/// zeroed (accumulate_values_amx multiplies them). The same arithmetic as the float32 path's
/// softmax_row with exp_shifted, in another order of the sum.
void softmax_tile_amx(float* s, std::int64_t rows, std::int64_t k0, std::int64_t n,
                      const KeySpan* spans, float scale, float* m, float* l, float* o,
                      std::int64_t dim, BFloat16* p16);

/// p16[i] = bf16(p[i]) for the rows r < rows rounded up to kAmxRows, [rows][kTileKeys] each.
void round_weights_amx(const float* p, std::int64_t rows, BFloat16* p16);

/// o[r][d] += sum over j of p16[r][j] * v[j][d] for r < rows rounded up to kAmxRows: p16 is
/// [rows][kTileKeys] bfloat16 (round_weights_amx, softmax_tile_amx), `values` from
/// pack_values_amx, o [rows][dim] float32.
void accumulate_values_amx(const BFloat16* p16, std::int64_t rows, const BFloat16* values,
                           std::int64_t dim, float* o);

}  // namespace tileops::cpu
