// The tileops tensor: shared storage + sizes, strides (in elements), offset, dtype and device.
//
// A Tensor is a cheap handle (one intrusive pointer to immutable metadata; copying it is one
// atomic increment). Metadata never changes after creation: views make new handles over the
// same Storage; in-place operations (copy_, fill_, set_at) change elements only. A
// default-constructed Tensor is "undefined"; every query on it throws SignatureError.
//
// Errors: bad use of the API (wrong sizes, dims, indexes, dtypes) throws SignatureError with a
// message naming the operation and the values received; CUDA runtime failures and CUDA use in a
// build or on a machine without CUDA throw UsageError.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tileops/core/device.h"
#include "tileops/core/dtype.h"
#include "tileops/core/half.h"

namespace tileops {

/// Sizes and strides, in elements.
using Sizes = std::vector<std::int64_t>;

/// "[2, 3]"; "[]" for a 0-d tensor.
std::string describe_sizes(const Sizes& sizes);

// ---------------------------------------------------------------------------------------------
// Storage

class Storage;

/// What Storage::allocate is asked for: `nbytes` on `device`. A tensor's storage
/// (Tensor::empty) also names its element type and contiguous sizes, so that a storage source
/// (storage_source.h) may allocate a framework tensor of that type and shape and hand it back
/// whole; raw allocations leave them empty.
struct StorageRequest {
  std::size_t nbytes = 0;
  Device device;
  std::optional<DType> dtype;
  std::span<const std::int64_t> sizes;
};

/// A shared reference to a Storage (intrusive reference count: copying is one atomic increment).
class StoragePtr {
 public:
  StoragePtr() noexcept = default;
  StoragePtr(const StoragePtr& other) noexcept;
  StoragePtr(StoragePtr&& other) noexcept : p_(other.p_) { other.p_ = nullptr; }
  StoragePtr& operator=(const StoragePtr& other) noexcept {
    StoragePtr(other).swap(*this);
    return *this;
  }
  StoragePtr& operator=(StoragePtr&& other) noexcept {
    StoragePtr(std::move(other)).swap(*this);
    return *this;
  }
  ~StoragePtr();

  Storage* get() const noexcept { return p_; }
  Storage* operator->() const noexcept { return p_; }
  Storage& operator*() const noexcept { return *p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  void reset() noexcept { StoragePtr().swap(*this); }
  void swap(StoragePtr& other) noexcept {
    Storage* t = p_;
    p_ = other.p_;
    other.p_ = t;
  }
  friend bool operator==(const StoragePtr& a, const StoragePtr& b) noexcept { return a.p_ == b.p_; }

 private:
  friend class Storage;
  explicit StoragePtr(Storage* adopt) noexcept : p_(adopt) {}
  Storage* p_ = nullptr;
};

/// A block of memory shared by a tensor and its views. It either owns the memory (allocated by
/// `allocate`, freed when the last reference dies) or borrows it (`borrow`: the owner is told
/// through `on_release`, exactly once, when the last reference dies).
class Storage {
 public:
  /// Owned memory for `nbytes` bytes on `device`. CPU memory is 64-byte aligned and shares one
  /// heap block with the Storage object itself (one allocation). CUDA memory comes from
  /// tileops' pool of the device (cudaMallocFromPoolAsync; see cuda_memory_stats in
  /// tileops/core/cuda.h) on cuda_current_stream(device.index) (with that device made current
  /// for the call) and is freed by cudaFreeAsync on that same stream. nbytes == 0 allocates no
  /// memory: data() is nullptr. The contents are uninitialised.
  static StoragePtr allocate(std::size_t nbytes, Device device) {
    return allocate(StorageRequest{nbytes, device, std::nullopt, {}});
  }
  /// As above, for `request.nbytes` on `request.device`; a storage source also sees the rest.
  static StoragePtr allocate(const StorageRequest& request);

