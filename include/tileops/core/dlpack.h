// DLPack import and export (only when tileops was built with dlpack.h: TILEOPS_WITH_DLPACK).
//
// dtype mapping: float32/float16 <-> kDLFloat 32/16, bfloat16 <-> kDLBfloat 16, int8..int64 <->
// kDLInt, uint8 <-> kDLUInt 8, bool <-> kDLBool 8, float8_e4m3fn <-> kDLFloat8_e4m3fn and
// float8_e5m2 <-> kDLFloat8_e5m2 where the dlpack.h in use defines them (otherwise
// SignatureError). Devices: cpu <-> kDLCPU (import also accepts kDLCUDAHost as cpu), cuda:n <->
// kDLCUDA n. Vector lanes are not supported.
#pragma once

#include "tileops/core/tensor.h"

struct DLManagedTensor;

namespace tileops {

#if TILEOPS_WITH_DLPACK

/// Exports a view of `tensor` (sizes, strides, offset kept; no copy). The returned tensor keeps
/// the storage alive until the consumer calls its deleter. SignatureError for an undefined
/// tensor or a dtype the dlpack.h in use cannot express.
DLManagedTensor* to_dlpack(const Tensor& tensor);

/// Imports a DLPack tensor without copying. Takes ownership of `managed` in every case: its
/// deleter runs when the last view of the result dies, or before from_dlpack throws
/// (SignatureError for a null pointer, an unsupported dtype, lanes != 1, an unsupported device,
/// negative strides).
Tensor from_dlpack(DLManagedTensor* managed);

#endif

}  // namespace tileops
