// Data movement: the strided, converting copy engine (CPU), copies across devices, fill,
// clone/contiguous/to.
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "core/cuda_copy.h"
#include "core/element_convert.h"
#include "core/tensor_internal.h"
#include "tileops/core/cuda.h"
#include "tileops/core/error.h"
#include "tileops/core/tensor.h"

#if TILEOPS_WITH_CUDA
#include "core/cuda_internal.h"
#endif

namespace tileops {

namespace detail {

StridedLoop coalesce(const Sizes& sizes, const Sizes& dst_strides, const Sizes& src_strides) {
  StridedLoop loop;
  loop.sizes.reserve(sizes.size());
  loop.dst_strides.reserve(sizes.size());
  loop.src_strides.reserve(sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::int64_t n = sizes[i];
    if (n == 1) continue;
    if (!loop.sizes.empty() && loop.dst_strides.back() == dst_strides[i] * n &&
        loop.src_strides.back() == src_strides[i] * n) {
      loop.sizes.back() *= n;
      loop.dst_strides.back() = dst_strides[i];
      loop.src_strides.back() = src_strides[i];
      continue;
    }
    loop.sizes.push_back(n);
    loop.dst_strides.push_back(dst_strides[i]);
    loop.src_strides.push_back(src_strides[i]);
  }
  return loop;
}

namespace {

// Runs the loop nest: dst[i] = convert(src[i]) for every index (a src stride 0 broadcasts).
template <class D, class S>
void copy_loop(void* dst_data, const void* src_data, const StridedLoop& loop) {
  auto* dst = static_cast<D*>(dst_data);
  const auto* src = static_cast<const S*>(src_data);
  const std::size_t nd = loop.sizes.size();
  if (nd == 0) {
    *dst = convert_element<D>(*src);
    return;
  }
  const std::int64_t n = loop.sizes.back();
  const std::int64_t ds = loop.dst_strides.back();
  const std::int64_t ss = loop.src_strides.back();
  std::vector<std::int64_t> counter(nd - 1, 0);
  std::int64_t dst_offset = 0;
  std::int64_t src_offset = 0;
  for (;;) {
    D* d = dst + dst_offset;
    const S* s = src + src_offset;
    if (ds == 1 && ss == 1) {
      for (std::int64_t k = 0; k < n; ++k) d[k] = convert_element<D>(s[k]);
    } else if (ds == 1 && ss == 0) {
      const D v = convert_element<D>(*s);
      for (std::int64_t k = 0; k < n; ++k) d[k] = v;
    } else {
      for (std::int64_t k = 0; k < n; ++k) d[k * ds] = convert_element<D>(s[k * ss]);
    }
    std::size_t i = nd - 1;
    for (; i-- > 0;) {
      dst_offset += loop.dst_strides[i];
      src_offset += loop.src_strides[i];
      if (++counter[i] < loop.sizes[i]) break;
      dst_offset -= loop.dst_strides[i] * loop.sizes[i];
      src_offset -= loop.src_strides[i] * loop.sizes[i];
      counter[i] = 0;
    }
    if (i == static_cast<std::size_t>(-1)) return;
  }
}

[[noreturn]] void throw_conversion(DType dst, DType src, const char* what) {
  throw SignatureError(std::string(what) + ": cannot convert " + std::string(dtype_name(src)) +
                       " to " + std::string(dtype_name(dst)) +
                       " (allowed: float -> float, int/bool -> float, int -> int, same dtype)");
}

#if TILEOPS_WITH_CUDA

CudaCopyPlan make_plan(const StridedLoop& loop, const TensorImpl& dst, std::int64_t numel,
                       const char* what) {
  if (loop.sizes.size() > static_cast<std::size_t>(kCudaCopyMaxDims)) {
    throw SignatureError(std::string(what) + ": a CUDA copy handles at most " +
                         std::to_string(kCudaCopyMaxDims) +
                         " non-mergeable dimensions; destination " + describe_tensor(dst) +
                         " with strides " + describe_sizes(dst.strides));
  }
  CudaCopyPlan plan;
  plan.ndim = static_cast<int>(loop.sizes.size());
  plan.numel = numel;
  for (std::size_t i = 0; i < loop.sizes.size(); ++i) {
    plan.sizes[i] = loop.sizes[i];
    plan.dst_strides[i] = loop.dst_strides[i];
    plan.src_strides[i] = loop.src_strides[i];
  }
  plan.dst = dst.data;
  plan.dst_dtype = dst.dtype;
  return plan;
}

// dst and src on the same CUDA device.
void cuda_copy_same_device(const TensorImpl& dst, const TensorImpl& src) {
  const int device = dst.device.index;
  cudaStream_t stream = stream_of(device);
  CudaDeviceGuard guard(device);
  if (dst.dtype == src.dtype && dst.contiguous && src.contiguous) {
    check_cuda(cudaMemcpyAsync(dst.data, src.data,
                               static_cast<std::size_t>(dst.numel) * element_size(dst.dtype),
                               cudaMemcpyDeviceToDevice, stream),
               "Tensor.copy_: cudaMemcpyAsync");
    return;
  }
  CudaCopyPlan plan =
      make_plan(coalesce(dst.sizes, dst.strides, src.strides), dst, dst.numel, "Tensor.copy_");
  plan.src = src.data;
  plan.src_dtype = src.dtype;
  launch_cuda_copy(plan, stream);
}

void cuda_fill(const TensorImpl& dst, const unsigned char* pattern) {
  const int device = dst.device.index;
  cudaStream_t stream = stream_of(device);
  CudaDeviceGuard guard(device);
  const std::size_t es = element_size(dst.dtype);
  bool bytes_equal = true;
  for (std::size_t k = 1; k < es; ++k) bytes_equal = bytes_equal && pattern[k] == pattern[0];
  if (dst.contiguous && bytes_equal) {
    check_cuda(
        cudaMemsetAsync(dst.data, pattern[0], static_cast<std::size_t>(dst.numel) * es, stream),
        "Tensor.fill_: cudaMemsetAsync");
    return;
  }
  const Sizes zeros(dst.sizes.size(), 0);
  CudaCopyPlan plan =
      make_plan(coalesce(dst.sizes, dst.strides, zeros), dst, dst.numel, "Tensor.fill_");
  std::memcpy(&plan.fill_bits, pattern, es);
  plan.src_dtype = dst.dtype;
  launch_cuda_copy(plan, stream);
}

// Copies between different devices (at least one CUDA); blocking.
void copy_across_devices(const Tensor& dst, const Tensor& src) {
  const auto& d = dst.impl();
  if (src.device().is_cpu()) {  // host -> device
    Tensor s = src.dtype() != dst.dtype() ? src.to(dst.dtype()) : src.contiguous();
    Tensor staged = d.contiguous ? dst : Tensor::empty(dst.sizes(), dst.dtype(), dst.device());
    const int device = d.device.index;
    cudaStream_t stream = stream_of(device);
    CudaDeviceGuard guard(device);
    check_cuda(cudaMemcpyAsync(staged.data_ptr(), s.data_ptr(), s.nbytes(), cudaMemcpyHostToDevice,
                               stream),
               "Tensor.copy_: cudaMemcpyAsync (host to device)");
    if (!d.contiguous) cuda_copy_same_device(d, staged.impl());
    check_cuda(cudaStreamSynchronize(stream), "Tensor.copy_: cudaStreamSynchronize");
    return;
  }
  Tensor s = src.contiguous();
  const int src_device = s.device().index;
  if (dst.device().is_cpu()) {  // device -> host
    const bool direct = d.contiguous && d.dtype == s.dtype();
    Tensor host = direct ? dst : Tensor::empty(s.sizes(), s.dtype(), Device::cpu());
    cudaStream_t stream = stream_of(src_device);
    {
      CudaDeviceGuard guard(src_device);
      check_cuda(cudaMemcpyAsync(host.data_ptr(), s.data_ptr(), s.nbytes(), cudaMemcpyDeviceToHost,
                                 stream),
                 "Tensor.copy_: cudaMemcpyAsync (device to host)");
      check_cuda(cudaStreamSynchronize(stream), "Tensor.copy_: cudaStreamSynchronize");
    }
    if (!direct) cpu_copy(d, host.impl());
    return;
  }
  // device -> other device
  const bool direct = d.contiguous && d.dtype == s.dtype();
  Tensor staged = direct ? dst : Tensor::empty(s.sizes(), s.dtype(), dst.device());
  {
    CudaDeviceGuard guard(src_device);
    check_cuda(cudaStreamSynchronize(stream_of(src_device)),
               "Tensor.copy_: cudaStreamSynchronize (source device)");
  }
  const int dst_device = d.device.index;
  cudaStream_t stream = stream_of(dst_device);
  CudaDeviceGuard guard(dst_device);
  check_cuda(cudaMemcpyPeerAsync(staged.data_ptr(), dst_device, s.data_ptr(), src_device,
                                 s.nbytes(), stream),
             "Tensor.copy_: cudaMemcpyPeerAsync");
  if (!direct) cuda_copy_same_device(d, staged.impl());
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace

bool copy_conversion_allowed(DType dst, DType src) noexcept {
  return dst == src || is_floating(dst) ||
         (dtype_category(dst) == DTypeCategory::int_ && dtype_category(src) == DTypeCategory::int_);
}

void cpu_copy(const TensorImpl& dst, const TensorImpl& src) {
  if (dst.numel == 0) return;
  if (dst.dtype == src.dtype) {
    const std::size_t es = element_size(dst.dtype);
    if (dst.contiguous && src.contiguous) {
      std::memcpy(dst.data, src.data, static_cast<std::size_t>(dst.numel) * es);
      return;
    }
    const StridedLoop loop = coalesce(dst.sizes, dst.strides, src.strides);
    visit_element_size(es, [&](auto tag) {
      using T = typename decltype(tag)::type;
      copy_loop<T, T>(dst.data, src.data, loop);
    });
    return;
  }
  const StridedLoop loop = coalesce(dst.sizes, dst.strides, src.strides);
  visit_dtype(dst.dtype, [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    visit_dtype(src.dtype, [&](auto stag) {
      using S = typename decltype(stag)::type;
      if constexpr (kConvertible<D, S>) {
        copy_loop<D, S>(dst.data, src.data, loop);
      } else {
        throw_conversion(dst.dtype, src.dtype, "Tensor.copy_");
      }
    });
  });
}

void cpu_fill(const TensorImpl& dst, const void* pattern) {
  if (dst.numel == 0) return;
  const std::size_t es = element_size(dst.dtype);
  const auto* bytes = static_cast<const unsigned char*>(pattern);
  bool bytes_equal = true;
  for (std::size_t k = 1; k < es; ++k) bytes_equal = bytes_equal && bytes[k] == bytes[0];
  if (dst.contiguous && bytes_equal) {
    std::memset(dst.data, bytes[0], static_cast<std::size_t>(dst.numel) * es);
    return;
  }
  const Sizes zeros(dst.sizes.size(), 0);
  const StridedLoop loop = coalesce(dst.sizes, dst.strides, zeros);
  visit_element_size(es, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T value;
    std::memcpy(&value, pattern, sizeof(T));
    copy_loop<T, T>(dst.data, &value, loop);
  });
}

void encode_scalar(double value, DType dtype, void* out, const char* what) {
  const auto store = [out](auto v) { std::memcpy(out, &v, sizeof(v)); };
  const auto check_int = [&](double lo, double hi_exclusive) {
    if (!(std::isfinite(value) && std::trunc(value) == value && value >= lo &&
          value < hi_exclusive)) {
      throw SignatureError(std::string(what) + ": value " + std::to_string(value) +
                           " is not representable in " + std::string(dtype_name(dtype)) +
                           " (an integer in [" + std::to_string(lo) + ", " +
                           std::to_string(hi_exclusive) + ") is required)");
    }
  };
  switch (dtype) {
    case DType::float64:
      return store(value);
    case DType::float32:
      return store(static_cast<float>(value));
    case DType::float16:
      return store(float_to_half(static_cast<float>(value)));
    case DType::bfloat16:
      return store(float_to_bfloat16(static_cast<float>(value)));
    case DType::float8_e4m3fn:
      return store(float_to_fp8e4m3(static_cast<float>(value)));
    case DType::float8_e5m2:
      return store(float_to_fp8e5m2(static_cast<float>(value)));
    case DType::int8:
      check_int(-128.0, 128.0);
      return store(static_cast<std::int8_t>(value));
    case DType::int16:
      check_int(-32768.0, 32768.0);
      return store(static_cast<std::int16_t>(value));
    case DType::int32:
      check_int(-2147483648.0, 2147483648.0);
      return store(static_cast<std::int32_t>(value));
    case DType::int64:
      check_int(-0x1p63, 0x1p63);
      return store(static_cast<std::int64_t>(value));
    case DType::uint8:
      check_int(0.0, 256.0);
      return store(static_cast<std::uint8_t>(value));
    case DType::bool_:
      return store(static_cast<std::uint8_t>(value != 0.0 ? 1 : 0));
  }
}

double load_scalar(const void* p, DType dtype) noexcept {
  double result = 0.0;
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v;
    std::memcpy(&v, p, sizeof(T));
    if constexpr (kIsFloatStorage<T>) {
      result = to_f64(v);
    } else if constexpr (std::is_same_v<T, BoolByte>) {
      result = v.value != 0 ? 1.0 : 0.0;
    } else {
      result = static_cast<double>(v);
    }
  });
  return result;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Tensor members

const Tensor& Tensor::copy_(const Tensor& src) const {
  const auto& d = checked("Tensor.copy_");
  if (!src.defined()) throw SignatureError("Tensor.copy_: the source tensor is undefined");
  const auto& s = *src.impl_;
  if (d.sizes != s.sizes) {
    throw SignatureError("Tensor.copy_: sizes differ: destination " + detail::describe_tensor(d) +
                         ", source " + detail::describe_tensor(s) + " (no broadcasting)");
  }
  if (!detail::copy_conversion_allowed(d.dtype, s.dtype)) {
    detail::throw_conversion(d.dtype, s.dtype, "Tensor.copy_");
  }
  if (d.numel == 0) return *this;
  if (d.storage == s.storage) {
    if (d.offset == s.offset && d.strides == s.strides && d.dtype == s.dtype) return *this;
    return copy_(src.clone());  // the regions may overlap: copy the source first
  }
  if (d.device.is_cpu() && s.device.is_cpu()) {
    detail::cpu_copy(d, s);
    return *this;
  }
#if TILEOPS_WITH_CUDA
  if (d.device == s.device) {
    detail::cuda_copy_same_device(d, s);
  } else {
    detail::copy_across_devices(*this, src);
  }
  return *this;
#else
  throw UsageError("Tensor.copy_: cannot copy from " + s.device.str() + " to " + d.device.str() +
                   ": tileops was built without CUDA");
#endif
}

Tensor& Tensor::copy_(const Tensor& src) {
  static_cast<const Tensor&>(*this).copy_(src);
  return *this;
}

const Tensor& Tensor::fill_(double value) const {
  const auto& i = checked("Tensor.fill_");
  unsigned char pattern[8] = {};
  detail::encode_scalar(value, i.dtype, pattern, "Tensor.fill_");
  if (i.numel == 0) return *this;
  if (i.device.is_cpu()) {
    detail::cpu_fill(i, pattern);
    return *this;
  }
#if TILEOPS_WITH_CUDA
  detail::cuda_fill(i, pattern);
  return *this;
#else
  throw UsageError("Tensor.fill_: cannot fill a tensor on " + i.device.str() +
                   ": tileops was built without CUDA");
#endif
}

Tensor& Tensor::fill_(double value) {
  static_cast<const Tensor&>(*this).fill_(value);
  return *this;
}

Tensor Tensor::clone() const {
  const auto& i = checked("Tensor.clone");
  Tensor out = empty(i.sizes, i.dtype, i.device);
  out.copy_(*this);
  return out;
}

Tensor Tensor::contiguous() const {
  if (checked("Tensor.contiguous").contiguous) return *this;
  return clone();
}

Tensor Tensor::to(Device device) const {
  const auto& i = checked("Tensor.to");
  if (i.device == device) return *this;
  Tensor out = empty(i.sizes, i.dtype, device);
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  const auto& i = checked("Tensor.to");
  if (i.dtype == dtype) return *this;
  if (!detail::copy_conversion_allowed(dtype, i.dtype)) {
    detail::throw_conversion(dtype, i.dtype, "Tensor.to");
  }
  Tensor out = empty(i.sizes, dtype, i.device);
  out.copy_(*this);
  return out;
}

}  // namespace tileops