  /// Memory the caller owns. `on_release` (may be empty) runs exactly once, when the Storage is
  /// destroyed (also when `borrow` itself fails); it must not throw (an exception escaping it is
  /// swallowed).
  static StoragePtr borrow(void* data, std::size_t nbytes, Device device,
                           std::function<void()> on_release);

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const noexcept { return data_; }
  std::size_t nbytes() const noexcept { return nbytes_; }
  Device device() const noexcept { return device_; }
  bool owns_memory() const noexcept { return kind_ != Kind::borrowed; }
  /// How many StoragePtr refer to this storage (a snapshot; for tests and debugging).
  long use_count() const noexcept { return static_cast<long>(refs_.load()); }

 private:
  friend class StoragePtr;
  enum class Kind : std::uint8_t { borrowed, cpu, cuda };

  Storage(void* data, std::size_t nbytes, Device device, Kind kind, void* stream,
          std::function<void()> on_release) noexcept;
  ~Storage();
  static void destroy(Storage* storage) noexcept;

  mutable std::atomic<std::int64_t> refs_{1};
  void* data_;
  std::size_t nbytes_;
  Device device_;
  Kind kind_;
  void* stream_;  // CUDA: the stream the memory was allocated on (freed on it too)
  std::function<void()> on_release_;
};

inline StoragePtr::StoragePtr(const StoragePtr& other) noexcept : p_(other.p_) {
  if (p_ != nullptr) p_->refs_.fetch_add(1, std::memory_order_relaxed);
}

inline StoragePtr::~StoragePtr() {
  if (p_ != nullptr && p_->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Storage::destroy(p_);
  }
}

// ---------------------------------------------------------------------------------------------
// C++ element types of each dtype (for Tensor::data<T>()).

template <class T>
struct DTypeOf;  // no definition: T is not an element type
template <>
struct DTypeOf<double> : std::integral_constant<DType, DType::float64> {};
template <>
struct DTypeOf<float> : std::integral_constant<DType, DType::float32> {};
template <>
struct DTypeOf<Half> : std::integral_constant<DType, DType::float16> {};
template <>
struct DTypeOf<BFloat16> : std::integral_constant<DType, DType::bfloat16> {};
template <>
struct DTypeOf<Float8E4M3FN> : std::integral_constant<DType, DType::float8_e4m3fn> {};
template <>
struct DTypeOf<Float8E5M2> : std::integral_constant<DType, DType::float8_e5m2> {};
template <>
struct DTypeOf<std::int8_t> : std::integral_constant<DType, DType::int8> {};
template <>
struct DTypeOf<std::int16_t> : std::integral_constant<DType, DType::int16> {};
template <>
struct DTypeOf<std::int32_t> : std::integral_constant<DType, DType::int32> {};
template <>
struct DTypeOf<std::int64_t> : std::integral_constant<DType, DType::int64> {};
template <>
struct DTypeOf<std::uint8_t> : std::integral_constant<DType, DType::uint8> {};
template <>
struct DTypeOf<bool> : std::integral_constant<DType, DType::bool_> {};

/// The dtype whose elements are the C++ type T (float -> float32, Half -> float16, ...).
template <class T>
inline constexpr DType dtype_of_v = DTypeOf<std::remove_cv_t<T>>::value;

namespace detail {

/// The metadata of a tensor. Immutable once published in a Tensor; intrusively reference
/// counted; recycled through a small per-thread pool (so views reuse the vectors' capacity).
struct TensorImpl {
  StoragePtr storage;
  Sizes sizes;
  Sizes strides;
  std::int64_t offset = 0;  // elements from storage->data()
  std::int64_t numel = 1;
  void* data = nullptr;  // storage->data() + offset elements (nullptr when storage has none)
  DType dtype = DType::float32;
  Device device;
  bool contiguous = true;
  mutable std::atomic<std::int32_t> refs{1};
};

/// Called when the last reference to impl dies: releases its storage and pools or frees it.
void recycle_impl(TensorImpl* impl) noexcept;

/// A shared reference to a TensorImpl (intrusive: copying is one atomic increment).
class ImplPtr {
 public:
  ImplPtr() noexcept = default;
  /// Adopts `impl` (its count already includes this reference).
  explicit ImplPtr(TensorImpl* impl) noexcept : p_(impl) {}
  ImplPtr(const ImplPtr& other) noexcept : p_(other.p_) {
    if (p_ != nullptr) p_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  ImplPtr(ImplPtr&& other) noexcept : p_(other.p_) { other.p_ = nullptr; }
  ImplPtr& operator=(const ImplPtr& other) noexcept {
    ImplPtr(other).swap(*this);
    return *this;
  }
  ImplPtr& operator=(ImplPtr&& other) noexcept {
    ImplPtr(std::move(other)).swap(*this);
    return *this;
  }
  ~ImplPtr() {
    if (p_ != nullptr && p_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      recycle_impl(p_);
    }
  }
  TensorImpl* get() const noexcept { return p_; }
  TensorImpl* operator->() const noexcept { return p_; }
  TensorImpl& operator*() const noexcept { return *p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  void swap(ImplPtr& other) noexcept {
    TensorImpl* t = p_;
    p_ = other.p_;
    other.p_ = t;
  }
  friend bool operator==(const ImplPtr& a, const ImplPtr& b) noexcept { return a.p_ == b.p_; }

 private:
  TensorImpl* p_ = nullptr;
};

[[noreturn]] void throw_undefined_tensor(const char* what);
[[noreturn]] void throw_data_type_mismatch(DType dtype, const char* requested_type);

/// Whether `data<T>()` may view a tensor of `dtype`: T's own dtype; also the raw-bits types
/// uint16_t for float16/bfloat16 and uint8_t for uint8/float8/bool, and std::byte for any.
template <class T>
constexpr bool data_type_matches(DType dtype) noexcept {
  if constexpr (std::is_same_v<T, std::byte>) {
    return true;
  } else if constexpr (std::is_same_v<T, std::uint16_t>) {
    return dtype == DType::float16 || dtype == DType::bfloat16;
  } else if constexpr (std::is_same_v<T, std::uint8_t>) {
    return dtype == DType::uint8 || dtype == DType::float8_e4m3fn || dtype == DType::float8_e5m2 ||
           dtype == DType::bool_;
  } else {
    return dtype == dtype_of_v<T>;
  }
}

/// The C++ spelling of an element type, for error messages.
template <class T>
constexpr const char* element_type_name() noexcept {
  if constexpr (std::is_same_v<T, double>)
    return "double";
  else if constexpr (std::is_same_v<T, float>)
    return "float";
  else if constexpr (std::is_same_v<T, Half>)
    return "tileops::Half";
  else if constexpr (std::is_same_v<T, BFloat16>)
    return "tileops::BFloat16";
  else if constexpr (std::is_same_v<T, Float8E4M3FN>)
    return "tileops::Float8E4M3FN";
  else if constexpr (std::is_same_v<T, Float8E5M2>)
    return "tileops::Float8E5M2";
  else if constexpr (std::is_same_v<T, std::int8_t>)
    return "int8_t";
  else if constexpr (std::is_same_v<T, std::int16_t>)
    return "int16_t";
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return "int32_t";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "int64_t";
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return "uint8_t";
  else if constexpr (std::is_same_v<T, std::uint16_t>)
    return "uint16_t";
  else if constexpr (std::is_same_v<T, bool>)
    return "bool";
  else
    return "an unsupported type";
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Tensor

class Tensor {
 public:
  /// An undefined tensor.
  Tensor() noexcept = default;

  // -- factories ------------------------------------------------------------------------------

  /// Uninitialised contiguous tensor. Sizes must be >= 0. (The overloads avoid building a
  /// vector: empty({rows, cols}, ...) allocates only the storage.)
  static Tensor empty(const Sizes& sizes, DType dtype, Device device = Device::cpu());
  static Tensor empty(std::initializer_list<std::int64_t> sizes, DType dtype,
                      Device device = Device::cpu());
  static Tensor zeros(Sizes sizes, DType dtype, Device device = Device::cpu());
  /// Every element set to `value` (see fill_ for how values convert).
  static Tensor full(Sizes sizes, double value, DType dtype, Device device = Device::cpu());
  /// Uniform values, deterministic for a seed on every platform (generated on the CPU, then
  /// copied). Float dtypes: uniform in [lo, hi), rounded to the dtype. Integer dtypes: uniform
  /// integers in [lo, hi) (lo and hi must be integers). bool: SignatureError.
  static Tensor rand(Sizes sizes, DType dtype, std::uint64_t seed, Device device = Device::cpu(),
                     double lo = 0.0, double hi = 1.0);
  /// Normal values (float dtypes only), deterministic for a seed on every platform.
  static Tensor randn(Sizes sizes, DType dtype, std::uint64_t seed, Device device = Device::cpu(),
                      double mean = 0.0, double std = 1.0);
  /// [0, 1, ..., n-1] as a 1-d tensor.
  static Tensor arange(std::int64_t n, DType dtype, Device device = Device::cpu());
  /// A tensor over memory the caller owns (nothing is copied). `strides` empty means
  /// contiguous; strides must be >= 0. `on_release` runs exactly once, when the last tensor
  /// viewing the memory dies (also when from_blob throws).
  static Tensor from_blob(void* data, Sizes sizes, DType dtype, Device device = Device::cpu(),
                          Sizes strides = {}, std::function<void()> on_release = {});

  // -- queries --------------------------------------------------------------------------------

  bool defined() const noexcept { return static_cast<bool>(impl_); }
  const Sizes& sizes() const { return checked("Tensor.sizes").sizes; }
  const Sizes& strides() const { return checked("Tensor.strides").strides; }
  std::int64_t offset() const { return checked("Tensor.offset").offset; }
  std::int64_t dim() const { return static_cast<std::int64_t>(checked("Tensor.dim").sizes.size()); }
  /// Size of dimension d (negative d counts from the end).
  std::int64_t size(std::int64_t d) const;
  std::int64_t stride(std::int64_t d) const;
  std::int64_t numel() const { return checked("Tensor.numel").numel; }
  DType dtype() const { return checked("Tensor.dtype").dtype; }
  Device device() const { return checked("Tensor.device").device; }
  /// numel() * element size.
  std::size_t nbytes() const {
    const auto& i = checked("Tensor.nbytes");
    return static_cast<std::size_t>(i.numel) * element_size(i.dtype);
  }
  /// Row-major dense; size-1 dimensions' strides are ignored; empty tensors are contiguous.
  bool is_contiguous() const { return checked("Tensor.is_contiguous").contiguous; }
  /// The address of the first element (at the offset); nullptr for tensors without memory.
  void* data_ptr() const { return checked("Tensor.data_ptr").data; }
  /// Typed data_ptr(); SignatureError when T is not the dtype's element type (see DTypeOf;
  /// uint16_t is also accepted for float16/bfloat16, uint8_t for the float8 dtypes and bool).
  template <class T>
  T* data() const {
    const auto& i = checked("Tensor.data");
    if constexpr (!std::is_void_v<std::remove_cv_t<T>>) {
      if (!detail::data_type_matches<std::remove_cv_t<T>>(i.dtype)) [[unlikely]] {
        detail::throw_data_type_mismatch(i.dtype, detail::element_type_name<std::remove_cv_t<T>>());
      }
    }
    return static_cast<T*>(i.data);
  }
  const Storage* storage() const { return checked("Tensor.storage").storage.get(); }
  bool shares_storage_with(const Tensor& other) const noexcept {
    return impl_ && other.impl_ && impl_->storage == other.impl_->storage;
  }
  /// "Tensor[2, 3] bfloat16 cpu"; "Tensor(undefined)".
  std::string str() const;

  // -- views (no copy; the result shares this tensor's storage) -------------------------------

  /// Same elements with new sizes (one -1 is inferred). SignatureError when the element count
  /// differs or the strides cannot express the new sizes (use reshape).
  Tensor view(const Sizes& sizes) const;
  Tensor view(std::initializer_list<std::int64_t> sizes) const;
  /// view() when possible, else a contiguous copy viewed.
  Tensor reshape(const Sizes& sizes) const;
  Tensor reshape(std::initializer_list<std::int64_t> sizes) const;
  /// Elements start, start+step, ... < end of dimension dim. Negative start/end count from the
  /// end; after that, 0 <= start <= end <= size(dim) is required (no clamping); step >= 1.
  Tensor slice(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  Tensor transpose(std::int64_t dim0, std::int64_t dim1) const;
  /// dims must be a permutation of 0..dim()-1 (negative entries count from the end).
  Tensor permute(const Sizes& dims) const;
  /// Removes dimension dim, keeping index `index` (negative counts from the end).
  Tensor select(std::int64_t dim, std::int64_t index) const;
  /// Inserts a size-1 dimension at d (-dim()-1 <= d <= dim()).
  Tensor unsqueeze(std::int64_t d) const;
  /// A 1-d tensor of numel() elements: a view when the strides allow it, else a copy (like
  /// reshape({-1})).
  Tensor flatten() const;

  // -- data movement --------------------------------------------------------------------------

  /// *this when already contiguous, else a contiguous copy (same dtype and device).
  Tensor contiguous() const;
  /// A contiguous copy (same dtype and device), never sharing storage.
  Tensor clone() const;
  /// Copies src's elements into this tensor. Sizes must be equal (no broadcasting). Devices may
  /// differ (copies that involve the host are blocking). dtype conversions allowed: any float
  /// dtype -> any float dtype; int/bool -> float (to the nearest value); int -> int (modulo
  /// 2^bits, as static_cast); same dtype. Anything else (float -> int, * -> bool, bool -> int)
  /// is a SignatureError naming both dtypes. Overlapping src and destination are handled (src is
  /// copied first).
  Tensor& copy_(const Tensor& src);
  const Tensor& copy_(const Tensor& src) const;
  /// *this when already on `device`, else a contiguous copy there.
  Tensor to(Device device) const;
  /// *this when already of `dtype`, else a contiguous converting copy (rules of copy_).
  Tensor to(DType dtype) const;
  /// Sets every element to `value`. Float dtypes: rounded to nearest (via float32 for the
  /// narrow formats). Integer dtypes: `value` must be an integer within the dtype's range. bool:
  /// value != 0. Otherwise SignatureError.
  Tensor& fill_(double value);
  const Tensor& fill_(double value) const;

  // -- element access, for tests (CPU tensors only; SignatureError on CUDA) ---------------------

  double item_at(std::initializer_list<std::int64_t> index) const;
  double item_at(std::span<const std::int64_t> index) const;
  /// Sets one element (value converts as in fill_).
  void set_at(std::initializer_list<std::int64_t> index, double value) const;
  void set_at(std::span<const std::int64_t> index, double value) const;
  /// The value of a one-element tensor (any number of dimensions).
  double item() const;
  /// All elements in logical row-major order, converted to double.
  std::vector<double> to_vector() const;

  /// The metadata (for the runtime's own code; most users need not touch it).
  const detail::TensorImpl& impl() const { return checked("Tensor.impl"); }
  explicit Tensor(detail::ImplPtr impl) noexcept : impl_(std::move(impl)) {}

 private:
  const detail::TensorImpl& checked(const char* what) const {
    if (!impl_) [[unlikely]] {
      detail::throw_undefined_tensor(what);
    }
    return *impl_;
  }
  detail::ImplPtr impl_;
};

}  // namespace tileops
