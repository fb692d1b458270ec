#include "ops/rows_view.h"

namespace tileops::detail {

std::optional<Tensor> rows_view(const Tensor& t, std::int64_t rows, std::int64_t cols) {
  // Already rows: no new view (the common case of a [tokens, hidden] activation).
  if (t.dim() == 2 && t.size(0) == rows && t.size(1) == cols && (cols <= 1 || t.stride(1) == 1)) {
    return t;
  }
  if (t.is_contiguous()) return t.view({rows, cols});
  // Collapse the trailing dims into one contiguous row and the leading dims into one row stride.
  const auto& sizes = t.sizes();
  const auto& strides = t.strides();
  std::int64_t d = static_cast<std::int64_t>(sizes.size()) - 1;
  std::int64_t inner = 1;
  std::int64_t expected_stride = 1;
  while (d >= 0 && inner < cols) {
    if (sizes[d] != 1 && strides[d] != expected_stride) return std::nullopt;
    inner *= sizes[d];
    expected_stride *= sizes[d];
    --d;
  }
  if (inner != cols) return std::nullopt;
  std::int64_t row_stride = -1;
  std::int64_t outer = 1;
  for (std::int64_t k = d; k >= 0; --k) {
    if (sizes[k] == 1) continue;
    if (row_stride < 0) {
      row_stride = strides[k];
    } else if (strides[k] != row_stride * outer) {
      return std::nullopt;
    }
    outer *= sizes[k];
  }
  if (outer != rows) return std::nullopt;
  if (row_stride < 0) row_stride = cols;
  // The view keeps `t` (and so its storage) alive.
  return Tensor::from_blob(t.data_ptr(), {rows, cols}, t.dtype(), t.device(), {row_stride, 1},
                           [keep = t] {});
}

Tensor rows_or_copy(const Tensor& t, std::int64_t rows, std::int64_t cols) {
  if (auto v = rows_view(t, rows, cols)) return *v;
  return t.contiguous().view({rows, cols});
}

}  // namespace tileops::detail
