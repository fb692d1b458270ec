// Internal: presenting a tensor as [rows, cols] with unit inner stride, as row-wise kernels
// take it.
#pragma once

#include <cstdint>
#include <optional>

#include "tileops/core/tensor.h"

namespace tileops::detail {

/// A [rows, cols] view of `t` (no copy) when its elements can be addressed as rows of `cols`
/// contiguous elements at a fixed row stride; nullopt otherwise.
std::optional<Tensor> rows_view(const Tensor& t, std::int64_t rows, std::int64_t cols);

/// rows_view(t) or, when there is none, a contiguous copy viewed as [rows, cols].
Tensor rows_or_copy(const Tensor& t, std::int64_t rows, std::int64_t cols);

}  // namespace tileops::detail
