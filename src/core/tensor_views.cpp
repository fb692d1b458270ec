// Views: view, reshape, slice, transpose, permute, select, unsqueeze, flatten. Each makes new
// metadata over the same storage (no copy), reusing pooled TensorImpl capacity.
#include <string>
#include <utility>

#include "core/tensor_internal.h"
#include "tileops/core/error.h"
#include "tileops/core/tensor.h"

namespace tileops {

namespace {

std::string istr(std::int64_t v) {
  return std::to_string(v);
}

// Normalises a dimension index (negative counts from the end).
std::size_t normalize_dim(std::int64_t d, const detail::TensorImpl& i, const char* what) {
  const auto ndim = static_cast<std::int64_t>(i.sizes.size());
  if (d < -ndim || d >= ndim) detail::throw_bad_dim(d, i, what);
  return static_cast<std::size_t>(d < 0 ? d + ndim : d);
}

// New metadata over the storage of `from`, with its sizes, strides and offset copied.
detail::ImplPtr derive(const detail::TensorImpl& from) {
  detail::ImplPtr out = detail::acquire_impl();
  out->storage = from.storage;
  out->sizes = from.sizes;
  out->strides = from.strides;
  out->offset = from.offset;
  out->dtype = from.dtype;
  out->device = from.device;
  return out;
}

Tensor publish(detail::ImplPtr impl) {
  detail::finish_impl(*impl);
  return Tensor(std::move(impl));
}

// Resolves one -1 in `sizes` so that the element count is `numel`; checks the count.
void infer_sizes(Sizes& sizes, std::int64_t numel, const Sizes& from, const char* what) {
  std::size_t infer = sizes.size();
  std::int64_t known = 1;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      if (infer != sizes.size()) {
        throw SignatureError(std::string(what) + ": only one dimension can be -1, got " +
                             describe_sizes(sizes));
      }
      infer = i;
    } else if (sizes[i] < 0) {
      throw SignatureError(std::string(what) + ": invalid size " + istr(sizes[i]) + " in " +
                           describe_sizes(sizes));
    } else if (__builtin_mul_overflow(known, sizes[i], &known)) {
      throw SignatureError(std::string(what) + ": the element count of " + describe_sizes(sizes) +
                           " overflows int64");
    }
  }
  if (infer != sizes.size()) {
    if (known == 0 || numel % known != 0) {
      throw SignatureError(std::string(what) + ": cannot view sizes " + describe_sizes(from) +
                           " (" + istr(numel) + " elements) as " + describe_sizes(sizes) + ": " +
                           (known == 0 ? "the -1 dimension is ambiguous next to a 0"
                                       : istr(numel) + " is not a multiple of " + istr(known)));
    }
    sizes[infer] = numel / known;
    return;
  }
  if (known != numel) {
    throw SignatureError(std::string(what) + ": cannot view sizes " + describe_sizes(from) + " (" +
                         istr(numel) + " elements) as " + describe_sizes(sizes) + " (" +
                         istr(known) + " elements)");
  }
}

// Strides (into new_strides) that let `new_sizes` address the same elements as
// (old_sizes, old_strides); false when none exist. Walks the old dimensions from the innermost,
// grouping them into chunks that are contiguous among themselves; each chunk must be covered
// exactly by consecutive new dimensions.
bool view_strides(const Sizes& old_sizes, const Sizes& old_strides, const Sizes& new_sizes,
                  std::int64_t numel, Sizes& new_strides) {
  new_strides.assign(new_sizes.size(), 1);
  if (old_sizes.empty()) return true;  // 0-d: every new dim has size 1
  if (numel == 0) {
    if (old_sizes == new_sizes) {
      new_strides = old_strides;
    } else {
      detail::contiguous_strides(new_sizes, new_strides);
    }
    return true;
  }
  auto view_d = static_cast<std::int64_t>(new_sizes.size()) - 1;
  std::int64_t base_stride = old_strides.back();
  std::int64_t chunk_numel = 1;
  std::int64_t view_numel = 1;
  for (auto d = static_cast<std::int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    const auto ud = static_cast<std::size_t>(d);
    chunk_numel *= old_sizes[ud];
    const bool chunk_ends =
        d == 0 || (old_sizes[ud - 1] != 1 && old_strides[ud - 1] != chunk_numel * base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 &&
           (view_numel < chunk_numel || new_sizes[static_cast<std::size_t>(view_d)] == 1)) {
      new_strides[static_cast<std::size_t>(view_d)] = view_numel * base_stride;
      view_numel *= new_sizes[static_cast<std::size_t>(view_d)];
      --view_d;
    }
    if (view_numel != chunk_numel) return false;
    if (d > 0) {
      base_stride = old_strides[ud - 1];
      chunk_numel = 1;
      view_numel = 1;
    }
  }
  return view_d == -1;
}

