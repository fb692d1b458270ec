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
/// [rows][dim] bfloat16 (the query rows as given), `keys` from pack_keys_amx.
void score_tile_amx(const BFloat16* q, std::int64_t rows, std::int64_t dim, const BFloat16* keys,
                    float scale, float* s);

/// o[r][d] += sum over j of bf16(p[r][j]) * v[j][d] for r < rows rounded up to kAmxRows: p is
/// [rows][kTileKeys] float32, `values` from pack_values_amx, p16 scratch of the rounded rows x
/// kTileKeys, o [rows][dim] float32.
void accumulate_values_amx(const float* p, std::int64_t rows, const BFloat16* values,
                           std::int64_t dim, BFloat16* p16, float* o);

}  // namespace tileops::cpu
