// Helpers of the op-level GPU tests: the skip without a device, poisoned outputs, comparison with
// the tolerance of the dtype.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tileops/base/reference.h"
#include "tileops/core/cuda.h"
#include "tileops/core/error.h"
#include "tileops/core/tensor.h"

namespace tileops::gpu_test {

#define SKIP_WITHOUT_GPU() \
  if (!::tileops::cuda_available()) GTEST_SKIP() << "no CUDA device"

inline const Device kGpu = Device::cuda(0);

/// A tensor of `dtype` and `sizes` on the GPU holding `host`'s elements (bit for bit, row-major;
/// T's size must be the dtype's element size).
template <class T>
Tensor device_tensor(const std::vector<T>& host, Sizes sizes, DType dtype) {
  Tensor t = Tensor::empty(std::move(sizes), dtype);
  std::memcpy(t.data_ptr(), host.data(), host.size() * sizeof(T));
  return t.to(kGpu);
}

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

/// Expects `call()` to raise DispatchError (a kernel's refusal) whose message contains `reason`.
template <class F>
void expect_refused(F&& call, const std::string& reason, const std::string& what) {
  try {
    call();
    ADD_FAILURE() << what << " ran";
  } catch (const DispatchError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr(reason)) << what;
  }
}

}  // namespace tileops::gpu_test
