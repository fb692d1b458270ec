// Tensor metadata: the TensorImpl pool, factories without random values, queries.
#include "tileops/core/tensor.h"

#include <string>
#include <utility>

#include "core/tensor_internal.h"
#include "tileops/core/error.h"

namespace tileops {

namespace {

std::string istr(std::int64_t v) {
  return std::to_string(v);
}

// Product of sizes with an overflow check; SignatureError on a negative size or overflow.
std::int64_t checked_numel(std::span<const std::int64_t> sizes, const char* what) {
  std::int64_t numel = 1;
  bool overflow = false;
  for (const std::int64_t s : sizes) {
    if (s < 0) {
      throw SignatureError(std::string(what) + ": negative size " + istr(s) + " in " +
                           describe_sizes(Sizes(sizes.begin(), sizes.end())));
    }
    overflow = overflow || __builtin_mul_overflow(numel, s, &numel);
  }
  if (overflow) {
    throw SignatureError(std::string(what) + ": the element count of " +
                         describe_sizes(Sizes(sizes.begin(), sizes.end())) + " overflows int64");
  }
  return numel;
}

const char* element_type_of(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return "float";
    case DType::float16:
      return "tileops::Half";
    case DType::bfloat16:
      return "tileops::BFloat16";
    case DType::float8_e4m3fn:
      return "tileops::Float8E4M3FN";
    case DType::int8:
      return "int8_t";
    case DType::int16:
      return "int16_t";
    case DType::int32:
      return "int32_t";
    case DType::int64:
      return "int64_t";
    case DType::uint8:
      return "uint8_t";
    case DType::bool_:
      return "bool";
    case DType::float64:
      return "double";
    case DType::float8_e5m2:
      return "tileops::Float8E5M2";
  }
  return "?";
}

// A small per-thread pool of TensorImpl objects, so that creating a tensor or a view reuses the
// capacity of the sizes/strides vectors instead of allocating. Impls are returned to the pool of
// whichever thread drops the last reference. The pool is trivially destructible (usable during
// static destruction); a drainer frees its contents when the thread exits.
constexpr int kImplPoolSize = 64;

struct ImplPool {
  detail::TensorImpl* items[kImplPoolSize];
  int count;
  bool registered;  // this thread's drainer has been constructed
  bool closed;      // this thread is exiting: free instead of pooling
};

constinit thread_local ImplPool t_pool{};

struct ImplPoolDrainer {
  bool alive = true;
  ~ImplPoolDrainer() {
    t_pool.closed = true;
    while (t_pool.count > 0) delete t_pool.items[--t_pool.count];
  }
};

thread_local ImplPoolDrainer t_drainer;

}  // namespace

std::string describe_sizes(const Sizes& sizes) {
  std::string out = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(sizes[i]);
  }
  out += "]";
  return out;
}

namespace detail {

void throw_undefined_tensor(const char* what) {
  throw SignatureError(std::string(what) + ": the tensor is undefined (default-constructed)");
}

void throw_data_type_mismatch(DType dtype, const char* requested_type) {
  throw SignatureError(std::string("Tensor.data: cannot access a ") +
                       std::string(dtype_name(dtype)) + " tensor as " + requested_type +
                       " (its element type is " + element_type_of(dtype) + ")");
}

void recycle_impl(TensorImpl* impl) noexcept {
  impl->storage.reset();  // the memory goes now, not when the impl is reused
  ImplPool& pool = t_pool;
  if (pool.closed || pool.count == kImplPoolSize) {
    delete impl;
    return;
  }
  if (!pool.registered) {
    pool.registered = t_drainer.alive;  // constructs this thread's drainer
  }
  pool.items[pool.count++] = impl;
}

ImplPtr acquire_impl() {
  ImplPool& pool = t_pool;
  TensorImpl* impl = pool.count > 0 ? pool.items[--pool.count] : new TensorImpl;
  impl->refs.store(1, std::memory_order_relaxed);
  return ImplPtr(impl);
}

void finish_impl(TensorImpl& impl) noexcept {
  std::int64_t numel = 1;
  for (const std::int64_t s : impl.sizes) numel *= s;
  bool contiguous = true;
  if (numel != 0) {
    std::int64_t expected = 1;
    for (std::size_t i = impl.sizes.size(); i-- > 0;) {
      if (impl.sizes[i] == 1) continue;
      if (impl.strides[i] != expected) {
        contiguous = false;
        break;
      }
      expected *= impl.sizes[i];
    }
  }
  void* base = impl.storage ? impl.storage->data() : nullptr;
  impl.data = base == nullptr
                  ? nullptr
                  : static_cast<char*>(base) +
                        impl.offset * static_cast<std::int64_t>(element_size(impl.dtype));
  impl.numel = numel;
  impl.contiguous = contiguous;
}

void contiguous_strides(std::span<const std::int64_t> sizes, Sizes& out) {
  out.resize(sizes.size());
  std::int64_t running = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    out[i] = running;
    running *= sizes[i] > 1 ? sizes[i] : 1;
  }
}

