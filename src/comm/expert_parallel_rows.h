// Internal: the row moves of expert-parallel dispatch and combine on the transport's device (host
// memory or a GPU): packing token rows into the wire format, unpacking them, and combining the
// returned partials (docs/design/expert-parallel.md § Protocol).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/expert_parallel_plan.h"
#include "comm/expert_parallel_rows_cuda.h"
#include "tileops/core/tensor.h"

namespace tileops::expert_parallel {

using cuda_kernels::RowCopyArgs;

/// One packed wire row: the hidden row, then the token's top_k ids, then its top_k weights.
struct PackedRow {
  std::int64_t row_bytes = 0, x_bytes = 0, id_bytes = 0;

  /// Where one field sits in every wire row (bytes).
  struct Field {
    std::int64_t stride = 0, offset = 0;
  };
  Field x() const { return {row_bytes, 0}; }
  Field ids() const { return {row_bytes, x_bytes}; }
  Field weights() const { return {row_bytes, x_bytes + id_bytes}; }
};

/// `values` as an [n] int64 tensor on `device`.
Tensor index_tensor(const std::vector<std::int64_t>& values, Device device);

/// Field f of wire row i = row order[i] of `src` (contiguous rows of `bytes`), for i < rows.
RowCopyArgs pack(Tensor& wire, PackedRow::Field f, const Tensor& src, std::int64_t bytes,
                 std::int64_t rows, const std::int64_t* order);
/// Row i of `dst` (contiguous rows of `bytes`) = field f of wire row i, for i < rows.
RowCopyArgs unpack(Tensor& dst, const Tensor& wire, PackedRow::Field f, std::int64_t bytes,
                   std::int64_t rows);

/// Runs the copy on `device`: memcpy per row on the CPU, the row-copy kernel on a GPU (on the
/// device's current tileops stream). The pointers must be `device`'s memory.
void copy_rows(const RowCopyArgs& args, Device device);

/// y[t] = round(sum in float32, in rank order, of returned[r] over token t's rows r in `plan`);
/// returned and y contiguous and on `device`.
void combine(const Tensor& returned, const DispatchPlan& plan, Tensor& y, Device device);

}  // namespace tileops::expert_parallel
