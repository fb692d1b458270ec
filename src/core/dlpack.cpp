// DLPack import and export.
#include "tileops/core/dlpack.h"

#if TILEOPS_WITH_DLPACK

#include <dlpack/dlpack.h>

#include <string>
#include <vector>

#include "tileops/core/error.h"

#if defined(DLPACK_MAJOR_VERSION) || (defined(DLPACK_VERSION) && DLPACK_VERSION >= 80)
#define TILEOPS_DLPACK_HAS_BOOL 1
#else
#define TILEOPS_DLPACK_HAS_BOOL 0
#endif
#if defined(DLPACK_MAJOR_VERSION) && \
    (DLPACK_MAJOR_VERSION > 1 || (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION >= 1))
#define TILEOPS_DLPACK_HAS_FLOAT8 1
#else
#define TILEOPS_DLPACK_HAS_FLOAT8 0
#endif

namespace tileops {

namespace {

struct ExportContext {
  Tensor tensor;  // keeps the storage alive
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  DLManagedTensor managed{};
};

void delete_export(DLManagedTensor* self) {
  delete static_cast<ExportContext*>(self->manager_ctx);
}

[[noreturn]] void unsupported_export(DType dtype) {
  throw SignatureError("to_dlpack: dtype " + std::string(dtype_name(dtype)) +
                       " has no code in the dlpack.h tileops was built with");
}

DLDataType to_dl_dtype(DType dtype) {
  const auto make = [](std::uint8_t code, int bits) {
    DLDataType t{};
    t.code = code;
    t.bits = static_cast<std::uint8_t>(bits);
    t.lanes = 1;
    return t;
  };
  switch (dtype) {
    case DType::float32:
      return make(kDLFloat, 32);
    case DType::float16:
      return make(kDLFloat, 16);
    case DType::bfloat16:
      return make(kDLBfloat, 16);
    case DType::float8_e4m3fn:
#if TILEOPS_DLPACK_HAS_FLOAT8
      return make(kDLFloat8_e4m3fn, 8);
#else
      unsupported_export(dtype);
#endif
    case DType::int8:
      return make(kDLInt, 8);
    case DType::int16:
      return make(kDLInt, 16);
    case DType::int32:
      return make(kDLInt, 32);
    case DType::int64:
      return make(kDLInt, 64);
    case DType::uint8:
      return make(kDLUInt, 8);
    case DType::bool_:
#if TILEOPS_DLPACK_HAS_BOOL
      return make(kDLBool, 8);
#else
      unsupported_export(dtype);
#endif
    case DType::float64:
      return make(kDLFloat, 64);
    case DType::float8_e5m2:
#if TILEOPS_DLPACK_HAS_FLOAT8
      return make(kDLFloat8_e5m2, 8);
#else
      unsupported_export(dtype);
#endif
  }
  unsupported_export(dtype);
}

std::string describe_dl_dtype(const DLDataType& t) {
  return "(code " + std::to_string(t.code) + ", bits " + std::to_string(t.bits) + ", lanes " +
         std::to_string(t.lanes) + ")";
}

DType from_dl_dtype(const DLDataType& t) {
  if (t.lanes != 1) {
    throw SignatureError("from_dlpack: vector dtypes are not supported, got dtype " +
                         describe_dl_dtype(t));
  }
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 64) return DType::float64;
      if (t.bits == 32) return DType::float32;
      if (t.bits == 16) return DType::float16;
      break;
    case kDLBfloat:
      if (t.bits == 16) return DType::bfloat16;
      break;
    case kDLInt:
      if (t.bits == 8) return DType::int8;
      if (t.bits == 16) return DType::int16;
      if (t.bits == 32) return DType::int32;
      if (t.bits == 64) return DType::int64;
      break;
    case kDLUInt:
      if (t.bits == 8) return DType::uint8;
      break;
#if TILEOPS_DLPACK_HAS_BOOL
    case kDLBool:
      if (t.bits == 8) return DType::bool_;
      break;
#endif
#if TILEOPS_DLPACK_HAS_FLOAT8
    case kDLFloat8_e4m3fn:
      if (t.bits == 8) return DType::float8_e4m3fn;
      break;
    case kDLFloat8_e5m2:
      if (t.bits == 8) return DType::float8_e5m2;
      break;
#endif
    default:
      break;
  }
  throw SignatureError("from_dlpack: unsupported dtype " + describe_dl_dtype(t) +
                       " (tileops has float64, float32, float16, bfloat16, int8/16/32/64, uint8" +
                       (TILEOPS_DLPACK_HAS_BOOL ? ", bool" : "") +
                       (TILEOPS_DLPACK_HAS_FLOAT8 ? ", float8_e4m3fn, float8_e5m2" : "") + ")");
}

Device from_dl_device(const DLDevice& d) {
  switch (d.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
      return Device::cpu();
    case kDLCUDA:
      if (d.device_id >= 0) return Device::cuda(d.device_id);
      break;
    default:
      break;
  }
  throw SignatureError("from_dlpack: unsupported device (type " +
                       std::to_string(static_cast<int>(d.device_type)) + ", id " +
                       std::to_string(d.device_id) + "); tileops has kDLCPU, kDLCUDAHost, kDLCUDA");
}

}  // namespace

DLManagedTensor* to_dlpack(const Tensor& tensor) {
  if (!tensor.defined()) throw SignatureError("to_dlpack: the tensor is undefined");
  const DLDataType dtype = to_dl_dtype(tensor.dtype());
  auto* ctx = new ExportContext;
  ctx->tensor = tensor;
  ctx->shape = tensor.sizes();
  ctx->strides = tensor.strides();
  DLTensor& t = ctx->managed.dl_tensor;
  t.data = tensor.data_ptr();
  t.device.device_type = tensor.device().is_cpu() ? kDLCPU : kDLCUDA;
  t.device.device_id = tensor.device().is_cpu() ? 0 : tensor.device().index;
  t.ndim = static_cast<int>(tensor.dim());
  t.dtype = dtype;
  t.shape = ctx->shape.data();
  t.strides = ctx->strides.data();
  t.byte_offset = 0;
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = &delete_export;
  return &ctx->managed;
}

Tensor from_dlpack(DLManagedTensor* managed) {
  if (managed == nullptr) throw SignatureError("from_dlpack: the DLManagedTensor is null");
  auto release = [managed] {
    if (managed->deleter != nullptr) managed->deleter(managed);
  };
  DType dtype{};
  Device device;
  Sizes sizes;
  Sizes strides;
  void* data = nullptr;
  try {
    const DLTensor& t = managed->dl_tensor;
    dtype = from_dl_dtype(t.dtype);
    device = from_dl_device(t.device);
    if (t.ndim < 0) {
      throw SignatureError("from_dlpack: negative ndim " + std::to_string(t.ndim));
    }
    if (t.ndim > 0 && t.shape == nullptr) throw SignatureError("from_dlpack: shape is null");
    sizes.assign(t.shape, t.shape + t.ndim);
    if (t.strides != nullptr && t.ndim > 0) {
      strides.assign(t.strides, t.strides + t.ndim);
      for (std::size_t d = 0; d < strides.size(); ++d) {
        if (sizes[d] <= 1 && strides[d] < 0) strides[d] = 1;  // meaningless stride
      }
    }
    data = t.data == nullptr ? nullptr : static_cast<char*>(t.data) + t.byte_offset;
  } catch (...) {
    release();
    throw;
  }
  return Tensor::from_blob(data, std::move(sizes), dtype, device, std::move(strides),
                           std::move(release));
}

}  // namespace tileops

#endif  // TILEOPS_WITH_DLPACK