// view / reshape: `sizes` are the requested sizes; copy_if_needed selects reshape.
Tensor view_impl(const Tensor& self, const detail::TensorImpl& i,
                 std::span<const std::int64_t> sizes, bool copy_if_needed) {
  const char* what = copy_if_needed ? "Tensor.reshape" : "Tensor.view";
  detail::ImplPtr out = detail::acquire_impl();
  out->sizes.assign(sizes.begin(), sizes.end());
  infer_sizes(out->sizes, i.numel, i.sizes, what);
  if (!view_strides(i.sizes, i.strides, out->sizes, i.numel, out->strides)) {
    if (copy_if_needed) return self.clone().view(out->sizes);
    throw SignatureError("Tensor.view: cannot view sizes " + describe_sizes(i.sizes) +
                         " with strides " + describe_sizes(i.strides) + " as " +
                         describe_sizes(out->sizes) +
                         ": the strides do not allow it without a copy (use reshape)");
  }
  out->storage = i.storage;
  out->offset = i.offset;
  out->dtype = i.dtype;
  out->device = i.device;
  return publish(std::move(out));
}

}  // namespace

namespace detail {

void throw_bad_dim(std::int64_t d, const TensorImpl& i, const char* what) {
  const auto ndim = static_cast<std::int64_t>(i.sizes.size());
  const std::string expected =
      ndim == 0 ? "it has no dimensions" : "expected " + istr(-ndim) + ".." + istr(ndim - 1);
  throw SignatureError(std::string(what) + ": dimension " + istr(d) + " is out of range for a " +
                       istr(ndim) + "-d tensor of sizes " + describe_sizes(i.sizes) + " (" +
                       expected + ")");
}

}  // namespace detail

Tensor Tensor::view(const Sizes& sizes) const {
  return view_impl(*this, checked("Tensor.view"), sizes, false);
}

Tensor Tensor::view(std::initializer_list<std::int64_t> sizes) const {
  return view_impl(*this, checked("Tensor.view"),
                   std::span<const std::int64_t>(sizes.begin(), sizes.size()), false);
}

Tensor Tensor::reshape(const Sizes& sizes) const {
  return view_impl(*this, checked("Tensor.reshape"), sizes, true);
}

Tensor Tensor::reshape(std::initializer_list<std::int64_t> sizes) const {
  return view_impl(*this, checked("Tensor.reshape"),
                   std::span<const std::int64_t>(sizes.begin(), sizes.size()), true);
}

Tensor Tensor::slice(std::int64_t dim, std::int64_t start, std::int64_t end,
                     std::int64_t step) const {
  const auto& i = checked("Tensor.slice");
  const std::size_t d = normalize_dim(dim, i, "Tensor.slice");
  const std::int64_t size = i.sizes[d];
  const auto where = [&] {
    return " for dimension " + istr(dim) + " of size " + istr(size) + " (sizes " +
           describe_sizes(i.sizes) + "; expected " + istr(-size) + ".." + istr(size) + ")";
  };
  const std::int64_t s = start < 0 ? start + size : start;
  const std::int64_t e = end < 0 ? end + size : end;
  if (s < 0 || s > size) {
    throw SignatureError("Tensor.slice: start " + istr(start) + " is out of range" + where());
  }
  if (e < 0 || e > size) {
    throw SignatureError("Tensor.slice: end " + istr(end) + " is out of range" + where());
  }
  if (s > e) {
    throw SignatureError("Tensor.slice: start " + istr(start) + " is after end " + istr(end) +
                         " for dimension " + istr(dim) + " of size " + istr(size));
  }
  if (step < 1) throw SignatureError("Tensor.slice: step must be >= 1, got " + istr(step));
  detail::ImplPtr out = derive(i);
  out->sizes[d] = (e - s + step - 1) / step;
  out->strides[d] = i.strides[d] * step;
  out->offset = i.offset + s * i.strides[d];
  return publish(std::move(out));
}

