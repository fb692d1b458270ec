// Internal: the TMA tensor maps of the Hopper kernels (the grouped GEMMs, attention): a 2D or
// 3D row-major tensor read or written in boxes, 128-byte swizzle (tma.cuh moves the boxes).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace tileops::cuda_kernels::hopper {

/// A map over the row-major [rows, cols] tensor at `base` (elements of `elem_bytes` bytes, rows
/// of cols elements, cols * elem_bytes a multiple of 16), in boxes of box_cols x box_rows
/// (box_cols * elem_bytes <= 128), 128-byte swizzle, zero fill past the bounds. UsageError when
/// the driver entry point is missing or refuses the map.
CUtensorMap make_tma_map_2d(const void* base, CUtensorMapDataType type, int elem_bytes,
                            int64_t rows, int64_t cols, int box_cols, int box_rows);

/// A map over the row-major [outer, middle, inner] tensor at `base` (inner * elem_bytes a multiple
/// of 16), in boxes of box_inner x box_middle x box_outer (box_inner * elem_bytes <= 128), 128-byte
/// swizzle, zero fill past the bounds. UsageError as make_tma_map_2d.
CUtensorMap make_tma_map_3d(const void* base, CUtensorMapDataType type, int elem_bytes,
                            int64_t outer, int64_t middle, int64_t inner, int box_inner,
                            int box_middle, int box_outer);

/// A map over the row-major [rows, heads, head_dim] tensor at `base` (head_dim a multiple of 64)
/// in boxes of box_rows rows of one head and every column, which TMA lays in shared memory chunk
/// major: [head_dim / 64][box_rows][64 columns], each row 128 bytes in the 128-byte swizzle, as
/// box_rows-row boxes of the 3D map at each 64-column chunk would be laid box_rows * 128 bytes
/// apart. Coordinates (innermost first): column 0, row, chunk 0, head. UsageError as
/// make_tma_map_2d.
CUtensorMap make_tma_map_row_chunks(const void* base, CUtensorMapDataType type, int elem_bytes,
                                    int64_t rows, int64_t heads, int64_t head_dim, int box_rows);

}  // namespace tileops::cuda_kernels::hopper
