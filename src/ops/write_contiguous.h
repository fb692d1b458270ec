// Internal: the `out` buffer of an op handed to a kernel that writes contiguous tensors.
#pragma once

#include "tileops/core/tensor.h"

namespace tileops::detail {

/// Runs `body` on `out` when it is contiguous, else on a contiguous scratch copied into it.
template <class Body>
void write_contiguous(const Tensor& out, Body&& body) {
  if (out.is_contiguous()) {
    body(out);
    return;
  }
  const Tensor scratch = Tensor::empty(out.sizes(), out.dtype(), out.device());
  body(scratch);
  out.copy_(scratch);
}

}  // namespace tileops::detail
