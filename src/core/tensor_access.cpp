// Element access for tests and debugging: item_at, set_at, item, to_vector (CPU tensors only).
#include <cstring>
#include <string>

#include "core/element_convert.h"
#include "core/tensor_internal.h"
#include "tileops/core/error.h"
#include "tileops/core/tensor.h"

namespace tileops {

namespace {

void require_cpu(const detail::TensorImpl& i, const char* what) {
  if (!i.device.is_cpu()) {
    throw SignatureError(std::string(what) + ": the tensor " + detail::describe_tensor(i) +
                         " is not on the CPU; element access needs a CPU tensor (use "
                         ".to(Device::cpu()) first)");
  }
}

std::string describe_index(std::span<const std::int64_t> index) {
  return describe_sizes(Sizes(index.begin(), index.end()));
}

// The address of the element at `index` (negative entries count from the end).
void* element_address(const detail::TensorImpl& i, std::span<const std::int64_t> index,
                      const char* what) {
  require_cpu(i, what);
  if (index.size() != i.sizes.size()) {
    throw SignatureError(std::string(what) + ": index " + describe_index(index) + " has " +
                         std::to_string(index.size()) + " entries but the tensor " +
                         detail::describe_tensor(i) + " has " + std::to_string(i.sizes.size()) +
                         " dimensions");
  }
  std::int64_t offset = 0;
  for (std::size_t d = 0; d < index.size(); ++d) {
    const std::int64_t size = i.sizes[d];
    const std::int64_t k = index[d];
    if (k < -size || k >= size) {
      throw SignatureError(std::string(what) + ": index " + std::to_string(k) +
                           " is out of range for dimension " + std::to_string(d) + " of size " +
                           std::to_string(size) + " (index " + describe_index(index) + ", sizes " +
                           describe_sizes(i.sizes) + ")");
    }
    offset += (k < 0 ? k + size : k) * i.strides[d];
  }
  return static_cast<char*>(i.data) + offset * static_cast<std::int64_t>(element_size(i.dtype));
}

}  // namespace

double Tensor::item_at(std::span<const std::int64_t> index) const {
  const auto& i = checked("Tensor.item_at");
  return detail::load_scalar(element_address(i, index, "Tensor.item_at"), i.dtype);
}

double Tensor::item_at(std::initializer_list<std::int64_t> index) const {
  return item_at(std::span<const std::int64_t>(index.begin(), index.size()));
}

void Tensor::set_at(std::span<const std::int64_t> index, double value) const {
  const auto& i = checked("Tensor.set_at");
  unsigned char pattern[8];
  detail::encode_scalar(value, i.dtype, pattern, "Tensor.set_at");
  std::memcpy(element_address(i, index, "Tensor.set_at"), pattern, element_size(i.dtype));
}

void Tensor::set_at(std::initializer_list<std::int64_t> index, double value) const {
  set_at(std::span<const std::int64_t>(index.begin(), index.size()), value);
}

double Tensor::item() const {
  const auto& i = checked("Tensor.item");
  require_cpu(i, "Tensor.item");
  if (i.numel != 1) {
    throw SignatureError("Tensor.item: the tensor " + detail::describe_tensor(i) + " has " +
                         std::to_string(i.numel) + " elements, not 1");
  }
  return detail::load_scalar(i.data, i.dtype);
}

std::vector<double> Tensor::to_vector() const {
  const auto& i = checked("Tensor.to_vector");
  require_cpu(i, "Tensor.to_vector");
  const Tensor c = contiguous();
  const auto n = static_cast<std::size_t>(i.numel);
  std::vector<double> out(n);
  detail::visit_dtype(i.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto* p = static_cast<const T*>(c.data_ptr());
    for (std::size_t k = 0; k < n; ++k) {
      if constexpr (detail::kIsFloatStorage<T>) {
        out[k] = detail::to_f64(p[k]);
      } else if constexpr (std::is_same_v<T, detail::BoolByte>) {
        out[k] = p[k].value != 0 ? 1.0 : 0.0;
      } else {
        out[k] = static_cast<double>(p[k]);
      }
    }
  });
  return out;
}

}  // namespace tileops