Tensor Tensor::transpose(std::int64_t dim0, std::int64_t dim1) const {
  const auto& i = checked("Tensor.transpose");
  const std::size_t d0 = normalize_dim(dim0, i, "Tensor.transpose");
  const std::size_t d1 = normalize_dim(dim1, i, "Tensor.transpose");
  detail::ImplPtr out = derive(i);
  std::swap(out->sizes[d0], out->sizes[d1]);
  std::swap(out->strides[d0], out->strides[d1]);
  return publish(std::move(out));
}

Tensor Tensor::permute(const Sizes& dims) const {
  const auto& i = checked("Tensor.permute");
  const std::size_t ndim = i.sizes.size();
  if (dims.size() != ndim) {
    throw SignatureError("Tensor.permute: dims " + describe_sizes(dims) + " have " +
                         istr(static_cast<std::int64_t>(dims.size())) + " entries but the tensor " +
                         describe_sizes(i.sizes) + " has " + istr(static_cast<std::int64_t>(ndim)) +
                         " dimensions");
  }
  detail::ImplPtr out = derive(i);
  std::uint64_t seen = 0;  // bit per dimension (tensors of more than 64 dims use the vector)
  std::vector<bool> seen_many(ndim > 64 ? ndim : 0, false);
  for (std::size_t k = 0; k < ndim; ++k) {
    const std::size_t d = normalize_dim(dims[k], i, "Tensor.permute");
    const bool repeated = ndim > 64 ? seen_many[d] : ((seen >> d) & 1u) != 0;
    if (repeated) {
      throw SignatureError("Tensor.permute: dims " + describe_sizes(dims) + " repeat dimension " +
                           istr(static_cast<std::int64_t>(d)));
    }
    if (ndim > 64) {
      seen_many[d] = true;
    } else {
      seen |= std::uint64_t{1} << d;
    }
    out->sizes[k] = i.sizes[d];
    out->strides[k] = i.strides[d];
  }
  return publish(std::move(out));
}

Tensor Tensor::select(std::int64_t dim, std::int64_t index) const {
  const auto& i = checked("Tensor.select");
  const std::size_t d = normalize_dim(dim, i, "Tensor.select");
  const std::int64_t size = i.sizes[d];
  if (index < -size || index >= size) {
    throw SignatureError("Tensor.select: index " + istr(index) + " is out of range for dimension " +
                         istr(dim) + " of size " + istr(size) + " (sizes " +
                         describe_sizes(i.sizes) + "; expected " + istr(-size) + ".." +
                         istr(size - 1) + ")");
  }
  const std::int64_t k = index < 0 ? index + size : index;
  detail::ImplPtr out = derive(i);
  out->sizes.erase(out->sizes.begin() + static_cast<std::ptrdiff_t>(d));
  out->strides.erase(out->strides.begin() + static_cast<std::ptrdiff_t>(d));
  out->offset = i.offset + k * i.strides[d];
  return publish(std::move(out));
}

Tensor Tensor::unsqueeze(std::int64_t d) const {
  const auto& i = checked("Tensor.unsqueeze");
  const auto ndim = static_cast<std::int64_t>(i.sizes.size());
  if (d < -ndim - 1 || d > ndim) {
    throw SignatureError("Tensor.unsqueeze: dimension " + istr(d) + " is out of range for a " +
                         istr(ndim) + "-d tensor of sizes " + describe_sizes(i.sizes) +
                         " (expected " + istr(-ndim - 1) + ".." + istr(ndim) + ")");
  }
  const auto at = static_cast<std::size_t>(d < 0 ? d + ndim + 1 : d);
  const std::int64_t stride = at < i.sizes.size() ? i.sizes[at] * i.strides[at] : 1;
  detail::ImplPtr out = derive(i);
  out->sizes.insert(out->sizes.begin() + static_cast<std::ptrdiff_t>(at), 1);
  out->strides.insert(out->strides.begin() + static_cast<std::ptrdiff_t>(at), stride);
  return publish(std::move(out));
}

Tensor Tensor::flatten() const {
  const auto& i = checked("Tensor.flatten");
  if (i.sizes.size() == 1) return *this;
  return reshape({i.numel});
}

}  // namespace tileops