std::string describe_tensor(const TensorImpl& impl) {
  return "Tensor" + describe_sizes(impl.sizes) + " " + std::string(dtype_name(impl.dtype)) + " " +
         impl.device.str();
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Factories

namespace {

Tensor make_empty(std::span<const std::int64_t> sizes, DType dtype, Device device) {
  const std::int64_t numel = checked_numel(sizes, "Tensor.empty");
  std::size_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(numel), element_size(dtype), &nbytes)) {
    throw SignatureError("Tensor.empty: " + describe_sizes(Sizes(sizes.begin(), sizes.end())) +
                         " " + std::string(dtype_name(dtype)) + " overflows the address space");
  }
  detail::ImplPtr impl = detail::acquire_impl();
  impl->storage = Storage::allocate(StorageRequest{nbytes, device, dtype, sizes});
  impl->sizes.assign(sizes.begin(), sizes.end());
  detail::contiguous_strides(sizes, impl->strides);
  impl->offset = 0;
  impl->dtype = dtype;
  impl->device = device;
  detail::finish_impl(*impl);
  return Tensor(std::move(impl));
}

}  // namespace

Tensor Tensor::empty(const Sizes& sizes, DType dtype, Device device) {
  return make_empty(sizes, dtype, device);
}

Tensor Tensor::empty(std::initializer_list<std::int64_t> sizes, DType dtype, Device device) {
  return make_empty(std::span<const std::int64_t>(sizes.begin(), sizes.size()), dtype, device);
}

Tensor Tensor::zeros(Sizes sizes, DType dtype, Device device) {
  Tensor t = empty(sizes, dtype, device);
  t.fill_(0.0);
  return t;
}

Tensor Tensor::full(Sizes sizes, double value, DType dtype, Device device) {
  // Check the value before allocating (a CUDA allocation would be wasted).
  unsigned char pattern[8];
  detail::encode_scalar(value, dtype, pattern, "Tensor.full");
  Tensor t = empty(sizes, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::arange(std::int64_t n, DType dtype, Device device) {
  if (n < 0) throw SignatureError("Tensor.arange: n must be >= 0, got " + istr(n));
  Tensor host = empty({n}, dtype, Device::cpu());
  auto* p = static_cast<unsigned char*>(host.data_ptr());
  const std::size_t es = element_size(dtype);
  for (std::int64_t i = 0; i < n; ++i) {
    detail::encode_scalar(static_cast<double>(i), dtype, p + static_cast<std::size_t>(i) * es,
                          "Tensor.arange");
  }
  return host.to(device);
}

Tensor Tensor::from_blob(void* data, Sizes sizes, DType dtype, Device device, Sizes strides,
                         std::function<void()> on_release) {
  std::int64_t extent = 0;  // elements spanned
  try {
    const std::int64_t numel = checked_numel(sizes, "Tensor.from_blob");
    if (strides.empty() && !sizes.empty()) {
      detail::contiguous_strides(sizes, strides);
    } else if (strides.size() != sizes.size()) {
      throw SignatureError("Tensor.from_blob: strides " + describe_sizes(strides) + " have " +
                           istr(static_cast<std::int64_t>(strides.size())) + " entries but sizes " +
                           describe_sizes(sizes) + " have " +
                           istr(static_cast<std::int64_t>(sizes.size())));
    }
    for (const std::int64_t s : strides) {
      if (s < 0) {
        throw SignatureError("Tensor.from_blob: negative stride " + istr(s) + " in " +
                             describe_sizes(strides) + " (negative strides are not supported)");
      }
    }
    if (numel > 0) {
      if (data == nullptr) {
        throw SignatureError("Tensor.from_blob: data is null for sizes " + describe_sizes(sizes) +
                             " (" + istr(numel) + " elements)");
      }
      extent = 1;
      for (std::size_t i = 0; i < sizes.size(); ++i) extent += (sizes[i] - 1) * strides[i];
    }
  } catch (...) {
    if (on_release) on_release();
    throw;
  }
  StoragePtr storage = Storage::borrow(data, static_cast<std::size_t>(extent) * element_size(dtype),
                                       device, std::move(on_release));
  detail::ImplPtr impl = detail::acquire_impl();
  impl->storage = std::move(storage);
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = 0;
  impl->dtype = dtype;
  impl->device = device;
  detail::finish_impl(*impl);
  return Tensor(std::move(impl));
}

// ---------------------------------------------------------------------------------------------
// Queries

std::int64_t Tensor::size(std::int64_t d) const {
  const auto& i = checked("Tensor.size");
  const auto ndim = static_cast<std::int64_t>(i.sizes.size());
  if (d < -ndim || d >= ndim) detail::throw_bad_dim(d, i, "Tensor.size");
  return i.sizes[static_cast<std::size_t>(d < 0 ? d + ndim : d)];
}

std::int64_t Tensor::stride(std::int64_t d) const {
  const auto& i = checked("Tensor.stride");
  const auto ndim = static_cast<std::int64_t>(i.sizes.size());
  if (d < -ndim || d >= ndim) detail::throw_bad_dim(d, i, "Tensor.stride");
  return i.strides[static_cast<std::size_t>(d < 0 ? d + ndim : d)];
}

std::string Tensor::str() const {
  if (!impl_) return "Tensor(undefined)";
  return detail::describe_tensor(*impl_);
}

}  // namespace tileops
