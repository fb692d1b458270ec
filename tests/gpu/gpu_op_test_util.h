// Helpers of the op-level GPU tests: the skip without a device, poisoned outputs, comparison with
// the tolerance of the dtype.
#pragma once

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "tileops/base/reference.h"
#include "tileops/core/cuda.h"
#include "tileops/core/tensor.h"

namespace tileops::gpu_test {

#define SKIP_WITHOUT_GPU() \
  if (!::tileops::cuda_available()) GTEST_SKIP() << "no CUDA device"

inline const Device kGpu = Device::cuda(0);

/// A tensor on the GPU filled with NaN: an element the op does not write stays NaN.
inline Tensor poisoned(const Sizes& sizes, DType dtype) {
  return Tensor::full(sizes, std::numeric_limits<double>::quiet_NaN(), dtype, kGpu);
}

/// Expects `got` to match `ref` (same dtype, or a float32 reference) within the tolerance of got's
/// dtype.
inline void expect_close(const Tensor& got, const Tensor& ref, const std::string& what) {
  const double err = max_relative_error(got, ref);
  EXPECT_LE(err, tolerance_for(got.dtype())) << what << ": max relative error " << err;
}

}  // namespace tileops::gpu_test
