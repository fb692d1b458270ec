// Internal helpers shared by the src/core/tensor*.cpp files (not installed).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "tileops/core/tensor.h"

namespace tileops::detail {

/// Row-major strides for sizes into `out` (a size-0 or size-1 dimension counts as 1 for the
/// dims before it).
void contiguous_strides(std::span<const std::int64_t> sizes, Sizes& out);

/// A TensorImpl to fill (from the per-thread pool when possible; refs == 1). The caller sets
/// storage, sizes, strides, offset, dtype and device, then calls finish_impl.
ImplPtr acquire_impl();

/// Computes numel, contiguity and the data pointer of a filled TensorImpl.
void finish_impl(TensorImpl& impl) noexcept;

/// `value` encoded as one element of dtype into out (8 bytes at most), by the rules of fill_;
/// SignatureError mentioning `what` when an integer dtype cannot hold it.
void encode_scalar(double value, DType dtype, void* out, const char* what);

/// One element of dtype at p, as double.
double load_scalar(const void* p, DType dtype) noexcept;

/// Whether copy_ converts src dtype to dst dtype (see Tensor::copy_).
bool copy_conversion_allowed(DType dst, DType src) noexcept;

/// Copies src into dst element by element on the CPU (same sizes, both on the host, dtypes
/// allowed by copy_conversion_allowed, no overlap).
void cpu_copy(const TensorImpl& dst, const TensorImpl& src);

/// Writes the element bit pattern (element_size(dst.dtype) bytes) to every element of dst.
void cpu_fill(const TensorImpl& dst, const void* pattern);

/// A strided loop nest over equal sizes in two tensors, outermost first, with size-1
/// dimensions dropped and dimensions that are contiguous in both tensors merged.
struct StridedLoop {
  Sizes sizes;
  Sizes dst_strides;
  Sizes src_strides;
};
StridedLoop coalesce(const Sizes& sizes, const Sizes& dst_strides, const Sizes& src_strides);

/// SignatureError: dimension d is out of range for impl (message names `what`, d, the sizes).
[[noreturn]] void throw_bad_dim(std::int64_t d, const TensorImpl& impl, const char* what);

/// "the tensor's sizes [2, 3]" and similar fragments for messages.
std::string describe_tensor(const TensorImpl& impl);

}  // namespace tileops::detail
