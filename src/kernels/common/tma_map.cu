// The TMA tensor maps of the Hopper kernels (tma_map.h), encoded through the driver entry
// point the runtime hands out (no link against libcuda).
#include "kernels/common/tma_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <string>

#include "tileops/core/error.h"

namespace tileops::cuda_kernels::hopper {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000,
                                                             cudaEnableDefault, &status);
    if (err != cudaSuccess || status != cudaDriverEntryPointSuccess) ptr = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
  }();
  return fn;
}

// A map of `rank` dimensions, innermost first; strides[i] is the byte stride of dimension i + 1.
CUtensorMap make_tma_map(const void* base, CUtensorMapDataType type, cuuint32_t rank,
                         const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_fn();
  if (encode == nullptr)
    throw UsageError("tma_map (CUDA): cuTensorMapEncodeTiled is not available");
  CUtensorMap map;
  const cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
  const CUresult res =
      encode(&map, type, rank, const_cast<void*>(base), dims, strides, box, elem_strides,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (res != CUDA_SUCCESS)
    throw UsageError("tma_map (CUDA): cuTensorMapEncodeTiled failed with error " +
                     std::to_string(static_cast<int>(res)));
  return map;
}

}  // namespace

CUtensorMap make_tma_map_2d(const void* base, CUtensorMapDataType type, int elem_bytes,
                            int64_t rows, int64_t cols, int box_cols, int box_rows) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) *
                                 static_cast<cuuint64_t>(elem_bytes)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  return make_tma_map(base, type, 2, dims, strides, box);
}

CUtensorMap make_tma_map_3d(const void* base, CUtensorMapDataType type, int elem_bytes,
                            int64_t outer, int64_t middle, int64_t inner, int box_inner,
                            int box_middle, int box_outer) {
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(middle),
                              static_cast<cuuint64_t>(outer)};
  const cuuint64_t row = static_cast<cuuint64_t>(inner) * static_cast<cuuint64_t>(elem_bytes);
  const cuuint64_t strides[2] = {row, row * static_cast<cuuint64_t>(middle)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box_inner),
                             static_cast<cuuint32_t>(box_middle),
                             static_cast<cuuint32_t>(box_outer)};
  return make_tma_map(base, type, 3, dims, strides, box);
}

CUtensorMap make_tma_map_row_chunks(const void* base, CUtensorMapDataType type, int elem_bytes,
                                    int64_t rows, int64_t heads, int64_t head_dim, int box_rows) {
  const auto eb = static_cast<cuuint64_t>(elem_bytes);
  const cuuint64_t dims[4] = {64, static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(head_dim / 64),
                              static_cast<cuuint64_t>(heads)};
  // Dimension order (column, row, chunk, head) makes the chunk the box's outermost: its strides
  // need not grow with the dimension.
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(heads * head_dim) * eb, 64 * eb,
                                 static_cast<cuuint64_t>(head_dim) * eb};
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_rows),
                             static_cast<cuuint32_t>(head_dim / 64), 1};
  return make_tma_map(base, type, 4, dims, strides, box);
}

}  // namespace tileops::cuda_kernels::hopper
